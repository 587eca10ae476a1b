"""`scorio-monitor score`: batch Bayes@N over results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scorio.eval as oracle

from monitor.cli import main

ROOT = Path(__file__).resolve().parents[2]


def score_json(
    capsys: pytest.CaptureFixture[str], *arguments: str
) -> list[dict[str, object]]:
    assert main(["score", *arguments, "--json"]) == 0
    boards: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return boards


def test_npz_scores_equal_scorio_bayes_per_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(11)
    results = rng.random((4, 12, 20)) < np.array([0.2, 0.5, 0.55, 0.9])[:, None, None]
    path = tmp_path / "bench.npz"
    np.savez(path, task=results.astype(np.int8), models=np.array(["w", "x", "y", "z"]))
    (board,) = score_json(capsys, str(path))
    rows = board["models"]
    assert isinstance(rows, list)
    by_model = {row["model"]: row for row in rows}
    for index, name in enumerate("wxyz"):
        mu, sigma, lo, hi = oracle.bayes_ci(
            results[index].astype(int), bounds=(0.0, 1.0)
        )
        row = by_model[name]
        assert (row["mu"], row["sigma"], row["lo"], row["hi"]) == pytest.approx(
            (mu, sigma, lo, hi), abs=1e-12
        )
        assert row["trials"] == 240
    assert [row["model"] for row in rows] == ["z", "y", "x", "w"]
    assert [row["rank"] for row in rows] == [1, 2, 3, 4]


def test_the_example_file_groups_the_tied_paper_models_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (board,) = score_json(capsys, str(ROOT / "examples" / "paper11.npz"))
    rows = board["models"]
    assert isinstance(rows, list)
    groups = {row["model"]: row["group"] for row in rows}
    assert groups["llm04"] == groups["llm05"]
    assert len(rows) == 11 and board["question_count"] == 30


def test_categorical_npz_uses_the_given_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = np.array([[[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]]])
    path = tmp_path / "rubric.npz"
    np.savez(path, run=results)
    (board,) = score_json(capsys, str(path), "--weights", "0,0.5,1")
    rows = board["models"]
    assert isinstance(rows, list)
    assert (rows[0]["mu"], rows[0]["sigma"]) == pytest.approx(
        oracle.bayes(results[0], np.array([0.0, 0.5, 1.0])), abs=1e-12
    )


def test_csv_rows_count_each_trial_once_and_match_scorio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = np.array([[0, 1, 1], [1, 1, 0]])
    lines = ["model,question,trial,correct"]
    for question, row in enumerate(results):
        for trial, value in enumerate(row):
            lines.append(f"m,q{question},{trial},{bool(value)}")
    lines.append("m,q0,0,False")  # a duplicate delivery
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    (board,) = score_json(capsys, str(path))
    rows = board["models"]
    assert isinstance(rows, list)
    assert (rows[0]["mu"], rows[0]["sigma"]) == pytest.approx(
        oracle.bayes(results), abs=1e-12
    )
    assert rows[0]["trials"] == 6


def test_jsonl_rows_report_bad_lines_with_their_number_and_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "aime.jsonl"
    path.write_text(
        '{"model": "a", "question": 1, "trial": 0, "category": 1}\n'
        "{not json\n"
        '[{"model": "a", "question": 2, "trial": 0, "correct": false}]\n'
        '{"model": "a", "question": 3, "category": 1}\n'
    )
    assert main(["score", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"{path}:2: skipped: invalid JSON" in captured.err
    assert f"{path}:4: skipped: missing field(s): trial" in captured.err
    (board,) = json.loads(captured.out)
    assert board["run"] == "aime" and board["open"] is True
    assert board["question_count"] == 2


def test_a_file_without_valid_rows_exits_nonzero(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("garbage\n")
    assert main(["score", str(path)]) == 1


@pytest.mark.slow
def test_the_console_script_prints_a_leaderboard() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "score",
            str(ROOT / "examples" / "paper11.npz"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "llm11" in result.stdout and "group" in result.stdout
