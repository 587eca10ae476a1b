"""The embedded SQLite store: durability, restart, fire-once, rollback, locking."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path

import msgspec
import numpy as np
import pytest

from monitor import Monitor, RunConfig, StoreError
from monitor.stores.sqlite import SqliteStore
from tests.monitor.streams import messy, stream_of


def ingest_all(
    monitor: Monitor, events: Sequence[Mapping[str, object]], chunk: int = 50
) -> None:
    for start in range(0, len(events), chunk):
        monitor.ingest(events[start : start + chunk])


def test_a_restart_rebuilds_exactly_the_same_status(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    results = (rng.random((4, 10, 8)) < rng.random((4, 1, 1))).astype(np.int64)
    events = messy(stream_of(results), rng)
    path = tmp_path / "state.db"
    with Monitor(path) as first:
        first.configure(
            RunConfig(run="bench", question_count=10, max_trials_per_question=20)
        )
        ingest_all(first, events)
        before = first.status("bench")
        fired = first.events_after("bench")
    with Monitor(path) as second:
        assert second.status("bench") == before
        assert second.events_after("bench") == fired
        assert second.look() == []


def test_each_event_fires_once_and_never_again_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    events = [
        {
            "run": "r",
            "model": model,
            "question": q,
            "trial": t,
            "correct": model == "good",
        }
        for model in ("good", "bad")
        for q in range(10)
        for t in range(4)
    ]
    with Monitor(path) as monitor:
        monitor.configure(RunConfig(run="r", question_count=10))
        ingest_all(monitor, events, chunk=7)
        kinds = [event.kind for event in monitor.events_after("r")]
    assert kinds == ["pair_resolved", "model_done", "model_done", "ranking_stable"]
    with Monitor(path) as monitor:
        ingest_all(monitor, events)  # all duplicates now
        assert monitor.look() == []
        assert [event.kind for event in monitor.events_after("r")] == kinds


def test_a_failed_commit_counts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Monitor(path) as monitor:
        monitor.ingest(
            {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
        )
        before = monitor.status("r")
        with sqlite3.connect(path) as other:
            other.execute("DROP TABLE totals")
        with pytest.raises(StoreError, match="cannot write state file"):
            monitor.ingest(
                [
                    {
                        "run": "r",
                        "model": "a",
                        "question": 1,
                        "trial": 1,
                        "correct": True,
                    },
                    {
                        "run": "r",
                        "model": "a",
                        "question": 1,
                        "trial": 0,
                        "correct": False,
                    },
                ]
            )
        assert monitor.status("r") == before
        assert monitor.store.totals("r").trials == 1


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with (
        Monitor(path),
        pytest.raises(StoreError, match="being written by another process"),
    ):
        Monitor(path)


def test_readers_see_a_live_writer(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Monitor(path) as writer:
        writer.ingest(
            {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
        )
        with Monitor(SqliteStore(path, read_only=True)) as reader:
            assert reader.status("r").trials == 1
            with pytest.raises(StoreError, match="read-only"):
                reader.ingest(
                    {
                        "run": "r",
                        "model": "a",
                        "question": 1,
                        "trial": 1,
                        "correct": True,
                    }
                )


def test_dead_letters_keep_the_raw_input_and_reason(tmp_path: Path) -> None:
    with Monitor(tmp_path / "state.db") as monitor:
        monitor.ingest_payload("{oops", source="file:x.jsonl", position=7)
        (letter,) = monitor.store.dead_letters()
    assert (letter.source, letter.position, letter.raw) == ("file:x.jsonl", 7, "{oops")
    assert letter.reason.startswith("invalid JSON")


def test_a_missing_state_file_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no state file"):
        SqliteStore(tmp_path / "none.db", read_only=True)


# The version 1 layout: one row per trial, kept up to date in place.
VERSION_1_SCHEMA = """
CREATE TABLE runs (run TEXT PRIMARY KEY, config TEXT NOT NULL,
    declared INTEGER NOT NULL);
CREATE TABLE trials (run TEXT NOT NULL, model TEXT NOT NULL,
    question TEXT NOT NULL, trial TEXT NOT NULL, prior INTEGER NOT NULL,
    category INTEGER NOT NULL, tokens INTEGER, seconds REAL, ts REAL,
    PRIMARY KEY (run, model, question, trial, prior)) WITHOUT ROWID;
CREATE TABLE totals (run TEXT PRIMARY KEY, trials INTEGER NOT NULL,
    duplicates INTEGER NOT NULL, corrections INTEGER NOT NULL,
    rejected INTEGER NOT NULL);
CREATE TABLE dead_letters (id INTEGER PRIMARY KEY, run TEXT,
    source TEXT NOT NULL, position INTEGER, reason TEXT NOT NULL,
    raw TEXT NOT NULL, received_s REAL NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL,
    kind TEXT NOT NULL, subject TEXT NOT NULL, payload TEXT NOT NULL,
    ts REAL NOT NULL, UNIQUE (run, kind, subject));
CREATE TABLE cursors (name TEXT PRIMARY KEY, position TEXT NOT NULL);
PRAGMA user_version = 1;
"""


def version_1_file(path: Path) -> None:
    """A state file as version 1 wrote it: trial 0 of q1 corrected to 0."""
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(VERSION_1_SCHEMA)
        db.execute(
            "INSERT INTO runs VALUES (?, ?, 0)",
            ("r", RunConfig(run="r").model_dump_json()),
        )
        db.executemany(
            "INSERT INTO trials VALUES ('r', ?, ?, ?, 0, ?, NULL, NULL, NULL)",
            [("a", "1", "0", 0), ("a", "1", "1", 1), ("b", "2", "0", 1)],
        )
        db.execute("INSERT INTO totals VALUES ('r', 3, 4, 1, 0)")


def test_a_version_1_state_file_is_migrated_to_the_trial_log(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    version_1_file(path)
    with Monitor(path) as monitor:
        status = monitor.status("r")
        assert {m.model: m.trials for m in status.models} == {"a": 2, "b": 1}
        assert (status.trials, status.duplicates, status.corrections) == (3, 4, 1)
        report = monitor.ingest(
            {"run": "r", "model": "a", "question": 1, "trial": 0, "category": 1}
        )
        assert report.corrections == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "trials" not in tables
        # The migrated trials stay in the log; later ones go to its batches.
        assert db.execute("SELECT count(*) FROM trial_log").fetchone() == (3,)
        assert db.execute("SELECT count(*) FROM trial_batches").fetchone() == (1,)
    with Monitor(path) as again:
        counts = again.store.counts("r")["a"]
        assert dict(zip(counts.questions, counts.observed, strict=True)) == {
            "1": [0, 2]
        }


def test_a_version_1_state_file_can_be_read_without_migrating(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    version_1_file(path)
    store = SqliteStore(path, read_only=True)
    try:
        assert store.load().totals["r"].trials == 3
        assert store.counts("r")["b"].observed == [[0, 1]]
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (1,)


def test_a_newer_state_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="schema version 99"):
        SqliteStore(path)
    with pytest.raises(StoreError, match="schema version 99"):
        SqliteStore(path)  # the first refusal released its lock


def test_the_lock_file_is_held_while_open_and_removed_on_close(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    lock = tmp_path / "state.db.lock"
    store = SqliteStore(path)
    try:
        assert lock.exists()
        with pytest.raises(StoreError, match="being written by another process"):
            SqliteStore(path)
    finally:
        store.close()
    assert not lock.exists()
    SqliteStore(path).close()  # a later writer takes a fresh lock
    assert not lock.exists()


def test_monitor_imports_where_there_is_no_fcntl() -> None:
    """As on Windows: nothing of ``monitor`` imports ``fcntl`` when loaded."""
    script = (
        "import sys\n"
        "sys.modules['fcntl'] = None  # import fcntl now raises ImportError\n"
        "from monitor import Monitor\n"
        "import monitor.stores.sqlite\n"
        "Monitor().close()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_the_log_keeps_a_row_per_call_with_costs_through_a_restart(
    tmp_path: Path,
) -> None:
    """Version 3's log: one row per run and call, holding only the new and
    corrected trials, costs and timestamps included."""
    path = tmp_path / "state.db"
    events = [
        {
            "run": "r",
            "model": f"m{index % 3}",
            "question": index % 7,
            "trial": index // 7,
            "correct": index % 2 == 0,
            "cost": {"tokens": index, "seconds": index / 10},
            "ts": 1000.0 + index,
        }
        for index in range(60)
    ]
    with Monitor(path) as first:
        first.ingest(events[:40])
        # Duplicates are not logged; a correction is.
        first.ingest([*events[30:60], {**events[0], "correct": False}])
        first.ingest(
            [{"run": "r", "model": "m0", "question": 1, "trial": 99, "correct": True}]
        )
        before = first.store.counts("r")
        status = first.status("r")
    with sqlite3.connect(path) as db:
        logged = db.execute("SELECT count(*) FROM trial_batches").fetchone()
        assert logged == (3,)
        assert db.execute("SELECT count(*) FROM trial_log").fetchone() == (0,)
    with Monitor(path) as second:
        assert second.store.counts("r") == before
        assert second.status("r") == status
        assert sum(counts.costed_trials for counts in before.values()) == 60


def unwritable_folder(folder: Path) -> Path:
    """``folder`` made read-only for this process (for root, which ignores
    the mode, made immutable with ``chattr +i``); undo with :func:`writable`."""
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    probe = folder / "probe"
    with pytest.raises(OSError):
        probe.touch()
    return folder


def writable(folder: Path) -> None:
    if folder.stat().st_mode & 0o200 == 0:
        if shutil.which("chattr"):
            subprocess.run(["chattr", "-i", str(folder)], check=False)
        folder.chmod(0o755)


@pytest.mark.parametrize("inside", ["state.db", "new/state.db"])
def test_a_state_file_in_a_read_only_folder_is_refused_in_one_line(
    tmp_path: Path, inside: str
) -> None:
    folder = unwritable_folder(tmp_path / "read-only")
    try:
        with pytest.raises(StoreError) as refused:
            Monitor(folder / inside)
    finally:
        writable(folder)
    message = str(refused.value)
    assert message.startswith(f"cannot open state file {folder / inside}: ")
    assert "\n" not in message and "a folder this user can write" in message


def test_watch_into_a_read_only_folder_says_why_in_one_line(tmp_path: Path) -> None:
    folder = unwritable_folder(tmp_path / "read-only")
    lines = tmp_path / "trials.jsonl"
    lines.write_text(
        '{"run": "r", "model": "a", "question": 1, "trial": 0, "correct": true}\n'
    )
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "monitor.cli",
                "watch",
                str(lines),
                "--json",
                "--state",
                str(folder / "state.db"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        writable(folder)
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        f"scorio-monitor: error: cannot open state file {folder / 'state.db'}: "
    )
    assert line.endswith("give a state path in a folder this user can write")


def test_a_damaged_batch_in_the_trial_log_names_the_file_and_what_to_do(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with Monitor(path) as monitor:
        monitor.ingest(
            [
                {"run": "r", "model": "a", "question": q, "trial": 0, "correct": True}
                for q in range(600)
            ]
        )
    with closing(sqlite3.connect(path)) as db, db:
        (count,) = db.execute("SELECT count(*) FROM trial_batches").fetchone()
        assert count >= 1
        # A model id that is a number: the kind of damage a bad disk makes.
        bad = msgspec.msgpack.encode([[1], ["q"], ["0"], [False], [1], [], [], []])
        db.execute("UPDATE trial_batches SET trials = ?", (bad,))
    with pytest.raises(StoreError) as refused:
        Monitor(path)
    message = str(refused.value)
    assert message.startswith(
        f"state file {path} is damaged: a logged batch of run 'r' cannot be read ("
    )
    assert message.endswith(
        "restore the file from a backup, or move it aside to start afresh"
    )
