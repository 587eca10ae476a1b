"""Real lm-eval runs: each run's generations are new trials, re-reading adds none.

lm-eval (a test dependency) runs its own CLI on the fixture tasks with its
registered ``dummy`` model, which needs no download (it answers every
generation with the same text, so every generation is scored wrong).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main

# Every test here takes seconds (the inner loop is -m "not slow").
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "lm_eval"


def run_lm_eval(
    output: Path,
    seed: int,
    *,
    tasks: str = "scorio_arith_r4",
    model_args: tuple[str, ...] = ("--model_args", "pretrained=scorio/dummy-lm"),
    extra: tuple[str, ...] = (),
) -> None:
    """One lm-eval run into ``output`` (by default the repeats task: 4 x 6 docs)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # The task files name their data relative to the working directory.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval",
            "run",
            "--model",
            "dummy",
            *model_args,
            "--tasks",
            tasks,
            "--include_path",
            "tasks",
            "--output_path",
            str(output),
            "--log_samples",
            "--seed",
            str(seed),
            *extra,
        ],
        cwd=FIXTURES,
        env=environment,
        check=True,
        capture_output=True,
        timeout=300,
    )


def ingest(
    capsys: pytest.CaptureFixture[str], output: Path, state: Path, *more: str
) -> dict[str, object]:
    arguments = [str(output), "--format", "lm-eval", "--state", str(state), *more]
    assert main(["ingest", *arguments, "--repeats", "--json"]) == 0
    # --json prints an array, one status per run
    (status,) = json.loads(capsys.readouterr().out)
    assert isinstance(status, dict)
    return status


def test_two_lm_eval_runs_into_one_output_directory_add_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output, state = tmp_path / "out", tmp_path / "state.db"

    run_lm_eval(output, seed=1)
    first = ingest(capsys, output, state)
    run_lm_eval(output, seed=2)
    second = ingest(capsys, output, state)
    again = ingest(capsys, output, state)

    assert len(list(output.rglob("samples_scorio_arith_r4_*.jsonl"))) == 2
    assert first["trials"] == 6 * 4
    assert second["trials"] == 2 * 6 * 4
    # Reading the same files again is a re-delivery: nothing new.
    assert again["trials"] == 2 * 6 * 4
    models = second["models"]
    assert isinstance(models, list)
    assert [row["model"] for row in models] == ["scorio/dummy-lm"]


def gold_has_the_highest_likelihood(line: dict[str, object]) -> bool:
    """lm-eval's acc for multiple choice, from a line's logged responses."""
    responses = line["resps"]
    assert isinstance(responses, list)
    likelihoods = [float(response[0][0]) for response in responses]
    best = max(range(len(likelihoods)), key=likelihoods.__getitem__)
    return best == int(str(line["target"]))


def test_predict_only_output_is_scored_where_the_task_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The rule agrees with lm-eval's own acc on a scored run's lines.
    [scored] = (FIXTURES / "output").rglob("samples_scorio_mc_*.jsonl")
    for text in scored.read_text().splitlines():
        line = json.loads(text)
        assert gold_has_the_highest_likelihood(line) == bool(line["acc"])

    output, state = tmp_path / "out", tmp_path / "state.db"
    run_lm_eval(output, 1, tasks="scorio_mc,scorio_arith_r4", extra=("--predict_only",))
    arguments = [str(output), "--format", "lm-eval", "--state", str(state)]
    assert main(["ingest", *arguments, "--json"]) == 0
    captured = capsys.readouterr()
    (status,) = json.loads(captured.out)
    # Multiple choice is scored from the logged likelihoods ...
    assert (status["run"], status["trials"]) == ("scorio_mc", 4)
    [predicted] = output.rglob("samples_scorio_mc_*.jsonl")
    lines = [json.loads(text) for text in predicted.read_text().splitlines()]
    wins = sum(gold_has_the_highest_likelihood(line) for line in lines)
    [row] = status["models"]
    assert row["mu"] == pytest.approx((wins + 1) / (len(lines) + 2))
    # ... generations are refused, saying what is missing.
    assert "a --predict_only run: lm-eval logged no scores" in captured.err
    assert "Missing: the task's metric and its options" in captured.err


def test_a_model_name_lm_eval_made_up_is_refused_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out"
    run_lm_eval(output, 1, tasks="scorio_mc", model_args=())
    [folder] = [path for path in output.iterdir() if path.is_dir()]
    state = tmp_path / "state.db"
    arguments = [str(output), "--format", "lm-eval", "--state", str(state)]

    assert main(["ingest", *arguments]) == 1
    err = capsys.readouterr().err
    assert f"lm-eval named the model {folder.name!r} itself" in err
    assert "--model NAME" in err and "pretrained=NAME" in err

    assert main(["ingest", *arguments, "--model", "dummy-lm", "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert [row["model"] for row in status["models"]] == ["dummy-lm"]
