"""The asyncio service's lifecycle."""

from __future__ import annotations

import asyncio
import time

from monitor import Monitor
from monitor.interfaces import IngestSink
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
    started = time.monotonic()
    async with Service(Monitor(), [source]):
        await source.started.wait()
    assert source.cancellations == 2
    assert time.monotonic() - started < 10
