"""Trial ids: each distinct id checked once, id columns factorized.

Most inputs repeat a few runs, models, questions and trial numbers, so an id
found valid is remembered; integer ids numbered from 0 take their texts
from a shared table instead of being formatted one by one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.inputs.factors import NUMBERED_IDS, Factors
from monitor.limits import MAX_ID_LENGTH
from monitor.trial_event import is_id_integer

_CONTROL = re.compile(r"[\x00-\x1f]")
# Ids seen before and found valid: most inputs repeat a few runs, models,
# questions and trial numbers, so checking each once pays. Bounded, since
# trial ids may all differ.
KNOWN_IDS: dict[object, str] = {}
KNOWN_IDS_LIMIT: Final = 1 << 16
_LOOSE: Final = (str, int)
# Whole-number timestamps up to this size convert to float exactly.
_EXACT_FLOAT_INT: Final = 1 << 53


def strict_id(value: object) -> str | None:
    """A run or model id: a string only."""
    if type(value) is not str:
        return None
    known = KNOWN_IDS.get(value)
    return known if known is not None else _new_id(value, value)


def loose_id(value: object) -> str | None:
    """A question or trial id: a string, or an integer read as its digits."""
    kind = type(value)
    if kind is str or kind is int:
        known = KNOWN_IDS.get(value)
        if known is not None:
            return known
        if kind is str:
            return _new_id(value, value)  # type: ignore[arg-type]
        if is_id_integer(value):  # type: ignore[arg-type]
            return _new_id(value, str(value))  # type: ignore[arg-type]
    return None


def loose_ids(values: Sequence[str | int]) -> list[str] | None:
    """:func:`loose_id` of each value, or None when one is invalid.

    For values a typed decoder gave as ``str`` or ``int`` (never a bool,
    which a lookup would take for its integer): known ids are looked up
    in one pass, the others checked one by one.
    """
    texts = list(map(KNOWN_IDS.get, values))
    if None in texts:
        for index, text in enumerate(texts):
            if text is None:
                text = loose_id(values[index])
                if text is None:
                    return None
                texts[index] = text
    return texts  # type: ignore[return-value]


def _new_id(key: str | int, text: str) -> str | None:
    if not 1 <= len(text) <= MAX_ID_LENGTH or _CONTROL.search(text):
        return None
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:  # a lone surrogate: not a valid string
            return None
    if len(KNOWN_IDS) >= KNOWN_IDS_LIMIT:
        KNOWN_IDS.clear()
    KNOWN_IDS[key] = text
    return text


def finite_float(value: object) -> float | None:
    """A float from a float or a modest integer (not a bool), if finite."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int and -_EXACT_FLOAT_INT <= value <= _EXACT_FLOAT_INT:
        return float(value)
    return None


def id_column(
    values: Iterator[str | int], size: int
) -> tuple[list[str] | None, Factors] | None:
    """A question or trial column's factors (texts in first-seen order), and
    the column as text if it was built on the way.

    None when an id is invalid. Each distinct value is checked once.
    """
    raw = Factors.of(values, size)  # type: ignore[arg-type]
    distinct: list[str | int] = raw.values  # type: ignore[assignment]
    texts = loose_ids(distinct)
    if texts is None:
        return None
    if len(set(texts)) < len(texts):  # an integer and its digits as text
        column: list[str] = np.array(texts, dtype=object)[raw.codes].tolist()
        return column, Factors.of(column)
    return None, Factors(texts, raw.codes)


# Integer ids spanning at most this many values (beyond the batch's size)
# are factorized through a table indexed by value, others by a sort.
_TABLE_SPAN: Final = 1 << 16


def number_column(
    values: Iterator[int], size: int, first_seen: bool = True
) -> Factors | None:
    """The factors :func:`id_column` gives integer ids; None past int64 (or
    an invalid id).

    The ids are read into an array once and factorized in first-seen order
    with NumPy (distinct integers have distinct texts). Unless
    ``first_seen``, ids in ``0.._OWN_CODES-1`` are their own codes and
    the values are the texts of ``0..max`` (some of which no entry may
    have): the ledger's trial columns need no more.
    """
    try:
        numbers = np.fromiter(values, np.int64, size)
    except OverflowError:
        return None
    low = int(numbers.min())
    top = int(numbers.max())
    if not first_seen and low >= 0 and top < _OWN_CODES:
        table = _NUMBER_TEXTS.upto(top)
        return Factors(table.listed[: top + 1], numbers, table.numbers[: top + 1])
    span = top - low + 1
    if span <= _TABLE_SPAN + 4 * size:
        shifted = numbers - low
        # Each value's first position: the smallest position that holds it.
        first = np.full(span, size, dtype=np.int64)
        np.minimum.at(first, shifted, np.arange(size))
        present = np.flatnonzero(first < size)
        distinct = present[np.argsort(first[present])]
        code_of = np.empty(span, dtype=np.int64)
        code_of[distinct] = np.arange(len(distinct))
        codes = code_of[shifted]
        distinct += low
    else:
        unique, first, inverse = np.unique(
            numbers, return_index=True, return_inverse=True
        )
        order = np.argsort(first)
        rank = np.empty(len(unique), dtype=np.int64)
        rank[order] = np.arange(len(unique))
        distinct, codes = unique[order], rank[inverse.reshape(-1)]
    if low >= 0 and top < NUMBERED_IDS:
        # Small ids: their texts from the table, no lookup per id.
        table = _NUMBER_TEXTS.upto(top)
        return Factors(table.array[distinct].tolist(), codes, distinct)
    texts = loose_ids(distinct.tolist())
    if texts is None:
        return None
    return Factors(texts, codes)


class _NumberTexts:
    """The texts of the integer ids ``0..n-1``, ``n`` grown (doubling) as
    larger ids come, up to ``NUMBERED_IDS`` (some 4 MB then)."""

    __slots__ = ("array", "listed", "numbers")

    def __init__(self) -> None:
        self.array: NDArray[np.object_] = np.zeros(0, dtype=object)
        self.listed: list[str] = []
        self.numbers: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.upto(1023)

    def upto(self, top: int) -> _NumberTexts:
        """These texts, covering the ids up to ``top`` (< NUMBERED_IDS)."""
        if top >= len(self.listed):
            size = max(len(self.listed), 1)
            while size <= top:
                size *= 2
            # Read-only: the arrays are shared by every caller.
            listed = self.listed + [str(n) for n in range(len(self.listed), size)]
            array = np.array(listed, dtype=object)
            array.flags.writeable = False
            numbers = np.arange(size, dtype=np.int64)
            numbers.flags.writeable = False
            self.array, self.listed, self.numbers = array, listed, numbers
        return self


# Most runs number their questions and trials from 0: those ids' texts are
# taken from here instead of made one by one.
_NUMBER_TEXTS: Final = _NumberTexts()
# Trial ids below this are their own codes (see _number_column).
_OWN_CODES: Final = 4096
