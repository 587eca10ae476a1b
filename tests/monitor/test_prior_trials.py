"""Prior outcomes (the paper's R0) are evidence, not trials."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor import Monitor, RunConfig
from monitor.cli import main


def events(trials: int, priors: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(7)
    observed = [
        {
            "run": "r",
            "model": f"m{index % 2}",
            "question": (index // 2) % 17,
            "trial": index // 34,
            "correct": bool(rng.random() < 0.6),
        }
        for index in range(trials)
    ]
    prior = [
        {
            "run": "r",
            "model": f"m{index % 2}",
            "question": index // 2,
            "trial": 0,
            "correct": True,
            "prior": True,
        }
        for index in range(priors)
    ]
    return observed + prior


def test_prior_outcomes_are_counted_apart_from_trials() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=17))
    monitor.ingest(events(238, 14))
    status = monitor.status("r")
    assert (status.trials, status.prior_trials) == (238, 14)
    assert sum(row.trials for row in status.models) == 238


def test_watch_reports_prior_trials_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "r.jsonl"
    stream.write_text("".join(json.dumps(e) + "\n" for e in events(238, 14)))
    assert main(["watch", str(stream), "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert (status["trials"], status["prior_trials"]) == (238, 14)
    assert main(["watch", str(stream), "--state", str(tmp_path / "v.db")]) == 0
    assert "238 trials" in capsys.readouterr().out


def test_prior_outcomes_use_no_budget() -> None:
    monitor = Monitor()
    monitor.configure(
        RunConfig(
            run="r", question_count=1, max_trials_per_question=3, models=["a", "b"]
        )
    )
    monitor.ingest(
        [
            {"run": "r", "model": model, "question": 0, "trial": t}
            | {"correct": model == "a", "prior": True}
            for model in ("a", "b")
            for t in range(5)
        ]
    )
    status = monitor.status("r")
    assert (status.trials, status.prior_trials) == (0, 10)
    assert not status.budget_exhausted
    assert not any(row.budget_exhausted for row in status.models)
    planned = {item.model: item.trials for item in monitor.next("r", 100)}
    assert planned == {"a": 3, "b": 3}
