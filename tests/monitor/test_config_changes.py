"""Changing a run's config after trials were counted.

A change that would give counted trials another meaning (another ``M``, a
questions list leaving out questions seen) or void the stopping rule's
guarantee (another confidence, cap, rule or target) is refused before
anything is saved, so a restart still reads the old config.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.errors import ConfigError
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.helpers import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def counted_on_30_questions(state: Path | None = None) -> Monitor:
    monitor = Monitor(state)
    monitor.configure(RunConfig(run="r", question_count=30))
    monitor.ingest(
        [
            {"run": "r", "model": "a", "question": q, "trial": 0, "correct": q % 2 == 0}
            for q in range(30)
        ]
    )
    return monitor


@pytest.mark.parametrize(
    "change",
    [
        {"question_count": 1},
        {"question_count": 1000},
        {"question_count": None},
        {"questions": [str(q) for q in range(29)], "question_count": None},
        {"questions": [*map(str, range(29)), "other"], "question_count": None},
        {"models": ["b"]},
    ],
)
def test_a_change_that_moves_counted_trials_is_refused_and_nothing_saved(
    tmp_path: Path, change: dict[str, object]
) -> None:
    state = tmp_path / "state.db"
    monitor = counted_on_30_questions(state)
    mu = monitor.status("r").models[0].mu
    with pytest.raises(ConfigError, match="already counted trials"):
        monitor.configure({"run": "r", "question_count": 30, **change})
    assert monitor.config("r").question_count == 30
    assert monitor.status("r").models[0].mu == mu
    monitor.close()
    with Monitor(state) as reopened:
        assert reopened.config("r").question_count == 30
        assert reopened.status("r").models[0].mu == mu
    assert main(["status", "--state", str(state), "--json"]) == 0


def test_a_change_that_keeps_m_the_questions_seen_and_the_rule_is_accepted() -> None:
    monitor = counted_on_30_questions()
    monitor.configure(
        RunConfig(
            run="r", question_count=30, labels=["wrong", "right"], metrics=["pass@2"]
        )
    )
    assert monitor.config("r").labels == ["wrong", "right"]
    listed = counted_on_30_questions()
    with pytest.raises(ConfigError):  # question_count -> list is another M kind
        listed.configure(RunConfig(run="r", questions=[str(q) for q in range(30)]))


def test_question_count_is_bounded() -> None:
    with pytest.raises(ConfigError, match="question_count"):
        Monitor().configure({"run": "r", "question_count": 10**12})


async def test_post_runs_answers_409_and_keeps_the_old_config() -> None:
    monitor = counted_on_30_questions()
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            for body in (
                {"run": "r", "question_count": 1},
                {"run": "r", "question_count": 1000},
                {"run": "r", "questions": ["0", "1"]},
            ):
                response = await client.post("/runs", json=body)
                assert response.status_code == 409, response.text
                assert "already counted trials" in response.json()["detail"]
            config = (await client.get("/runs/r/config")).json()
            assert config["question_count"] == 30
            response = await client.post(
                "/runs", json={"run": "r", "question_count": 10**9}
            )
            assert response.status_code == 422


def test_a_questions_list_leaving_out_a_seen_question_is_refused() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", questions=["q1", "q2"]))
    monitor.ingest(
        {"run": "r", "model": "a", "question": "q1", "trial": 0, "category": 1}
    )
    with pytest.raises(ConfigError, match="leaves out: 'q1'"):
        monitor.configure(RunConfig(run="r", questions=["q2", "q3"]))
    monitor.configure(RunConfig(run="r", questions=["q1", "q3"]))
    assert monitor.config("r").questions == ["q1", "q3"]


@pytest.mark.parametrize(
    ("change", "stored", "new"),
    [
        ({"confidence": 0.8}, "confidence 0.95", "0.8"),
        ({"max_trials_per_question": 40}, "max_trials_per_question 80", "40"),
        ({"max_trials_per_question": None}, "max_trials_per_question 80", "None"),
        ({"rule": "paper"}, "rule sequential", "paper"),
        ({"error_control": "pair"}, "error_control ranking", "pair"),
        ({"target": "leader"}, "target ranking", "leader"),
        ({"equivalence_margin": 0.05}, "equivalence_margin None", "0.05"),
    ],
)
def test_a_change_of_what_the_stopping_rule_is_calibrated_with_is_refused(
    tmp_path: Path, change: dict[str, object], stored: str, new: str
) -> None:
    state = tmp_path / "state.db"
    monitor = Monitor(state)
    base = {"run": "r", "question_count": 30, "max_trials_per_question": 80}
    monitor.configure(base)
    monitor.ingest(
        [
            {"run": "r", "model": "a", "question": q, "trial": 0, "correct": q % 2 == 0}
            for q in range(30)
        ]
    )
    with pytest.raises(ConfigError) as refused:
        monitor.configure({**base, **change})
    message = str(refused.value)
    assert f"already counted trials with {stored}; cannot change it to {new}" in message
    assert f"so {new} needs a new run" in message
    assert monitor.config("r").confidence == 0.95
    monitor.close()
    with Monitor(state) as reopened:
        assert reopened.config("r") == RunConfig.model_validate(base)


def test_the_stopping_rule_may_change_while_no_trial_is_counted() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", confidence=0.95))
    monitor.configure(RunConfig(run="r", confidence=0.8, max_trials_per_question=40))
    assert monitor.config("r").confidence == 0.8


def watch(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "watch", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_watch_refuses_another_confidence_for_a_counted_run_and_says_the_way_out(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "aime25.jsonl"
    shutil.copy(EXAMPLES / "aime25.jsonl", stream)
    config = EXAMPLES / "aime25.toml"
    assert watch(str(stream), "--config", str(config), cwd=tmp_path).returncode == 0
    edited = tmp_path / "edited.toml"
    edited.write_text(
        config.read_text().replace("confidence = 0.95", "confidence = 0.8")
    )

    refused = watch(str(stream), "--config", str(edited), cwd=tmp_path)

    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert "already counted trials with confidence 0.95; cannot change it to 0.8" in (
        line
    )
    state = tmp_path / "aime25.jsonl.monitor.db"
    assert f"give a new --state FILE (or delete {state})" in line
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert monitor.config("aime25").confidence == 0.95
    # The way out: a new state file counts the stream again under 0.8.
    fresh = tmp_path / "fresh.db"
    again = watch(
        str(stream), "--config", str(edited), "--state", str(fresh), cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    with Monitor(SqliteStore(fresh, read_only=True)) as monitor:
        assert monitor.config("aime25").confidence == 0.8


@pytest.mark.slow
def test_watch_with_a_config_after_one_without_says_how_to_start_over(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "aime25.jsonl"
    shutil.copy(EXAMPLES / "aime25.jsonl", stream)
    assert watch(str(stream), cwd=tmp_path).returncode == 0  # an open run

    refused = watch(
        str(stream), "--config", str(EXAMPLES / "aime25.toml"), cwd=tmp_path
    )

    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    state = tmp_path / "aime25.jsonl.monitor.db"
    assert line == (
        "scorio-monitor: error: run 'aime25' already counted trials with an open "
        "question set; cannot change to question_count=30; to start over under "
        f"this config, give a new --state FILE (or delete {state})"
    )
    state.unlink()
    assert (
        watch(
            str(stream), "--config", str(EXAMPLES / "aime25.toml"), cwd=tmp_path
        ).returncode
        == 0
    )
