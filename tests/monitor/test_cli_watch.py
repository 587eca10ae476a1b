"""`scorio-monitor watch`, `status` and `next` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import scorio.eval as oracle

from monitor import Monitor, MonitorError, Status
from monitor.cli import main
from monitor.stores.sqlite import SqliteStore
from tests.monitor.streams import messy, stream_of
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "monitor.cli"]


def write_lines(path: Path, lines: list[str]) -> None:
    with path.open("a") as handle:
        handle.write("".join(line + "\n" for line in lines))


def stream_lines(
    seed: int, models: int = 6, questions: int = 12, trials: int = 8
) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    results = (
        rng.random((models, questions, trials)) < rng.random((models, 1, 1))
    ).astype(np.int64)
    events = messy(stream_of(results, run="bench"), rng)
    lines = [json.dumps(event) for event in events]
    lines.insert(len(lines) // 3, "{not json")
    lines.insert(
        len(lines) // 2,
        json.dumps(
            {"run": "bench", "model": "m0", "question": 1, "trial": 99, "category": 5}
        ),
    )
    return lines, results


def test_watch_prints_the_status_json_and_matches_scorio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, results = stream_lines(1)
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)
    config = tmp_path / "run.toml"
    config.write_text('run = "bench"\nweights = [0.0, 1.0]\nquestion_count = 12\n')
    assert main(["watch", str(path), "--config", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    (status,) = json.loads(captured.out)
    # Both the broken line and the out-of-range category count against the run.
    assert status["trials"] == results.size and status["rejected"] == 2
    for row in status["models"]:
        mu, sigma = oracle.bayes(results[int(row["model"][1:])])
        assert (row["mu"], row["sigma"]) == pytest.approx((mu, sigma), abs=1e-12)
    bad_json_line = lines.index("{not json") + 1
    assert f"{path}:{bad_json_line}: rejected: invalid JSON" in captured.err
    assert "category 5 is outside 0..1" in captured.err
    assert (tmp_path / "run.jsonl.monitor.db").exists()


def test_a_second_watch_of_the_same_file_counts_nothing_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, _ = stream_lines(2)
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)
    assert main(["watch", str(path), "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["watch", str(path), "--json"]) == 0
    assert capsys.readouterr().out == first


def test_oversized_lines_and_batches_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    batch = [
        {"run": "r", "model": "a", "question": q, "trial": 0, "correct": True}
        for q in range(3)
    ]
    write_lines(
        path,
        [
            json.dumps(batch),
            '{"run": "r", "pad": "' + "x" * (2 << 20) + '"}',
            json.dumps(batch[0]),
        ],
    )
    assert main(["watch", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    (status,) = json.loads(captured.out)
    assert (status["trials"], status["duplicates"]) == (3, 1)
    assert f"{path}:2: rejected: payload of 2097" in captured.err


def test_a_file_with_nothing_valid_exits_with_one(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_lines(path, ["{", "[1, 2]"])
    assert main(["watch", str(path), "--state", str(tmp_path / "s.db")]) == 1


def test_status_and_next_read_a_state_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, _ = stream_lines(3, trials=2)
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)
    state = tmp_path / "state.db"
    main(["watch", str(path), "--state", str(state), "--json"])
    (watched,) = json.loads(capsys.readouterr().out)
    assert main(["status", "--state", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [watched]
    assert (
        main(
            [
                "next",
                "--state",
                str(state),
                "--run",
                "bench",
                "--budget",
                "10",
                "--json",
            ]
        )
        == 0
    )
    items = json.loads(capsys.readouterr().out)
    assert sum(item["trials"] for item in items) == 10
    needing = {row["model"] for row in watched["models"] if row["needs_trials"]}
    assert {item["model"] for item in items} <= needing


def test_several_runs_print_a_json_array(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.jsonl"
    write_lines(
        path,
        [
            json.dumps(
                {"run": run, "model": "a", "question": 1, "trial": 0, "correct": True}
            )
            for run in ("x", "y")
        ],
    )
    main(["watch", str(path), "--json"])
    statuses = json.loads(capsys.readouterr().out)
    assert [status["run"] for status in statuses] == ["x", "y"]


def poll_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def read_status(state: Path) -> Status | None:
    """The run's status from a state file another process may be writing."""
    if not state.exists():
        return None
    try:
        with Monitor(SqliteStore(state, read_only=True)) as monitor:
            return monitor.status("bench") if "bench" in monitor.runs else None
    except (MonitorError, sqlite3.Error):
        return None


def counted(status: Status | None) -> int:
    """Every valid input the status accounts for."""
    return (
        0 if status is None else status.trials + status.duplicates + status.corrections
    )


@pytest.mark.slow
def test_kill_9_mid_stream_then_restart_ends_like_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    lines, _ = stream_lines(4, models=8, questions=15, trials=10)
    full = tmp_path / "full.jsonl"
    write_lines(full, lines)
    reference_state = tmp_path / "reference.db"
    subprocess.run(
        [*COMMAND, "watch", str(full), "--state", str(reference_state), "--json"],
        check=True,
        capture_output=True,
    )
    reference = read_status(reference_state)
    assert reference is not None

    growing = tmp_path / "growing.jsonl"
    growing.touch()
    state = tmp_path / "crash.db"
    follow = [*COMMAND, "watch", str(growing), "--follow", "--state", str(state)]
    worker = subprocess.Popen(
        follow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        cut = int(len(lines) * 0.6)
        for start in range(0, cut, 97):
            write_lines(growing, lines[start : min(start + 97, cut)])
        poll_until(lambda: counted(read_status(state)) > 0)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        assert 0 < counted(read_status(state)) < counted(reference)
        write_lines(growing, lines[cut:])
        worker = subprocess.Popen(
            follow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        poll_until(lambda: counted(read_status(state)) >= counted(reference))
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    # Counts and posteriors are exact; settled decisions record when they
    # were made (look, trials), which depends on how the stream was chunked.
    assert untimed(read_status(state)) == untimed(reference)


def untimed(status: Status | None) -> dict[str, object]:
    assert status is not None
    data = status.model_dump()
    for decision in data["decisions"]:
        decision.pop("look"), decision.pop("trials"), decision.pop("z")
    for pair in data["pairs"]:
        pair.pop("decision")
    return data


@pytest.mark.slow
def test_the_readme_main_job_runs(tmp_path: Path) -> None:
    example = tmp_path / "aime25.jsonl"
    example.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    result = subprocess.run(
        [
            *COMMAND,
            "watch",
            str(example),
            "--config",
            str(ROOT / "examples" / "aime25.toml"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "llm11" in result.stdout and "unresolved pairs" in result.stdout


@pytest.mark.slow
def test_watch_with_http_serves_the_api_and_dashboard(tmp_path: Path) -> None:
    lines, results = stream_lines(5)
    path = tmp_path / "run.jsonl"
    write_lines(path, lines)
    port = free_port()
    process = subprocess.Popen(
        [
            *COMMAND,
            "watch",
            str(path),
            "--http",
            str(port),
            "--state",
            str(tmp_path / "s.db"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def counted() -> bool:
            try:
                response = httpx.get(f"{base}/runs/bench/status", timeout=1.0)
            except httpx.HTTPError:
                return False
            return (
                response.status_code == 200
                and response.json()["trials"] == results.size
            )

        poll_until(counted)
        assert "scorio-monitor" in httpx.get(f"{base}/").text
        assert "scorio_model_score" in httpx.get(f"{base}/metrics").text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert process.stderr is not None
    with process.stderr:
        log = process.stderr.read().decode()
    assert f"dashboard at http://127.0.0.1:{port}/" in log
