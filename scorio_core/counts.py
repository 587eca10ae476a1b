r"""Per-model count tables with O(C) streaming Bayes@N updates.

A :class:`CountTable` holds, for one model, the observed and prior outcome
counts of every question (rows) in every category (columns), and keeps the
running sums of the per-question posterior terms so that ``mu`` and ``sigma``
(see :mod:`scorio_core.posterior` for the symbols) are read in O(1) after an
O(C) update. Questions may have different trial counts, including none; a
declared question that has not been seen yet contributes its prior.

Storage: NumPy arrays with a row per question, read and written one cell
at a time through memoryviews on the streaming path (a fifth of the cost of
NumPy scalar indexing) and as whole blocks on the batch path. Both paths
compute a question's terms with the same float operations in the same
order, so they agree to the last bit. Counts are kept in the narrowest
unsigned type that holds them (uint8 first), widened when one would not
fit, and the Dirichlet parameters ``nu = observed + prior + 1`` are derived
when needed, not stored: 100 models x 10,000 questions x 8 categories take
16 MB of counts, not 192 MB. Tables of one run may share a
:class:`~scorio_core.question_index.QuestionIndex`, so questions are
numbered once for all models; a row another table added is empty here
until this table touches it.

The table keeps the streaming path (:meth:`CountTable.update`) and the
O(1) reads; its other methods delegate to functions of one concern each:
the constructors to :mod:`scorio_core.count_state`, the batch path to
:mod:`scorio_core.count_batch` (the arithmetic on the rows is
:meth:`CountStorage.add_rows`), the O(M) reads to
:mod:`scorio_core.count_reads`. Those read the table through a small
package-internal surface (no leading underscore, internal to scorio_core):
``storage``, ``layer``, ``attach``, ``detach``, ``take_rows``, ``add_row``
and ``move_sums``. Only the class's methods read its underscored state.

The tables of a run are layers of one
:class:`~scorio_core.storage.CountStorage` (see there): a table reads and
writes its layer through views, as a table of its own would, and a batch of
many models' trials updates all their layers in one pass. A table on its
own, or a copy, has a storage of its own. The vectorised kernels both share
are in :mod:`scorio_core.count_kernels`.

Float drift: each update moves the running sums by one rounding of size
``eps * |sum|``; every ``max(1024, rows // 8)`` updates the sums are replaced
by an exactly rounded ``math.fsum`` over the rows. Between resyncs the error
in ``mu`` is at most ``2 * window * eps`` times the weight scale (~5e-13 for
M <= 8192) and in practice ~1e-15, so a stream of any length agrees with a
batch recompute to 1e-12. A batch that changes ``k`` rows of a table of
``M`` rows adds its ``k`` row changes (each at most the weight scale) into
one change and moves the sums by it once: one rounding of the sums, the
rounding of each row's difference (as a single update has), plus at most
``k * k / 2`` roundings of size ``eps`` times the weight scale in adding
the ``k`` differences up, i.e. at most ``k * k / (2 * M)`` roundings of the
size the bound counts (``eps * M`` times the weight scale). So it counts as
``1 + k * k // M`` updates against the window, and the bound above holds
as stated for any mix of single updates and batches.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core import count_batch, count_reads, count_state
from scorio_core.count_kernels import (
    category_counts,
    is_category,
)
from scorio_core.count_state import check_member
from scorio_core.posterior import (
    Posterior,
    clipped_interval,
    row_term,
    z_value,
)
from scorio_core.question_index import QuestionIndex
from scorio_core.storage import CountStorage

__all__ = ["CountStorage", "CountTable", "category_counts"]

_MIN_RESYNC_INTERVAL: Final = 1024


class CountTable:
    """Outcome counts of one model over questions x categories.

    Args:
        w: Category weights, length ``C+1``.
        question_count: The benchmark's declared number of questions ``M``;
            ``None`` for an open table where ``M`` is the questions seen.
        index: A question numbering shared with other tables (the models
            of one run); every question in it is declared in this table.
        storage: The storage of the tables of one run, this table one more
            layer of it (its index, weights and question count must be
            these); ``None``: a storage of the table's own.

    ``storage``, ``layer``, ``attach``, ``detach``, ``take_rows``, ``add_row``
    and ``move_sums`` are internal to scorio_core (see the module doc).

    Examples:
        >>> table = CountTable([0.0, 1.0], question_count=2)
        >>> for question, outcome in [("a", 1), ("a", 1), ("b", 0)]:
        ...     table.update(question, outcome)
        >>> round(table.mu, 6), round(table.sigma, 6)
        (0.541667, 0.152525)
        >>> table.update("a", 1, delta=-1)  # retract one trial
        >>> table.trial_count
        2
    """

    __slots__ = (
        "_declared_count",
        "_empty_mean",
        "_empty_variance",
        "_layer",
        "_mean_sum",
        "_means_view",
        "_observed",
        "_observed_view",
        "_prior",
        "_prior_trial_count",
        "_prior_view",
        "_questions",
        "_resync_countdown",
        "_row_trials_view",
        "_rows",
        "_scaled",
        "_size",
        "_storage",
        "_synced",
        "_trial_count",
        "_variance_sum",
        "_variances_view",
        "_width",
    )

    def __init__(
        self,
        w: ArrayLike,
        question_count: int | None = None,
        *,
        index: QuestionIndex | None = None,
        storage: CountStorage | None = None,
    ) -> None:
        if storage is None:
            storage = CountStorage(w, question_count, index=index)
        else:
            check_member(storage, w, question_count, index)
        self._storage = storage
        self._scaled = storage.scaled
        self._declared_count = storage.declared_count
        self._width = storage.weights.size
        # Aliases of the index's numbering (read only here).
        self._rows = storage.index.rows
        self._questions = storage.index.questions
        # Rows the sums take in; the index's later rows are empty.
        self._size = 0
        self._trial_count = 0
        self._prior_trial_count = 0
        self._empty_mean, self._empty_variance = storage.empty_terms
        self._mean_sum = 0.0
        self._variance_sum = 0.0
        self._resync_countdown = _MIN_RESYNC_INTERVAL
        self._synced = True
        self._layer = storage.join(self)
        self.attach()

    # -- construction (scorio_core.count_state) ------------------------------
    from_matrix = classmethod(count_state.from_matrix)
    from_state = classmethod(count_state.from_state)
    copy = count_state.copy

    # -- updates ---------------------------------------------------------------
    declare = count_batch.declare

    def update(
        self, question: Hashable, category: int, delta: int = 1, *, prior: bool = False
    ) -> None:
        """Add ``delta`` trials (negative to retract) of ``category`` on ``question``.

        O(C): only the changed question's posterior terms are recomputed.

        Raises:
            ValueError: for a category outside ``0..C``, a non-integer delta, a
                count that would become negative, or a new question beyond the
                declared ``question_count``. The table is unchanged then.
        """
        width = self._width
        if type(category) is not int:
            if not is_category(category, width):
                raise ValueError(
                    f"category must be an integer in 0..{width - 1}; got {category!r}"
                )
            category = int(category)
        elif not 0 <= category < width:
            raise ValueError(
                f"category must be an integer in 0..{width - 1}; got {category}"
            )
        if type(delta) is not int:
            delta = check.integer(delta, "delta")
        row = self._rows.get(question)
        if row is None:
            if delta < 0:
                raise ValueError(
                    f"cannot retract a trial of unseen question {question!r}"
                )
            row = self.add_row(question)
        elif row >= self._size:
            self.take_rows()
        # Views are flat: cell (row, category) is row * width + category.
        cell = row * width + category
        counts = self._prior_view if prior else self._observed_view
        count = counts[cell] + delta
        if count < 0:
            raise ValueError(
                f"count of category {category} on question {question!r} would become "
                f"negative ({count - delta} + {delta})"
            )
        try:
            counts[cell] = count
        except ValueError:  # past the array's type: widen it
            self._storage.widen_counts(prior, count)
            counts = self._prior_view if prior else self._observed_view
            counts[cell] = count
        if prior:
            self._prior_trial_count += delta
        else:
            self._trial_count += delta
            trials = self._row_trials_view[row] + delta
            try:
                self._row_trials_view[row] = trials
            except ValueError:
                self._storage.widen_trials(trials)
                self._row_trials_view[row] = trials
        # O(C): recompute this question's terms and move the sums by the change.
        if width == 2:
            # row_term's binary case, inline on the hot path (the same float
            # operations; a test holds the two paths equal to the last bit).
            observed, prior_counts = self._observed_view, self._prior_view
            first = cell - category
            failed = observed[first] + prior_counts[first] + 1
            passed = observed[first + 1] + prior_counts[first + 1] + 1
            total = failed + passed
            share = passed / total
            mean = self._scaled.unit[1] * share
            variance = share * (1.0 - share) / (total + 1)
        else:
            mean, variance = row_term(self._nu(row).tolist(), self._scaled)
        means, variances = self._means_view, self._variances_view
        self._mean_sum += mean - means[row]
        self._variance_sum += variance - variances[row]
        means[row] = mean
        variances[row] = variance
        self._synced = False
        self._resync_countdown -= 1
        if self._resync_countdown <= 0:
            self.resync()

    # The batch path (scorio_core.count_batch).
    update_many = count_batch.update_many
    add_counts = count_batch.add_counts
    add_row_counts = count_batch.add_row_counts
    add_row_counts_together = staticmethod(count_batch.add_row_counts_together)
    merge = count_batch.merge

    @property
    def is_synced(self) -> bool:
        """Whether the sums are exact (no update since the last resync): then
        ``mu`` and ``sigma`` depend on the counts only, not their order."""
        return self._synced and self._size == len(self._questions)

    def resync(self) -> None:
        """Recompute the running sums exactly from the rows (O(M))."""
        size = self.take_rows()
        # Through the memoryviews: floats made in C, no list.
        self._mean_sum = math.fsum(self._means_view[:size])
        self._variance_sum = math.fsum(self._variances_view[:size])
        self._synced = True
        self._resync_countdown = max(_MIN_RESYNC_INTERVAL, size // 8)

    # -- reads -----------------------------------------------------------------
    @property
    def weights(self) -> NDArray[np.float64]:
        """The category weights (read-only)."""
        return self._storage.weights

    @property
    def category_count(self) -> int:
        """Number of categories, ``C+1``."""
        return len(self._scaled.unit)

    @property
    def question_count(self) -> int:
        """``M``: the declared question count, or the questions seen if open."""
        if self._declared_count is not None:
            return self._declared_count
        return max(len(self._questions), 1)

    @property
    def is_open(self) -> bool:
        """Whether ``M`` is the number of questions seen so far."""
        return self._declared_count is None

    @property
    def questions(self) -> tuple[Hashable, ...]:
        """Seen or declared question ids, in row order."""
        return tuple(self._questions)

    @property
    def trial_count(self) -> int:
        """Observed trials over all questions."""
        return self._trial_count

    @property
    def prior_trial_count(self) -> int:
        """Prior outcomes (R0) over all questions."""
        return self._prior_trial_count

    @property
    def observed_counts(self) -> NDArray[np.int64]:
        """``rows x (C+1)`` observed counts, rows in :attr:`questions` order."""
        return count_reads.observed_counts(self)

    @property
    def prior_counts(self) -> NDArray[np.int64]:
        """``rows x (C+1)`` prior-outcome counts."""
        return count_reads.prior_counts(self)

    @property
    def question_trials(self) -> NDArray[np.int64]:
        """Observed trials per question, in :attr:`questions` order."""
        return count_reads.question_trials(self)

    # O(M) reads (scorio_core.count_reads).
    count_views = count_reads.count_views
    trials_for = count_reads.trials_for
    trials_array = count_reads.trials_array

    @property
    def least_question_trials(self) -> int:
        """Fewest observed trials on any of the ``M`` questions (0 if any unseen)."""
        return count_reads.least_question_trials(self)

    def counts(self, question: Hashable) -> tuple[int, ...]:
        """Observed counts per category of one question (zeros if unseen)."""
        row = self._rows.get(question)
        if row is None or row >= self._size:
            return (0,) * self.category_count
        return tuple(self._observed[row].tolist())

    @property
    def posterior(self) -> Posterior:
        """Posterior mean and standard deviation together."""
        return Posterior(mu=self.mu, sigma=self.sigma)

    @property
    def mu(self) -> float:
        """Posterior mean of the benchmark score."""
        # Rows past the arrays' (questions not seen yet) are empty.
        size = self._declared_count or max(len(self._questions), 1)
        mean_sum = self._mean_sum + (size - self._size) * self._empty_mean
        return self._scaled.offset + self._scaled.scale * (mean_sum / size)

    @property
    def sigma(self) -> float:
        """Posterior standard deviation of the benchmark score."""
        size = self._declared_count or max(len(self._questions), 1)
        variance_sum = self._variance_sum + (size - self._size) * self._empty_variance
        if variance_sum <= 0.0:  # a rounding below zero
            return 0.0
        return self._scaled.scale * math.sqrt(variance_sum) / size

    @property
    def unit_variance(self) -> float:
        """Variance of the score with one unit of information per question
        (:func:`scorio_core.count_reads.unit_variance`)."""
        return count_reads.unit_variance(self)

    def interval(
        self, confidence: float = 0.95, bounds: tuple[float, float] | None = None
    ) -> tuple[float, float]:
        """Credible interval ``mu +- z sigma``, optionally clipped to ``bounds``."""
        clip = check.bounds(bounds)
        return clipped_interval(self.mu, z_value(confidence) * self.sigma, clip)

    @property
    def score_range(self) -> tuple[float, float]:
        """``(min w, max w)``: the range any score lies in."""
        return self._scaled.low, self._scaled.high

    @property
    def avg(self) -> tuple[float, float]:
        """avg@N and its Bayesian standard deviation ``sigma_a``
        (:func:`scorio_core.count_reads.average`).

        Raises:
            ValueError: when no trial has been observed.
        """
        return count_reads.average(self)

    # -- internal to scorio_core (see the module doc) --------------------------

    @property
    def storage(self) -> CountStorage:
        """The storage the table is a layer of (internal to scorio_core)."""
        return self._storage

    @property
    def layer(self) -> int:
        """The table's layer of its storage's arrays (internal to scorio_core)."""
        return self._layer

    def attach(self) -> None:
        """Point at the table's layer of the storage's (new) arrays, and at
        flat memoryviews of them: the cheapest one-cell indexing."""
        arrays = self._storage.layer_arrays(self._layer)
        self._observed, self._prior = arrays.observed, arrays.prior
        self._observed_view = self._observed.reshape(-1).data
        self._prior_view = self._prior.reshape(-1).data
        self._row_trials_view = arrays.row_trials.data
        self._means_view = cast("memoryview[float]", arrays.means.data)
        self._variances_view = cast("memoryview[float]", arrays.variances.data)

    def detach(self) -> None:
        """Drop the views of the storage's arrays (they are about to move)."""
        del self._observed, self._prior, self._observed_view, self._prior_view
        del self._row_trials_view, self._means_view, self._variances_view

    def _nu(self, rows: int | NDArray[np.int64]) -> NDArray[np.int64]:
        """Dirichlet parameters of rows: observed + prior counts + 1."""
        nu: NDArray[np.int64] = (
            self._observed[rows].astype(np.int64) + self._prior[rows] + 1
        )
        return nu

    def take_rows(self) -> int:
        """Take in the index's rows added since (by any table; no trials here:
        each adds the empty terms to the sums). Returns the number of rows."""
        count = len(self._questions)
        added = count - self._size
        if added:
            self._storage.take_rows(count)
            self._mean_sum += added * self._empty_mean
            self._variance_sum += added * self._empty_variance
            self._size = count
            self._synced = False
        return count

    def add_row(self, question: Hashable) -> int:
        """Number a new question (in the shared index) and take its row in."""
        declared = self._declared_count
        if declared is not None and len(self._questions) >= declared:
            raise ValueError(
                f"question {question!r} would exceed question_count={declared}"
            )
        row = self._storage.index.add(question)
        self.take_rows()
        return row

    @staticmethod
    def move_sums(
        tables: Sequence[CountTable],
        changes: Iterable[tuple[int, float, float, int]],
        prior: bool,
    ) -> None:
        """Move each table's trial count and running sums by its part of a
        batch: (trials, mean and variance sums, the updates it counts as)."""
        for table, (trials, mean, variance, updates) in zip(
            tables, changes, strict=True
        ):
            if prior:
                table._prior_trial_count += trials
            else:
                table._trial_count += trials
            table._mean_sum += mean
            table._variance_sum += variance
            table._synced = False
            table._resync_countdown -= updates
            if table._resync_countdown <= 0:
                table.resync()
