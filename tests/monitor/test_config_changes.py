"""Changing a run's config after trials were counted (issue 15, point 2).

A change that would give counted trials another meaning (another ``M``, a
questions list leaving out questions seen) is refused before anything is
saved, so a restart still reads the old config.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.errors import ConfigError
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving


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


def test_a_change_that_keeps_m_and_the_questions_seen_is_accepted() -> None:
    monitor = counted_on_30_questions()
    monitor.configure(RunConfig(run="r", question_count=30, confidence=0.9))
    assert monitor.config("r").confidence == 0.9
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
