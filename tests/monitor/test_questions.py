"""The per-question view: separating and saturated questions, over HTTP too."""

from __future__ import annotations

import httpx

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.http.views import question_rows
from monitor.service.service import Service
from tests.helpers import serving


def outcomes(monitor: Monitor) -> None:
    right = {("a", "q0"), ("b", "q0"), ("a", "q2")}
    monitor.ingest(
        [
            {"run": "r", "model": model, "question": q, "trial": t}
            | {"correct": (model, q) in right or (q == "q3" and t == 0)}
            for model in ("a", "b")
            for q in ("q0", "q1", "q2", "q3")
            for t in range(4)
        ]
        + [
            # A prior outcome is evidence for mu, not an observed score here.
            {"run": "r", "model": "b", "question": "q2", "trial": 0}
            | {"correct": True, "prior": True}
        ]
    )


def test_questions_are_ranked_by_how_far_apart_the_models_are() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4))
    outcomes(monitor)
    ranked = question_rows(monitor, "r")
    rows = {row.question: row for row in ranked}
    assert ranked[0].question == "q2"
    assert rows["q2"].models == {"a": 1.0, "b": 0.0}
    assert (rows["q2"].spread, rows["q2"].saturated) == (1.0, None)
    assert (rows["q0"].saturated, rows["q1"].saturated) == ("top", "bottom")
    assert rows["q3"].models == {"a": 0.25, "b": 0.25}
    assert (rows["q3"].spread, rows["q3"].saturated) == (0.0, None)
    assert rows["q0"].trials == 8 and rows["q0"].mean == 1.0


async def test_the_questions_endpoint_serves_the_same_rows() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4))
    outcomes(monitor)
    expected = [row.model_dump() for row in question_rows(monitor, "r")]
    async with (
        Service(monitor) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        assert (await client.get("/runs/r/questions")).json() == expected
        assert (await client.get("/runs/nope/questions")).status_code == 404


async def test_the_rejected_endpoint_lists_the_runs_dead_letters_newest_first() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4))
    monitor.configure(RunConfig(run="s"))
    monitor.ingest_payload('{"run": "r", "model": "a"}', source="file:/x.jsonl")
    monitor.ingest_payload('{"run": "s", "model": "a"}', source="other")
    async with (
        Service(monitor) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        assert (
            await client.post(
                "/runs/r/trials",
                content=b"{broken",
                headers={"content-type": "application/json"},
            )
        ).is_error
        listed = (await client.get("/runs/r/rejected")).json()
        assert (await client.get("/runs/nope/rejected")).status_code == 404
    assert [item["source"] for item in listed] == ["http", "/x.jsonl"]
    assert listed[0]["reason"].startswith("invalid JSON")
    assert "missing field" in listed[1]["reason"]
