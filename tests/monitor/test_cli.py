"""The command line as a new user meets it: version, entry points, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from monitor.config import load_service_config

ROOT = Path(__file__).resolve().parents[2]


def run(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_version_prints_the_installed_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == (
        f"scorio-monitor {metadata.version('scorio-monitor')}"
    )


def test_python_dash_m_monitor_is_the_command_line() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "usage: scorio-monitor" in result.stdout
    for command in ("watch", "status", "next", "score", "ingest", "serve"):
        assert command in result.stdout


def write_npz(path: Path) -> None:
    np.savez(path, bench=np.ones((2, 3, 4), dtype=np.int64))


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "allow_pickle" not in lines[0] and "codec" not in lines[0]
    return lines[0]


@pytest.mark.slow
def test_ingest_format_decides_how_a_file_is_read_not_its_extension(
    tmp_path: Path,
) -> None:
    rows = tmp_path / "results.txt"
    rows.write_text("model,question,trial,correct\na,1,0,true\na,1,1,false\n")
    result = run(
        "ingest", str(rows), "--format", "csv", "--run", "r", "--json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert [s["trials"] for s in json.loads(result.stdout)] == [2]
    jsonl = tmp_path / "rows.csv"
    jsonl.write_text('{"model": "a", "question": 1, "trial": 0, "category": 1}\n')
    result = run(
        "ingest", str(jsonl), "--format", "jsonl", "--run", "r", "--json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert [s["trials"] for s in json.loads(result.stdout)] == [1]


@pytest.mark.slow
def test_inputs_a_command_cannot_read_get_one_clear_line(tmp_path: Path) -> None:
    archive = tmp_path / "paper.npz"
    write_npz(archive)
    rows = tmp_path / "x.csv"
    rows.write_text("model,question,trial,correct\na,1,0,true\n")
    directory = tmp_path / "logs"
    directory.mkdir()
    assert "is a directory" in one_line_error(run("watch", str(directory)))
    assert "is an .npz archive" in one_line_error(run("watch", str(archive)))
    assert "is not an .npz archive" in one_line_error(
        run("ingest", str(rows), "--format", "npz")
    )
    assert "is an .npz archive" in one_line_error(
        run("ingest", str(archive), "--format", "jsonl")
    )
    assert "is a directory" in one_line_error(
        run("ingest", str(directory), "--format", "csv")
    )
    assert "is a directory" in one_line_error(run("score", str(directory)))
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    assert "not a readable .npz archive" in one_line_error(run("score", str(broken)))
    assert not list(tmp_path.glob("*.db*"))


@pytest.mark.slow
def test_status_finds_the_state_file_the_quick_start_wrote(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    stream = examples / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    config = str(ROOT / "examples" / "aime25.toml")
    assert run("watch", str(stream), "--config", config, cwd=tmp_path).returncode == 0
    assert sorted(path.name for path in examples.iterdir()) == [
        "aime25.jsonl",
        "aime25.jsonl.monitor.db",
    ]  # no lock file, no -wal or -shm left behind
    result = run("status", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [s["run"] for s in json.loads(result.stdout)] == ["aime25"]
    assert "reading examples/aime25.jsonl.monitor.db" in result.stderr
    result = run("next", "--run", "aime25", "--budget", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_status_without_a_state_file_says_where_watch_writes_one(
    tmp_path: Path,
) -> None:
    line = one_line_error(run("status", cwd=tmp_path))
    assert "give --state" in line and "<input>.monitor.db" in line


@pytest.mark.slow
def test_a_bad_config_fails_before_any_state_file_exists(tmp_path: Path) -> None:
    stream = tmp_path / "x.jsonl"
    stream.write_text('{"run": "r", "model": "a", "question": 1, "trial": 0}\n')
    config = tmp_path / "bad.toml"
    config.write_text('run = "r"\nconfidence = 7\n')
    for command in (
        ["watch", str(stream), "--config", str(config)],
        ["ingest", str(stream), "--format", "jsonl", "--config", str(config)],
    ):
        assert "confidence" in one_line_error(run(*command, cwd=tmp_path))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.toml", "x.jsonl"]


@pytest.mark.slow
def test_json_is_an_array_of_one_status_per_run_for_every_command(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "one.jsonl"
    stream.write_text(
        '{"run": "r", "model": "a", "question": 1, "trial": 0, "correct": true}\n'
    )
    state = str(tmp_path / "one.db")
    outputs = [
        run("watch", str(stream), "--state", state, "--json", cwd=tmp_path),
        run("status", "--state", state, "--json", cwd=tmp_path),
        run("status", "--state", state, "--run", "r", "--json", cwd=tmp_path),
        run("score", str(stream), "--json", cwd=tmp_path),
    ]
    for result in outputs:
        assert result.returncode == 0, result.stderr
        (document,) = json.loads(result.stdout)
        assert document["run"] == "r"


def test_simulate_refuses_bad_numbers_in_words() -> None:
    for option, value in (("--cap", "0"), ("--kappa", "-1"), ("--kappa", "nan")):
        result = run("simulate", option, value)
        assert result.returncode == 2
        assert f"argument {option}: must be" in result.stderr
        assert "pydantic" not in result.stderr and "a <= 0" not in result.stderr


@pytest.mark.slow
def test_a_run_file_given_to_serve_says_run_settings_go_under_runs() -> None:
    line = one_line_error(run("serve", "--config", "examples/aime25.toml"))
    assert "are run settings" in line and "[[runs]]" in line
    assert "examples/service.toml" in line


def test_the_example_service_config_is_valid() -> None:
    config = load_service_config(ROOT / "examples" / "service.toml", {})
    assert config.store.kind == "sqlite" and config.http.port == 8000
    assert [run.run for run in config.runs] == ["aime25"]


def test_a_pydantic_error_reaches_the_user_as_one_line(tmp_path: Path) -> None:
    stream = tmp_path / "x.jsonl"
    stream.write_text("\n")
    config = tmp_path / "bad.toml"
    config.write_text('run = "r"\nmax_trials_per_question = 0\n')
    line = one_line_error(run("watch", str(stream), "--config", str(config)))
    assert "max_trials_per_question" in line and "errors.pydantic.dev" not in line


def test_every_commands_help_prints_percent_signs_once() -> None:
    usage = run("--help").stdout
    names = usage[usage.index("{") + 1 : usage.index("}")].split(",")
    assert "plan" in names and "watch" in names
    for name in names:
        result = run(name, "--help")
        assert result.returncode == 0, (name, result.stderr)
        assert "%%" not in result.stdout, (name, result.stdout)
    assert "(10-90 % range)" in " ".join(run("plan", "--help").stdout.split())


@pytest.mark.slow
def test_a_directory_given_as_the_state_file_is_named_as_one(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    stream = tmp_path / "trials.jsonl"
    stream.write_text(
        '{"run": "r", "model": "a", "question": 1, "trial": 0, "category": 1}\n'
    )
    for command in (
        ["status", "--state", str(logs)],
        ["next", "--state", str(logs), "--run", "r", "--budget", "1"],
        [
            "gate",
            "--state",
            str(logs),
            "--run",
            "r",
            "--candidate",
            "a",
            "--baseline",
            "b",
        ],
        ["watch", str(stream), "--state", str(logs)],
        ["ingest", str(stream), "--format", "jsonl", "--state", str(logs)],
        ["plan", "--pilot", str(logs), "--run", "r"],
    ):
        error = one_line_error(run(*command, cwd=tmp_path))
        assert f"{logs} is a directory, not a state file" in error, command
    assert list(logs.iterdir()) == []
    assert (
        run("watch", str(stream), "--state", str(logs / "r.monitor.db")).returncode == 0
    )
    error = one_line_error(run("status", "--state", str(logs), cwd=tmp_path))
    assert error.endswith(f"the state files in it: {logs / 'r.monitor.db'}")


@pytest.mark.slow
def test_a_run_the_state_file_lacks_is_named_with_the_file_and_its_runs(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "trials.jsonl"
    stream.write_text(
        '{"run": "r", "model": "a", "question": 1, "trial": 0, "category": 1}\n'
        '{"run": "s", "model": "a", "question": 1, "trial": 0, "category": 1}\n'
    )
    assert run("watch", str(stream), cwd=tmp_path).returncode == 0
    state = Path("trials.jsonl.monitor.db")  # found, not given
    for command in (
        ["next", "--run", "x", "--budget", "3"],
        ["status", "--run", "x"],
        ["gate", "--run", "x", "--candidate", "a", "--baseline", "b"],
        ["plan", "--pilot", str(state), "--run", "x"],
    ):
        result = run(*command, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            f"scorio-monitor: error: {state} holds no run 'x'; its runs: r, s"
        ), command
