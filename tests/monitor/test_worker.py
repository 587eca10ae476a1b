"""The engine thread runs queued light calls before heavy ones."""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest

from monitor.service.worker import EngineWorker


async def test_light_calls_overtake_queued_heavy_ones() -> None:
    worker = EngineWorker()
    worker.start()
    release = threading.Event()
    order: list[str] = []

    def note(name: str) -> str:
        order.append(name)
        return name

    holding = threading.Event()

    def block() -> bool:
        holding.set()
        return release.wait(5.0)

    running = asyncio.create_task(worker.run(block))
    assert await asyncio.to_thread(holding.wait, 5.0)  # the thread is held
    heavy = [
        asyncio.create_task(
            worker.run(functools.partial(note, f"heavy{n}"), heavy=True)
        )
        for n in range(3)
    ]
    # A task queues its call at its first step, before it awaits anything:
    # one pass of the loop queues the heavy ones, the next the light one.
    await asyncio.sleep(0)
    light = asyncio.create_task(worker.run(lambda: note("light")))
    await asyncio.sleep(0)
    release.set()
    assert await running is True
    assert await light == "light"
    assert [await task for task in heavy] == ["heavy0", "heavy1", "heavy2"]
    assert order == ["light", "heavy0", "heavy1", "heavy2"]
    await worker.stop()


async def test_errors_reach_the_caller_and_the_thread_goes_on() -> None:
    worker = EngineWorker()
    worker.start()

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await worker.run(fail)
    assert await worker.run(lambda: 42) == 42
    await worker.stop()
