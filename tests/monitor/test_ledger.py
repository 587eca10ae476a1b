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
)
def test_batches_classify_like_a_dictionary_in_delivery_order(
    stream: list[Row], cuts: list[int], columns: int
) -> None:
    """Any split into batches (small ones trial by trial, large ones with
    NumPy), with trial ids past the column limit going to the overflow."""
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
