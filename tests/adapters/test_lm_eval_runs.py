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

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "lm_eval"


def run_lm_eval(output: Path, seed: int) -> None:
    """One lm-eval run of the repeats task into ``output`` (4 generations x 6 docs)."""
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
            "--model_args",
            "pretrained=scorio/dummy-lm",
            "--tasks",
            "scorio_arith_r4",
            "--include_path",
            "tasks",
            "--output_path",
            str(output),
            "--log_samples",
            "--seed",
            str(seed),
        ],
        cwd=FIXTURES,
        env=environment,
        check=True,
        capture_output=True,
        timeout=300,
    )


def ingest(
    capsys: pytest.CaptureFixture[str], output: Path, state: Path
) -> dict[str, object]:
    arguments = [str(output), "--format", "lm-eval", "--repeats", "--state", str(state)]
    assert main(["ingest", *arguments, "--json"]) == 0
    status: dict[str, object] = json.loads(capsys.readouterr().out)
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
