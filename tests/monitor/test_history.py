"""A run's history: kept in every store, bounded and thinned, read after a restart."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.redis import RedisStore
from monitor import Monitor, RunConfig
from monitor.interfaces import Store
from monitor.stores.history import (
    HISTORY_MAX,
    HistoryPoint,
    ModelPoint,
    thinned,
    to_thin,
)
from monitor.stores.memory import MemoryStore
from monitor.stores.sqlite import SqliteStore
from tests.services import RedisServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def batch(model_rates: dict[str, float], round_: int) -> list[dict[str, object]]:
    return [
        {
            "run": "r",
            "model": model,
            "question": f"q{q}",
            "trial": round_,
            "correct": (q + round_) % 10 < rate * 10,
        }
        for model, rate in model_rates.items()
        for q in range(10)
    ]


RATES = {"a": 0.8, "b": 0.5, "c": 0.2}


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.services)]
)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, prefix: str
) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        yield SqliteStore(tmp_path / "state.db")
    else:
        server: RedisServer = request.getfixturevalue("redis")
        yield RedisStore(server.url, prefix=prefix)


def test_every_look_whose_trials_moved_on_is_kept_best_first(store: Store) -> None:
    clock = Clock()
    monitor = Monitor(store, clock=clock)
    monitor.configure(RunConfig(run="r", question_count=10))
    for round_ in range(6):
        monitor.ingest(batch(RATES, round_))
        clock.now += 1.0
        monitor.status("r")
    monitor.status("r")  # nothing new: no point
    points = monitor.history("r")
    assert [p.trials for p in points] == [30 * (i + 1) for i in range(6)]
    status = monitor.status("r")
    last = points[-1]
    assert [m.model for m in last.models] == [row.model for row in status.models]
    assert [m.mu for m in last.models] == [row.mu for row in status.models]
    assert [m.sigma for m in last.models] == [row.sigma for row in status.models]
    assert [m.group for m in last.models] == [row.group for row in status.models]
    times = [p.ts for p in points]
    assert times == sorted(times) and times[0] >= 1_000.0 and times[-1] <= clock.now


def test_looks_closer_than_the_interval_keep_one_point_and_history_keeps_the_last(
    tmp_path: Path,
) -> None:
    clock = Clock()
    monitor = Monitor(tmp_path / "s.db", clock=clock, look_interval_s=0.0)
    for round_ in range(5):
        monitor.ingest(batch(RATES, round_))  # looks at once, the same instant
    assert [p.trials for p in monitor.history("r")] == [30, 150]


def test_a_finished_run_reopened_shows_its_whole_history(tmp_path: Path) -> None:
    clock = Clock()
    with Monitor(tmp_path / "s.db", clock=clock) as monitor:
        for round_ in range(4):
            monitor.ingest(batch(RATES, round_))
            clock.now += 0.5
            monitor.status("r")
        # The last batch, never looked at by a status: closing keeps it.
        monitor.ingest(batch(RATES, 4))
    with Monitor(SqliteStore(tmp_path / "s.db", read_only=True)) as viewer:
        points = viewer.history("r")
    assert [p.trials for p in points] == [30, 60, 90, 120, 150]


def test_a_file_from_before_the_history_reads_as_no_history(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with Monitor(path) as monitor:
        monitor.ingest(batch(RATES, 0))
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE history")
    with Monitor(SqliteStore(path, read_only=True)) as viewer:
        assert viewer.history("r") == []
    with Monitor(path) as writer:  # a writer's open adds the table back
        assert [p.trials for p in writer.history("r")] == [30]


def point(trials: int) -> HistoryPoint:
    return HistoryPoint(
        ts=float(trials), trials=trials, models=(ModelPoint("m", 0.5, 0.1, 1),)
    )


@pytest.mark.slow
def test_the_history_is_bounded_and_keeps_its_first_and_newest_half(
    store: Store,
) -> None:
    for trials in range(1, 2 * HISTORY_MAX + 2):
        store.record_history("r", point(trials))
    kept = [p.trials for p in store.history("r")]
    assert len(kept) <= HISTORY_MAX
    assert kept[0] == 1
    assert kept[-HISTORY_MAX // 2 :] == list(
        range(2 * HISTORY_MAX + 2 - HISTORY_MAX // 2, 2 * HISTORY_MAX + 2)
    )
    assert kept == sorted(kept)
    # A point with no more trials than the last is not kept.
    store.record_history("r", point(5))
    assert [p.trials for p in store.history("r")] == kept


@given(count=st.integers(0, 5000), limit=st.integers(4, 2000))
def test_thinning_keeps_the_first_and_the_newest_half(count: int, limit: int) -> None:
    drop = to_thin(count, limit)
    assert (count <= limit) == (drop == [])
    kept = thinned([point(i + 1) for i in range(count)], limit)
    if count:
        assert kept[0].trials == 1 and kept[-1].trials == count
    if count > limit:
        assert len(kept) < count
        newest = [p.trials for p in kept[-(limit // 2) :]]
        assert newest == list(range(count - limit // 2 + 1, count + 1))


def test_a_file_replayed_at_full_speed_keeps_its_whole_trace(tmp_path: Path) -> None:
    stream = tmp_path / "aime25.jsonl"
    shutil.copy(EXAMPLES / "aime25.jsonl", stream)
    config = str(EXAMPLES / "aime25.toml")
    watched = subprocess.run(
        [sys.executable, "-m", "monitor", "watch", str(stream), "--config", config],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert watched.returncode == 0, watched.stderr
    state = tmp_path / "aime25.jsonl.monitor.db"
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        history = monitor.history("aime25")
        trials = monitor.status("aime25").trials
    counts = [point.trials for point in history]
    # From the first 100 lines to the last trial, a point at least every
    # 100 trials, or every 2 % of those counted once past 5,000.
    assert counts[0] <= 100 and counts[-1] == trials == 6600
    gaps = [(later - earlier, later) for earlier, later in pairwise(counts)]
    assert all(gap <= max(100, later // 50) for gap, later in gaps), gaps
    assert len(history) >= 60
