"""A read-only store of one run follows the writer, reading only what is new."""

from __future__ import annotations

from pathlib import Path

from monitor import Monitor, RunConfig
from monitor.stores.sqlite import SqliteStore


def events(run: str, model: str, trials: range) -> list[dict[str, object]]:
    return [
        {
            "run": run,
            "model": model,
            "question": t % 3,
            "trial": t,
            "correct": t % 2 == 1,
        }
        for t in trials
    ]


def test_a_reader_of_one_run_sees_the_trials_the_writer_appends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    writer = Monitor(path)
    writer.configure(RunConfig(run="big"))
    writer.configure(RunConfig(run="small", models=["a", "b"]))
    writer.ingest(events("big", "x", range(500)))
    writer.ingest(events("small", "a", range(6)))

    reader = Monitor(SqliteStore(path, read_only=True, run="small"), shared_refresh_s=0)
    assert reader.runs == ["small"]
    assert reader.status("small").trials == 6

    writer.ingest(events("small", "b", range(4)) + events("big", "x", range(500, 900)))
    writer.ingest(events("small", "a", range(6)))  # re-delivered: duplicates
    status = reader.status("small")
    assert status.trials == 10 and status.duplicates == 6
    assert {row.model: row.trials for row in status.models} == {"a": 6, "b": 4}
    # Its plans see the new counts too.
    planned = reader.next("small", 3, lease_s=0, model="b")
    assert {item.model for item in planned} == {"b"}
    reader.close()
    writer.close()
    with Monitor(SqliteStore(path, read_only=True)) as whole:
        assert whole.runs == ["big", "small"]
        assert whole.status("big").trials == 900
