"""A question's trials, read for the dashboard's drill-down: how long a click waits.

Run: `nice -n 10 .venv/bin/python benchmarks/question_trials.py [--trials 100000]`

Fills one run of `--trials` trials (10 models x `--trials`/100 questions x 10
trial ids, delivered in ingest calls of `--call-size`, with costs and times)
into each store (memory, SQLite, Redis on its own redis-server), then reads
`--reads` questions' trials through ``read_question_trials`` and prints the
median and the slowest read per store, and the same through the HTTP route
(``GET /runs/{run}/questions/{question}/trials``, served by uvicorn) for the
memory and SQLite stores. SQLite scans the run's log (its model and question
columns per call), so its time grows with the run's trials; the memory
store reads one row per grid, Redis scans its trials hash with a ``MATCH``.
Numbers from a machine shared with other work are indicative only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.interfaces import Store
from monitor.service.service import Service
from monitor.stores.memory import MemoryStore
from monitor.stores.question_trials import read_question_trials
from monitor.stores.sqlite import SqliteStore
from tests.helpers import serving
from tests.services import redis_server

MODELS = 10
TRIAL_IDS = 10


def events(count: int) -> list[dict[str, object]]:
    questions = max(count // (MODELS * TRIAL_IDS), 1)
    return [
        {
            "model": f"model-{index % MODELS}",
            "question": f"q{(index // MODELS) % questions}",
            "trial": str(index // (MODELS * questions)),
            "correct": (index * 7) % 10 < 6,
            "ts": 1_700_000_000.0 + index / 100,
            "cost": {"tokens": 100 + index % 50, "seconds": 0.5},
        }
        for index in range(count)
    ]


def fill(store: Store, trials: list[dict[str, object]], call_size: int) -> Monitor:
    monitor = Monitor(store)
    monitor.configure(RunConfig(run="bench", question_count=len(trials) // 100))
    for first in range(0, len(trials), call_size):
        monitor.ingest(
            [{**t, "run": "bench"} for t in trials[first : first + call_size]]
        )
    return monitor


def timed(read: Callable[[str], int], questions: list[str]) -> dict[str, float]:
    seconds = []
    for question in questions:
        start = time.perf_counter()
        found = read(question)
        seconds.append(time.perf_counter() - start)
        assert found == MODELS * TRIAL_IDS, (question, found)
    return {
        "median_ms": round(1000 * statistics.median(seconds), 2),
        "max_ms": round(1000 * max(seconds), 2),
    }


def store_reads(store: Store, questions: list[str]) -> dict[str, float]:
    return timed(
        lambda q: len(read_question_trials(store, "bench", q).trials), questions
    )


async def route_reads(monitor: Monitor, questions: list[str]) -> dict[str, float]:
    async with (
        Service(monitor) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        seconds = []
        for question in questions:
            start = time.perf_counter()
            answer = await client.get(f"/runs/bench/questions/{question}/trials")
            seconds.append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.text
            assert sum(m["total"] for m in answer.json()["models"]) == 100
    return {
        "median_ms": round(1000 * statistics.median(seconds), 2),
        "max_ms": round(1000 * max(seconds), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--call-size", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=20)
    arguments = parser.parse_args()
    trials = events(arguments.trials)
    count = max(arguments.trials // (MODELS * TRIAL_IDS), 1)
    step = max(count // arguments.reads, 1)
    questions = [f"q{index}" for index in range(0, count, step)][: arguments.reads]
    result: dict[str, object] = {
        "trials": arguments.trials,
        "call_size": arguments.call_size,
        "reads": len(questions),
    }
    with tempfile.TemporaryDirectory() as folder:
        memory = fill(MemoryStore(), trials, arguments.call_size)
        result["memory"] = store_reads(memory.store, questions)
        result["memory_route"] = asyncio.run(route_reads(memory, questions))

        path = Path(folder) / "bench.db"
        written = fill(SqliteStore(path), trials, arguments.call_size)
        result["sqlite"] = store_reads(written.store, questions)
        # The service closes the monitor (and its state file) when it stops.
        result["sqlite_route"] = asyncio.run(route_reads(written, questions))
        result["sqlite_bytes"] = path.stat().st_size

        with redis_server(Path(folder)) as server:
            shared = fill(
                RedisStore(server.url, prefix="bench"), trials, arguments.call_size
            )
            result["redis"] = store_reads(shared.store, questions)
            shared.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
