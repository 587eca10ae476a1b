"""``status`` and ``score`` print Markdown and CSV tables equal to their JSON."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRIALS = [
    {"run": "r", "model": model, "question": f"q{q}", "trial": t, "category": c}
    for model, rate in (("org/strong|v2", 0.8), ("weak", 0.3))
    for q in range(6)
    for t in range(5)
    for c in [int((q * 5 + t) % 10 < rate * 10)]
]


def cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    stream = tmp_path / "trials.jsonl"
    stream.write_text("".join(json.dumps(trial) + "\n" for trial in TRIALS))
    watched = cli("watch", str(stream), "--state", "s.db", cwd=tmp_path)
    assert watched.returncode == 0, watched.stderr
    return tmp_path / "s.db"


def status_json(state: Path) -> dict[str, object]:
    result = cli("status", "--state", str(state), "--json", cwd=state.parent)
    assert result.returncode == 0, result.stderr
    (status,) = json.loads(result.stdout)
    assert isinstance(status, dict)
    return status


@pytest.mark.slow
def test_status_csv_equals_the_json(state: Path) -> None:
    models = status_json(state)["models"]
    assert isinstance(models, list)
    result = cli("status", "--state", str(state), "--format", "csv", cwd=state.parent)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["model"] for row in rows] == [m["model"] for m in models]
    for row, model in zip(rows, models, strict=True):
        assert row["run"] == "r"
        assert float(row["mu"]) == model["mu"]
        assert float(row["avg"]) == model["avg"]
        assert (float(row["lo"]), float(row["hi"])) == (model["lo"], model["hi"])
        assert int(row["trials"]) == model["trials"] == 30
        assert row["needs_trials"] == str(model["needs_trials"])


@pytest.mark.slow
def test_status_markdown_is_one_table_per_run(state: Path) -> None:
    models = status_json(state)["models"]
    assert isinstance(models, list)
    result = cli(
        "status", "--state", str(state), "--format", "markdown", cwd=state.parent
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "### r"
    assert lines[2].startswith("60 trials, M=6, ")
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| rank | group | model | avg | mu ± sigma |")
    assert len(table) == 2 + len(models)
    first = [cell.strip() for cell in table[2].strip("|").split(" | ")]
    # The model's own pipe is escaped, so the row keeps its eight cells.
    assert first[2] == "org/strong\\|v2"
    assert first[3] == f"{models[0]['avg']:.4f}"
    assert first[4] == f"{models[0]['mu']:.4f} ± {models[0]['sigma']:.4f}"
    assert first[6] == "30"


@pytest.mark.slow
def test_score_markdown_and_csv(state: Path) -> None:
    stream = state.parent / "trials.jsonl"
    as_json = cli("score", str(stream), "--json", cwd=state.parent)
    (board,) = json.loads(as_json.stdout)
    as_csv = cli("score", str(stream), "--format", "csv", cwd=state.parent)
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [float(row["mu"]) for row in rows] == [m["mu"] for m in board["models"]]
    assert "needs_trials" not in rows[0]
    as_markdown = cli("score", str(stream), "--format", "markdown", cwd=state.parent)
    assert as_markdown.stdout.startswith("### r\n")
    assert as_markdown.stdout.count("\n| ") == 1 + len(board["models"])


def test_json_and_another_format_is_one_clear_error(state: Path) -> None:
    result = cli(
        "status", "--state", str(state), "--json", "--format", "csv", cwd=state.parent
    )
    assert result.returncode != 0
    assert "--json and --format csv ask for two outputs" in result.stderr
    assert "Traceback" not in result.stderr
