"""The HTTP API: every route, bad input, auth, size limits, server-sent events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
async def api() -> AsyncIterator[tuple[httpx.AsyncClient, Monitor]]:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4, max_trials_per_question=50))
    settings = HttpSettings(token=TOKEN, max_body_bytes=4096)
    async with Service(monitor, status_interval_s=0.01) as service:
        app = create_app(service, settings, lambda: (b"scorio_up 1\n", "text/plain"))
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            yield client, monitor


def trial(
    question: int, trial_id: int, correct: bool, model: str = "a"
) -> dict[str, object]:
    return {"model": model, "question": question, "trial": trial_id, "correct": correct}


async def test_health_openapi_metrics_and_dashboard(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {
        "/runs",
        "/runs/{run}/trials",
        "/runs/{run}/status",
        "/runs/{run}/next",
        "/runs/{run}/events",
    } <= set(paths)
    assert (await client.get("/metrics")).text == "scorio_up 1\n"
    page = await client.get("/")
    assert page.status_code == 200 and "scorio-monitor" in page.text


async def test_post_runs_declares_a_run(api: tuple[httpx.AsyncClient, Monitor]) -> None:
    client, _ = api
    response = await client.post(
        "/runs", json={"run": "new", "weights": [0, 0.5, 1]}, headers=AUTH
    )
    assert response.status_code == 201 and response.json()["weights"] == [0, 0.5, 1]
    assert "new" in (await client.get("/runs")).json()
    assert (await client.get("/runs/new/config")).json()["run"] == "new"


async def test_post_runs_with_a_bad_config_is_422_with_a_reason(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    response = await client.post(
        "/runs", json={"run": "x", "questions": [1], "question_count": 1}, headers=AUTH
    )
    assert response.status_code == 422
    assert "give questions or question_count, not both" in response.json()["detail"]
    response = await client.post(
        "/runs", json={"run": "x", "confidence": 2}, headers=AUTH
    )
    assert response.status_code == 422 and response.json()["detail"].startswith(
        "confidence:"
    )


async def test_changing_weights_after_trials_is_a_conflict(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    await client.post("/runs/r/trials", json=trial(1, 0, True), headers=AUTH)
    response = await client.post(
        "/runs", json={"run": "r", "weights": [0, 2]}, headers=AUTH
    )
    assert (
        response.status_code == 409
        and "cannot change them" in response.json()["detail"]
    )


async def test_trials_are_counted_once_and_reported(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    batch = [trial(1, 0, True), trial(2, 0, False), trial(1, 0, True)]
    response = await client.post("/runs/r/trials", json=batch, headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {
        "accepted": 2,
        "duplicates": 1,
        "corrections": 0,
        "rejected": [],
        "rejected_count": 0,
    }
    status = (await client.get("/runs/r/status")).json()
    assert status["trials"] == 2 and status["models"][0]["model"] == "a"


async def test_bad_trials_are_422_with_reasons_and_count_nothing(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, monitor = api
    for body, reason in [
        (b"{not json", "invalid JSON"),
        (json.dumps({"model": "a"}).encode(), "question: missing field"),
        (
            json.dumps(trial(1, 0, True) | {"run": "other"}).encode(),
            "arrived on run 'r'",
        ),
        (
            json.dumps(
                {"model": "a", "question": 1, "trial": 0, "category": 9}
            ).encode(),
            "category 9 is outside",
        ),
        (
            json.dumps(
                {
                    "model": "a",
                    "question": 7,
                    "trial": 0,
                    "category": "__import__('os')",
                }
            ).encode(),
            "category: must be an integer >= 0; got \"__import__('os')\"",
        ),
    ]:
        response = await client.post("/runs/r/trials", content=body, headers=AUTH)
        assert response.status_code == 422, body
        assert reason in response.json()["detail"]
    assert monitor.status("r").trials == 0


async def test_a_partly_bad_batch_counts_the_good_trials(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    response = await client.post(
        "/runs/r/trials", json=[trial(1, 0, True), {"model": "a"}], headers=AUTH
    )
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 1 and len(body["rejected"]) == 1


@pytest.mark.parametrize(
    ("method", "path", "payload"),
    [
        ("post", "/runs", {"run": "x"}),
        (
            "post",
            "/runs/r/trials",
            {"model": "a", "question": 1, "trial": 0, "correct": True},
        ),
    ],
)
async def test_write_routes_need_the_bearer_token(
    api: tuple[httpx.AsyncClient, Monitor],
    method: str,
    path: str,
    payload: dict[str, object],
) -> None:
    client, monitor = api
    missing = await client.request(method, path, json=payload)
    assert (
        missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    )
    wrong = await client.request(
        method, path, json=payload, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 403
    assert monitor.status("r").trials == 0 and "x" not in monitor.runs


async def test_read_routes_need_no_token(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    assert (await client.get("/runs/r/status")).status_code == 200


async def test_oversized_bodies_are_413(api: tuple[httpx.AsyncClient, Monitor]) -> None:
    client, monitor = api
    big = json.dumps([trial(q % 4, q, True) for q in range(200)]).encode()
    assert len(big) > 4096
    response = await client.post("/runs/r/trials", content=big, headers=AUTH)
    assert response.status_code == 413

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    chunked = await client.post("/runs/r/trials", content=chunks(), headers=AUTH)
    assert chunked.status_code == 413
    assert monitor.status("r").trials == 0


async def test_unknown_runs_are_404(api: tuple[httpx.AsyncClient, Monitor]) -> None:
    client, _ = api
    for path in (
        "/runs/nope/status",
        "/runs/nope/next?budget=3",  # a preview
        "/runs/nope/events",
        "/runs/nope/trace",
    ):
        response = await client.get(path)
        assert (
            response.status_code == 404
            and "unknown run 'nope'" in response.json()["detail"]
        )


async def test_next_needs_a_non_negative_budget(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    await client.post(
        "/runs/r/trials",
        json=[trial(1, 0, True), trial(1, 0, False, model="b")],
        headers=AUTH,
    )
    response = await client.post("/runs/r/next", json={"budget": 6}, headers=AUTH)
    items = response.json()
    assert sum(item["trials"] for item in items) == 6
    assert {item["model"] for item in items} == {"a", "b"}
    for ask in ({"budget": -1}, {"budget": 1_001}, {"budget": 1, "lease_s": 86_401}):
        bad = await client.post("/runs/r/next", json=ask, headers=AUTH)
        assert bad.status_code == 422, ask
        assert bad.json()["detail"].startswith(("budget:", "lease_s:"))
    assert (await client.post("/runs/r/next", json={}, headers=AUTH)).status_code == 422
    bad = await client.get("/runs/r/next", params={"budget": -1})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("budget:")
    assert (await client.get("/runs/r/next")).status_code == 422


async def test_reserving_needs_the_token_and_a_get_reserves_nothing(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, monitor = api
    both = [trial(1, 0, True), trial(1, 0, False, model="b")]
    await client.post("/runs/r/trials", json=both, headers=AUTH)
    week = {"budget": 1_000, "lease_s": 86_400}
    json_type = {"Content-Type": "application/json"}
    response = await client.post("/runs/r/next", json=week, headers=json_type)
    assert response.status_code == 401
    wrong = {**json_type, "Authorization": "Bearer wrong"}
    assert (
        await client.post("/runs/r/next", json=week, headers=wrong)
    ).status_code == 403
    # What an <img> tag can send: a GET. It previews, leases nothing.
    seven_days = {"budget": 1_000, "lease_s": 604_800}
    response = await client.get("/runs/r/next", params=seven_days)
    assert response.status_code == 405 and "POST /runs/{run}/next" in response.text
    preview = (await client.get("/runs/r/next", params={"budget": 1_000})).json()
    assert preview and all(item["lease"] is None for item in preview)
    # Nothing was reserved: the scheduler with the token gets the whole room.
    plan = (await client.post("/runs/r/next", json=week, headers=AUTH)).json()
    assert sum(item["trials"] for item in plan) == sum(i["trials"] for i in preview)
    assert all(item["lease"] for item in plan)
    assert monitor.next("r", 1_000, lease_s=0) == []


async def test_events_stream_replays_from_last_event_id_then_goes_live(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    clear = [trial(q, t, True, "good") for q in range(4) for t in range(30)]
    clear += [trial(q, t, False, "bad") for q in range(4) for t in range(30)]
    for start in range(0, len(clear), 40):  # under the 4 KiB body limit
        response = await client.post(
            "/runs/r/trials", json=clear[start : start + 40], headers=AUTH
        )
        assert response.status_code == 200
    first = await read_sse(
        client, "/runs/r/events", {}, until=lambda e: e["event"] == "ranking_stable"
    )
    fired = [e for e in first if e["event"] != "status"]
    assert [e["event"] for e in fired] == [
        "pair_resolved",
        "model_done",
        "model_done",
        "ranking_stable",
    ]
    assert [int(e["id"]) for e in fired] == sorted(int(e["id"]) for e in fired)
    resumed = await read_sse(
        client,
        "/runs/r/events",
        {"Last-Event-ID": fired[1]["id"]},
        until=lambda e: e["event"] == "status",
    )
    assert [e["event"] for e in resumed] == ["model_done", "ranking_stable", "status"]


async def test_status_messages_flow_live_on_the_event_stream(
    api: tuple[httpx.AsyncClient, Monitor],
) -> None:
    client, _ = api
    streaming = asyncio.Event()

    async def post_once_streaming() -> None:
        await streaming.wait()
        await client.post("/runs/r/trials", json=trial(2, 5, True), headers=AUTH)

    def until(event: dict[str, str]) -> bool:
        streaming.set()  # the stream is open: the trial arrives while it is
        return event["event"] == "status" and json.loads(event["data"])["trials"] == 1

    poster = asyncio.create_task(post_once_streaming())
    seen = await read_sse(client, "/runs/r/events", {}, until=until)
    await poster
    assert seen[0]["event"] == "status" and json.loads(seen[0]["data"])["trials"] == 0


async def read_sse(
    client: httpx.AsyncClient,
    path: str,
    headers: dict[str, str],
    until: object,
    timeout_s: float = 10.0,
) -> list[dict[str, str]]:
    """Server-sent events until ``until(event)`` is true."""
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    async with (
        asyncio.timeout(timeout_s),
        client.stream("GET", path, headers=headers) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line:
                if current:
                    events.append(current)
                    if until(current):  # type: ignore[operator]
                        return events
                current = {}
                continue
            field, _, value = line.partition(":")
            current[field] = value.strip()
    return events
