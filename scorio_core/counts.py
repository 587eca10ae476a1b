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
from scorio_core import count_batch, count_state
from scorio_core.count_kernels import (
    category_counts,
    is_category,
    observed_average,
    readonly,
)
from scorio_core.posterior import (
    Posterior,
    clipped_interval,
    row_term,
    z_value,
)
from scorio_core.question_index import QuestionIndex
from scorio_core.storage import CountStorage, check_member

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

    The streaming path (:meth:`update`) and the reads are here; the
    constructors are in :mod:`scorio_core.count_state`, the batch path in
    :mod:`scorio_core.count_batch` (the methods delegate), the batch
    arithmetic on the rows in :mod:`scorio_core.storage` and the whole-array
    kernels in :mod:`scorio_core.count_kernels`. Internal to scorio_core
    (what those modules use, not for callers): :attr:`storage`,
    :attr:`layer`, :meth:`attach`, :meth:`detach`, :meth:`take_rows`,
    :meth:`add_row` and :meth:`move_sums`.

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
        "_index",
        "_layer",
        "_mean_sum",
        "_means",
        "_means_view",
        "_observed",
        "_observed_view",
        "_prior",
        "_prior_trial_count",
        "_prior_view",
        "_questions",
        "_resync_countdown",
        "_row_trials",
        "_row_trials_view",
        "_rows",
        "_scaled",
        "_size",
        "_storage",
        "_synced",
        "_trial_count",
        "_variance_sum",
        "_variances",
        "_variances_view",
        "_weights",
        "_width",
    )

    # The table's layer of its storage's arrays (see the module doc); the
    # memoryviews alias them. Count arrays have one of the _COUNT_TYPES.
    _observed: NDArray[np.integer]
    _prior: NDArray[np.integer]
    _row_trials: NDArray[np.integer]
    _means: NDArray[np.float64]
    _variances: NDArray[np.float64]
    _observed_view: memoryview
    _prior_view: memoryview
    _row_trials_view: memoryview
    _means_view: memoryview[float]
    _variances_view: memoryview[float]

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
        self._weights = storage.weights
        self._scaled = storage.scaled
        self._declared_count = storage.declared_count
        self._width = storage.weights.size
        self._index = storage.index
        # Aliases of the index's numbering (read only here).
        self._rows = self._index.rows
        self._questions = self._index.questions
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

    # -- construction --------------------------------------------------------

    @classmethod
    def from_matrix(
        cls, R: ArrayLike, w: ArrayLike | None = None, R0: ArrayLike | None = None
    ) -> CountTable:
        """Build from an ``M x N`` results matrix; questions are ``0..M-1``."""
        return count_state.from_matrix(cls, R, w, R0)

    @classmethod
    def from_state(
        cls,
        w: ArrayLike,
        questions: Sequence[Hashable],
        observed: ArrayLike,
        prior: ArrayLike | None = None,
        question_count: int | None = None,
        *,
        index: QuestionIndex | None = None,
        storage: CountStorage | None = None,
    ) -> CountTable:
        """Rebuild from stored sufficient statistics (counts per question).

        Arguments as :func:`scorio_core.count_state.from_state` says.
        """
        return count_state.from_state(
            cls,
            w,
            questions,
            observed,
            prior,
            question_count,
            index=index,
            storage=storage,
        )

    def copy(self) -> CountTable:
        """An independent copy (with its own question numbering)."""
        return count_state.copy(self)

    # -- updates ---------------------------------------------------------------

    def declare(self, questions: Iterable[Hashable]) -> None:
        """Register questions before any trial (they contribute their prior)."""
        for question in questions:
            if question not in self._rows:
                self.add_row(question)

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

    def update_many(
        self,
        questions: Sequence[Hashable],
        categories: ArrayLike,
        deltas: ArrayLike | None = None,
        *,
        prior: bool = False,
    ) -> None:
        """Vectorized :meth:`update` of many trials; all or nothing.

        The deltas are aggregated per question and category first, so a batch
        costs O(len(batch) + distinct questions x C).
        """
        count_batch.update_many(self, questions, categories, deltas, prior)

    def add_counts(
        self, questions: Sequence[Hashable], deltas: ArrayLike, *, prior: bool = False
    ) -> None:
        """Add count deltas per question and category; all or nothing.

        Args:
            questions: Distinct question ids, one per row of ``deltas``.
            deltas: ``len(questions) x (C+1)`` integer changes (negative to
                retract), e.g. a batch already summed per question.
        """
        count_batch.add_counts(self, questions, deltas, prior)

    def add_row_counts(
        self, rows: NDArray[np.int64], deltas: NDArray[np.int64], *, prior: bool
    ) -> None:
        """:meth:`add_counts` by distinct rows of the shared question index
        (:func:`scorio_core.count_batch.add_row_counts`); all or nothing."""
        count_batch.add_row_counts(self, rows, deltas, prior)

    @staticmethod
    def add_row_counts_together(
        parts: Sequence[tuple[CountTable, NDArray[np.int64], NDArray[np.int64]]],
        *,
        prior: bool,
    ) -> None:
        """:meth:`add_row_counts` of several tables (``parts``: table, rows,
        deltas) in one pass, all or nothing
        (:func:`scorio_core.count_batch.add_row_counts_together`)."""
        count_batch.add_row_counts_together(parts, prior)

    def merge(self, other: CountTable) -> None:
        """Fold in another table's counts (e.g. a shard from another worker).

        Raises:
            ValueError: when the weights or declared question counts differ.
        """
        count_batch.merge(self, other)

    @property
    def is_synced(self) -> bool:
        """Whether the sums are exact (no update since the last resync).

        A synced table's ``mu`` and ``sigma`` depend on its counts only, not
        on the order the updates came in, to the last bit.
        """
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
        return self._weights

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
        size = self.take_rows()
        return readonly(self._observed[:size].astype(np.int64))

    @property
    def prior_counts(self) -> NDArray[np.int64]:
        """``rows x (C+1)`` prior-outcome counts."""
        size = self.take_rows()
        return readonly(self._prior[:size].astype(np.int64))

    def count_views(self) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        """Observed and prior counts as stored, without a copy.

        Read-only views in the table's count type (as narrow as uint8, so
        do arithmetic in a wider type); they change with the table. For
        reads over many tables at once, where int64 copies would take eight
        times the memory.
        """
        size = self.take_rows()
        observed, prior = self._observed[:size].view(), self._prior[:size].view()
        observed.setflags(write=False)
        prior.setflags(write=False)
        return observed, prior

    @property
    def question_trials(self) -> NDArray[np.int64]:
        """Observed trials per question, in :attr:`questions` order."""
        size = self.take_rows()
        return readonly(self._row_trials[:size].astype(np.int64))

    def trials_for(self, questions: Sequence[Hashable]) -> list[int]:
        """Observed trials of each given question (0 for unseen ones)."""
        self.take_rows()
        rows, trials = self._rows, self._row_trials_view
        return [trials[rows[q]] if q in rows else 0 for q in questions]

    def trials_array(self, questions: Sequence[Hashable]) -> NDArray[np.int64]:
        """:meth:`trials_for` as a new array; a copy of the row totals when the
        table's rows are ``questions`` in order (a declared run's tables)."""
        rows = self.take_rows()
        size = len(questions)
        if size <= rows and self._questions[:size] == list(questions):
            return self._row_trials[:size].astype(np.int64)
        return np.array(self.trials_for(questions), dtype=np.int64)

    @property
    def least_question_trials(self) -> int:
        """Fewest observed trials on any of the ``M`` questions (0 if any unseen)."""
        size = self.take_rows()
        if not size or self.question_count > size:
            return 0
        return int(self._row_trials[:size].min())

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
        r"""Variance of the score with one unit of information per question.

        Each question's posterior variance is ``s_a^2 / (T_a + 1)``, with
        ``s_a^2`` the variance of one more outcome and ``T_a`` its Dirichlet
        total; this is :math:`\text{scale}^2 \sum_a s_a^2 / M^2`, so
        ``unit_variance / sigma**2`` is the model's variance-weighted
        information (prior included). O(M), read when a look needs it.
        """
        size = self.take_rows()
        declared = self._declared_count or max(size, 1)
        # T_a + 1 = trials + prior outcomes + the C+1 uniform prior counts + 1.
        totals = self._row_trials[:size].astype(np.int64) + (self._width + 1)
        if self._prior_trial_count:
            totals = totals + self._prior[:size].sum(axis=1, dtype=np.int64)
        spread = self._variances[:size] * totals
        unseen = (declared - size) * self._empty_variance * (self._width + 1)
        total = float(spread.sum()) + unseen
        return self._scaled.scale**2 * max(total, 0.0) / declared**2

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
        size = self.take_rows()
        return observed_average(
            self._observed[:size], self._prior[:size], self._variances, self._scaled
        )

    # -- internals -------------------------------------------------------------

    # The table's package-internal surface (see the class docstring).

    @property
    def storage(self) -> CountStorage:
        """The storage the table is a layer of."""
        return self._storage

    @property
    def layer(self) -> int:
        """The table's layer of its storage's arrays."""
        return self._layer

    def attach(self) -> None:
        """Point at the table's layer of the storage's (new) arrays."""
        arrays = self._storage.layer_arrays(self._layer)
        self._observed, self._prior, self._row_trials = arrays[:3]
        self._means, self._variances = arrays[3:]
        self._refresh_views()

    def detach(self) -> None:
        """Drop the views of the storage's arrays (they are about to move)."""
        del self._observed, self._prior, self._row_trials, self._means
        del self._variances, self._observed_view, self._prior_view
        del self._row_trials_view, self._means_view, self._variances_view

    def _refresh_views(self) -> None:
        """Flat memoryviews of the arrays: the cheapest one-cell indexing."""
        self._observed_view = self._observed.reshape(-1).data
        self._prior_view = self._prior.reshape(-1).data
        self._row_trials_view = self._row_trials.data
        self._means_view = cast("memoryview[float]", self._means.data)
        self._variances_view = cast("memoryview[float]", self._variances.data)

    def _nu(self, rows: int | NDArray[np.int64]) -> NDArray[np.int64]:
        """Dirichlet parameters of rows: observed + prior counts + 1."""
        nu: NDArray[np.int64] = (
            self._observed[rows].astype(np.int64) + self._prior[rows] + 1
        )
        return nu

    def take_rows(self) -> int:
        """Take in the index's rows added since (by this table or another).

        They hold no trials here, so each adds the empty terms to the sums.
        Returns the number of rows.
        """
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
        if (
            self._declared_count is not None
            and len(self._questions) >= self._declared_count
        ):
            raise ValueError(
                f"question {question!r} would exceed "
                f"question_count={self._declared_count}"
            )
        row = self._index.add(question)
        self.take_rows()
        return row

    def move_sums(
        self,
        trial_change: int,
        mean_change: float,
        variance_change: float,
        updates: int,
        prior: bool,
    ) -> None:
        """Move the trial count and running sums by a batch's changes; the
        batch counts as ``updates`` updates against the resync window."""
        if prior:
            self._prior_trial_count += trial_change
        else:
            self._trial_count += trial_change
        self._mean_sum += mean_change
        self._variance_sum += variance_change
        self._synced = False
        self._resync_countdown -= updates
        if self._resync_countdown <= 0:
            self.resync()
