"""RunState.add_changes: other writers' changes land as the same trials would."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.engine.runs import RunState
from monitor.schema import RunConfig
from monitor.stores.batches import TrialBatch
from monitor.stores.ledger import NEW
from monitor.stores.records import CountChanges, ModelCounts

WEIGHTS = [0.0, 0.5, 1.0]


def tables(state: RunState) -> dict[str, dict[str, object]]:
    """Every model's counts by question (observed, prior), and its trials."""
    return {
        model: {
            "counts": {
                question: (tuple(observed), tuple(prior))
                for question, observed, prior in zip(
                    table.questions,
                    table.observed_counts.tolist(),
                    table.prior_counts.tolist(),
                    strict=True,
                )
                if any(observed) or any(prior)
            },
            "trials": (table.trial_count, table.prior_trial_count),
        }
        for model, table in sorted(state.tables.items())
    }


def test_changes_as_columns_count_as_the_same_cells_one_by_one() -> None:
    rng = np.random.default_rng(7)
    config = RunConfig(run="r", weights=WEIGHTS)
    by_columns, by_cell = RunState(config), RunState(config)
    for _ in range(5):
        # Cells may repeat (summed), and corrections take back earlier counts.
        cells = [
            (
                f"m{rng.integers(3)}",
                str(rng.integers(40)),
                bool(rng.integers(2)),
                int(rng.integers(3)),
            )
            for _ in range(300)
        ]
        deltas = [int(d) for d in rng.integers(1, 4, size=len(cells))]
        questions = sorted({c[1] for c in cells}, reverse=True)
        changes = CountChanges(
            models=["m0", "m1", "m2"],
            model=np.array([int(c[0][1]) for c in cells], dtype=np.int64),
            questions=questions,
            question=np.array([questions.index(c[1]) for c in cells]),
            prior=np.array([c[2] for c in cells], dtype=np.bool_),
            category=np.array([c[3] for c in cells], dtype=np.int64),
            delta=np.array(deltas, dtype=np.int64),
            costs={"m1": (2, 30, 0.5)},
        )
        by_columns.add_changes(changes)
        for (model, question, prior, category), delta in zip(
            cells, deltas, strict=True
        ):
            if question not in by_cell.questions:
                by_cell.add_question(question)
            by_cell.table(model).update(question, category, delta, prior=prior)
        assert tables(by_columns) == tables(by_cell)
        taken = CountChanges.from_cells({cells[0]: -deltas[0], cells[1]: 0})
        by_columns.add_changes(taken)
        model, question, prior, category = cells[0]
        by_cell.table(model).update(question, category, -deltas[0], prior=prior)
        assert tables(by_columns) == tables(by_cell)
    assert sorted(by_columns.questions) == sorted(by_cell.questions)
    cost = by_columns.costs["m1"]
    assert (cost.trials, cost.tokens, cost.seconds) == (10, 150, 2.5)


def test_a_change_the_tables_cannot_take_raises_value_error() -> None:
    state = RunState(RunConfig(run="r", weights=WEIGHTS))
    state.add_changes(CountChanges.from_cells({("m", "q", False, 1): 2}))
    with pytest.raises(ValueError, match="negative"):
        state.add_changes(CountChanges.from_cells({("m", "q", False, 1): -3}))
    with pytest.raises(ValueError, match="outside"):
        state.add_changes(CountChanges.from_cells({("m", "q", False, 3): 1}))
    state.add_changes(CountChanges.from_cells({}))
    assert state.tables["m"].counts("q") == (0, 2, 0)


def test_count_changes_read_back_as_cells() -> None:
    cells = {("a", "1", False, 0): 2, ("b", "1", True, 2): -1}
    changes = CountChanges.from_cells(cells, {"a": (1, 2, 3.0)})
    assert changes.models == ["a", "b"]
    assert changes.cells == cells
    assert changes.costs == {"a": (1, 2, 3.0)}


def test_batches_of_many_models_on_one_storage_count_like_trials_one_by_one() -> None:
    # Vectorized batches (new trials, corrections, prior outcomes) against
    # the same trials one at a time; models and questions arrive mid-run, so
    # the run's storage grows its layers and rows between and within batches.
    rng = np.random.default_rng(11)
    config = RunConfig(run="r", weights=WEIGHTS)
    batched, single = RunState(config), RunState(config)
    held: dict[tuple[str, str, bool], list[int]] = {}
    for round_ in range(6):
        batch = TrialBatch("r")
        previous: list[int] = []
        for _ in range(200):
            key = (
                f"m{rng.integers(2 + 2 * round_)}",
                str(rng.integers(10 + 15 * round_)),
                bool(rng.random() < 0.2),
            )
            category = int(rng.integers(3))
            trials = held.setdefault(key, [])
            # A correction of an earlier trial, or a new trial.
            before = NEW
            if trials and rng.random() < 0.3:
                before = trials.pop(int(rng.integers(len(trials))))
            trials.append(category)
            batch.model.append(key[0])
            batch.question.append(key[1])
            batch.trial.append(str(len(previous)))
            batch.category.append(category)
            batch.prior.append(key[2])
            batch.tokens.append(None)
            batch.seconds.append(None)
            batch.ts.append(None)
            previous.append(before)
        batched.apply(batch, previous)
        for index, before in enumerate(previous):
            single.apply_trial(
                batch.model[index],
                batch.question[index],
                batch.category[index],
                batch.prior[index],
                before,
            )
    assert tables(batched) == tables(single)
    storages = {id(table._storage) for table in batched.tables.values()}
    assert len(storages) == 1 and len(batched.tables) == 12
    for model, table in batched.tables.items():
        table.resync()
        single.tables[model].resync()
        assert (table.mu, table.sigma) == (
            single.tables[model].mu,
            single.tables[model].sigma,
        )
    # A restore puts the tables on a storage of their own, as they were.
    restored = RunState(config)
    restored.restore(
        {
            model: ModelCounts(
                questions=[str(question) for question in table.questions],
                observed=table.observed_counts.tolist(),
                prior=table.prior_counts.tolist(),
            )
            for model, table in batched.tables.items()
        }
    )
    assert tables(restored) == tables(batched)
    assert len({id(table._storage) for table in restored.tables.values()}) == 1
