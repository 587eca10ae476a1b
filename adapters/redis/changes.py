"""Reading the counts' change log: other workers' deltas, summed with NumPy.

``apply_trials.lua`` numbers every counts cell the first time the change
log names it (the run's ``cells`` list, see :mod:`adapters.redis.keys`), and
an entry lists its changed cells by number, comma-separated, and their
deltas likewise. A worker following another one's trials so reads an entry
with two NumPy parses, and decodes a cell's field (JSON ``[model, question,
prior, category]``) once, when a number is new to it (:class:`CellTable`).
The deltas of all the entries one look reads are summed per cell in one
pass and handed to the engine as columns (:class:`monitor.stores.records.CountChanges`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from monitor.stores.records import CountChanges


class CellTable:
    """The run's numbered counts cells, as far as this worker read them."""

    def __init__(self) -> None:
        self.models: list[str] = []
        self._model_numbers: dict[str, int] = {}
        self.questions: list[str] = []
        self._question_numbers: dict[str, int] = {}
        # By cell number: model and question (numbered here), prior and
        # category, in the first ``_size`` columns (room to grow after them).
        self._columns = np.zeros((4, 1024), dtype=np.int32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def extend(self, fields: str, count: int) -> bool:
        """Append the next ``count`` cells, their fields newline-separated.

        False, appending nothing, when ``fields`` does not hold ``count``
        cells (the caller then reads the counts whole).
        """
        try:
            cells = json.loads("[" + fields.replace("\n", ",") + "]") if fields else []
            if len(cells) != count:
                return False
            columns = self._numbered(cells)
        except (ValueError, TypeError, OverflowError):  # not fields of four ints
            return False
        size = self._size + count
        if size > self._columns.shape[1]:
            grown = np.zeros((4, max(size, 2 * self._columns.shape[1])), np.int32)
            grown[:, : self._size] = self._columns[:, : self._size]
            self._columns = grown
        self._columns[:, self._size : size] = columns
        self._size = size
        return True

    def _numbered(self, cells: list[list[str | int]]) -> NDArray[np.int32]:
        """Model and question numbers, prior and category of new cells."""
        rows: list[tuple[int, int, int, int]] = []
        for model, question, prior, category in cells:
            model_number = self._model_numbers.get(str(model))
            if model_number is None:
                model_number = self._model_numbers[str(model)] = len(self.models)
                self.models.append(str(model))
            question_number = self._question_numbers.get(str(question))
            if question_number is None:
                question_number = len(self.questions)
                self._question_numbers[str(question)] = question_number
                self.questions.append(str(question))
            rows.append((model_number, question_number, int(prior), int(category)))
        return np.array(rows, dtype=np.int32).reshape(-1, 4).T

    def changes(
        self,
        numbers: NDArray[np.int64],
        deltas: NDArray[np.int64],
        costs: dict[str, tuple[int, int, float]],
    ) -> CountChanges:
        """The deltas summed per cell, one row per cell whose count moved.

        ``numbers`` must be below ``len(self)``.
        """
        named, inverse = np.unique(numbers, return_inverse=True)
        sums = np.zeros(named.size, dtype=np.int64)
        np.add.at(sums, inverse, deltas)
        moved = named[sums != 0]
        model, question, prior, category = self._columns[:, moved].astype(np.int64)
        # Only the questions that moved, each once, go to the engine.
        touched, question_codes = np.unique(question, return_inverse=True)
        return CountChanges(
            models=list(self.models),
            model=model,
            questions=[self.questions[number] for number in touched.tolist()],
            question=question_codes.astype(np.int64),
            prior=prior.astype(np.bool_),
            category=category,
            delta=sums[sums != 0],
            costs=costs,
        )


def read_entry(
    fields: Mapping[str, str],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """An entry's cell numbers and their deltas.

    Raises:
        ValueError: for an entry without numbered cells (written before
            them) or whose numbers and deltas do not pair up; the caller
            then reads the counts whole.
    """
    listed = fields.get("i")
    if listed is None:
        raise ValueError("change-log entry without cell numbers")
    if not listed:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    numbers = integers(listed)
    deltas = integers(fields["n"])
    if numbers.size != deltas.size or int(numbers.min()) < 0:
        raise ValueError(
            f"change-log entry has {numbers.size} cells and {deltas.size} deltas"
        )
    return numbers, deltas


def add_costs(
    costs: dict[str, tuple[int, int, float]], fields: Mapping[str, str]
) -> None:
    """Add an entry's cost sums to ``costs`` (model -> trials, tokens, seconds)."""
    for model, trials, tokens, seconds in json.loads(fields["c"]):
        before = costs.get(model, (0, 0, 0.0))
        costs[model] = (
            before[0] + int(trials),
            before[1] + int(tokens),
            before[2] + float(seconds),
        )


def integers(text: str) -> NDArray[np.int64]:
    """Comma-separated decimal integers, parsed in one go."""
    with warnings.catch_warnings():
        # NumPy warns (newer ones raise ValueError) at a bad item.
        warnings.simplefilter("error", DeprecationWarning)
        try:
            values = np.fromstring(text, dtype=np.int64, sep=",")
        except DeprecationWarning as warning:
            raise ValueError(f"not a list of integers: {text[:80]!r}") from warning
    if values.size != text.count(",") + 1:
        raise ValueError(f"not a list of integers: {text[:80]!r}")
    return values


class Versions:
    """Per run, the newest version of the counts this worker has seen.

    Every apply that changes a run's counts bumps its version. ``-1`` means
    unsure what was applied (an apply whose reply was lost): the next look
    then reads the counts whole.
    """

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def get(self, run: str) -> int:
        return self._seen.get(run, 0)

    def set(self, run: str, version: int) -> None:
        self._seen[run] = version

    def unsure(self, run: str) -> None:
        self._seen[run] = -1

    def note(self, run: str, version: int) -> None:
        """Take the version one of our own applies answered."""
        # Our own change right after the version we knew keeps us current; a
        # jump means another worker wrote in between (re-read next look).
        if version == self._seen.get(run, 0) + 1:
            self._seen[run] = version
