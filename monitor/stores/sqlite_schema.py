"""The SQLite state file's layout: schema, migrations, the trial log's rows.

The trials are an append-only log, one row per run and call holding its new
and corrected trials as msgpack columns (:class:`LoggedTrials`): replaying
it in order rebuilds the exactly-once index and the counts. Files of older
versions are migrated on a writer's open (:func:`create_or_migrate`) and
read as they are by a read-only one.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from monitor.errors import StoreError
from monitor.stores.batches import TrialBatch
from monitor.stores.records import RunTotals

SCHEMA_VERSION = 3
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY, config TEXT NOT NULL, declared INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS trial_log (
    run TEXT NOT NULL, model TEXT NOT NULL, question TEXT NOT NULL,
    trial TEXT NOT NULL, prior INTEGER NOT NULL, category INTEGER NOT NULL,
    tokens INTEGER, seconds REAL, ts REAL);
CREATE TABLE IF NOT EXISTS trial_batches (run TEXT NOT NULL, trials BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS totals (
    run TEXT PRIMARY KEY, trials INTEGER NOT NULL, duplicates INTEGER NOT NULL,
    corrections INTEGER NOT NULL, rejected INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY, run TEXT, source TEXT NOT NULL, position INTEGER,
    reason TEXT NOT NULL, raw TEXT NOT NULL, received_s REAL NOT NULL);
CREATE INDEX IF NOT EXISTS dead_letters_by_age ON dead_letters (received_s);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, kind TEXT NOT NULL,
    subject TEXT NOT NULL, payload TEXT NOT NULL, ts REAL NOT NULL,
    UNIQUE (run, kind, subject));
CREATE TABLE IF NOT EXISTS cursors (name TEXT PRIMARY KEY, position TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY, run TEXT NOT NULL, trials INTEGER NOT NULL,
    point BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS history_by_run ON history (run, id);
"""
# The trial log is append-only, and replaying it in order (the last delivery
# of a trial wins) rebuilds the ledger. Version 2 appended a row per new or
# corrected trial to ``trial_log`` (2.6 us a row, most of an array's cost);
# version 3 appends one row to ``trial_batches`` per run and call, its
# trials as msgpack columns, and replays ``trial_log`` (older files) first.
APPEND_TRIALS = "INSERT INTO trial_batches (run, trials) VALUES (?, ?)"
TRIAL_COLUMNS = "run, model, question, trial, prior, category, tokens, seconds, ts"
# Version 1 kept one row per trial in ``trials``; it becomes the log's start.
_MIGRATE_FROM_1 = f"""
INSERT INTO trial_log ({TRIAL_COLUMNS}) SELECT {TRIAL_COLUMNS} FROM trials;
DROP TABLE trials;
"""


class LoggedTrials(msgspec.Struct, array_like=True):
    """One ``trial_batches`` row's trials, as columns.

    A column of ``None`` only (no costs, no timestamps) is stored empty.
    """

    model: list[str]
    question: list[str]
    trial: list[str]
    prior: list[bool]
    category: list[int]
    tokens: list[int | None]
    seconds: list[float | None]
    ts: list[float | None]


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(LoggedTrials).decode


def create_or_migrate(db: sqlite3.Connection, path: Path) -> None:
    """Create the tables, or migrate an older file to ``SCHEMA_VERSION``."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"state file {path} has schema version {version}; this "
            f"scorio-monitor reads up to {SCHEMA_VERSION}"
        )
    old_trials = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'trials'"
    ).fetchone()
    db.execute("BEGIN IMMEDIATE")
    try:
        # One transaction (executescript would commit on its own).
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        if old_trials is not None:
            for statement in _statements(_MIGRATE_FROM_1):
                db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


def logged_row(trials: TrialBatch, changed: NDArray[np.bool_]) -> bytes:
    """A ``trial_batches`` row of the batch's ``changed`` trials."""
    columns: list[list[Any]] = [
        trials.model,
        trials.question,
        trials.trial,
        trials.prior,
        trials.category,
        trials.tokens,
        trials.seconds,
        trials.ts,
    ]
    if not changed.all():
        keep = changed.tolist()
        columns = [list(itertools.compress(column, keep)) for column in columns]
    size = len(columns[0])
    for index in (5, 6, 7):
        if columns[index].count(None) == size:
            columns[index] = []
    return _encode(columns)


def replay_rows(
    batches: dict[str, TrialBatch],
    rows: Iterable[tuple[Any, ...]],
    runs: set[str] | None,
) -> None:
    """Add ``trial_log`` rows (without rowid) to each run's batch, in order."""
    for row in rows:
        run = row[0]
        if runs is not None and run not in runs:
            continue
        trials = batches.get(run)
        if trials is None:
            trials = batches[run] = TrialBatch(run)
        trials.append(
            row[1],
            row[2],
            row[3],
            category=row[5],
            prior=bool(row[4]),
            tokens=row[6],
            seconds=row[7],
            ts=row[8],
        )


def replay_batches(
    batches: dict[str, TrialBatch],
    rows: Iterable[tuple[Any, ...]],
    runs: set[str] | None,
    path: Path | None = None,
) -> None:
    """Add ``trial_batches`` rows (run, trials) to each run's batch, in order.

    Raises:
        StoreError: for a row whose trials cannot be read (named with the
            state file at ``path``, and what to do).
    """
    for run, body in rows:
        if runs is not None and run not in runs:
            continue
        try:
            logged = _decode(body)
        except msgspec.DecodeError as exc:  # includes ValidationError
            where = "the state file" if path is None else f"state file {path}"
            raise StoreError(
                f"{where} is damaged: a logged batch of run {run!r} cannot be "
                f"read ({exc}); restore the file from a backup, or move it "
                "aside to start afresh"
            ) from exc
        size = len(logged.category)
        trials = batches.get(run)
        if trials is None:
            trials = batches[run] = TrialBatch(run)
        trials.model.extend(logged.model)
        trials.question.extend(logged.question)
        trials.trial.extend(logged.trial)
        trials.prior.extend(logged.prior)
        trials.category.extend(logged.category)
        nothing = [None] * size
        trials.tokens.extend(logged.tokens if logged.tokens else nothing)
        trials.seconds.extend(logged.seconds if logged.seconds else nothing)
        trials.ts.extend(logged.ts if logged.ts else nothing)


def totals_row(run: str, totals: RunTotals) -> tuple[object, ...]:
    return (run, totals.trials, totals.duplicates, totals.corrections, totals.rejected)
