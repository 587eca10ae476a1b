"""The SQLite store's history table (see :mod:`monitor.stores.history`).

A file written before the table existed gains it on a writer's open; read
only, such a file has no history yet and reads as none.
"""

from __future__ import annotations

import sqlite3

from monitor.stores.history import (
    HISTORY_MAX,
    HistoryPoint,
    decode_point,
    encode_point,
    to_thin,
)


def append_point(db: sqlite3.Connection, run: str, point: HistoryPoint) -> None:
    """Append ``point`` unless the run's last has as many trials; thin past the bound.

    Runs inside the caller's write transaction.
    """
    last = db.execute(
        "SELECT trials FROM history WHERE run = ? ORDER BY id DESC LIMIT 1", (run,)
    ).fetchone()
    if last is not None and last[0] >= point.trials:
        return
    db.execute(
        "INSERT INTO history (run, trials, point) VALUES (?, ?, ?)",
        (run, point.trials, encode_point(point)),
    )
    (count,) = db.execute(
        "SELECT COUNT(*) FROM history WHERE run = ?", (run,)
    ).fetchone()
    if count <= HISTORY_MAX:
        return
    ids = [
        row[0]
        for row in db.execute(
            "SELECT id FROM history WHERE run = ? ORDER BY id", (run,)
        )
    ]
    db.executemany(
        "DELETE FROM history WHERE id = ?", [(ids[i],) for i in to_thin(len(ids))]
    )


def read_points(db: sqlite3.Connection, run: str) -> list[HistoryPoint]:
    """The run's points, oldest first (none in a file without the table)."""
    try:
        rows = db.execute(
            "SELECT point FROM history WHERE run = ? ORDER BY id", (run,)
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [decode_point(row[0]) for row in rows]
