"""Building count tables: from a results matrix, from stored counts, as copies.

The constructors of :class:`~scorio_core.counts.CountTable` (its
``from_matrix``, ``from_state`` and ``copy`` delegate here, and its
``__init__`` checks a shared storage with :func:`check_member`): they validate
the counts, make a table and add the counts to its rows in one batch
through the storage (:meth:`~scorio_core.storage.CountStorage.add_rows`,
the float operations of :meth:`CountTable.update`), then resync the
table's running sums exactly.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.count_kernels import category_counts, count_matrix
from scorio_core.question_index import QuestionIndex

if TYPE_CHECKING:
    from scorio_core.counts import CountTable
    from scorio_core.storage import CountStorage


def check_member(
    storage: CountStorage,
    w: ArrayLike,
    question_count: int | None,
    index: QuestionIndex | None,
) -> None:
    """Raise unless a table of these arguments fits the storage's tables."""
    if not np.array_equal(check.weights(w), storage.weights):
        raise ValueError("a table's weights must be its storage's")
    if question_count != storage.declared_count:
        raise ValueError(
            f"a table's question_count ({question_count}) must be its storage's "
            f"({storage.declared_count})"
        )
    if index is not None and index is not storage.index:
        raise ValueError("a table's question index must be its storage's")


def from_matrix(
    kind: type[CountTable],
    R: ArrayLike,
    w: ArrayLike | None = None,
    R0: ArrayLike | None = None,
) -> CountTable:
    """A ``kind`` table of an ``M x N`` results matrix; questions ``0..M-1``."""
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    prior = check.prior_matrix(R0, results.shape[0])
    check.category_range(results, weights.size, "R")
    check.category_range(prior, weights.size, "R0")
    return from_trusted(
        kind,
        weights,
        list(range(results.shape[0])),
        category_counts(results, weights.size),
        category_counts(prior, weights.size),
        results.shape[0],
    )


def from_state(
    kind: type[CountTable],
    w: ArrayLike,
    questions: Sequence[Hashable],
    observed: ArrayLike,
    prior: ArrayLike | None = None,
    question_count: int | None = None,
    *,
    index: QuestionIndex | None = None,
    storage: CountStorage | None = None,
) -> CountTable:
    """Rebuild a ``kind`` table from stored sufficient statistics.

    Args:
        kind: The table class.
        w: Weights, length ``C+1``.
        questions: Question ids, one per row of ``observed``.
        observed: ``rows x (C+1)`` observed counts (non-negative integers).
        prior: Optional ``rows x (C+1)`` prior-outcome counts.
        question_count: Declared ``M`` or ``None`` for an open table.
        index: A question numbering shared with other tables; the
            questions are added to it.
        storage: The storage of the tables of a run (its index is the
            numbering, its weights and question count these ones).
    """
    weights = check.weights(w)
    shape = (len(questions), weights.size)
    observed_counts = count_matrix(observed, shape, "observed")
    prior_counts = (
        np.zeros(shape, dtype=np.int64)
        if prior is None
        else count_matrix(prior, shape, "prior")
    )
    if len(set(questions)) != len(questions):
        raise ValueError("questions must be distinct")
    return from_trusted(
        kind,
        weights,
        list(questions),
        observed_counts,
        prior_counts,
        question_count,
        index,
        storage,
    )


def from_trusted(
    kind: type[CountTable],
    weights: NDArray[np.float64],
    questions: list[Hashable],
    observed: NDArray[np.int64],
    prior: NDArray[np.int64],
    question_count: int | None,
    index: QuestionIndex | None = None,
    storage: CountStorage | None = None,
) -> CountTable:
    """:func:`from_state` of checked counts."""
    if storage is None:
        index = QuestionIndex() if index is None else index
        known = index
    else:
        known = storage.index
    if question_count is not None:
        limit = check.integer(question_count, "question_count")
        total = len(known) + sum(question not in known for question in questions)
        # Checked before the table joins a storage (a shared one keeps it).
        if limit >= 1 and total > limit:
            raise ValueError(f"{total} questions exceed question_count={limit}")
    table = kind(weights, question_count, index=index, storage=storage)
    rows = np.fromiter(map(known.add, questions), np.int64, len(questions))
    # A new layer: its rows are empty, so adding the counts sets them.
    if len(rows):
        table.storage.add_rows(table, rows, observed, False)
        if prior.any():
            table.storage.add_rows(table, rows, prior, True)
    table.resync()
    return table


def copy(table: CountTable) -> CountTable:
    """An independent copy (with its own question numbering)."""
    return from_trusted(
        type(table),
        table.weights,
        list(table.questions),
        table.observed_counts,
        table.prior_counts,
        table.storage.declared_count,
    )
