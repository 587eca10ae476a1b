"""Stores do not grow without limit (issue 15, point 9).

Dead letters are kept by count and by age in the memory and SQLite stores;
without declared runs, the number of runs event names may create is capped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor import Monitor, RunConfig
from monitor.config import load_service_config
from monitor.interfaces import Store
from monitor.stores.memory import MemoryStore
from monitor.stores.sqlite import SqliteStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def bad(index: int) -> dict[str, object]:
    return {"run": "r", "model": "a", "question": 0, "trial": index, "category": 9}


def store_of(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return MemoryStore(dead_letters_max=50, dead_letters_max_age_s=100.0)
    return SqliteStore(
        tmp_path / "s.db", dead_letters_max=50, dead_letters_max_age_s=100.0
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_dead_letters_are_kept_by_count_and_by_age(tmp_path: Path, kind: str) -> None:
    store = store_of(kind, tmp_path)
    clock = Clock()
    monitor = Monitor(store, clock=clock)
    monitor.configure(RunConfig(run="r", question_count=4))
    for index in range(120):
        monitor.ingest(bad(index))
    letters = store.dead_letters(limit=1000)
    assert len(letters) == 50
    kept = {json.loads(letter.raw)["trial"] for letter in letters}
    assert kept == {str(index) for index in range(70, 120)}  # the newest
    assert monitor.status("r").rejected == 120  # totals still count them all
    clock.now += 101.0
    monitor.ingest(bad(500))
    assert [letter.received_s for letter in store.dead_letters(limit=1000)] == [
        clock.now
    ]
    monitor.close()
    if kind == "sqlite":
        with Monitor(SqliteStore(tmp_path / "s.db")) as reopened:
            assert len(reopened.store.dead_letters(limit=1000)) == 1
            assert reopened.status("r").rejected == 121


def test_undeclared_runs_are_capped() -> None:
    monitor = Monitor(max_undeclared_runs=3)
    report = monitor.ingest(
        [
            {"run": f"run{n}", "model": "a", "question": 0, "trial": 0, "category": 1}
            for n in range(5)
        ]
    )
    assert report.accepted == 3 and monitor.runs == ["run0", "run1", "run2"]
    assert [r.kind for r in report.rejected] == ["unknown_run", "unknown_run"]
    assert "max_undeclared_runs" in report.rejected[0].reason
    assert len(monitor.store.dead_letters()) == 2


def test_retention_and_the_run_cap_are_service_settings(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text(
        "max_undeclared_runs = 10\n[store]\ndead_letters_max = 500\n"
        "dead_letters_max_age_s = 3600\n"
    )
    config = load_service_config(path, {})
    assert config.max_undeclared_runs == 10
    assert config.store.dead_letters_max == 500
    assert config.store.dead_letters_max_age_s == 3600.0
