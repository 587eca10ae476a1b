"""Reading the change log: cell numbers, summed deltas, malformed entries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adapters.redis.changes import CellTable, add_costs, read_entry

Cell = tuple[str, str, bool, int]


def fields_of(cells: list[Cell]) -> str:
    return "\n".join(json.dumps([m, q, int(p), c]) for m, q, p, c in cells)


def test_cells_read_in_pieces_sum_per_cell_and_drop_what_cancels() -> None:
    rng = np.random.default_rng(3)
    cells: list[Cell] = [
        (f"m{m}", f"q{q}\n", bool(p), c)
        for m in range(3)
        for q in range(700)
        for p in (0, 1)
        for c in (0, 2)
    ]
    table = CellTable()
    # Pieces of uneven size, past the table's first capacity.
    for start in range(0, len(cells), 1500):
        piece = cells[start : start + 1500]
        assert table.extend(fields_of(piece), len(piece))
    assert len(table) == len(cells)
    numbers = rng.integers(0, len(cells), size=5000)
    deltas = rng.integers(-2, 3, size=numbers.size)
    expected: dict[Cell, int] = {}
    for number, delta in zip(numbers.tolist(), deltas.tolist(), strict=True):
        expected[cells[number]] = expected.get(cells[number], 0) + delta
    changes = table.changes(numbers, deltas, {})
    assert changes.cells == {cell: n for cell, n in expected.items() if n}
    assert len(changes.questions) == len(set(changes.questions))


def test_fields_that_are_not_the_cells_announced_append_nothing() -> None:
    table = CellTable()
    assert table.extend(fields_of([("m", "q", False, 1)]), 1)
    assert not table.extend(fields_of([("m", "q", False, 1)]), 2)
    assert not table.extend("[1, 2]", 1)
    assert not table.extend('["m", "q", 0, 99999999999999]', 1)
    assert not table.extend("not json", 1)
    assert len(table) == 1
    assert table.changes(np.array([0]), np.array([4]), {}).cells == {
        ("m", "q", False, 1): 4
    }


def test_an_entry_reads_as_numbers_and_deltas() -> None:
    numbers, deltas = read_entry({"i": "3,0,7", "n": "1,-1,2", "c": "[]"})
    assert numbers.tolist() == [3, 0, 7] and deltas.tolist() == [1, -1, 2]
    numbers, deltas = read_entry({"i": "", "n": "", "c": "[]"})
    assert numbers.size == deltas.size == 0
    costs: dict[str, tuple[int, int, float]] = {"a": (1, 2, 0.5)}
    add_costs(costs, {"c": '[["a", 2, 3, 0.25], ["b", 1, 0, 0]]'})
    assert costs == {"a": (3, 5, 0.75), "b": (1, 0, 0.0)}


@pytest.mark.parametrize(
    "entry",
    [
        {"d": "[]", "c": "[]"},  # written before cell numbers
        {"i": "1,2", "n": "1", "c": "[]"},
        {"i": "1,x", "n": "1,1", "c": "[]"},
        {"i": "1,,2", "n": "1,1,1", "c": "[]"},
        {"i": "-1", "n": "1", "c": "[]"},
    ],
)
def test_an_entry_in_another_layout_is_refused(entry: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        read_entry(entry)
