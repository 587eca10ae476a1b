"""Workers on one Redis follow each other's counts and converge to Redis's.

A worker keeps its own picture of a run's counts: its own applies, and the
other workers' changes read from the run's change log. These tests check
that the picture never drifts from the counts Redis holds, however the
workers' writes interleave.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from redis import Redis

from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig
from monitor.interfaces import Payload
from monitor.schema import Status
from monitor.service.service import Service
from tests.helpers import eventually
from tests.services import RedisServer

RUN = "bench"
BATCH = 10
QUESTIONS = 500
ROUNDS = 4


def delete_keys(url: str, prefix: str) -> None:
    """Remove this test's keys (never FLUSHALL: the server is shared)."""
    with Redis.from_url(url) as client:
        found = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if found:
            client.delete(*found)


@pytest.fixture
def clean(redis: RedisServer, prefix: str) -> Iterator[str]:
    delete_keys(redis.url, prefix)
    yield prefix
    delete_keys(redis.url, prefix)


def event(question: int, correct: bool) -> dict[str, object]:
    return {
        "run": RUN,
        "model": "m0",
        "question": question,
        "trial": 0,
        "correct": correct,
    }


def trials_per_model(monitor: Monitor) -> dict[str, int]:
    return {row.model: row.trials for row in monitor.status(RUN).models}


def test_a_duplicate_applied_after_another_workers_change_does_not_hide_it(
    redis: RedisServer, clean: str
) -> None:
    with (
        Monitor(
            RedisStore(redis.url, clean), look_interval_s=0, shared_refresh_s=0
        ) as first,
        Monitor(
            RedisStore(redis.url, clean), look_interval_s=0, shared_refresh_s=0
        ) as second,
    ):
        for monitor in (first, second):
            monitor.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
        first.ingest(event(0, True))
        assert trials_per_model(first) == {"m0": 1}  # first is current
        second.ingest(event(1, True))  # the run's version moves on
        # Nothing changes in Redis, and its reply names the version the
        # other worker made.
        first.ingest(event(0, True))
        assert trials_per_model(first) == trials_per_model(second) == {"m0": 2}


def counted_rows(status: Status) -> list[tuple[str, int, float, float]]:
    return sorted((row.model, row.trials, row.mu, row.sigma) for row in status.models)


def batches(run: str, questions: int, category: int) -> list[bytes]:
    """Every trial of two models, in batches of ``BATCH``, all in one category."""
    return [
        json.dumps(
            [
                {
                    "run": run,
                    "model": model,
                    "question": question,
                    "trial": 0,
                    "category": category,
                }
                for question in range(start, min(start + BATCH, questions))
            ]
        ).encode()
        for model in ("m0", "m1")
        for start in range(0, questions, BATCH)
    ]


@pytest.mark.slow
def test_two_workers_fed_the_same_trials_converge_to_the_counts_in_redis(
    redis: RedisServer, clean: str
) -> None:
    """Eight clients, four per worker, post the same trials with alternating
    categories (duplicates and corrections crossing workers), run after run;
    when they are done, both workers' statuses of every run come to what
    Redis holds (what a worker started afresh reads)."""
    runs = [f"round-{number}" for number in range(ROUNDS)]

    async def rounds() -> None:
        monitors = [
            Monitor(RedisStore(redis.url, clean), shared_refresh_s=0.05)
            for _ in range(2)
        ]
        for monitor in monitors:
            for run in runs:
                monitor.configure(RunConfig(run=run, weights=[0.0, 1.0]))
        async with Service(monitors[0]) as first, Service(monitors[1]) as second:
            workers = (first, second)
            for run in runs:
                await post_in_step(workers, run)
            with Monitor(RedisStore(redis.url, clean)) as fresh:
                truth = {run: counted_rows(fresh.status(run)) for run in runs}
            for run in runs:
                assert sum(row[1] for row in truth[run]) == 2 * QUESTIONS

            async def converged() -> bool:
                seen = {
                    (index, run): counted_rows(await worker.status(run))
                    for index, worker in enumerate(workers)
                    for run in runs
                }
                return all(rows == truth[run] for (_, run), rows in seen.items())

            await eventually(converged, timeout_s=20.0)

    asyncio.run(rounds())


async def post_in_step(workers: tuple[Service, Service], run: str) -> None:
    """Clients 0-3 post to the first worker, 4-7 to the second; even clients
    say category 0, odd ones 1. They go batch by batch in step, so each
    batch's eight posts race each other."""
    posts = [batches(run, QUESTIONS, client % 2) for client in range(8)]
    for step in range(len(posts[0])):
        await asyncio.gather(
            *(
                workers[client // 4].ingest_payloads(
                    [Payload(posts[client][step], f"client-{client}")]
                )
                for client in range(8)
            )
        )
