"""The exactly-once index of trials kept by the embedded stores.

A trial is identified by ``(model, question, trial)`` within a run, in two
namespaces (observed and prior outcomes). Recording a trial stores its
category and returns what was there before, which is all the engine needs:
nothing (``NEW``: a new trial), the same category (a duplicate delivery) or
another one (a correction).

Layout: per (model, namespace) a grid of categories, one row per question
and one column per distinct trial id (ids are strings; "0".."79" become 80
columns shared by all questions), ``-1`` where no trial was seen. Rows and
columns are numbered once per run, for all its grids, so a batch looks each
id up once. A cell is one byte (int8) until a category past 127 widens its
grid to int16, and a grid grows to the run's rows and columns, not past
them: fifty models x 1,000 questions x 80 trials take 4 MB, a hundred
models x 10,000 questions x 2 trials 2 MB. A run whose trial ids are all
distinct (say UUIDs) would grow a column per trial, so past
``MAX_COLUMNS`` further ids go to a dict instead. A grid's array
grows only while it holds at most ``CELLS_PER_TRIAL`` cells per trial it
recorded; trials outside it go to the same dict, so memory grows with the
trials counted, never with questions x distinct ids (a model with one trial
at the far corner of the run's grid costs a few hundred bytes).

Batches are classified with NumPy in one pass, with the same answers a
trial-by-trial loop gives: within a batch, a repeat is compared with the
delivery before it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.inputs.factors import NUMBERED_IDS as NUMBERED_IDS
from monitor.inputs.factors import Factors as Factors
from monitor.inputs.factors import NumberedRows as NumberedRows
from monitor.inputs.factors import run_starts
from monitor.stores.grid_growth import grown as _grown

NEW: Final = -1
MAX_COLUMNS: Final = 4096
# A grid's array may hold this many cells per trial it records (plus a
# small start): rows and columns are the run's, so a new model's first trial
# at question 999 and trial id 4,095 would otherwise take a 1,024 x 4,096
# array (8 MB). Cells past the array go to the overflow dict instead.
CELLS_PER_TRIAL: Final = 16
_START_CELLS: Final = 64 * 64
_INT8_MAX: Final = 127
# A (question, trial) -> category dict entry, with its key tuple: about.
_OVERFLOW_ENTRY_BYTES: Final = 200


class TrialGrid:
    """Categories of one model's trials in one namespace.

    Rows and columns are the run's (shared by every grid of its ledger);
    a grid's array grows to cover the ones its own trials use.
    """

    __slots__ = ("_cells", "_columns", "_overflow", "_rows", "_shape", "_size", "_view")

    def __init__(self, rows: dict[str, int], columns: dict[str, int]) -> None:
        self._rows = rows
        self._columns = columns
        self._cells = np.full((1, 1), NEW, dtype=np.int8)
        self._shape = (1, 1)
        # Trial-at-a-time access goes through a memoryview: a fifth of the
        # cost of NumPy scalar indexing.
        self._view = self._cells.data
        self._overflow: dict[tuple[str, str], int] = {}
        self._size = 0

    def __len__(self) -> int:
        """Distinct trials recorded."""
        return self._size

    def record(self, question: str, trial: str, category: int) -> int:
        """Set one trial's category; return the previous one or ``NEW``."""
        row = self._rows.get(question)
        column = self._columns.get(trial)
        if row is None or column is None:
            row, column = _cell(self._rows, self._columns, question, trial)
        if column >= 0 and (row >= self._shape[0] or column >= self._shape[1]):
            self._cover(row, column, self._size + 1)
        if category > _INT8_MAX:
            self._hold(category)
        if column < 0 or row >= self._shape[0] or column >= self._shape[1]:
            previous = self._overflow.get((question, trial), NEW)
            self._overflow[(question, trial)] = category
        else:
            previous = self._view[row, column]
            self._view[row, column] = category
        if previous == NEW:
            self._size += 1
        return previous

    def restore(self, question: str, trial: str, category: int) -> None:
        """Put back a previous value (``NEW`` erases) after a failed commit."""
        row, column = _cell(self._rows, self._columns, question, trial)
        if column < 0 or row >= self._shape[0] or column >= self._shape[1]:
            previous = self._overflow.pop((question, trial), NEW)
            if category != NEW:
                self._overflow[(question, trial)] = category
        else:
            previous = self._view[row, column]
            self._view[row, column] = category
        self._size += (category != NEW) - (previous != NEW)

    def record_sorted(
        self,
        rows: NDArray[np.int64],
        columns: NDArray[np.int64],
        categories: NDArray[np.int64],
        first: NDArray[np.bool_],
        last: NDArray[np.bool_],
        previous: NDArray[np.int64],
        ids: Callable[[int], tuple[str, str]],
        span: tuple[int, int, int, int],
    ) -> None:
        """Record trials sorted by cell (stably); previous categories in place.

        ``first`` and ``last`` flag each cell's first and last delivery;
        ``previous`` holds, for every later delivery, the one before it and
        gets the stored category of each first one. ``ids(k)``: the k-th
        trial's ids, for those outside the array. ``span``: the highest row,
        lowest and highest column and highest category of the trials.
        """
        top_row, low_column, top_column, top_category = span
        self._hold(top_category)
        every = False
        if low_column >= 0:  # the common case: no mask of the trials needed
            self._cover(top_row, top_column, self._size + len(rows))
            every = top_row < self._shape[0] and top_column < self._shape[1]
        dense = first  # unused when every trial is in the array
        if not every:
            dense = columns >= 0
            if dense.any():
                self._cover(
                    int(rows[dense].max()),
                    int(columns[dense].max()),
                    self._size + len(rows),
                )
                dense &= (rows < self._shape[0]) & (columns < self._shape[1])
            every = bool(dense.all())
        flat = rows * self._shape[1] + columns
        stored = self._cells.reshape(-1)
        head = first if every else first & dense
        tail = last if every else last & dense
        found = stored[flat[head]]
        previous[head] = found
        stored[flat[tail]] = categories[tail]
        self._size += int(np.count_nonzero(found == NEW))
        if not every:
            # Cells outside the array, one by one in (stable) sorted order:
            # each cell's deliveries keep their batch order.
            for index in np.flatnonzero(~dense).tolist():
                previous[index] = self.record(*ids(index), int(categories[index]))

    def make_room(self, span: tuple[int, int, int, int], count: int) -> bool:
        """Prepare for ``count`` trials in ``span`` (see :meth:`record_sorted`).

        True when every one of them falls inside the array, so that
        :meth:`exchange` can record them.
        """
        top_row, low_column, top_column, top_category = span
        if top_category > _INT8_MAX:
            self._hold(top_category)
        if low_column < 0:
            return False
        rows, columns = self._shape
        if top_row < rows and top_column < columns:
            return True
        self._cover(top_row, top_column, self._size + count)
        return top_row < self._shape[0] and top_column < self._shape[1]

    @staticmethod
    def make_room_in(
        grids: list[TrialGrid],
        spans: list[tuple[int, int, int, int]],
        counts: list[int],
    ) -> list[int] | None:
        """:meth:`make_room` of each grid (every one prepared); their widths
        (a cell's flat index is ``row * width + column``) when all fit."""
        fits = True
        for grid, span, count in zip(grids, spans, counts, strict=True):
            top_row, low_column, top_column, top_category = span
            rows, columns = grid._shape
            if (
                top_row < rows
                and low_column >= 0
                and top_column < columns
                and top_category <= _INT8_MAX
            ):
                continue  # the common case, without a call
            if not grid.make_room(span, count):
                fits = False
        return [grid._shape[1] for grid in grids] if fits else None

    @staticmethod
    def exchange(
        grids: list[TrialGrid],
        heads: NDArray[np.int64],
        head_bounds: list[int],
        tails: NDArray[np.int64],
        tail_bounds: list[int],
        categories: NDArray[np.int64],
    ) -> NDArray[np.integer]:
        """Each grid's categories at its flat cells ``heads[head_bounds[k]:
        head_bounds[k + 1]]`` (all grids' in one array), then store its
        ``categories`` at its ``tails`` (likewise); the grids made room first
        (:meth:`make_room_in`); count new trials with :meth:`add_recorded`."""
        found = []
        # Written in the cells' own type: a cast inside each grid's
        # assignment costs four times the assignment.
        narrow = categories
        if categories.size and int(categories.max()) <= _INT8_MAX:
            narrow = categories.astype(np.int8)
        for index, grid in enumerate(grids):
            stored = grid._cells.reshape(-1)
            found.append(stored[heads[head_bounds[index] : head_bounds[index + 1]]])
            cells = slice(tail_bounds[index], tail_bounds[index + 1])
            values = narrow if stored.dtype == narrow.dtype else categories
            stored[tails[cells]] = values[cells]
        return np.concatenate(found)

    @staticmethod
    def add_recorded(grids: list[TrialGrid], counts: list[int]) -> None:
        """Count new distinct trials recorded by :meth:`exchange`, per grid."""
        for grid, count in zip(grids, counts, strict=True):
            grid._size += count

    def counts(self, width: int) -> tuple[list[str], NDArray[np.int64]]:
        """Questions this grid holds trials of (row order), counts per category."""
        questions = list(self._rows)
        cells = self._cells[: len(questions)]
        counts = np.zeros((len(questions), width), dtype=np.int64)
        for category in range(width):
            counts[: cells.shape[0], category] = (cells == category).sum(axis=1)
        for (question, _), category in self._overflow.items():
            counts[self._rows[question], category] += 1
        used = np.flatnonzero(counts.any(axis=1))
        return [questions[row] for row in used.tolist()], counts[used]

    def trials_of(self, question: str) -> list[tuple[str, int]]:
        """(trial id, category) of the grid's trials of ``question``."""
        row = self._rows.get(question, self._shape[0])
        ids = list(itertools.islice(self._columns, self._shape[1]))
        cells = (
            self._cells[row, : len(ids)] if row < self._shape[0] else self._cells[0, :0]
        )
        found = [
            (ids[c], int(cells[c])) for c in np.flatnonzero(np.not_equal(cells, NEW))
        ]
        return found + [(t, c) for (q, t), c in self._overflow.items() if q == question]

    @property
    def memory_bytes(self) -> int:
        """About what the grid holds: its array and its overflow entries."""
        return int(self._cells.nbytes) + _OVERFLOW_ENTRY_BYTES * len(self._overflow)

    def _cover(self, row: int, column: int, trials: int) -> None:
        """Grow the array (doubling) to have this row and column, if affordable.

        Affordable: at most ``CELLS_PER_TRIAL`` cells per trial (``trials``,
        the grid's trials after the coming ones). Otherwise the array stays
        and the trials outside it go to the overflow dict.
        """
        rows, columns = self._shape
        if row < rows and column < columns:
            return
        rows = _grown(rows, row, len(self._rows))
        columns = _grown(columns, column, len(self._columns))
        if rows * columns > max(_START_CELLS, CELLS_PER_TRIAL * trials):
            return
        old = self._cells
        new = np.full((rows, columns), NEW, dtype=old.dtype)
        new[: old.shape[0], : old.shape[1]] = old
        self._cells = new
        self._shape = (rows, columns)
        self._view = new.data
        # Overflowed trials the array now covers move into it: a trial is
        # in the array exactly when its cell is inside it.
        for (question, trial), category in list(self._overflow.items()):
            column = self._columns.get(trial, -1)
            row = self._rows[question]
            if 0 <= column < columns and row < rows:
                self._view[row, column] = category
                del self._overflow[(question, trial)]

    def _hold(self, category: int) -> None:
        """Widen the cells to int16 if ``category`` does not fit in int8."""
        if category > _INT8_MAX and self._cells.dtype == np.int8:
            self._cells = self._cells.astype(np.int16)
            self._view = self._cells.data


def _ids_of(
    ids: Callable[[int], tuple[str, str]], part: NDArray[np.int64], index: int
) -> tuple[str, str]:
    """``ids`` of the ``index``-th trial of ``part`` (batch indices)."""
    return ids(int(part[index]))


def _stable_order(keys: NDArray[np.int64], bound: int) -> NDArray[np.int64]:
    """``np.argsort(keys, kind="stable")`` for keys in ``0..bound-1``.

    Each key made distinct by its position (when that fits in int64), so
    the faster unstable sort gives the stable order.
    """
    size = len(keys)
    if bound * size >= 1 << 62:
        return np.argsort(keys, kind="stable")
    return np.argsort(keys * size + np.arange(size))


class Ledger:
    """Trial -> category index of one run, one grid per (model, namespace)."""

    __slots__ = ("_column_numbers", "_columns", "_grids", "_row_numbers", "_rows")

    def __init__(self) -> None:
        self._grids: dict[tuple[str, bool], TrialGrid] = {}
        # The run's questions and trial ids, numbered once for all grids.
        self._rows: dict[str, int] = {}
        self._columns: dict[str, int] = {}
        self._row_numbers = NumberedRows(self._rows)
        self._column_numbers = NumberedRows(self._columns)

    def __len__(self) -> int:
        """Distinct trials recorded (observed and prior)."""
        return sum(len(grid) for grid in self._grids.values())

    def grid(self, model: str, prior: bool) -> TrialGrid:
        key = (model, prior)
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = TrialGrid(self._rows, self._columns)
        return grid

    def record(
        self, model: str, question: str, trial: str, prior: bool, category: int
    ) -> int:
        """Set the trial's category; return the previous one or ``NEW``."""
        grid = self._grids.get((model, prior))
        if grid is None:
            grid = self.grid(model, prior)
        return grid.record(question, trial, category)

    def record_groups(
        self,
        models: list[str],
        groups: NDArray[np.int64],
        rows: NDArray[np.int64],
        columns: NDArray[np.int64],
        categories: NDArray[np.int64],
        ids: Callable[[int], tuple[str, str]],
    ) -> NDArray[np.int64]:
        """Record a batch of many grids; previous category (or ``NEW``) per trial.

        ``groups``: each trial's grid as ``2 * model code + prior`` (codes
        index ``models``); ``rows`` and ``columns`` from :meth:`cells`. One
        stable sort of the whole batch by (grid, cell) replaces one per grid,
        with the answers a trial-by-trial loop gives.
        """
        size = len(rows)
        stride = len(self._columns) + 1  # columns of -1 get a slot of their own
        keys = (groups * len(self._rows) + rows) * stride + (columns + 1)
        order = _stable_order(keys, 2 * len(models) * len(self._rows) * stride)
        sorted_keys = keys[order]
        sorted_categories = categories[order]
        change = np.ones(size + 1, dtype=bool)
        change[1:-1] = sorted_keys[1:] != sorted_keys[:-1]
        first, last = change[:-1], change[1:]
        previous_sorted = np.empty(size, dtype=np.int64)
        # A repeat inside the batch sees the delivery just before it.
        repeats = np.flatnonzero(~first)
        previous_sorted[repeats] = sorted_categories[repeats - 1]
        sorted_groups = groups[order]
        sorted_rows, sorted_columns = rows[order], columns[order]
        starts = run_starts(sorted_groups)
        # Each grid's trials are sorted by row: its last has the highest.
        spans = list(
            zip(
                sorted_rows[np.append(starts[1:], size) - 1].tolist(),
                np.minimum.reduceat(sorted_columns, starts).tolist(),
                np.maximum.reduceat(sorted_columns, starts).tolist(),
                np.maximum.reduceat(sorted_categories, starts).tolist(),
                strict=True,
            )
        )
        bounds = [*starts.tolist(), size]
        known = self._grids.get
        grids = []
        for group in sorted_groups[starts].tolist():
            key = (models[group >> 1], bool(group & 1))
            grid = known(key)
            grids.append(self.grid(*key) if grid is None else grid)
        sizes = [stop - start for start, stop in itertools.pairwise(bounds)]
        widths = TrialGrid.make_room_in(grids, spans, sizes)
        if widths is not None:
            # Every trial in its grid's array: each grid's work is one read
            # of its first deliveries' cells and one write of its last ones'.
            flat = sorted_rows * np.repeat(widths, sizes) + sorted_columns
            heads, tails = np.flatnonzero(first), np.flatnonzero(last)
            head_bounds = np.searchsorted(heads, bounds).tolist()
            found = TrialGrid.exchange(
                grids,
                flat[heads],
                head_bounds,
                flat[tails],
                np.searchsorted(tails, bounds).tolist(),
                sorted_categories[tails],
            )
            previous_sorted[heads] = found
            new = np.add.reduceat(found == NEW, head_bounds[:-1], dtype=np.int64)
            TrialGrid.add_recorded(grids, new.tolist())
        else:
            for grid, span, (start, stop) in zip(
                grids, spans, itertools.pairwise(bounds), strict=True
            ):
                grid.record_sorted(
                    sorted_rows[start:stop],
                    sorted_columns[start:stop],
                    sorted_categories[start:stop],
                    first[start:stop],
                    last[start:stop],
                    previous_sorted[start:stop],
                    functools.partial(_ids_of, ids, order[start:stop]),
                    span,
                )
        previous = np.empty(size, dtype=np.int64)
        previous[order] = previous_sorted
        return previous

    def cells(
        self, questions: Factors, trials: Factors
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Row and column of each trial of a batch (columns -1 past the limit).

        One lookup per distinct question and trial id of the batch (none for
        small integer ids seen before).
        """
        rows, columns = self._rows, self._columns
        row_of = self._row_numbers.of(questions)
        for index in np.flatnonzero(row_of < 0).tolist():
            row = _cell(rows, columns, questions.values[index], None)[0]
            row_of[index] = row
            self._row_numbers.add(_number(questions, index), row)
        column_of = self._column_numbers.of(trials)
        for index in np.flatnonzero(column_of < 0).tolist():
            column = _cell(rows, columns, None, trials.values[index])[1]
            column_of[index] = column
            if column >= 0:
                self._column_numbers.add(_number(trials, index), column)
        return row_of[questions.codes], column_of[trials.codes]

    def models(self) -> list[str]:
        return sorted({model for model, _ in self._grids})

    @property
    def memory_bytes(self) -> int:
        """About what the grids hold (not the shared id numbering)."""
        return sum(grid.memory_bytes for grid in self._grids.values())


def _number(factors: Factors, index: int) -> int | None:
    """The integer id of a factor's ``index``-th value, if it has one."""
    return None if factors.numbers is None else int(factors.numbers[index])


def _cell(
    rows: dict[str, int],
    columns: dict[str, int],
    question: str | None,
    trial: str | None,
) -> tuple[int, int]:
    """Row and column of a trial, numbered if new (a column is -1 past the limit).

    ``None`` for either skips it (used to number rows or columns alone).
    """
    row = -1
    if question is not None:
        row = rows.get(question, -1)
        if row < 0:
            row = rows[question] = len(rows)
    if trial is None:
        return row, -1
    column = columns.get(trial, -1)
    if column < 0 and len(columns) < MAX_COLUMNS:
        column = columns[trial] = len(columns)
    return row, column
