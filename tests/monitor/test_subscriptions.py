"""Live subscribers are bounded in bytes and coalesce statuses (issue 15, point 5)."""

from __future__ import annotations

import asyncio
import json

import pytest

from monitor import Monitor, RunConfig
from monitor.interfaces import Payload
from monitor.schema import Status
from monitor.service.service import Service
from monitor.service.subscriptions import Subscription
from monitor.stores.records import StoredEvent


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def status(run: str, trials: int) -> Status:
    monitor = Monitor()
    monitor.configure(RunConfig(run=run, question_count=4))
    return monitor.status(run).model_copy(update={"trials": trials})


def event(seq: int) -> StoredEvent:
    return StoredEvent(
        seq=seq, run="r", kind="model_done", subject="a", payload={}, ts=0.0
    )


@pytest.mark.slow
async def test_a_lagging_subscriber_holds_only_the_newest_status_per_run() -> None:
    subscription = Subscription(1 << 20, 60.0, Clock())
    for trials in range(1000):
        for run in ("a", "b", "c"):
            assert subscription.offer(status(run, trials))
    assert subscription.pending_statuses == 3
    got = [await subscription.get() for _ in range(3)]
    assert [(s.run, s.trials) for s in got if isinstance(s, Status)] == [
        ("a", 999),
        ("b", 999),
        ("c", 999),
    ]


async def test_events_stay_in_order_within_a_byte_bound() -> None:
    subscription = Subscription(1000, 60.0, Clock())
    assert all(subscription.offer(event(seq), 100) for seq in range(10))
    assert subscription.pending_event_bytes == 1000
    assert not subscription.offer(event(10), 100)  # over the bound: drop it
    first = await subscription.get()
    assert isinstance(first, StoredEvent) and first.seq == 0


async def test_a_subscriber_that_reads_nothing_for_too_long_is_dropped() -> None:
    clock = Clock()
    subscription = Subscription(1 << 20, 5.0, clock)
    assert subscription.offer(status("a", 1))
    clock.now = 4.0
    assert subscription.offer(status("a", 2))
    assert await subscription.get() is not None  # read: not stalled
    clock.now = 8.0
    assert subscription.offer(status("a", 3))
    clock.now = 14.0
    assert not subscription.offer(status("a", 4))


async def test_the_service_drops_a_stalled_subscriber_and_frees_its_items() -> None:
    clock = Clock()
    monitor = Monitor()
    for run in ("r1", "r2"):
        monitor.configure(RunConfig(run=run, question_count=4))

    async def ingest(service: Service, run: str, trial: int) -> None:
        event = {"run": run, "model": "a", "question": 1, "trial": trial, "category": 1}
        await service.ingest_payloads(
            [Payload(data=json.dumps(event).encode(), source="test")]
        )

    async with Service(
        monitor, status_interval_s=0.001, subscriber_stall_s=5.0, clock=clock
    ) as service:
        stalled = service.subscribe()
        reading = service.subscribe()
        for trial in range(40):
            for run in ("r1", "r2"):
                await ingest(service, run, trial)
            await asyncio.sleep(0.005)
            while reading.pending_statuses:
                await reading.get()
        assert 1 <= stalled.pending_statuses <= 2 and not stalled.is_ended
        clock.now = 10.0
        for trial in range(40, 100):
            await ingest(service, "r1", trial)
            await asyncio.sleep(0.005)
            while reading.pending_statuses:
                await reading.get()
            if stalled.is_ended:
                break
        assert stalled.is_ended and stalled.pending_statuses == 0
        assert await stalled.get() is None
        assert not reading.is_ended
