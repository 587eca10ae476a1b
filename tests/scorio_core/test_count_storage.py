"""CountTable storage: count types widened on demand, question numbering shared.

Counts start in uint8 and widen when one would not fit; these tests cross
each boundary on every path (one update, a block, a restore) and check the
counts and the posterior against a table rebuilt from int64 counts. Tables
sharing a :class:`QuestionIndex` must read exactly like tables that
declared the same questions themselves.
"""

from __future__ import annotations

import numpy as np
import pytest

from scorio_core import CountTable, count_metrics
from scorio_core.count_metrics import MetricSpec, ModelCounts, live_metrics
from scorio_core.question_index import QuestionIndex


def rebuilt(table: CountTable) -> CountTable:
    """The same counts through from_state (int64 arrays in)."""
    return CountTable.from_state(
        table.weights,
        table.questions,
        table.observed_counts,
        table.prior_counts,
        None if table.is_open else table.question_count,
    )


@pytest.mark.parametrize("weights", [[0.0, 1.0], [0.0, 0.25, 1.0]])
def test_one_cell_counted_past_each_type_boundary_stays_exact(
    weights: list[float],
) -> None:
    table = CountTable(weights, question_count=3)
    last = len(weights) - 1
    for _ in range(300):  # past uint8
        table.update("a", last)
        table.update("b", 0, prior=True)
    table.update_many(["a"] * 70_000, [last] * 70_000)  # past uint16
    table.add_counts(["c"], [[0] * last + [5_000_000_000]])  # past uint32
    table.update("a", 0)
    table.update("a", last, delta=-1)  # a correction after the widening
    assert table.counts("a")[0] == 1 and table.counts("a")[-1] == 70_299
    assert table.counts("c")[-1] == 5_000_000_000
    assert table.prior_counts[1].tolist()[0] == 300
    assert table.trial_count == 70_300 + 5_000_000_000
    assert table.question_trials.tolist() == [70_300, 0, 5_000_000_000]
    table.resync()
    other = rebuilt(table)
    assert (table.mu, table.sigma) == (other.mu, other.sigma)
    assert table.unit_variance == pytest.approx(other.unit_variance, rel=1e-15)


def test_counts_read_back_as_int64() -> None:
    table = CountTable([0.0, 1.0], question_count=2)
    table.update("a", 1)
    assert table.observed_counts.dtype == np.int64
    assert table.prior_counts.dtype == np.int64
    assert table.question_trials.dtype == np.int64
    # uint8 arithmetic would wrap here; the int64 read must not.
    assert (table.observed_counts - 2).tolist() == [[-2, -1]]


def test_from_state_keeps_large_counts() -> None:
    observed = np.array([[2**40, 3], [7, 2**33]])
    table = CountTable.from_state([0.0, 1.0], ["x", "y"], observed)
    assert table.observed_counts.tolist() == observed.tolist()
    table.update("x", 0)
    assert table.counts("x") == (2**40 + 1, 3)


def test_tables_sharing_an_index_read_like_tables_declaring_the_questions() -> None:
    index = QuestionIndex()
    weights = [0.0, 0.5, 1.0]
    first, second = (CountTable(weights, question_count=6, index=index) for _ in "ab")
    first.update("q1", 2)
    first.add_counts(["q2", "q3"], [[1, 0, 0], [0, 4, 1]])
    second.update("q4", 1, prior=True)
    # Each table has every question the other added, without trials.
    assert first.questions == second.questions == ("q1", "q2", "q3", "q4")
    assert second.counts("q1") == (0, 0, 0)
    assert not second.is_synced  # rows another table added are taken in
    alone = CountTable(weights, question_count=6)
    alone.declare(["q1", "q2", "q3", "q4"])
    alone.update("q4", 1, prior=True)
    alone.resync()
    second.resync()
    assert (second.mu, second.sigma) == (alone.mu, alone.sigma)
    assert second.observed_counts.tolist() == alone.observed_counts.tolist()
    assert second.least_question_trials == 0
    with pytest.raises(ValueError, match="question_count=6"):
        CountTable.from_state(
            weights,
            ["r1", "r2", "r3"],
            np.zeros((3, 3), dtype=np.int64),
            question_count=6,
            index=index,
        )
    assert len(index) == 4  # the refused restore added nothing


def test_a_table_restored_onto_a_shared_index_uses_its_rows() -> None:
    index = QuestionIndex(["a", "b", "c"])
    table = CountTable.from_state(
        [0.0, 1.0], ["c", "a"], [[1, 2], [3, 4]], question_count=4, index=index
    )
    assert table.questions == ("a", "b", "c")
    assert table.observed_counts.tolist() == [[3, 4], [0, 0], [1, 2]]
    assert table.trial_count == 10


@pytest.mark.parametrize("categories", [2, 8])
def test_live_metrics_read_stored_counts_like_int64_copies(categories: int) -> None:
    """Tables of mixed count types (uint8, widened to uint16), with prior
    outcomes; eight categories make the state key space pass 2**62 (the
    sorting path of the metrics' distinct states)."""
    rng = np.random.default_rng(3)
    weights = np.linspace(0.0, 1.0, categories)
    tables = []
    for model in range(3):
        table = CountTable(weights, question_count=40)
        table.add_counts(
            [f"q{q}" for q in range(30)], rng.integers(0, 20, (30, categories))
        )
        table.update("q0", 1, prior=True)
        if model == 1:
            table.update_many(["q1"] * 400, [0] * 400)  # past uint8
        tables.append(table)
    specs = [MetricSpec.parse(text) for text in ("avg", "bayes", "max@4")]
    if categories == 2:
        specs += [MetricSpec.parse(text) for text in ("pass@4", "pass^2")]
    stored = [ModelCounts(*table.count_views(), 40) for table in tables]
    copies = [ModelCounts(t.observed_counts, t.prior_counts, 40) for t in tables]
    assert stored[1].observed.dtype == np.uint16
    assert live_metrics(specs, stored, weights, 0.95) == live_metrics(
        specs, copies, weights, 0.95
    )


def test_live_metrics_in_groups_of_models_equal_one_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """States are keyed a group of models at a time (bounded temporaries);
    groups must merge into the very histogram one group gives."""
    rng = np.random.default_rng(4)
    models = [
        ModelCounts(rng.integers(0, 4, (rows, 3)).astype(np.uint8), None, 12)
        for rows in (10, 0, 7, 12, 3)
    ]
    specs = [MetricSpec.parse(text) for text in ("avg", "bayes", "max@2")]
    weights = np.array([0.0, 0.3, 1.0])
    whole = live_metrics(specs, models, weights, 0.95)
    monkeypatch.setattr(count_metrics, "_GROUP_ROWS", 8)
    assert live_metrics(specs, models, weights, 0.95) == whole
