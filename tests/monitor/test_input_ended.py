"""``GET /input``: whether more trials can still come to this service.

A file read once has ended when its last line is counted; a followed file,
or a service fed over HTTP, never ends.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.jsonl import JsonLines, JsonLinesSource
from monitor import Monitor
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.lock import has_writer
from tests.helpers import eventually, serving


def stream(tmp_path: Path, lines: int) -> Path:
    path = tmp_path / "trials.jsonl"
    events = (
        {"run": "r", "model": "a", "question": q, "trial": 0, "correct": q % 2 == 0}
        for q in range(lines)
    )
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


@pytest.fixture
def source_path(tmp_path: Path) -> Path:
    return stream(tmp_path, 50)


@contextlib.asynccontextmanager
async def serve(
    source: JsonLinesSource | None,
) -> AsyncIterator[tuple[httpx.AsyncClient, Service]]:
    service = Service(Monitor(), [] if source is None else [source])
    async with (
        service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        yield client, service


async def counted(client: httpx.AsyncClient, trials: int) -> bool:
    answer = await client.get("/runs/r/status")
    return answer.status_code == 200 and answer.json()["trials"] == trials


async def test_a_file_read_once_has_ended_after_its_last_line(
    source_path: Path,
) -> None:
    async with serve(JsonLinesSource(JsonLines(source_path))) as (client, service):
        await eventually(lambda: counted(client, 50), timeout_s=30)

        async def ended() -> bool:
            return bool((await client.get("/input")).json() == {"ended": True})

        await eventually(ended, timeout_s=30)
        assert service.input_ended


async def test_a_followed_file_has_not_ended_when_its_lines_are_counted(
    source_path: Path,
) -> None:
    reader = JsonLines(source_path, follow=True)
    async with serve(JsonLinesSource(reader)) as (client, service):
        await eventually(lambda: counted(client, 50), timeout_s=30)
        assert (await client.get("/input")).json() == {"ended": False}
        assert not service.input_ended
        reader.stop()  # a followed reader finishes after its current batch


async def test_a_service_fed_over_http_never_ends() -> None:
    async with serve(None) as (client, service):
        assert (await client.get("/input")).json() == {"ended": False}
        assert not service.input_ended


def test_a_state_file_has_a_writer_while_one_has_it_open(tmp_path: Path) -> None:
    path = tmp_path / "run.monitor.db"
    with Monitor(path):
        assert has_writer(path)
    assert not has_writer(path)
