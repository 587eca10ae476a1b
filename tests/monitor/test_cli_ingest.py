"""`scorio-monitor ingest` as a user runs it on harness output."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scorio.eval as oracle

from monitor import Monitor, MonitorError
from monitor.cli import main
from monitor.stores.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "tests" / "fixtures" / "lm_eval" / "output"
COMMAND = [sys.executable, "-m", "monitor.cli"]
# The lm-eval fixture model's answers per document, one character per repeat.
PATTERNS = ["1111", "0000", "1010", "0111", "1000", "0011"]


def ingest_json(
    capsys: pytest.CaptureFixture[str], *arguments: str
) -> list[dict[str, object]]:
    assert main(["ingest", *arguments, "--json"]) == 0
    output: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return output


def by_run(statuses: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(status["run"]): status for status in statuses}


def only_model(status: dict[str, object]) -> dict[str, object]:
    models = status["models"]
    assert isinstance(models, list) and len(models) == 1
    model: dict[str, object] = models[0]
    return model


def test_an_lm_eval_output_directory_becomes_one_run_per_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.db"
    statuses = by_run(
        ingest_json(capsys, str(OUTPUT), "--format", "lm-eval", "--state", str(state))
    )
    assert {run: s["trials"] for run, s in statuses.items()} == {
        "scorio_arith_gen": 6,
        "scorio_arith_r4": 6,
        "scorio_mc": 4,
    }
    assert only_model(statuses["scorio_mc"])["model"] == "scorio/fixture-lm"
    first = np.array([[int(pattern[0])] for pattern in PATTERNS])
    row = only_model(statuses["scorio_arith_r4"])
    assert (row["mu"], row["sigma"]) == pytest.approx(oracle.bayes(first), abs=1e-12)


def test_repeats_ingest_every_generation_and_agree_with_scorio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.db"
    arguments = [str(OUTPUT), "--format", "lm-eval", "--state", str(state)]
    statuses = by_run(ingest_json(capsys, *arguments, "--repeats"))
    assert statuses["scorio_arith_r4"]["trials"] == 24
    matrix = np.array([[int(mark) for mark in pattern] for pattern in PATTERNS])
    row = only_model(statuses["scorio_arith_r4"])
    assert (row["mu"], row["sigma"]) == pytest.approx(oracle.bayes(matrix), abs=1e-12)
    again = by_run(ingest_json(capsys, *arguments, "--repeats"))
    assert again["scorio_arith_r4"]["duplicates"] == 24


def test_rows_with_columns_and_values_report_bad_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inspect.csv"
    path.write_text("sample_id,epoch,score,who\n1,1,C,a\n1,2,I,a\n2,1,P,a\n1,1,C,b\n")
    code = main(
        [
            "ingest",
            str(path),
            "--format",
            "csv",
            "--columns",
            "sample_id=question,epoch=trial,score=category,who=model",
            "--values",
            "C=1,I=0",
            "--run",
            "bench",
            "--json",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    (status,) = json.loads(captured.out)
    assert (status["run"], status["trials"], status["rejected"]) == ("bench", 3, 1)
    assert f"{path}:4: rejected: category 'P' is not in the value map" in captured.err
    assert (tmp_path / "inspect.csv.monitor.db").exists()


def test_npz_is_ingested_in_bulk_under_the_given_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = np.random.default_rng(3).random((3, 20, 10)) < [[[0.3]], [[0.5]], [[0.8]]]
    path = tmp_path / "bench.npz"
    np.savez(path, task=results.astype(np.int8), models=np.array(["a", "b", "c"]))
    (status,) = ingest_json(capsys, str(path), "--format", "npz", "--run", "aime")
    assert (status["run"], status["trials"]) == ("aime", results.size)
    models = status["models"]
    assert isinstance(models, list)
    for row in models:
        index = "abc".index(row["model"])
        assert (row["mu"], row["sigma"]) == pytest.approx(
            oracle.bayes(results[index].astype(int)), abs=1e-12
        )


def test_options_of_another_format_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench.npz"
    np.savez(path, task=np.zeros((1, 2, 2), dtype=np.int8))
    assert main(["ingest", str(path), "--format", "npz", "--repeats"]) == 2
    assert "--repeats applies to --format lm-eval" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path / "missing"), "--format", "csv"]) == 2


def test_nothing_valid_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"model": "a"}\n')
    assert main(["ingest", str(path), "--format", "jsonl", "--json"]) == 1
    err = capsys.readouterr().err
    assert f"{path}:1: rejected: missing field(s): question, trial" in err
    assert "no valid trials read" in err


def poll_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def runs_in(state: Path) -> dict[str, int]:
    """Trials per run in a state file another process may be writing."""
    if not state.exists():
        return {}
    try:
        with Monitor(SqliteStore(state, read_only=True)) as monitor:
            return {run: monitor.status(run).trials for run in monitor.runs}
    except (MonitorError, sqlite3.Error):
        return {}


@pytest.mark.slow
def test_follow_ingests_samples_files_as_the_harness_writes_them(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "output" / "scorio__fixture-lm"
    folder.mkdir(parents=True)
    source = OUTPUT / "scorio__fixture-lm"
    (results,) = source.glob("results_*.json")
    (mc,) = source.glob("samples_scorio_mc_*.jsonl")
    (arith,) = source.glob("samples_scorio_arith_r4_*.jsonl")
    shutil.copy(results, folder)
    shutil.copy(mc, folder)
    state = tmp_path / "state.db"
    command = [
        *COMMAND,
        "ingest",
        str(tmp_path / "output"),
        "--format",
        "lm-eval",
        "--repeats",
        "--follow",
        "--json",
        "--state",
        str(state),
    ]
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        poll_until(lambda: runs_in(state) == {"scorio_mc": 4})
        shutil.copy(arith, folder)
        poll_until(lambda: runs_in(state).get("scorio_arith_r4") == 24)
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0
    statuses = by_run(json.loads(output))
    assert {run: s["trials"] for run, s in statuses.items()} == {
        "scorio_arith_r4": 24,
        "scorio_mc": 4,
    }


def test_an_npz_run_is_declared_with_its_m_and_says_no_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "paper11.npz"
    path.write_bytes((ROOT / "examples" / "paper11.npz").read_bytes())
    statuses = ingest_json(capsys, str(path), "--format", "npz")
    with np.load(path) as archive:
        shapes = {key: archive[key].shape for key in archive.files}
    for status in statuses:
        assert status["open"] is False
        assert status["question_count"] == shapes[str(status["run"])][-2]
        assert status["max_trials_per_question"] is None
    assert main(["ingest", str(path), "--format", "npz"]) == 0
    table = capsys.readouterr().out
    assert "no budget" in table and "(open)" not in table


def test_another_format_is_one_line_and_leaves_no_state_file(tmp_path: Path) -> None:
    stream = tmp_path / "aime25.jsonl"
    shutil.copy(ROOT / "examples" / "aime25.jsonl", stream)
    for kind, reason in (
        ("csv", "line 2: missing field(s): model, question, trial"),
        ("lm-eval", "line 1: doc_id must be an integer"),
    ):
        result = subprocess.run(
            [*COMMAND, "ingest", str(stream), "--format", kind],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(
            f"scorio-monitor: error: {stream}: the first 10 rows were refused as "
            f"--format {kind} ({reason}"
        ), line
        assert line.endswith("nothing written; it reads as JSON lines: --format jsonl")
        assert sorted(path.name for path in tmp_path.iterdir()) == ["aime25.jsonl"]


def test_rows_all_refused_by_the_run_leave_no_new_state_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [
        {"run": "r", "model": "a", "question": q, "trial": 0, "category": 1}
        for q in range(3)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = tmp_path / "run.toml"
    config.write_text('run = "r"\nquestions = ["x"]\n')
    code = main(["ingest", str(path), "--format", "jsonl", "--config", str(config)])
    assert code == 1
    err = capsys.readouterr().err
    state = tmp_path / "rows.jsonl.monitor.db"
    assert f"no valid trials read ({state} not kept)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl", "run.toml"]
    # An existing state file is kept: its dead letters join what it holds.
    assert main(["ingest", str(path), "--format", "jsonl", "--state", str(state)]) == 0
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({**rows[0], "trial": 1, "category": 7}) + "\n")
    assert main(["ingest", str(wrong), "--format", "jsonl", "--state", str(state)]) == 1
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert (monitor.status("r").trials, monitor.status("r").rejected) == (3, 1)
