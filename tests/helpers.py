"""Shared pieces of the adapter tests: running services, waiting, trial data."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np
import uvicorn
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, settings

from tests.services import free_port


def server_examples(count: int | None = None) -> settings:
    """Settings of a property whose examples use a server or a process.

    ``count`` examples (the profile's number without one), no deadline, and
    no shrinking: hypothesis shrinks a failure for up to five minutes of
    examples, long past the test's timeout when each takes seconds. A
    failure shows the example as generated. tests/conftest.py fails a
    property marked ``services`` that shrinks.
    """
    chosen = settings(
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    return chosen if count is None else settings(chosen, max_examples=count)


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout_s: float = 30.0
) -> None:
    """Poll ``check`` until it is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s} s")


@contextlib.asynccontextmanager
async def serving(app: FastAPI, port: int | None = None) -> AsyncIterator[str]:
    """Run ``app`` on a real uvicorn server on ``port`` (default: a free one);
    yields its base URL."""
    port = free_port() if port is None else port
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def trial_results(seed: int, models: int, questions: int, trials: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (
        rng.random((models, questions, trials)) < rng.random((models, 1, 1))
    ).astype(np.int64)


def trial_events(results: np.ndarray) -> list[dict[str, object]]:
    """One event per trial; run comes from the channel."""
    return [
        {"model": f"m{m}", "question": q, "trial": t, "category": int(results[m, q, t])}
        for m in range(results.shape[0])
        for q in range(results.shape[1])
        for t in range(results.shape[2])
    ]


def with_duplicates(
    events: list[dict[str, object]], share: float, seed: int
) -> list[bytes]:
    """JSON payloads in random order, ``share`` of them delivered twice."""
    rng = np.random.default_rng(seed)
    payloads = [json.dumps(event).encode() for event in events]
    repeats = [
        payloads[i]
        for i in rng.choice(len(payloads), int(share * len(payloads)), replace=False)
    ]
    mixed = payloads + repeats
    return [mixed[i] for i in rng.permutation(len(mixed))]
