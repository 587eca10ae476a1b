"""HTTP hardening against hostile or careless clients (issue 15).

Positions of rejected batch elements, the rejection metric from the start,
redacted webhook URLs, content types and origins on write routes, and the
bounds on what one request may ask.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http import create_app
from monitor.service import Service
from tests.helpers import serving


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, Monitor]]:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4, max_trials_per_question=50))
    async with Service(monitor, status_interval_s=0.01) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            yield http, monitor


def trial(question: int, trial_id: int, category: int) -> dict[str, object]:
    return {"model": "a", "question": question, "trial": trial_id, "category": category}


async def test_rejected_batch_elements_carry_their_index_as_position(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    http, monitor = client
    batch = [trial(0, 0, 1), {"model": "a"}, trial(1, 0, 0), trial(2, 0, 5)]
    response = await http.post("/runs/r/trials", json=batch)
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 2
    assert [item["position"] for item in body["rejected"]] == [1, 3]
    positions = [letter.position for letter in monitor.store.dead_letters()]
    assert sorted(position or 0 for position in positions) == [1, 3]


async def test_webhook_urls_are_redacted_in_read_routes(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    http, _ = client
    secret = "https://hooks.slack.com/services/T000/B000/s3cr3t"
    response = await http.post(
        "/runs", json={"run": "hooked", "webhooks": [secret, "http://u:p@h:81/x"]}
    )
    assert response.status_code == 201 and "s3cr3t" not in response.text
    config = (await http.get("/runs/hooked/config")).json()
    assert config["webhooks"] == ["https://hooks.slack.com/...", "http://h:81/..."]
    for path in ("/runs", "/runs/hooked/status", "/runs/hooked/trace"):
        assert "s3cr3t" not in (await http.get(path)).text
