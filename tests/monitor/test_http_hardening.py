"""HTTP hardening against hostile or careless clients (issue 15).

Positions of rejected batch elements, the rejection metric from the start,
redacted webhook URLs, content types and origins on write routes, and the
bounds on what one request may ask.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.inputs.columns import TrialColumns
from monitor.inputs.decode import Decoded as Wire
from monitor.service.pipe import INGEST_PIECE, SHARED_GROUP
from monitor.service.service import Service
from monitor.stores.records import IngestReport
from tests.helpers import serving
from tests.monitor.test_cli_watch import poll_until
from tests.services import RedisServer, free_port

COMMAND = [sys.executable, "-m", "monitor.cli"]


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


ONE = json.dumps(trial(0, 0, 1)).encode()


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""],
)
async def test_write_routes_take_only_json(
    client: tuple[httpx.AsyncClient, Monitor], content_type: str
) -> None:
    http, monitor = client
    headers = {"Content-Type": content_type} if content_type else {}
    response = await http.post("/runs/r/trials", content=ONE, headers=headers)
    assert response.status_code == 415 and "application/json" in response.text
    response = await http.post("/runs", content=b'{"run": "x"}', headers=headers)
    assert response.status_code == 415
    assert monitor.status("r").trials == 0 and "x" not in monitor.runs
    charset = {"Content-Type": "application/json; charset=utf-8"}
    assert (await http.post("/runs/r/trials", content=ONE, headers=charset)).is_success


async def test_cross_origin_browsers_cannot_write(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    http, monitor = client
    json_type = {"Content-Type": "application/json"}
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        response = await http.post(
            "/runs/r/trials", content=ONE, headers={**json_type, **headers}
        )
        assert response.status_code == 403, headers
    assert monitor.status("r").trials == 0
    own = {"Origin": str(http.base_url).rstrip("/"), "Sec-Fetch-Site": "same-origin"}
    response = await http.post(
        "/runs/r/trials", content=ONE, headers={**json_type, **own}
    )
    assert response.status_code == 200 and monitor.status("r").trials == 1


async def test_allowed_origins_may_write() -> None:
    monitor = Monitor()
    settings = HttpSettings(allowed_origins=["https://ui.example"])
    async with Service(monitor) as service:
        app = create_app(service, settings)
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            response = await http.post(
                "/runs",
                json={"run": "x"},
                headers={"Origin": "https://ui.example"},
            )
            assert response.status_code == 201


@pytest.mark.slow
def test_watch_http_takes_a_token(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"run": "r", **trial(0, 0, 1)}) + "\n")
    port = free_port()
    process = subprocess.Popen(
        [*COMMAND, "watch", str(path), "--http", str(port)],
        env={**os.environ, "SCORIO_MONITOR_HTTP_TOKEN": "t0ken"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=1.0).is_success
            except httpx.HTTPError:
                return False

        poll_until(up)
        url = f"{base}/runs/r/trials"
        body = json.dumps(trial(1, 0, 1))
        json_type = {"Content-Type": "application/json"}
        assert httpx.post(url, content=body, headers=json_type).status_code == 401
        with_token = {**json_type, "Authorization": "Bearer t0ken"}
        assert httpx.post(url, content=body, headers=with_token).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()


async def test_one_request_may_ask_only_so_much(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    http, monitor = client
    response = await http.post("/runs/r/next", json={"budget": 1_001})
    assert response.status_code == 422 and "budget" in response.text
    assert (await http.post("/runs/r/next", json={"budget": 1_000})).is_success
    response = await http.post("/runs/r/next", json={"budget": 1, "lease_s": 1e9})
    assert response.status_code == 422 and "lease_s" in response.text
    ones = b"[" + b"1," * 199_999 + b"1]"
    response = await http.post(
        "/runs/r/trials", content=ones, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422 and len(response.content) < 2000
    assert response.json()["rejected_count"] == 1
    assert "exceeds the limit of 10000" in response.json()["detail"]
    assert len(monitor.store.dead_letters()) == 1
    many = [trial(0, t, 7) for t in range(5000)]
    body = (await http.post("/runs/r/trials", json=many)).json()
    assert body["rejected_count"] == 5000 and len(body["rejected"]) == 100
    assert monitor.status("r").trials == 0


class CallCounting(Monitor):
    """A monitor that notes the size of each ingest call it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def ingest_parsed(self, items: Iterable[Wire], **options: Any) -> IngestReport:
        listed = list(items)
        self.calls.append(sum(len(i) if type(i) is TrialColumns else 1 for i in listed))
        return super().ingest_parsed(listed, **options)


async def test_a_large_request_is_counted_in_pieces_others_can_pass() -> None:
    monitor = CallCounting()
    monitor.configure(RunConfig(run="r", question_count=10))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            batch = [trial(q % 10, q, 1) for q in range(5500)]
            response = await http.post("/runs/r/trials", json=batch)
            assert response.json()["accepted"] == 5500
    assert monitor.calls == [INGEST_PIECE] * (5500 // INGEST_PIECE) + [
        5500 % INGEST_PIECE
    ] * (5500 % INGEST_PIECE > 0)
    assert monitor.status("r").trials == 5500


class RedisCallCounting(CallCounting):
    """CallCounting on a shared (Redis) store."""

    def __init__(self, store: RedisStore) -> None:
        Monitor.__init__(self, store)
        self.calls = []


async def test_a_shared_store_takes_pieces_in_groups_while_none_is_rejected(
    redis: RedisServer, prefix: str
) -> None:
    monitor = RedisCallCounting(RedisStore(redis.url, prefix))
    monitor.configure(RunConfig(run="r", question_count=10))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            good = [trial(q % 10, q, 1) for q in range(5500)]
            assert (await http.post("/runs/r/trials", json=good)).json()[
                "accepted"
            ] == 5500
            # One piece first, then groups of SHARED_GROUP pieces.
            group = SHARED_GROUP * INGEST_PIECE
            assert monitor.calls == [INGEST_PIECE] + [group] * 5 + [INGEST_PIECE]
            monitor.calls.clear()
            bad = [trial(q % 10, q, 7) for q in range(5000)]
            await http.post("/runs/r/trials", json=bad)
            # Rejections keep the pieces one at a time.
            assert monitor.calls == [INGEST_PIECE] * 20
    assert monitor.status("r").trials == 5500


async def test_a_rebound_name_is_refused_even_with_its_own_origin(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    # DNS rebinding: a page at http://evil.example:PORT whose name now points
    # here sends Host and Origin both naming evil.example.
    http, monitor = client
    port = http.base_url.port
    evil = {
        "Host": f"evil.example:{port}",
        "Origin": f"http://evil.example:{port}",
        "Content-Type": "application/json",
    }
    response = await http.post("/runs/r/trials", content=ONE, headers=evil)
    assert response.status_code == 400 and "allowed_hosts" in response.text
    assert (
        await http.get("/runs", headers={"Host": "evil.example"})
    ).status_code == 400
    assert monitor.status("r").trials == 0
    for own in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1"):
        assert (await http.get("/runs", headers={"Host": own})).is_success, own
    # The Host check passed (an IP literal), the Origin is still foreign.
    foreign = {**evil, "Host": f"127.0.0.1:{port}"}
    response = await http.post("/runs/r/trials", content=ONE, headers=foreign)
    assert response.status_code == 403
    assert monitor.status("r").trials == 0


async def test_allowed_hosts_name_the_monitor_and_its_own_origins() -> None:
    monitor = Monitor()
    settings = HttpSettings(allowed_hosts=["monitor.example", "*.lab.example"])
    async with Service(monitor) as service:
        app = create_app(service, settings)
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
            port = int(base.rpartition(":")[2])
            for host in ("monitor.example", "a.lab.example", "[::1]"):
                assert (await http.get("/runs", headers={"Host": host})).is_success
            for host in ("lab.example", "evil.example", "monitor.example.evil"):
                response = await http.get("/runs", headers={"Host": host})
                assert response.status_code == 400, host
            page = f"http://monitor.example:{port}"
            headers = {"Host": f"monitor.example:{port}", "Origin": page}
            response = await http.post("/runs", json={"run": "x"}, headers=headers)
            assert response.status_code == 201
            # Another port on the same name is another origin.
            other = {**headers, "Origin": f"http://monitor.example:{port + 1}"}
            response = await http.post("/runs", json={"run": "y"}, headers=other)
            assert response.status_code == 403


async def test_requests_naming_unknown_runs_record_only_a_clients_allowance(
    client: tuple[httpx.AsyncClient, Monitor],
) -> None:
    # Run "r" is declared, so any other name is refused (unknown_run) and
    # dead-lettered; without a token anyone may send such requests.
    http, monitor = client
    batch = [trial(q % 4, q, 1) for q in range(1000)]
    answers = []
    for number in range(20):
        response = await http.post(f"/runs/new{number}/trials", json=batch)
        answers.append(response.status_code)
        if response.status_code == 429:
            break
    assert answers[0] == 422 and answers[-1] == 429, answers
    assert "unknown run 'new" in response.json()["detail"]
    assert int(response.headers["Retry-After"]) > 0
    recorded = len(monitor.store.dead_letters(limit=1_000_000))
    assert recorded == 1000 * (len(answers) - 1)
    for number in range(5):
        response = await http.post(f"/runs/more{number}/trials", json=batch)
        assert response.status_code == 429
    assert len(monitor.store.dead_letters(limit=1_000_000)) == recorded
    # The declared run still takes this client's trials.
    assert (await http.post("/runs/r/trials", json=[trial(0, 0, 1)])).is_success
    assert monitor.status("r").trials == 1
