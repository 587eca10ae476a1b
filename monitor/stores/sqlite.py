"""The embedded durable store: SQLite in WAL mode, the default behind a path.

Every :meth:`SqliteStore.apply` is one transaction holding the batch's new
and corrected trials, the run totals, dead letters and the source cursor; it
returns only after COMMIT (``synchronous=FULL`` by default: durable across a
power loss, not just a crash). The trials are an append-only log, one row
per run and call holding its new and corrected trials as columns: a restart
replays it and rebuilds the exactly-once index and the counts.

SQLite comes with Python, so this store lives beside the in-memory one in
``monitor`` (``Monitor(state=path)`` needs it) rather than in ``adapters``,
which holds the third-party systems. One process writes a state file at a
time (a lock file enforces it); any number may open it read-only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.errors import StoreError
from monitor.limits import DEAD_LETTERS_MAX, DEAD_LETTERS_MAX_AGE_S
from monitor.schema import RunConfig
from monitor.stores.batches import Batch, Previous, TrialAsBatch, TrialBatch
from monitor.stores.history import HistoryPoint
from monitor.stores.local import LocalCounts
from monitor.stores.lock import WriterLock
from monitor.stores.question_trials import QuestionTrials, from_sqlite
from monitor.stores.records import (
    DeadLetter,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
    StoredState,
)
from monitor.stores.sqlite_history import append_point, read_points
from monitor.stores.sqlite_schema import (
    APPEND_TRIALS,
    TRIAL_COLUMNS,
    create_or_migrate,
    logged_row,
    replay_batches,
    replay_rows,
    totals_row,
)


class SqliteStore(TrialAsBatch):
    """Durable single-writer store in one SQLite file.

    Args:
        path: The state file (created with its directory if missing).
        read_only: Open for reading while another process writes. Such a
            store follows the writer: :meth:`counts_if_changed` reads the
            trials appended since the last read (so a monitor over it
            re-reads them at its looks, as over a shared store).
        run: With ``read_only``, read this run only: what a look at one run
            needs, however many trials of other runs the file holds.
        synchronous: ``FULL`` survives power loss; ``NORMAL`` only crashes.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        run: str | None = None,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        dead_letters_max: int = DEAD_LETTERS_MAX,
        dead_letters_max_age_s: float = DEAD_LETTERS_MAX_AGE_S,
    ) -> None:
        if run is not None and not read_only:
            raise ValueError("a store of one run must be read-only")
        self._path = Path(path)
        self._dead_letters_max = dead_letters_max
        self._dead_letters_max_age_s = dead_letters_max_age_s
        self._read_only = read_only
        self._only_run = run
        self._last_rowid = 0
        self._last_batch_rowid = 0
        self._configured: set[str] = set()
        self._log = "trial_log"
        self._local = LocalCounts()
        self._lock = WriterLock(self._path)
        try:
            if read_only:
                if not self._path.exists():
                    raise StoreError(f"no state file at {self._path}")
                self._db = sqlite3.connect(
                    f"file:{self._path}?mode=ro", uri=True, check_same_thread=False
                )
            else:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._lock.acquire()
                self._db = sqlite3.connect(
                    self._path, isolation_level=None, check_same_thread=False
                )
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                create_or_migrate(self._db, self._path)
            self._db.execute("PRAGMA busy_timeout=5000")
        except StoreError:
            self._lock.release()
            raise
        except sqlite3.Error as exc:
            self._lock.release()
            raise StoreError(f"cannot open state file {self._path}: {exc}") from exc
        except OSError as exc:  # its folder cannot be made, or is read-only
            self._lock.release()
            raise StoreError(
                f"cannot open state file {self._path}: {exc.strerror or exc} "
                f"({exc.filename or self._path.parent}); give a state path in "
                "a folder this user can write"
            ) from exc

    @property
    def is_shared(self) -> bool:
        # A read-only store views a file another process writes.
        return self._read_only

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> StoredState:
        try:
            return self._load()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read state file {self._path}: {exc}") from exc

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        self._local.configure(config.run, len(config.weights))
        if self._read_only:
            return
        self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO runs (run, config, declared) VALUES (?, ?, ?)",
                (config.run, config.model_dump_json(), int(declared)),
            )
        )

    def apply(self, batch: Batch) -> list[Previous]:
        if self._read_only:
            raise StoreError(f"state file {self._path} is open read-only")
        classified: list[tuple[TrialBatch, Previous]] = []
        rows: list[tuple[str, bytes]] = []
        for trials in batch.trials:
            previous = self._local.classify(trials)
            classified.append((trials, previous))
            changed = np.asarray(previous) != trials.categories()
            if changed.any():
                rows.append((trials.run, logged_row(trials, changed)))
        self._local.count_dead_letters(batch.dead_letters)
        runs = {trials.run for trials in batch.trials} | {
            letter.run for letter in batch.dead_letters if letter.run is not None
        }

        def write(db: sqlite3.Connection) -> None:
            if rows:
                db.executemany(APPEND_TRIALS, rows)
            db.executemany(
                "INSERT OR REPLACE INTO totals VALUES (?, ?, ?, ?, ?)",
                [
                    totals_row(run, self._local.totals.get(run, RunTotals()))
                    for run in runs
                ],
            )
            if batch.dead_letters:
                db.executemany(
                    "INSERT INTO dead_letters (run, source, position, reason, raw, "
                    "received_s) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (d.run, d.source, d.position, d.reason, d.raw, d.received_s)
                        for d in batch.dead_letters
                    ],
                )
                # Retention, in the same transaction: by age, then by count.
                newest = max(d.received_s for d in batch.dead_letters)
                db.execute(
                    "DELETE FROM dead_letters WHERE received_s < ?",
                    (newest - self._dead_letters_max_age_s,),
                )
                db.execute(
                    "DELETE FROM dead_letters WHERE id <= "
                    "(SELECT MAX(id) FROM dead_letters) - ?",
                    (self._dead_letters_max,),
                )
            if batch.cursor is not None:
                db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)", batch.cursor)

        try:
            self._write(write)
        except StoreError:
            for trials, previous in reversed(classified):
                self._local.rollback(trials, previous)
            self._local.count_dead_letters(batch.dead_letters, sign=-1)
            raise
        return [previous for _, previous in classified]

    def totals(self, run: str) -> RunTotals:
        return self._local.totals.get(run, RunTotals())

    def counts(self, run: str) -> dict[str, ModelCounts]:
        return self._local.counts(run)

    def counts_if_changed(self, run: str) -> dict[str, ModelCounts] | None:
        """Read-only: the run's counts if trials were appended since the last read.

        Only the rows after the last one read are fetched (by rowid), so the
        cost follows what the writer added, not the size of the file.
        """
        if not self._read_only or self._log != "trial_log":
            return None
        try:
            return self._read_appended(run)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read state file {self._path}: {exc}") from exc

    def _read_appended(self, run: str) -> dict[str, ModelCounts] | None:
        where, arguments = self._run_filter("AND")
        rows = self._db.execute(
            f"SELECT rowid, {TRIAL_COLUMNS} FROM trial_log WHERE rowid > ?{where} "
            "ORDER BY rowid",
            (self._last_rowid, *arguments),
        ).fetchall()
        logged = (
            self._db.execute(
                f"SELECT rowid, run, trials FROM trial_batches WHERE rowid > ?{where} "
                "ORDER BY rowid",
                (self._last_batch_rowid, *arguments),
            ).fetchall()
            if self._has_batches()
            else []
        )
        if not rows and not logged:
            return None
        if rows:
            self._last_rowid = rows[-1][0]
        if logged:
            self._last_batch_rowid = logged[-1][0]
        batches: dict[str, TrialBatch] = {}
        # A run configured after the open is left out: reopen to see it.
        replay_rows(batches, (row[1:] for row in rows), self._configured)
        replay_batches(
            batches, (row[1:] for row in logged), self._configured, self._path
        )
        for trials in batches.values():
            self._local.classify(trials)
        for name, trials_total, duplicates, corrections, rejected in self._db.execute(
            "SELECT run, trials, duplicates, corrections, rejected FROM totals "
            "WHERE run = ?",
            (run,),
        ):
            self._local.totals[name] = RunTotals(
                trials_total, duplicates, corrections, rejected
            )
        return self._local.counts(run) if run in batches else None

    def _run_filter(self, joiner: str) -> tuple[str, tuple[str, ...]]:
        if self._only_run is None:
            return "", ()
        return f" {joiner} run = ?", (self._only_run,)

    def record_events(self, events: Sequence[PendingEvent]) -> list[StoredEvent]:
        if self._read_only or not events:
            return []
        fired: list[StoredEvent] = []

        def write(db: sqlite3.Connection) -> None:
            fired.clear()
            for event in events:
                cursor = db.execute(
                    "INSERT OR IGNORE INTO events (run, kind, subject, payload, ts) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        event.run,
                        event.kind,
                        event.subject,
                        json.dumps(event.payload),
                        event.ts,
                    ),
                )
                if cursor.rowcount == 1 and cursor.lastrowid is not None:
                    fired.append(
                        StoredEvent(
                            seq=cursor.lastrowid,
                            run=event.run,
                            kind=event.kind,
                            subject=event.subject,
                            payload=event.payload,
                            ts=event.ts,
                        )
                    )

        self._write(write)
        return fired

    def events_after(
        self, run: str, seq: int = 0, limit: int = 1000
    ) -> list[StoredEvent]:
        try:
            rows = self._db.execute(
                "SELECT seq, run, kind, subject, payload, ts FROM events "
                "WHERE run = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run, seq, limit),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read events: {exc}") from exc
        return [
            StoredEvent(
                seq=r[0],
                run=r[1],
                kind=r[2],
                subject=r[3],
                payload=json.loads(r[4]),
                ts=r[5],
            )
            for r in rows
        ]

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        try:
            rows = self._db.execute(
                "SELECT source, reason, raw, run, position, received_s "
                "FROM dead_letters ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read dead letters: {exc}") from exc
        return [DeadLetter(*row) for row in reversed(rows)]

    def record_history(self, run: str, point: HistoryPoint) -> None:
        if not self._read_only:
            self._write(lambda db: append_point(db, run, point))

    def history(self, run: str) -> list[HistoryPoint]:
        try:
            return read_points(self._db, run)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the history: {exc}") from exc

    def question_trials(self, run: str, question: str) -> QuestionTrials:
        try:
            return from_sqlite(self._db, run, question)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the trials of {question!r}: {exc}") from exc

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            self._lock.release()

    # -- internals -----------------------------------------------------------

    def _write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                work(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write state file {self._path}: {exc}") from exc

    def _load(self) -> StoredState:
        db = self._db
        state = StoredState()
        self._configured = set()
        where, arguments = self._run_filter("WHERE")
        for run, config_json, declared in db.execute(
            f"SELECT run, config, declared FROM runs{where}", arguments
        ):
            self._configured.add(run)
            config = RunConfig.model_validate_json(config_json)
            state.configs[run] = config
            if declared:
                state.declared.add(run)
            self._local.configure(run, len(config.weights))
        batches: dict[str, TrialBatch] = {}
        found = db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('trial_log', 'trials') ORDER BY name = 'trials'"
        ).fetchone()
        if found is None:
            raise StoreError(f"{self._path} is not a scorio-monitor state file")
        (log,) = found
        # A read-only open of a version 1 file reads its table of trials.
        order = " ORDER BY rowid" if log == "trial_log" else ""
        self._log = log
        rowid_column = "rowid" if log == "trial_log" else "0"  # v1: WITHOUT ROWID
        rows = db.execute(
            f"SELECT {rowid_column}, {TRIAL_COLUMNS} FROM {log}{where}{order}",
            arguments,
        )
        replay_rows(batches, self._after_rowids(rows, "_last_rowid"), None)
        if self._has_batches():
            logged = db.execute(
                f"SELECT rowid, run, trials FROM trial_batches{where} ORDER BY rowid",
                arguments,
            )
            replay_batches(
                batches,
                self._after_rowids(logged, "_last_batch_rowid"),
                None,
                self._path,
            )
        for trials in batches.values():
            self._local.classify(trials)
        for run, trials_total, duplicates, corrections, rejected in db.execute(
            f"SELECT run, trials, duplicates, corrections, rejected FROM totals{where}",
            arguments,
        ):
            self._local.totals[run] = RunTotals(
                trials_total, duplicates, corrections, rejected
            )
        state.counts = {run: self._local.counts(run) for run in self._local.runs()}
        state.totals = dict(self._local.totals)
        state.fired = {
            (run, kind, subject)
            for run, kind, subject in db.execute(
                f"SELECT run, kind, subject FROM events{where}", arguments
            )
        }
        state.cursors = dict(
            db.execute("SELECT name, position FROM cursors").fetchall()
        )
        return state

    def _after_rowids(
        self,
        rows: Iterable[tuple[Any, ...]],
        last: Literal["_last_rowid", "_last_batch_rowid"],
    ) -> Iterable[tuple[Any, ...]]:
        """Rows without their leading rowid, keeping the highest in ``last``."""
        for rowid, *row in rows:
            if rowid > getattr(self, last):
                setattr(self, last, rowid)
            yield tuple(row)

    def _has_batches(self) -> bool:
        """Whether the file has version 3's log (a read-only open may not)."""
        found = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' "
            "AND name = 'trial_batches'"
        ).fetchone()
        return found is not None
