"""The exactly-once index of trials kept by the embedded stores.

A trial is identified by ``(model, question, trial)`` within a run, in two
namespaces (observed and prior outcomes). :meth:`Ledger.record` stores a
trial's category and returns what was there before, which is all the engine
needs: nothing (a new trial), the same category (a duplicate delivery) or
another one (a correction).

Memory: trial ids that are small canonical integers ("0", "17") with a
category below 255 index a ``bytearray`` per (model, question), one byte per
trial; anything else falls back to a dict. Fifty models x 1,000 questions x
80 trials take a few MB.
"""

from __future__ import annotations

from typing import Final

NEW: Final = -1
_EMPTY: Final = 255
_DENSE_LIMIT: Final = 1 << 16


class _Slots:
    """Categories of one (model, question, namespace), keyed by trial id."""

    __slots__ = ("dense", "sparse")

    def __init__(self) -> None:
        self.dense = bytearray()
        self.sparse: dict[str, int] = {}


class Ledger:
    """Trial -> category map of one run, answering "seen before?" in O(1)."""

    __slots__ = ("_size", "_slots")

    def __init__(self) -> None:
        self._slots: dict[tuple[str, str, bool], _Slots] = {}
        self._size = 0

    def __len__(self) -> int:
        """Distinct trials recorded (observed and prior)."""
        return self._size

    def record(
        self, model: str, question: str, trial: str, prior: bool, category: int
    ) -> int:
        """Set the trial's category; return the previous one or ``NEW``."""
        key = (model, question, prior)
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = _Slots()
        index = _dense_index(trial)
        dense = slots.dense
        previous = self._previous(slots, trial, index)
        if index is not None and category < _EMPTY:
            if index >= len(dense):
                dense.extend(b"\xff" * (index + 1 - len(dense)))
            dense[index] = category
            if slots.sparse:
                slots.sparse.pop(trial, None)
        else:
            slots.sparse[trial] = category
            if index is not None and index < len(dense):
                dense[index] = _EMPTY
        if previous == NEW:
            self._size += 1
        return previous

    def get(self, model: str, question: str, trial: str, prior: bool = False) -> int:
        """The trial's category, or ``NEW`` when it has not been recorded."""
        slots = self._slots.get((model, question, prior))
        if slots is None:
            return NEW
        return self._previous(slots, trial, _dense_index(trial))

    def forget(
        self, model: str, question: str, trial: str, prior: bool, previous: int
    ) -> None:
        """Undo a :meth:`record` (restore ``previous``) after a failed commit."""
        if previous == NEW:
            slots = self._slots[(model, question, prior)]
            index = _dense_index(trial)
            if index is not None and index < len(slots.dense):
                slots.dense[index] = _EMPTY
            slots.sparse.pop(trial, None)
            self._size -= 1
        else:
            self.record(model, question, trial, prior, previous)

    @staticmethod
    def _previous(slots: _Slots, trial: str, index: int | None) -> int:
        if index is not None and index < len(slots.dense):
            stored = slots.dense[index]
            if stored != _EMPTY:
                return stored
        if slots.sparse:
            return slots.sparse.get(trial, NEW)
        return NEW


def _dense_index(trial: str) -> int | None:
    """The integer of a canonical small non-negative integer id, else None."""
    if not (trial.isascii() and trial.isdigit()) or len(trial) > 5:
        return None
    if len(trial) > 1 and trial[0] == "0":
        return None
    value = int(trial)
    return value if value < _DENSE_LIMIT else None
