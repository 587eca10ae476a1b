r"""The O(M) reads of a count table: summaries over all its rows.

Functions over a :class:`~scorio_core.counts.CountTable` that read every
row of its layer (through the package-internal ``take_rows``, ``storage``
and ``layer``) and are computed when read, not kept: copies and views of
the counts, the observed trials of given questions, the fewest trials on
any question, the variance with one unit of information per question,
and avg@N with its standard deviation. The table's reads of the same
names delegate here; its O(1) reads (``mu``, ``sigma``, the counts of one
question) stay on the table.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from scorio_core.count_kernels import observed_average, readonly

if TYPE_CHECKING:
    from scorio_core.counts import CountTable


def observed_counts(table: CountTable) -> NDArray[np.int64]:
    """``rows x (C+1)`` observed counts, rows in question order."""
    size = table.take_rows()
    return readonly(
        table.storage.layer_arrays(table.layer).observed[:size].astype(np.int64)
    )


def prior_counts(table: CountTable) -> NDArray[np.int64]:
    """``rows x (C+1)`` prior-outcome counts."""
    size = table.take_rows()
    return readonly(
        table.storage.layer_arrays(table.layer).prior[:size].astype(np.int64)
    )


def question_trials(table: CountTable) -> NDArray[np.int64]:
    """Observed trials per question, in question order."""
    size = table.take_rows()
    return readonly(
        table.storage.layer_arrays(table.layer).row_trials[:size].astype(np.int64)
    )


def count_views(table: CountTable) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
    """Observed and prior counts as stored, without a copy.

    Read-only views in the table's count type (as narrow as uint8, so
    do arithmetic in a wider type); they change with the table. For
    reads over many tables at once, where int64 copies would take eight
    times the memory.
    """
    size = table.take_rows()
    arrays = table.storage.layer_arrays(table.layer)
    observed, prior = arrays.observed[:size].view(), arrays.prior[:size].view()
    observed.setflags(write=False)
    prior.setflags(write=False)
    return observed, prior


def trials_for(table: CountTable, questions: Sequence[Hashable]) -> list[int]:
    """Observed trials of each given question (0 for unseen ones)."""
    table.take_rows()
    rows = table.storage.index.rows
    # A memoryview: the cheapest one-cell indexing.
    trials = table.storage.layer_arrays(table.layer).row_trials.data
    return [trials[rows[q]] if q in rows else 0 for q in questions]


def trials_array(table: CountTable, questions: Sequence[Hashable]) -> NDArray[np.int64]:
    """:meth:`~CountTable.trials_for` as a new array; a copy of the row totals
    when the table's rows are ``questions`` in order (a declared run's tables)."""
    rows = table.take_rows()
    size = len(questions)
    if size <= rows and table.storage.index.questions[:size] == list(questions):
        row_trials = table.storage.layer_arrays(table.layer).row_trials
        return row_trials[:size].astype(np.int64)
    return np.array(trials_for(table, questions), dtype=np.int64)


def least_question_trials(table: CountTable) -> int:
    """Fewest observed trials on any of the ``M`` questions (0 if any unseen)."""
    size = table.take_rows()
    if not size or table.question_count > size:
        return 0
    return int(table.storage.layer_arrays(table.layer).row_trials[:size].min())


def unit_variance(table: CountTable) -> float:
    r"""Variance of the score with one unit of information per question.

    Each question's posterior variance is ``s_a^2 / (T_a + 1)``, with
    ``s_a^2`` the variance of one more outcome and ``T_a`` its Dirichlet
    total; this is :math:`\text{scale}^2 \sum_a s_a^2 / M^2`, so
    ``unit_variance / sigma**2`` is the model's variance-weighted
    information (prior included). O(M), read when a look needs it.
    """
    size = table.take_rows()
    storage = table.storage
    arrays = storage.layer_arrays(table.layer)
    row_trials, variances = arrays.row_trials, arrays.variances
    declared = storage.declared_count or max(size, 1)
    width = table.category_count
    # T_a + 1 = trials + prior outcomes + the C+1 uniform prior counts + 1.
    totals = row_trials[:size].astype(np.int64) + (width + 1)
    if table.prior_trial_count:
        totals = totals + arrays.prior[:size].sum(axis=1, dtype=np.int64)
    spread = variances[:size] * totals
    unseen = (declared - size) * storage.empty_terms[1] * (width + 1)
    total = float(spread.sum()) + unseen
    return storage.scaled.scale**2 * max(total, 0.0) / declared**2


def average(table: CountTable) -> tuple[float, float]:
    r"""avg@N and its Bayesian standard deviation ``sigma_a``.

    For rectangular data this is the paper's eq. 19-20:
    :math:`a` = mean observed weight, :math:`\sigma_a = (T/N)\sigma`.
    With uneven counts, ``a`` is the mean over questions with at least one
    observed trial of each question's observed mean, and
    :math:`\sigma_a = \frac{1}{M'}\sqrt{\sum_a (T_a/n_a)^2 \mathrm{Var}_a}`
    over those ``M'`` questions, which reduces to eq. 20 when every
    question has the same ``N`` and no prior outcomes.

    Raises:
        ValueError: when no trial has been observed.
    """
    size = table.take_rows()
    arrays = table.storage.layer_arrays(table.layer)
    return observed_average(
        arrays.observed[:size],
        arrays.prior[:size],
        arrays.variances,
        table.storage.scaled,
    )
