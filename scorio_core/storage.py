r"""The stacked row arrays of the count tables of one run.

A :class:`CountStorage` holds the observed and prior counts (layers x rows x
categories), the row totals and the per-question terms (layers x rows) of
all the :class:`~scorio_core.counts.CountTable` of one run in one set of
arrays, a layer per table. A table reads and writes its layer through
views, as a table of its own would; a batch of many models' trials (a wire
array of 1,000 trials is 20 models x 50 questions) gathers and scatters
each array once for all of them through flat indices
``layer * capacity + row``, where one pass per table cost some seven NumPy
calls a table, ~10 us a model a call. Rows grow by doubling (up to the
declared count), layers by half when a model arrives, and a count that does
not fit widens the count type of every layer. A storage of a MB or more
lives in private anonymous memory maps: layers no table has yet take no
memory, layers are added in place (mremap, no second copy at the peak), and
the pages of a replaced array go back to the system. The memory handling
(count types, maps) and the drift accounting of a batch live here too, as
does the batch arithmetic of one table (:meth:`CountStorage.add_rows`).
The members documented as internal to scorio_core (``weights``,
``scaled``, ``declared_count``, ``empty_terms``, ``layer_arrays``,
``join``, ``take_rows``, ``widen_counts``, ``widen_trials``, ``add_rows``)
are what the tables and their batch functions use instead of the
storage's underscored state. Large arrays live in :mod:`scorio_core.memory_maps`.
"""

from __future__ import annotations

import itertools
import math
import mmap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core import memory_maps
from scorio_core.count_kernels import row_terms, set_rows, split_pieces
from scorio_core.memory_maps import map_of, zeros
from scorio_core.posterior import ScaledWeights, row_term
from scorio_core.question_index import QuestionIndex

if TYPE_CHECKING:
    from scorio_core.counts import CountTable

_INITIAL_ROWS: Final = 8
# Count types, narrowest first; a count that does not fit widens its array.
_COUNT_TYPES: Final = (np.uint8, np.uint16, np.uint32, np.int64)
# Rows of many tables updated in one pass, at most (about): bounds the pass's
# temporaries (some 50 bytes per row and category) for bulk batches.
_TOGETHER_ROWS: Final = 16_384
# A storage whose float arrays take this much has memory maps (zeros).
_MAPPED_BYTES: Final = 1 << 20
# Their largest values (np.iinfo builds an object per call: a batch's
# tables asked 20 times per call).
_COUNT_MAX: Final = {np.dtype(kind): int(np.iinfo(kind).max) for kind in _COUNT_TYPES}


class LayerArrays(NamedTuple):
    """One table's layer of a storage's arrays: views, rows x ... each."""

    observed: NDArray[np.integer]
    prior: NDArray[np.integer]
    row_trials: NDArray[np.integer]
    means: NDArray[np.float64]
    variances: NDArray[np.float64]


class CountStorage:
    """Row arrays of the count tables of one run, stacked: a layer per table.

    The tables share the question index, the weights and the declared
    question count. A batch that touches many tables gathers and scatters
    each array once for all of them, through flat indices
    ``layer * capacity + row``, instead of once per table.

    Args:
        w: Category weights, length ``C+1``.
        question_count: Declared ``M`` or ``None`` for open tables.
        index: The tables' question numbering (a new one if ``None``).
        layers: Tables to make room for now (more are added as they come).
    """

    __slots__ = (
        "_capacity",
        "_declared_count",
        "_empty_mean",
        "_empty_variance",
        "_index",
        "_means",
        "_observed",
        "_prior",
        "_row_trials",
        "_scaled",
        "_tables",
        "_variances",
        "_weights",
        "_width",
    )

    # layers x capacity (x width for counts). Count arrays have one of the
    # _COUNT_TYPES, the same for every layer.
    _observed: NDArray[np.integer]
    _prior: NDArray[np.integer]
    _row_trials: NDArray[np.integer]
    _means: NDArray[np.float64]
    _variances: NDArray[np.float64]

    def __init__(
        self,
        w: ArrayLike,
        question_count: int | None = None,
        *,
        index: QuestionIndex | None = None,
        layers: int = 1,
    ) -> None:
        weights = check.weights(w)
        if question_count is not None:
            question_count = check.integer(question_count, "question_count")
            if question_count < 1:
                raise ValueError(f"question_count must be >= 1; got {question_count}")
        weights.setflags(write=False)
        self._weights = weights
        self._scaled = ScaledWeights.from_weights(weights)
        self._declared_count = question_count
        self._width = width = weights.size
        self._index = QuestionIndex() if index is None else index
        self._empty_mean, self._empty_variance = row_term([1] * width, self._scaled)
        self._tables: list[CountTable] = []
        self._capacity = 0
        self._observed = np.zeros((0, 0, width), dtype=np.uint8)
        self._prior = np.zeros((0, 0, width), dtype=np.uint8)
        self._row_trials = np.zeros((0, 0), dtype=np.uint8)
        self._means = np.zeros((0, 0))
        self._variances = np.zeros((0, 0))
        self._allocate(max(1, layers), _INITIAL_ROWS)

    @property
    def index(self) -> QuestionIndex:
        """The tables' question numbering."""
        return self._index

    @property
    def tables(self) -> tuple[CountTable, ...]:
        """The tables, in layer order."""
        return tuple(self._tables)

    # -- internal to scorio_core: what the tables read and call ---------------

    @property
    def weights(self) -> NDArray[np.float64]:
        """The tables' category weights (read-only)."""
        return self._weights

    @property
    def scaled(self) -> ScaledWeights:
        """The weights rescaled to the unit interval (internal to scorio_core)."""
        return self._scaled

    @property
    def declared_count(self) -> int | None:
        """The declared ``M``, ``None`` for open tables."""
        return self._declared_count

    @property
    def empty_terms(self) -> tuple[float, float]:
        """Posterior mean and variance terms of a row without trials."""
        return self._empty_mean, self._empty_variance

    def layer_arrays(self, layer: int) -> LayerArrays:
        """Views of one layer's arrays (internal to scorio_core)."""
        return LayerArrays(
            self._observed[layer],
            self._prior[layer],
            self._row_trials[layer],
            self._means[layer],
            self._variances[layer],
        )

    def _allocate(self, layers: int, capacity: int) -> None:
        """(Re)allocate for ``layers`` x ``capacity`` rows, keeping the rows held."""
        width = self._width
        held_layers, held_rows = self._means.shape
        # All in memory maps or none (they grow in place together).
        mapped = layers * capacity * 8 >= _MAPPED_BYTES
        observed = zeros((layers, capacity, width), self._observed.dtype, mapped)
        prior = zeros((layers, capacity, width), self._prior.dtype, mapped)
        row_trials = zeros((layers, capacity), self._row_trials.dtype, mapped)
        means = zeros((layers, capacity), np.dtype(np.float64), mapped)
        variances = zeros((layers, capacity), np.dtype(np.float64), mapped)
        # The tables' layers hold empty rows; layers no table has yet stay
        # untouched zero pages (their table fills them when it joins).
        used = len(self._tables)
        means[:used] = self._empty_mean
        variances[:used] = self._empty_variance
        if held_layers and held_rows:
            observed[:held_layers, :held_rows] = self._observed
            prior[:held_layers, :held_rows] = self._prior
            row_trials[:held_layers, :held_rows] = self._row_trials
            means[:held_layers, :held_rows] = self._means
            variances[:held_layers, :held_rows] = self._variances
        self._observed, self._prior, self._row_trials = observed, prior, row_trials
        self._means, self._variances = means, variances
        self._capacity = capacity
        self._reattach()

    def _reattach(self) -> None:
        """Point every table at its layer of the (new) arrays."""
        for table in self._tables:
            table.attach()

    def join(self, table: CountTable) -> int:
        """A layer for a new table (internal to scorio_core): the layers
        grow by half when full."""
        layer = len(self._tables)
        layers = self._means.shape[0]
        if layer == layers:
            self._add_layers(max(layer + 1, layers * 3 // 2))
        self._means[layer] = self._empty_mean
        self._variances[layer] = self._empty_variance
        self._tables.append(table)
        return layer

    def _add_layers(self, layers: int) -> None:
        """Room for ``layers`` tables: the memory maps grow in place (mremap:
        no copy, no second set of arrays) when every array has one and no
        view of them is held elsewhere; else a copy, as for more rows."""
        arrays = (
            self._observed,
            self._prior,
            self._row_trials,
            self._means,
            self._variances,
        )
        found = [map_of(array) for array in arrays]
        if None in found:
            self._allocate(layers, self._capacity)
            return
        maps = cast("list[mmap.mmap]", found)
        held = self._means.shape[0]
        shapes = [(array.dtype, array.shape[1:]) for array in arrays]
        # Drop every view of the maps (the tables' too), so they can resize.
        del arrays
        del self._observed, self._prior, self._row_trials, self._means
        del self._variances
        for table in self._tables:
            table.detach()
        grown = True
        try:
            for buffer, (kind, shape) in zip(maps, shapes, strict=True):
                memory_maps.resize(buffer, layers * math.prod(shape) * kind.itemsize)
        except (BufferError, OSError, SystemError):
            # A view held elsewhere, or no mremap (macOS): copy instead.
            grown = False
        rebuilt: list[NDArray[Any]] = []
        for buffer, (kind, shape) in zip(maps, shapes, strict=True):
            array = np.frombuffer(buffer, dtype=kind).reshape((-1, *shape))
            rebuilt.append(array if grown else array[:held])
        self._observed, self._prior, self._row_trials = rebuilt[:3]
        self._means, self._variances = rebuilt[3:]
        if grown:
            self._reattach()
        else:
            self._allocate(layers, self._capacity)

    def take_rows(self, count: int) -> None:
        """Room for ``count`` rows of the index (internal to scorio_core):
        doubling, up to the declared count."""
        if count <= self._capacity:
            return
        capacity = max(self._capacity, 1)
        while capacity < count:
            capacity *= 2
        if self._declared_count is not None:
            capacity = max(count, min(capacity, self._declared_count))
        self._allocate(self._means.shape[0], capacity)

    def widen_counts(self, prior: bool, values: ArrayLike) -> None:
        """Give every layer's observed (or prior) counts a type for ``values``
        (internal to scorio_core)."""
        if prior:
            held = _holding(self._prior, values)
            changed, self._prior = held is not self._prior, held
        else:
            held = _holding(self._observed, values)
            changed, self._observed = held is not self._observed, held
        if changed:
            self._reattach()

    def widen_trials(self, values: ArrayLike) -> None:
        """Give every layer's row totals a type for ``values`` (internal to
        scorio_core)."""
        held = _holding(self._row_trials, values)
        if held is not self._row_trials:
            self._row_trials = held
            self._reattach()

    def add_rows(
        self,
        table: CountTable,
        rows: NDArray[np.int64],
        deltas: NDArray[np.int64],
        prior: bool,
    ) -> None:
        """Add checked deltas to existing rows of one table and move its sums
        (internal to scorio_core: the one-table batch of :mod:`count_batch`)."""
        size = table.take_rows()
        layer = table.layer
        stored = self._prior[layer] if prior else self._observed[layer]
        counts = stored[rows].astype(np.int64) + deltas
        if counts.size and int(counts.max()) > max_of(stored.dtype):
            self.widen_counts(prior, int(counts.max()))
            stored = self._prior[layer] if prior else self._observed[layer]
        stored[rows] = counts
        trials = deltas.sum(axis=1)
        if not prior:
            row_trials = self._row_trials[layer][rows].astype(np.int64) + trials
            self.widen_trials(row_trials)
            self._row_trials[layer][rows] = row_trials
        # Observed + prior counts + 1 (as the table's nu), from the counts made.
        other = self._observed[layer] if prior else self._prior[layer]
        nu = other[rows] + counts + 1
        means, variances = row_terms(nu, self._scaled)
        held_means, held_variances = self._means[layer], self._variances[layer]
        mean_change = float((means - held_means[rows]).sum())
        variance_change = float((variances - held_variances[rows]).sum())
        held_means[rows], held_variances[rows] = means, variances
        updates = _batch_updates(len(rows), size)
        change = (int(trials.sum()), mean_change, variance_change, updates)
        table.move_sums([table], [change], prior)

    def add_counts(
        self,
        tables: Sequence[CountTable],
        sizes: Sequence[int],
        rows: NDArray[np.int64],
        deltas: NDArray[np.int64],
        *,
        prior: bool,
    ) -> None:
        """Add count deltas to rows of many of the tables; all or nothing.

        Args:
            tables: Distinct tables of this storage.
            sizes: How many of the rows are each table's, in order.
            rows: Distinct rows of the index per table, the tables' one
                after the other.
            deltas: ``len(rows) x (C+1)`` integer changes, row by row.
            prior: Whether the deltas are prior-outcome counts.

        Each array is gathered and scattered once for all the tables (in
        pieces of about ``_TOGETHER_ROWS`` rows), and each row's terms are
        the ones :meth:`CountTable.update` would compute.

        Raises:
            ValueError: when a count would become negative (none changed)
                or a table is not on this storage.
        """
        if any(table.storage is not self for table in tables):
            raise ValueError("every table must be on this storage")
        if sum(sizes) != len(rows) or deltas.shape != (len(rows), self._width):
            raise ValueError(
                f"sizes must add up to the rows ({len(rows)}) and deltas be "
                f"rows x {self._width}; got {sum(sizes)} and {deltas.shape}"
            )
        if 0 in sizes:  # reduceat takes a table without rows for one row
            kept = [position for position, size in enumerate(sizes) if size]
            tables = [tables[position] for position in kept]
            sizes = [sizes[position] for position in kept]
        if not tables:
            return
        if len(rows) <= _TOGETHER_ROWS:
            self._add(tables, sizes, rows, deltas, prior)
            return
        ends = [0, *itertools.accumulate(sizes)]
        pieces = split_pieces(sizes, _TOGETHER_ROWS)
        if len(pieces) > 1 and int(deltas.min()) < 0:
            # A piece is written before the next is checked: check all first.
            for first, last in pieces:
                piece = slice(ends[first], ends[last])
                self._add(
                    tables[first:last],
                    sizes[first:last],
                    rows[piece],
                    deltas[piece],
                    prior,
                    write=False,
                )
        for first, last in pieces:
            piece = slice(ends[first], ends[last])
            self._add(
                tables[first:last],
                sizes[first:last],
                rows[piece],
                deltas[piece],
                prior,
            )

    def _add(
        self,
        tables: Sequence[CountTable],
        sizes: Sequence[int],
        rows: NDArray[np.int64],
        deltas: NDArray[np.int64],
        prior: bool,
        write: bool = True,
    ) -> None:
        """One pass of :meth:`add_counts` (or its check only)."""
        count = len(self._index)
        for table in tables:
            table.take_rows()  # may grow the arrays: before the indices
        width = self._width
        # Each row's position in the layers x capacity arrays.
        offsets = [table.layer * self._capacity for table in tables]
        flat = rows + np.repeat(np.array(offsets), np.array(sizes))
        stored = self._prior if prior else self._observed
        # take: a fifth of the cost of indexing rows of a 2-D array.
        counts = stored.reshape(-1, width).take(flat, axis=0) + deltas
        if int(deltas.min()) < 0 and int(counts.min()) < 0:
            bad = int(np.argmax((counts < 0).any(axis=1)))
            question = self._index.questions[int(rows[bad])]
            raise ValueError(f"a count on question {question!r} would become negative")
        if not write:
            return
        # Observed + prior counts + 1 (as _nu), from the counts just made;
        # observed counts only when no table has prior rows (all zero).
        if prior or any([table.prior_trial_count for table in tables]):
            other = self._observed if prior else self._prior
            nu = other.reshape(-1, width).take(flat, axis=0) + counts + 1
        else:
            nu = counts + 1
        means, variances = row_terms(nu, self._scaled)
        starts = np.array([0, *itertools.accumulate(sizes[:-1])])
        mean_changes = np.add.reduceat(means - self._means.take(flat), starts)
        variance_changes = np.add.reduceat(
            variances - self._variances.take(flat), starts
        )
        trial_changes = np.add.reduceat(deltas, starts).sum(axis=1)
        top_count = int(counts.max())
        if top_count > max_of(stored.dtype):
            self.widen_counts(prior, top_count)
            stored = self._prior if prior else self._observed
        set_rows(stored, flat, counts)
        if not prior:
            # Observed trials per row: the sum of its observed counts (a
            # column at a time: NumPy sums a short row slowly).
            row_trials = counts[:, 0].copy()
            for category in range(1, width):
                row_trials += counts[:, category]
            top_trials = int(row_trials.max())
            if top_trials > max_of(self._row_trials.dtype):
                self.widen_trials(top_trials)
            self._row_trials.reshape(-1)[flat] = row_trials
        self._means.reshape(-1)[flat] = means
        self._variances.reshape(-1)[flat] = variances
        # Every table has taken the index's rows: its size is ``count``
        # (_batch_updates inline: a call per table costs more than this).
        updates = [1 + size * size // count for size in sizes]
        changes = zip(
            trial_changes.tolist(),
            mean_changes.tolist(),
            variance_changes.tolist(),
            updates,
            strict=True,
        )
        tables[0].move_sums(tables, changes, prior)


def _batch_updates(rows: int, size: int) -> int:
    """How many updates a batch of ``rows`` changed rows counts as for drift.

    One rounding of the running sums, plus the rounding of the sum of its
    row changes (see the module docstring): ``1 + rows * rows // size``.
    """
    return 1 + rows * rows // max(size, 1)


def max_of(kind: np.dtype[Any]) -> int:
    """The largest value of an integer type."""
    top = _COUNT_MAX.get(kind)
    return int(np.iinfo(kind).max) if top is None else top


def _holding(array: NDArray[np.integer], values: ArrayLike) -> NDArray[Any]:
    """``array``, or a copy in a wider count type when ``values`` need one."""
    needed = np.asarray(values)
    if not needed.size:
        return array
    high = int(needed.max())
    if high <= max_of(array.dtype):
        return array
    for kind in _COUNT_TYPES:
        if high <= np.iinfo(kind).max:
            widened = zeros(array.shape, np.dtype(kind), map_of(array) is not None)
            widened[...] = array
            return widened
    raise OverflowError(f"a count of {high} does not fit in 64 bits")
