"""Id columns factorized, and the numbering of ids as rows of an array.

A batch's ``model``, ``question`` and ``trial`` columns become their
distinct values and one integer code per entry (:class:`Factors`), so the
vectorised steps (validation, the ledger, the count tables) look each
distinct id up once. :class:`NumberedRows` keeps the rows of small integer
ids in an array, so runs that number their questions and trials 0, 1, ...
take their rows with one NumPy index.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class Factors:
    """A column's distinct values and each entry's code (its index in them).

    ``numbers``: when every value is the text of a small integer id (below
    ``NUMBERED_IDS``), those integers, in value order: rows of such ids are
    then looked up in an array (see :class:`NumberedRows`).
    """

    values: list[str]
    codes: NDArray[np.int64]
    numbers: NDArray[np.int64] | None = None

    @classmethod
    def of(cls, column: Iterable[str], size: int | None = None) -> Factors:
        """Values in first-seen order; ``size``: the column's length, if an
        iterator (e.g. a ``map`` over events: no list of the column made)."""
        if size is None:
            column = column if isinstance(column, list) else list(column)
            size = len(column)
        # One pass: each entry's value -> where the value was first seen
        # (the dict keeps first-seen order), then those positions -> codes.
        first: dict[str, int] = {}
        seen_at = np.fromiter(
            map(first.setdefault, column, itertools.count()), np.int64, size
        )
        codes = np.empty(size, dtype=np.int64)
        codes[np.fromiter(first.values(), np.int64, len(first))] = np.arange(len(first))
        return cls(list(first), codes[seen_at])

    def present(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """The distinct codes among ``codes``, in code order."""
        return np.flatnonzero(np.bincount(codes, minlength=len(self.values)))


# Integer ids below this have their rows cached in an array (at most 512
# kB, grown as larger ids come).
NUMBERED_IDS: Final = 1 << 16


class NumberedRows:
    """Rows of a text-keyed numbering, for small integer ids in one array.

    Rows never change once given, so a row found in the numbering is kept
    by its integer id and later batches of integer ids (most runs number
    questions and trials 0, 1, ...) take their rows with one NumPy index
    instead of a dict lookup per distinct id.
    """

    __slots__ = ("_cache", "_rows")

    def __init__(self, rows: dict[str, int]) -> None:
        self._rows = rows
        self._cache = np.full(1024, -1, dtype=np.int64)

    def of(self, factors: Factors) -> NDArray[np.int64]:
        """Each distinct value's row, -1 where the numbering has none yet."""
        return self.of_values(factors.values, factors.numbers)

    def of_values(
        self, values: Sequence[str], numbers: NDArray[np.int64] | None
    ) -> NDArray[np.int64]:
        """:meth:`of` given the values and their integer ids (or None)."""
        if numbers is not None:
            top = int(numbers.max()) if numbers.size else -1
            if top >= len(self._cache):
                self._grow(top)
            rows = self._cache[numbers]
            if not rows.size or int(rows.min()) >= 0:
                return rows
        rows = np.fromiter(
            map(self._rows.get, values, itertools.repeat(-1)),
            np.int64,
            len(values),
        )
        if numbers is not None:
            self._cache[numbers] = rows  # -1 stays -1
        return rows

    def add(self, number: int | None, row: int) -> None:
        """Keep the row just given to integer id ``number`` (if one)."""
        if number is not None:
            if number >= len(self._cache):
                self._grow(number)
            self._cache[number] = row

    def _grow(self, number: int) -> None:
        """Cover ids up to ``number`` (below NUMBERED_IDS), doubling."""
        size = len(self._cache)
        while size <= number:
            size *= 2
        grown = np.full(size, -1, dtype=np.int64)
        grown[: len(self._cache)] = self._cache
        self._cache = grown


def run_starts(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Where each run of equal values starts."""
    change = np.empty(len(values), dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    return np.flatnonzero(change)
