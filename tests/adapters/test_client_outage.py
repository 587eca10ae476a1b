"""The client while the monitor is away: warn once, fail fast, buffer, catch up."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest
import uvicorn

from adapters.harness import AsyncMonitorClient, HttpTransport, Retry
from adapters.harness.breaker import BreakerSettings
from adapters.harness.transports import MonitorUnavailableError
from monitor import Monitor, TrialEvent
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import eventually
from tests.services import free_port


def trial(index: int) -> TrialEvent:
    return TrialEvent(
        run="r", model="a", question=str(index % 5), trial=f"e:{index}", correct=True
    )


class Later:
    """A service that starts on a chosen port when asked."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.service = Service(Monitor())
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.service.__aenter__()
        self._server = uvicorn.Server(
            uvicorn.Config(
                create_app(self.service, HttpSettings()),
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
            )
        )
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            await self.service.__aexit__(None, None, None)


@pytest.fixture
async def later() -> AsyncIterator[Later]:
    service = Later(free_port())
    try:
        yield service
    finally:
        await service.stop()


async def test_trials_wait_while_the_monitor_is_away_and_arrive_when_it_returns(
    later: Later, caplog: pytest.LogCaptureFixture
) -> None:
    client = AsyncMonitorClient(
        HttpTransport(f"http://127.0.0.1:{later.port}"),
        batch_size=10,
        flush_interval_s=0.05,
        max_buffered=50,
        retry=Retry(attempts=1),
        breaker=BreakerSettings(first_wait_s=0.2, max_wait_s=0.4),
    )
    with caplog.at_level(logging.INFO, logger="adapters.harness"):
        async with client:
            for index in range(40):
                await client.report(trial(index))
            await asyncio.sleep(0.3)  # the background flush finds no monitor
            assert client.monitor_away and client.pending == 40

            # While the breaker is open, calls fail at once.
            started = time.monotonic()
            for _ in range(20):
                with pytest.raises(MonitorUnavailableError, match="next try"):
                    await client.status("r")
            assert time.monotonic() - started < 0.2

            # The buffer holds 50: ten more fit, the next 15 are dropped.
            for index in range(40, 65):
                await client.report(trial(index))
            assert (client.pending, client.dropped) == (50, 15)

            await later.start()

            async def delivered() -> bool:
                return client.pending == 0

            await eventually(delivered, timeout_s=10)
            assert not client.monitor_away
    status = later.service.monitor.status("r")
    assert status.trials == 50
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("is unreachable" in m for m in messages) == 1
    assert sum("dropping new trials" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    assert len(messages) <= 4, messages
