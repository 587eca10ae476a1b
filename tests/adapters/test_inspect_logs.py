"""Inspect logs after the fact: real evals' logs equal what Inspect itself reports.

The logs come from real ``inspect eval`` runs of our own latency provider
(tests/adapters/inspect_models.py) at Inspect's default concurrency: a
partial-credit scorer (C/P/I) beside a binary one, three epochs, and an eval
that early stopping cut short.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalLog, EvalSpec, read_eval_log
from inspect_ai.model import get_model
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    PARTIAL,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    scorer,
)
from inspect_ai.solver import TaskState, generate
from inspect_ai.util import EarlyStop
from pydantic import JsonValue

import tests.adapters.inspect_models  # noqa: F401 (registers scorio-latency)
from adapters.harness.inspect_logs import inspect_value, read_log
from monitor import Monitor
from monitor.stores.sqlite import SqliteStore

INSPECT_OWN_WARNINGS = (
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning",
    "ignore:Unclosed <MemoryObject:ResourceWarning",
)
pytestmark = [
    pytest.mark.slow,  # each test runs real Inspect evals or reads their logs
    *(pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS),
]

QUESTIONS = [f"q{index}" for index in range(6)]
EPOCHS = 3
# Per model: the k-th answer to a question is "yes" when pattern[k] is "1".
PATTERNS = {"strong": "1101", "weak": "0100"}


@scorer(metrics=[accuracy()])
def graded() -> Scorer:
    """C: yes on an even question; P (partial credit): yes on an odd one; I: no."""

    async def score(state: TaskState, target: Target) -> Score:
        if state.output.completion != "yes":
            return Score(value=INCORRECT)
        odd = int(state.input_text.removeprefix("q")) % 2
        return Score(value=PARTIAL if odd else CORRECT)

    return score


@scorer(metrics=[accuracy()])
def strict() -> Scorer:
    """1 for yes, 0 for no: a second scorer of the same samples."""

    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=1 if state.output.completion == "yes" else 0)

    return score


class SkipLateEpochs:
    """Early stopping that skips every epoch after the first on q0 and q1."""

    async def start_task(
        self, task: EvalSpec, samples: list[Sample], epochs: int
    ) -> str:
        return "skip-late-epochs"

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        if id in ("q0", "q1") and epoch > 1:
            return EarlyStop(id=id, epoch=epoch, reason="enough")
        return None

    async def complete_sample(
        self, id: str | int, epoch: int, scores: dict[str, SampleScore]
    ) -> None:
        return None

    async def complete_task(self) -> dict[str, JsonValue]:
        return {}


def task(name: str, *, early: bool = False) -> Task:
    return Task(
        name=name,
        dataset=MemoryDataset([Sample(id=q, input=q, target="yes") for q in QUESTIONS]),
        solver=generate(),
        scorer=[graded(), strict()],
        epochs=EPOCHS,
        early_stopping=SkipLateEpochs() if early else None,
    )


def run_eval(the_task: Task, log_dir: Path) -> list[EvalLog]:
    models = [
        get_model(f"scorio-latency/{name}", pattern=pattern, latency_s=0.01)
        for name, pattern in PATTERNS.items()
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        logs = eval(the_task, model=models, log_dir=str(log_dir), display="none")
    gc.collect()
    return [read_eval_log(log.location) for log in logs]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[EvalLog]]:
    log_dir = tmp_path_factory.mktemp("inspect-logs")
    made = run_eval(task("graded"), log_dir) + run_eval(
        task("graded_early", early=True), log_dir
    )
    return log_dir, made


def ingest(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "ingest",
            *arguments,
            "--format",
            "inspect",
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def inspect_accuracy(log: EvalLog, scorer_name: str) -> float:
    assert log.results is not None
    for score in log.results.scores:
        if score.name == scorer_name:
            return score.metrics["accuracy"].value
    raise AssertionError(f"no {scorer_name} in {log.location}")


def test_ingest_equals_inspect_counts_and_accuracy_per_model(
    logs: tuple[Path, list[EvalLog]], tmp_path: Path
) -> None:
    log_dir, made = logs
    state = tmp_path / "state.db"

    first = ingest(str(log_dir), "--state", str(state), "--json")
    assert first.returncode == 0, first.stderr

    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert set(monitor.runs) == {"graded", "graded_early"}
        assert monitor.config("graded").weights == [0.0, 0.5, 1.0]
        for log in made:
            status = monitor.status(log.eval.task)
            row = next(r for r in status.models if r.model == log.eval.model)
            samples = log.samples or []
            # Every completed sample-epoch is one trial, early-stopped ones absent.
            assert row.trials == len(samples)
            assert row.avg == pytest.approx(inspect_accuracy(log, "graded"))
    early = next(log for log in made if log.eval.task == "graded_early")
    assert len(early.samples or []) == (len(QUESTIONS) - 2) * EPOCHS + 2

    again = ingest(str(log_dir), "--state", str(state))
    assert again.returncode == 0, again.stderr
    assert "0 new trials" in again.stderr
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert sum(monitor.status(r).trials for r in monitor.runs) == sum(
            len(log.samples or []) for log in made
        )


def test_one_log_file_and_a_chosen_scorer(
    logs: tuple[Path, list[EvalLog]], tmp_path: Path
) -> None:
    _, made = logs
    log = made[0]
    state = tmp_path / "state.db"
    result = ingest(
        log.location, "--state", str(state), "--scorer", "strict", "--run", "strict_run"
    )
    assert result.returncode == 0, result.stderr
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert monitor.config("strict_run").weights == [0.0, 1.0]
        (row,) = monitor.status("strict_run").models
    assert row.model == log.eval.model
    assert row.avg == pytest.approx(inspect_accuracy(log, "strict"))


def test_attempt_ids_are_the_live_hooks(logs: tuple[Path, list[EvalLog]]) -> None:
    _, made = logs
    log = made[0]
    read = read_log(Path(log.location))
    expected = Counter(f"{log.eval.eval_id}:{s.epoch - 1}" for s in log.samples or [])
    assert Counter(t.trial for t in read.trials) == expected
    assert read.run == "graded"


def test_a_scorer_the_logs_lack_is_refused_loudly(
    logs: tuple[Path, list[EvalLog]], tmp_path: Path
) -> None:
    log_dir, _ = logs
    result = ingest(str(log_dir), "--state", str(tmp_path / "s.db"), "--scorer", "nope")
    assert result.returncode == 1
    assert "no score from scorer 'nope' (scorers: graded, strict)" in result.stderr
    assert "no valid trials read" in result.stderr


def test_a_known_run_keeps_its_weights_and_refuses_other_values(
    logs: tuple[Path, list[EvalLog]], tmp_path: Path
) -> None:
    _log_dir, made = logs
    state = tmp_path / "state.db"
    config = tmp_path / "run.toml"
    config.write_text('run = "graded"\nweights = [0.0, 1.0]\n')
    result = ingest(made[0].location, "--state", str(state), "--config", str(config))
    partial = sum(
        1
        for sample in made[0].samples or []
        if sample.scores and sample.scores["graded"].value == PARTIAL
    )
    assert partial > 0
    assert "score value 0.5 is no weight of run 'graded' (weights [0.0, 1.0])" in (
        result.stderr
    )
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        status = monitor.status("graded")
    assert status.trials == len(made[0].samples or []) - partial
    assert status.rejected == partial


def test_not_a_log_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.eval"
    bad.write_text("not a zip")
    result = ingest(str(bad), "--state", str(tmp_path / "s.db"))
    assert result.returncode != 0
    assert "not an Inspect log Inspect can read" in result.stderr
    assert "Traceback" not in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = ingest(str(empty), "--state", str(tmp_path / "s.db"))
    assert result.returncode != 0
    assert "no Inspect logs" in result.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("C", 1.0),
        ("P", 0.5),
        ("I", 0.0),
        ("N", 0.0),
        ("yes", 1.0),
        (True, 1.0),
        ("0.25", 0.25),
        (0.75, 0.75),
        ("c", "score value 'c' has no value Inspect can read"),
        (
            {"a": 1},
            "score value {'a': 1} is no scalar (pick one scorer value with --scorer)",
        ),
        (float("inf"), "score value inf is not finite"),
    ],
)
def test_inspect_values(value: object, expected: float | str) -> None:
    assert inspect_value(value) == expected
    if isinstance(expected, str):
        json.dumps(expected)  # a plain sentence for the dead letter
