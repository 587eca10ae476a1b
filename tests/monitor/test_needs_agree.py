"""Who needs trials: ``needs_trials``, ``predicted_trials`` and ``next`` agree.

A model whose position is not settled (beside an open boundary of the
target) needs trials, has a forecast above zero and gets trials from
``next``; a model whose position is settled needs none and gets none.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from monitor.config import load_run_configs
from monitor.engine.monitor import Monitor
from monitor.schema import Status

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
    assert set(planned) == needing
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
