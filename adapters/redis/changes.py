"""Reading the counts' change log: other workers' deltas, summed with NumPy.

A run's change log (see :mod:`adapters.redis.keys`) names each changed cell
by its field in the counts hash, the JSON text ``[model, question, prior,
category]``. A worker following another one's trials meets the same few
thousand fields again and again, so it numbers each field once
(:class:`CellNumbers`) and then reads an entry as two splits and a dict
lookup per cell: the fields joined by newlines, their deltas
comma-separated. The deltas of all the entries one look reads are summed per
cell in one pass and handed to the engine as columns
(:class:`monitor.store.CountChanges`).

Entries written before that layout carry ``d``, the deltas as one JSON
array, and are read the slow way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import repeat

import numpy as np
from numpy.typing import NDArray

from monitor.store import CountChanges

Cell = tuple[str, str, bool, int]


class CellNumbers:
    """The counts cells one run's change log names, numbered once each.

    Two fields that decode to the same cell (written by different clients,
    say) get the same number, so sums per number are sums per cell.
    """

    def __init__(self) -> None:
        self._by_field: dict[str, int] = {}
        self._by_cell: dict[Cell, int] = {}
        self.models: list[str] = []
        self._model_numbers: dict[str, int] = {}
        self._model: list[int] = []
        self.questions: list[str] = []
        self._prior: list[bool] = []
        self._category: list[int] = []
        self._columns: (
            tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]] | None
        ) = None

    def __len__(self) -> int:
        return len(self.questions)

    def of_fields(self, fields: list[str]) -> NDArray[np.int64]:
        """The number of each counts field (a new one is decoded once)."""
        numbers = np.fromiter(
            map(self._by_field.get, fields, repeat(-1)), np.int64, len(fields)
        )
        for index in np.flatnonzero(numbers < 0).tolist():
            field = fields[index]
            model, question, prior, category = json.loads(field)
            number = self.of_cell((model, question, bool(prior), int(category)))
            self._by_field[field] = numbers[index] = number
        return numbers

    def of_cell(self, cell: Cell) -> int:
        """The cell's number, given one on first sight."""
        number = self._by_cell.get(cell)
        if number is None:
            model, question, prior, category = cell
            number = self._by_cell[cell] = len(self.questions)
            model_number = self._model_numbers.get(model)
            if model_number is None:
                model_number = self._model_numbers[model] = len(self.models)
                self.models.append(model)
            self._model.append(model_number)
            self.questions.append(question)
            self._prior.append(prior)
            self._category.append(category)
            self._columns = None
        return number

    def columns(
        self,
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]]:
        """Model number, prior and category of every cell, by cell number."""
        if self._columns is None:
            self._columns = (
                np.array(self._model, dtype=np.int64),
                np.array(self._prior, dtype=np.bool_),
                np.array(self._category, dtype=np.int64),
            )
        return self._columns


class ChangeSum:
    """Sums change-log entries of one run; :meth:`changes` gives the result."""

    def __init__(self, cells: CellNumbers) -> None:
        self._cells = cells
        self._numbers: list[NDArray[np.int64]] = []
        self._deltas: list[NDArray[np.int64]] = []
        self._costs: dict[str, tuple[int, int, float]] = {}

    def add(self, fields: Mapping[str, str]) -> None:
        """Add one entry's count and cost deltas.

        Raises:
            ValueError: for an entry whose fields and deltas do not pair up
                (the caller then reads the counts whole).
        """
        names = fields.get("k")
        if names is None:  # written before k and n
            cells = json.loads(fields["d"])
            self._numbers.append(
                np.fromiter(
                    (
                        self._cells.of_cell(
                            (model, question, bool(prior), int(category))
                        )
                        for (model, question, prior, category), _ in cells
                    ),
                    np.int64,
                    len(cells),
                )
            )
            self._deltas.append(
                np.fromiter((int(delta) for _, delta in cells), np.int64, len(cells))
            )
        elif names:
            split = names.split("\n")
            deltas = np.fromstring(fields["n"], dtype=np.int64, sep=",")
            if deltas.size != len(split):
                raise ValueError(
                    f"change-log entry has {len(split)} fields and {deltas.size} deltas"
                )
            self._numbers.append(self._cells.of_fields(split))
            self._deltas.append(deltas)
        for model, trials, tokens, seconds in json.loads(fields["c"]):
            before = self._costs.get(model, (0, 0, 0.0))
            self._costs[model] = (
                before[0] + int(trials),
                before[1] + int(tokens),
                before[2] + float(seconds),
            )

    def changes(self) -> CountChanges:
        """The summed changes, one row per cell whose count moved."""
        sums = np.zeros(len(self._cells), dtype=np.int64)
        if self._numbers:
            np.add.at(sums, np.concatenate(self._numbers), np.concatenate(self._deltas))
        moved = np.flatnonzero(sums)
        model, prior, category = self._cells.columns()
        questions = self._cells.questions
        return CountChanges(
            models=list(self._cells.models),
            model=model[moved],
            question=[questions[number] for number in moved.tolist()],
            prior=prior[moved],
            category=category[moved],
            delta=sums[moved],
            costs=self._costs,
        )
