"""Rejections where the service runs: listed per run, counted, logged calmly."""

from __future__ import annotations

import itertools
import logging

import httpx
import pytest

from adapters.prometheus import metrics_renderer
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.schema import Rejection
from monitor.service.rejections import RecentRejections
from monitor.service.service import Service
from tests.helpers import serving


async def test_the_service_lists_counts_and_logs_what_it_rejected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", questions=["q0", "q1"]))
    service = Service(monitor)
    app = create_app(
        service, HttpSettings(), metrics_renderer(lambda: service.snapshot)
    )
    good = {"model": "a", "question": "q0", "trial": 0, "correct": True}
    graded = {"model": "a", "question": "q0"}
    with caplog.at_level(logging.WARNING, logger="monitor.service.rejections"):
        async with (
            service,
            serving(app) as base,
            httpx.AsyncClient(base_url=base) as client,
        ):
            posts = [
                [good, {**graded, "trial": 1, "category": 7}],  # no such category
                [{**good, "question": "q9"}],  # not a declared question
                b"{not json",
            ]
            for body in posts:
                if isinstance(body, bytes):
                    response = await client.post(
                        "/runs/r/trials",
                        content=body,
                        headers={"content-type": "application/json"},
                    )
                else:
                    response = await client.post("/runs/r/trials", json=body)
                assert response.status_code in (200, 422)
            for index in range(120):  # a sender stuck in a loop
                await client.post(
                    "/runs/r/trials", json=[{**graded, "trial": index, "category": 9}]
                )
            listed = (await client.get("/runs/r/rejections")).json()
            few = (await client.get("/runs/r/rejections?limit=3")).json()
            exposition = (await client.get("/metrics")).text
            assert (
                await client.get("/runs/r/rejections?limit=1000")
            ).status_code == 422

    # Newest first, bounded: the last 100 of the 123.
    assert len(listed) == 100
    assert listed[0]["reason"] == few[0]["reason"] and len(few) == 3
    assert listed[0]["kind"] == "category" and '"trial":"119"' in listed[0]["raw"]
    assert all(a["ts"] >= b["ts"] for a, b in itertools.pairwise(listed))
    assert monitor.status("r").trials == 1
    assert 'scorio_trials_rejected_total{reason="category"} 121.0' in exposition
    assert 'scorio_trials_rejected_total{reason="undeclared"} 1.0' in exposition
    assert 'scorio_trials_rejected_total{reason="invalid_json"} 1.0' in exposition
    # Logged, but at most five lines in ten seconds.
    lines = [
        r.getMessage() for r in caplog.records if r.name == "monitor.service.rejections"
    ]
    assert len(lines) == 5
    assert lines[0].startswith("rejected (category) from ") and "run 'r'" in lines[0]


def test_the_log_says_how_many_it_left_out_once_the_window_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    recent = RecentRejections(per_run=3, burst=2, window_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="monitor.service.rejections"):
        recent.record(
            [Rejection(reason=f"r{i}", kind="category", run="a") for i in range(5)]
        )
        recent.record([Rejection(reason="x", kind="invalid_json")])
        now[0] = 11.0
        recent.record([Rejection(reason="later", kind="undeclared", run="b")])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    assert lines[2].startswith("4 more rejections were not logged in 10 s")
    assert "3 category" in lines[2] and "1 invalid_json" in lines[2]
    assert [e.reason for e in recent.newest_first("a")] == ["r4", "r3", "r2"]
    assert [e.reason for e in recent.newest_first("")] == ["x"]
    assert recent.newest_first("nobody") == []
