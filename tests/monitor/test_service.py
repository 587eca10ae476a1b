"""The asyncio service's lifecycle."""

from __future__ import annotations

import asyncio
import logging

import pytest

from monitor import Monitor
from monitor.interfaces import IngestSink
from monitor.service import service as service_module
from monitor.service.service import Service


class StubbornSource:
    """Loses the first cancellation, as redis-py's blocking reads can."""

    def __init__(self) -> None:
        self.cancellations = 0
        self.started = asyncio.Event()

    @property
    def name(self) -> str:
        return "stubborn"

    async def run(self, sink: IngestSink) -> None:
        self.started.set()
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancellations += 1
                if self.cancellations > 1:
                    raise


async def test_closing_ends_a_source_that_swallows_a_cancellation() -> None:
    source = StubbornSource()
    async with Service(Monitor(), [source]):
        await source.started.wait()
    # Cancelled again after it swallowed the first: closing ended (a close
    # that waited on the source for ever would meet the test's timeout).
    assert source.cancellations == 2


class BlippingSource:
    """Fails three times at once, then runs a while before failing again."""

    def __init__(self) -> None:
        self.calls = 0
        self.settled = asyncio.Event()

    @property
    def name(self) -> str:
        return "blipping"

    async def run(self, sink: IngestSink) -> None:
        self.calls += 1
        if self.calls <= 3:
            raise RuntimeError("store unavailable")
        if self.calls == 4:
            await asyncio.sleep(0.3)
            raise RuntimeError("store unavailable")
        self.settled.set()
        await asyncio.sleep(3600)


async def test_a_task_that_ran_healthy_restarts_from_the_first_delay(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(service_module, "_RESTART_DELAYS_S", (0.01, 0.02, 0.03, 0.9))
    monkeypatch.setattr(service_module, "_HEALTHY_S", 0.2)
    source = BlippingSource()
    with caplog.at_level(logging.ERROR, logger=service_module.__name__):
        async with Service(Monitor(), [source]):
            await asyncio.wait_for(source.settled.wait(), timeout=5)
    delays = [
        record.getMessage().rsplit(" ", 2)[-2]
        for record in caplog.records
        if "restarting in" in record.getMessage()
    ]
    # Three quick failures back off; the fourth came after a healthy run.
    assert delays == ["0.0", "0.0", "0.0", "0.0"]
