"""The exactly-once index against a plain dictionary, trial by trial."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.stores import ledger
from monitor.stores.batches import TrialBatch
from monitor.stores.ledger import NEW, _stable_order
from monitor.stores.local import LocalCounts

Row = tuple[str, str, str, bool, int]  # model, question, trial, prior, category

rows = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([str(q) for q in range(6)]),
    st.sampled_from([str(t) for t in range(12)]),
    st.booleans(),
    st.integers(0, 2),
)


def batch_of(run: str, part: list[Row], numbered: bool = False) -> TrialBatch:
    """The rows as a batch; ``numbered``: with the integer ids the wire gives
    factors of integer question and trial ids (rows then come from an array)."""
    batch = TrialBatch(run)
    for model, question, trial, prior, category in part:
        batch.append(model, question, trial, category, prior)
    if numbered and part:
        factors = {}
        for name in ("question", "trial"):
            plain = batch.factors(name)
            numbers = np.array([int(value) for value in plain.values], dtype=np.int64)
            factors[name] = ledger.Factors(plain.values, plain.codes, numbers)
        batch.preset(batch.categories(), factors)
    return batch


@settings(max_examples=300, deadline=None)
@given(
    stream=st.lists(rows, max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    columns=st.sampled_from([3, 5, 4096]),
    sparse=st.booleans(),
    numbered=st.booleans(),
)
# Batches that take the vectorised path with every trial in its grid's array,
# repeats within the batch included.
@example(
    stream=[
        (model, str(index % 6), str(index % 9), index % 5 == 0, index % 3)
        for index in range(90)
        for model in ("a", "b")
    ],
    cuts=[40, 41, 130],
    columns=4096,
    sparse=False,
    numbered=True,
)
def test_batches_classify_like_a_dictionary_in_delivery_order(
    stream: list[Row], cuts: list[int], columns: int, sparse: bool, numbered: bool
) -> None:
    """Any split into batches (small ones trial by trial, large ones with
    NumPy), with trial ids past the column limit going to the overflow,
    (``sparse``) arrays that may not grow as far as their trials reach and
    (``numbered``) integer ids whose rows and columns are cached."""
    expected: dict[tuple[str, str, str, bool], int] = {}
    previous_expected = []
    for model, question, trial, prior, category in stream:
        key = (model, question, trial, prior)
        previous_expected.append(expected.get(key, NEW))
        expected[key] = category
    local = LocalCounts()
    local.configure("r", 3)
    bounds = sorted({0, len(stream), *(min(cut, len(stream)) for cut in cuts)})
    previous: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger, "MAX_COLUMNS", columns)
        if sparse:
            patch.setattr(ledger, "_START_CELLS", 4)
            patch.setattr(ledger, "CELLS_PER_TRIAL", 2)
        # Parts of 32 rows or more take the vectorized path.
        for start, stop in itertools.pairwise(bounds):
            part = stream[start:stop]
            batch = batch_of("r", part, numbered)
            previous.extend(int(p) for p in local.classify(batch))
    assert previous == previous_expected
    assert local.recorded("r") == len(expected)
    counts = local.counts("r")
    for model in {row[0] for row in stream}:
        for prior, matrix in ((False, "observed"), (True, "prior")):
            kept = {
                question: row
                for question, row in zip(
                    counts[model].questions, getattr(counts[model], matrix), strict=True
                )
            }
            for question in {row[1] for row in stream}:
                want = [0, 0, 0]
                for (m, q, _, p), category in expected.items():
                    if (m, q, p) == (model, question, prior):
                        want[category] += 1
                assert kept.get(question, [0, 0, 0]) == want


def test_a_failed_commit_is_rolled_back_in_the_overflow_too() -> None:
    local = LocalCounts()
    local.configure("r", 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger, "MAX_COLUMNS", 2)
        first = batch_of("r", [("a", "q", str(t), False, 1) for t in range(40)])
        local.classify(first)
        second = batch_of("r", [("a", "q", str(t), False, 0) for t in range(45)])
        before = local.classify(second)
        local.rollback(second, before)
        again = local.classify(second)
    assert [int(p) for p in again] == [1] * 40 + [NEW] * 5
    assert local.totals["r"].trials == 45


def test_memory_grows_with_trials_not_with_questions_times_trial_ids() -> None:
    """Issue 15, point 7: 1,000 questions and 4,096 trial ids in a run, then
    models with one trial at the far corner each."""
    local = LocalCounts()
    local.configure("r", 2)
    wide = TrialBatch("r")
    for trial in range(4096):
        wide.append("first", str(trial % 1000), str(trial), 1, False)
    local.classify(wide)
    before = local.memory_bytes("r")
    for model in range(60):
        one = TrialBatch("r")
        one.append(f"m{model}", "999", "4095", 1, False)
        local.classify(one)
    per_model = (local.memory_bytes("r") - before) / 60
    assert per_model < 10_000, per_model  # was 8 MB (a 1,024 x 4,096 array)
    again = TrialBatch("r")
    again.append("m0", "999", "4095", 0, False)
    assert [int(p) for p in local.classify(again)] == [1]  # a correction


def test_categories_past_int8_widen_the_grid_and_stay_exactly_once() -> None:
    """Cells are int8 until a category past 127 comes (a 300-category run)."""
    local = LocalCounts()
    local.configure("r", 300)
    small = batch_of("r", [("a", str(q), "0", False, 5) for q in range(40)])
    local.classify(small)
    wide = batch_of("r", [("a", str(q), "0", False, 200 + q) for q in range(40)])
    assert [int(p) for p in local.classify(wide)] == [5] * 40  # corrections
    again = batch_of("r", [("a", "3", "0", False, 203), ("a", "4", "1", False, 299)])
    assert [int(p) for p in local.classify(again)] == [203, NEW]
    counts = local.counts("r")["a"]
    assert counts.observed[3][203] == 1 and counts.observed[4][299] == 1
    assert sum(map(sum, counts.observed)) == 41


def test_large_and_many_trial_ids_are_counted_exactly_once() -> None:
    """Ids past 64 bits and past the column limit (the overflow), delivered
    twice, then corrected: every trial counted once."""
    local = LocalCounts()
    local.configure("r", 2)
    ids = [str(2**64 + t) for t in range(3000)] + [str(t) for t in range(3000)]
    stream = [("a", str(q), trial, False, 1) for q in range(2) for trial in ids]
    first = local.classify(batch_of("r", stream))
    assert (np.asarray(first) == NEW).all()
    assert (np.asarray(local.classify(batch_of("r", stream))) == 1).all()
    fixed = [(m, q, t, p, 0) for m, q, t, p, _ in stream[::7]]
    assert (np.asarray(local.classify(batch_of("r", fixed))) == 1).all()
    totals = local.totals["r"]
    assert (totals.trials, totals.duplicates) == (12_000, 12_000)
    assert totals.corrections == len(fixed)
    counts = local.counts("r")["a"]
    assert [sum(row) for row in counts.observed] == [6000, 6000]
    assert sum(row[0] for row in counts.observed) == len(fixed)


def test_grids_take_a_byte_per_trial_cell_of_the_run() -> None:
    """Issue 18: a hundred models on the same 1,000 questions x 2 trial ids
    take 1 byte per cell, not twice the rows and 8 columns of int16."""
    local = LocalCounts()
    local.configure("r", 8)
    stream = [
        (f"m{m}", str(q), str(t), False, (m + q + t) % 8)
        for m in range(100)
        for q in range(1000)
        for t in range(2)
    ]
    local.classify(batch_of("r", stream))
    assert local.memory_bytes("r") <= 100 * 1000 * 2


@given(
    st.lists(st.integers(0, 50), max_size=200),
    st.sampled_from([51, 1 << 40, 1 << 62]),
)
def test_the_fast_stable_order_is_the_stable_argsort(
    keys: list[int], bound: int
) -> None:
    array = np.array(keys, dtype=np.int64)
    expected = np.argsort(array, kind="stable")
    assert _stable_order(array, bound).tolist() == expected.tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(st.integers(0, 50), st.integers(1000, 70_000)),
            min_size=1,
            max_size=30,
            unique=True,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_rows_of_integer_ids_are_the_numbering_s_as_the_cache_grows(
    batches: list[list[int]],
) -> None:
    numbering: dict[str, int] = {}
    rows = ledger.NumberedRows(numbering)
    for batch in batches:
        values = [str(number) for number in batch]
        small = [n for n in batch if n < ledger.NUMBERED_IDS]
        numbers = np.array(batch, dtype=np.int64) if len(small) == len(batch) else None
        found = rows.of_values(values, numbers)
        assert found.tolist() == [numbering.get(value, -1) for value in values]
        for value, number in zip(values, batch, strict=True):
            if value not in numbering:
                numbering[value] = len(numbering)
                rows.add(number if numbers is not None else None, numbering[value])
        again = rows.of_values(values, numbers)
        assert again.tolist() == [numbering[value] for value in values]
