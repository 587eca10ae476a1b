"""The exactly-once index against a plain dictionary, trial by trial."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor import ledger
from monitor.ledger import NEW
from monitor.store import LocalCounts, TrialBatch

Row = tuple[str, str, str, bool, int]  # model, question, trial, prior, category

rows = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([str(q) for q in range(6)]),
    st.sampled_from([str(t) for t in range(12)]),
    st.booleans(),
    st.integers(0, 2),
)


def batch_of(run: str, part: list[Row]) -> TrialBatch:
    batch = TrialBatch(run)
    for model, question, trial, prior, category in part:
        batch.append(model, question, trial, category, prior)
    return batch


@settings(max_examples=300, deadline=None)
@given(
    stream=st.lists(rows, max_size=120),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    columns=st.sampled_from([3, 5, 4096]),
    sparse=st.booleans(),
)
def test_batches_classify_like_a_dictionary_in_delivery_order(
    stream: list[Row], cuts: list[int], columns: int, sparse: bool
) -> None:
    """Any split into batches (small ones trial by trial, large ones with
    NumPy), with trial ids past the column limit going to the overflow, and
    (``sparse``) arrays that may not grow as far as their trials reach."""
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
            previous.extend(int(p) for p in local.classify(batch_of("r", part)))
    assert previous == previous_expected
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
