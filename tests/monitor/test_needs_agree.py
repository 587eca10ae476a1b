"""Who needs trials: ``needs_trials``, ``predicted_trials`` and ``next`` agree.

A model whose position is not settled needs trials and has a forecast above
zero; ``next`` gives trials to those the stopping rule draws from now (the
others are told they wait); a model whose position is settled needs none,
gets none, and needs trials again only when reopened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

from monitor.config import load_run_configs
from monitor.engine.monitor import Monitor
from monitor.schema import Status
from tests.monitor.scheduling import Step, follow_next

ROOT = Path(__file__).resolve().parents[2]


def _unsettled(status: Status) -> set[str]:
    """Models beside a boundary that is neither resolved nor closed as a tie."""
    return {
        name
        for pair in status.pairs
        if not (pair.resolved or pair.unresolvable or pair.equivalent)
        for name in (pair.a, pair.b)
    }


def _check_agreement(monitor: Monitor, run: str, budget: int) -> Status:
    status = monitor.status(run)
    needing = {row.model for row in status.models if row.needs_trials}
    assert _unsettled(status) <= needing
    for row in status.models:
        if row.needs_trials:
            assert row.predicted_trials is None or row.predicted_trials > 0, row
        else:
            assert row.predicted_trials == 0, row
    planned = Counter[str]()
    for item in monitor.next(run, budget):
        planned[item.model] += item.trials
    assert set(planned) <= needing
    told = {name for waiting in status.waiting_for for name in waiting.models}
    assert needing <= set(planned) | told
    return status


def test_every_unsettled_model_needs_and_gets_trials_early_in_the_example() -> None:
    # The first 300 lines of the example stream: nothing settled yet, all
    # eleven models in one group with about 26 trials each.
    (config,) = load_run_configs(ROOT / "examples" / "aime25.toml")
    lines = (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()[:300]
    with Monitor() as monitor:
        monitor.configure(config)
        for line in lines:
            monitor.ingest_payload(line)
        status = _check_agreement(monitor, config.run, 60)
        assert {row.group for row in status.models} == {1}
        assert all(row.needs_trials for row in status.models)
        assert all(20 <= row.trials <= 32 for row in status.models)


def test_needs_forecasts_and_next_agree_all_along_the_example() -> None:
    (config,) = load_run_configs(ROOT / "examples" / "aime25.toml")
    lines = (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()
    with Monitor() as monitor:
        monitor.configure(config)
        for start in range(0, len(lines), 600):
            for line in lines[start : start + 600]:
                monitor.ingest_payload(line)  # the stream's bad lines are refused
            _check_agreement(monitor, config.run, 60)


# Per world: the true means, and when each model joins (None: declared).
WORLDS: dict[str, tuple[tuple[float, ...], tuple[int, ...] | None]] = {
    "eight equal": ((0.5,) * 8, None),
    "seven apart": ((0.2, 0.3, 0.4, 0.45, 0.5, 0.6, 0.7), None),
    "a late twin": ((0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.4), (0,) * 7 + (3000,)),
    "two joiners": ((0.3, 0.5, 0.5, 0.7, 0.5, 0.3), (0, 0, 0, 0, 1500, 2500)),
}


def _check_needs_stay_false(steps: Iterable[Step]) -> int:
    """Every round: ``next`` gives trials only to models that need them, a
    forecast is 0 exactly when none are needed, and a model that needed no
    trials needs them again only with a ``model_reopened`` event saying why.

    Returns the reopenings seen.
    """
    needed: dict[str, bool] = {}
    reopenings = 0
    for step in steps:
        reopened = {
            str(event.payload["model"])
            for event in step.events
            if event.kind == "model_reopened"
        }
        reopenings += len(reopened)
        for row in step.status.models:
            if needed.get(row.model) is False and row.needs_trials:
                assert row.model in reopened, (row, step.events)
            needed[row.model] = row.needs_trials
            assert (row.predicted_trials == 0) == (not row.needs_trials), row
        given = {item.model for item in step.plan}
        assert given <= {row.model for row in step.status.models if row.needs_trials}
    assert step.status.stable  # the last round's status
    return reopenings


@pytest.mark.parametrize("world", list(WORLDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_model_that_needs_no_trials_needs_them_again_only_when_reopened(
    world: str, seed: int
) -> None:
    # Tied models trade places beside the open boundaries, so which of them
    # draw changes from round to round; needing trials does not.
    means, joins = WORLDS[world]
    _check_needs_stay_false(follow_next(means, seed, joins=joins, reuse=0.1))


def test_a_joiner_reopens_the_done_models_of_its_group_and_says_so() -> None:
    # Seeds where the late twin joined a group whose models were done.
    means, joins = WORLDS["a late twin"]
    reopenings = sum(
        _check_needs_stay_false(follow_next(means, seed, joins=joins))
        for seed in (1, 2)
    )
    assert reopenings >= 2


@pytest.mark.parametrize("world", ["a late twin", "two joiners"])
def test_needs_stay_false_across_restarts_and_corrections(
    world: str, tmp_path: Path
) -> None:
    # Restarted every few rounds, the monitor rebuilds who is done (and
    # reopened) from the events it fired.
    means, joins = WORLDS[world]
    _check_needs_stay_false(
        follow_next(
            means,
            3,
            joins=joins,
            reuse=0.2,
            state=tmp_path / "state.db",
            restart_every=5,
        )
    )
