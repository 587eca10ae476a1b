"""How a ledger grid's array grows (see :mod:`monitor.stores.ledger`)."""

from __future__ import annotations


def grown(size: int, index: int, numbered: int) -> int:
    """A new size for a grid side that must take ``index``.

    Doubling, but not past the ids the run has numbered (every grid would
    otherwise carry up to twice the run's rows), and at least 1.5 times the
    old size so a run numbering ids one at a time grows its grids at an
    amortized constant cost.
    """
    grown = size
    while grown <= index:
        grown *= 2
    return max(index + 1, min(grown, max(numbered, size + size // 2)))
