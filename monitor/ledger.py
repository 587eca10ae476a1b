"""The exactly-once index of trials kept by the embedded stores.

A trial is identified by ``(model, question, trial)`` within a run, in two
namespaces (observed and prior outcomes). Recording a trial stores its
category and returns what was there before, which is all the engine needs:
nothing (``NEW``: a new trial), the same category (a duplicate delivery) or
another one (a correction).

Layout: per (model, namespace) a grid of categories, one row per question
and one column per distinct trial id (ids are strings; "0".."79" become 80
columns shared by all questions), ``-1`` where no trial was seen. Fifty
models x 1,000 questions x 80 trials take 8 MB. A model whose trial ids are
all distinct (say UUIDs) would grow a column per trial, so past
``MAX_COLUMNS`` further ids go to a dict instead.

Batches are classified with NumPy in one pass, with the same answers a
trial-by-trial loop gives: within a batch, a repeat is compared with the
delivery before it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

NEW: Final = -1
MAX_COLUMNS: Final = 4096


@dataclass(frozen=True, slots=True)
class Factors:
    """A column's distinct values (first-seen order) and each entry's code."""

    values: list[str]
    codes: NDArray[np.int64]

    @classmethod
    def of(cls, column: Sequence[str]) -> Factors:
        values = list(dict.fromkeys(column))
        index = dict(zip(values, range(len(values)), strict=True))
        codes = np.fromiter(map(index.__getitem__, column), np.int64, len(column))
        return cls(values, codes)

    def present(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """The distinct codes among ``codes``, in code order."""
        return np.flatnonzero(np.bincount(codes, minlength=len(self.values)))


class TrialGrid:
    """Categories of one model's trials in one namespace."""

    __slots__ = ("_cells", "_columns", "_overflow", "_rows", "_size", "_view")

    def __init__(self) -> None:
        self._rows: dict[str, int] = {}
        self._columns: dict[str, int] = {}
        self._cells = np.full((8, 8), NEW, dtype=np.int16)
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
            row, column = self._cell(question, trial)
        if column < 0:
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
        row, column = self._cell(question, trial)
        if column < 0:
            previous = self._overflow.pop((question, trial), NEW)
            if category != NEW:
                self._overflow[(question, trial)] = category
        else:
            previous = self._view[row, column]
            self._view[row, column] = category
        self._size += (category != NEW) - (previous != NEW)

    def record_many(
        self,
        questions: Factors,
        question_codes: NDArray[np.int64],
        trials: Factors,
        trial_codes: NDArray[np.int64],
        categories: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        """Record a batch in order; previous category (or ``NEW``) per trial.

        Questions and trials come factorized: ids are looked up once per
        distinct value, not once per trial.
        """
        row_of = np.zeros(len(questions.values), dtype=np.int64)
        for code in questions.present(question_codes).tolist():
            row_of[code] = self._cell(questions.values[code], None)[0]
        column_of = np.full(len(trials.values), -1, dtype=np.int64)
        for code in trials.present(trial_codes).tolist():
            column_of[code] = self._cell(None, trials.values[code])[1]
        rows = row_of[question_codes]
        columns = column_of[trial_codes]
        previous = np.empty(len(rows), dtype=np.int64)
        dense = columns >= 0
        if not dense.all():
            for index in np.flatnonzero(~dense).tolist():
                previous[index] = self.record(
                    questions.values[question_codes[index]],
                    trials.values[trial_codes[index]],
                    int(categories[index]),
                )
        if dense.any():
            previous[dense] = self._record_dense(
                rows[dense], columns[dense], categories[dense]
            )
        return previous

    def counts(self, width: int) -> tuple[list[str], NDArray[np.int64]]:
        """Questions (row order) and their per-category counts."""
        questions = list(self._rows)
        cells = self._cells[: len(questions)]
        counts = np.zeros((len(questions), width), dtype=np.int64)
        for category in range(width):
            counts[:, category] = (cells == category).sum(axis=1)
        for (question, _), category in self._overflow.items():
            counts[self._rows[question], category] += 1
        return questions, counts

    def items(self) -> Iterator[tuple[str, str, int]]:
        """Every recorded (question, trial, category)."""
        trial_ids = list(self._columns)
        for question, row in self._rows.items():
            for column in np.flatnonzero(self._cells[row, : len(trial_ids)] != NEW):
                yield question, trial_ids[column], int(self._cells[row, column])
        for (question, trial), category in self._overflow.items():
            yield question, trial, category

    def _record_dense(
        self,
        rows: NDArray[np.int64],
        columns: NDArray[np.int64],
        categories: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        keys = rows * self._cells.shape[1] + columns
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        sorted_categories = categories[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = sorted_keys[1:] != sorted_keys[:-1]
        stored = self._cells.reshape(-1)
        previous_sorted = np.empty(len(keys), dtype=np.int64)
        previous_sorted[first] = stored[sorted_keys[first]]
        # A repeat inside the batch sees the delivery just before it.
        previous_sorted[~first] = sorted_categories[np.flatnonzero(~first) - 1]
        last = np.ones(len(keys), dtype=bool)
        last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
        stored[sorted_keys[last]] = sorted_categories[last]
        self._size += int(np.count_nonzero(previous_sorted[first] == NEW))
        previous = np.empty(len(keys), dtype=np.int64)
        previous[order] = previous_sorted
        return previous

    def _cell(self, question: str | None, trial: str | None) -> tuple[int, int]:
        """Row and column of a trial, added if new (a column is -1 past the limit).

        ``None`` for either skips it (used to add rows or columns alone).
        """
        row = -1
        if question is not None:
            found = self._rows.get(question)
            if found is None:
                found = self._rows[question] = len(self._rows)
                if found >= self._cells.shape[0]:
                    self._grow(rows=2 * self._cells.shape[0])
            row = found
        if trial is None:
            return row, -1
        column = self._columns.get(trial)
        if column is None:
            if len(self._columns) >= MAX_COLUMNS:
                return row, -1
            column = self._columns[trial] = len(self._columns)
            if column >= self._cells.shape[1]:
                self._grow(columns=2 * self._cells.shape[1])
        return row, column

    def _grow(self, rows: int | None = None, columns: int | None = None) -> None:
        old = self._cells
        new = np.full(
            (rows or old.shape[0], columns or old.shape[1]), NEW, dtype=np.int16
        )
        new[: old.shape[0], : old.shape[1]] = old
        self._cells = new
        self._view = new.data


class Ledger:
    """Trial -> category index of one run, one grid per (model, namespace)."""

    __slots__ = ("_grids",)

    def __init__(self) -> None:
        self._grids: dict[tuple[str, bool], TrialGrid] = {}

    def __len__(self) -> int:
        """Distinct trials recorded (observed and prior)."""
        return sum(len(grid) for grid in self._grids.values())

    def grid(self, model: str, prior: bool) -> TrialGrid:
        key = (model, prior)
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = TrialGrid()
        return grid

    def record(
        self, model: str, question: str, trial: str, prior: bool, category: int
    ) -> int:
        """Set the trial's category; return the previous one or ``NEW``."""
        grid = self._grids.get((model, prior))
        if grid is None:
            grid = self.grid(model, prior)
        return grid.record(question, trial, category)

    def models(self) -> list[str]:
        return sorted({model for model, _ in self._grids})
