"""Real Inspect evals: every trial the hook sees is counted, or refused once up front.

The evals run on ``scorio-latency`` (tests/adapters/inspect_models.py) at
Inspect's default concurrency, as in tests/adapters/test_inspect_loop.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    PARTIAL,
    Score,
    Scorer,
    Target,
    accuracy,
    scorer,
)
from inspect_ai.solver import TaskState, generate

from adapters.harness.inspect_ai import inspect_weights
from adapters.harness.transports import StateFileTransport, spool_of
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.adapters.test_inspect_ai import INSPECT_OWN_WARNINGS
from tests.adapters.test_inspect_loop import PROVIDER, QUESTIONS, evaluate, model
from tests.helpers import serving

pytestmark = [
    pytest.mark.slow,  # each test runs real Inspect evals or reads their logs
    *(pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS),
]
REPO = Path(__file__).resolve().parents[2]
TASKS = Path(__file__).with_name("inspect_tasks.py")
PARTIAL_CREDIT = '{"C": 2, "P": 1, "I": 0}'
# Questions a "yes" earns half the credit on.
HALF = {"q1", "q4", "q7"}


@scorer(metrics=[accuracy()])
def graded() -> Scorer:
    """C for a yes, P for a yes on a HALF question, I for a no."""

    async def score(state: TaskState, target: Target) -> Score:
        if state.output.completion != "yes":
            return Score(value=INCORRECT)
        return Score(value=PARTIAL if state.sample_id in HALF else CORRECT)

    return score


def graded_task(epochs: int) -> Task:
    dataset = MemoryDataset([Sample(id=q, input=q, target="yes") for q in QUESTIONS])
    return Task(
        name="graded",
        dataset=dataset,
        solver=generate(),
        scorer=graded(),
        epochs=epochs,
    )


@pytest.fixture(autouse=True)
def quiet_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    for name in (
        "SCORIO_MONITOR_URL",
        "SCORIO_MONITOR_STATE",
        "SCORIO_MONITOR_RUN",
        "SCORIO_MONITOR_CATEGORIES",
    ):
        monkeypatch.delenv(name, raising=False)


def test_partial_credit_weighs_each_letter_as_inspect_does() -> None:
    assert inspect_weights({"C": 2, "P": 1, "I": 0}) == [0.0, 0.5, 1.0]
    assert inspect_weights({"C": 1, "I": 0, "N": 0}) == [0.0, 1.0]
    # The default lumps P with I: no weights agree with Inspect.
    assert inspect_weights({"C": 1, "I": 0, "P": 0, "N": 0}) is None
    assert inspect_weights({"C": 3, "I": 0}) is None  # categories 1, 2 unused
    assert inspect_weights({"A": 1, "I": 0}) is None  # Inspect gives A no value


# -- 6. partial credit ------------------------------------------------------


@pytest.mark.parametrize("transport", ["state", "http"])
async def test_partial_credit_declares_the_run_so_avg_is_inspects_accuracy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    transport: str,
) -> None:
    monkeypatch.setenv("SCORIO_MONITOR_CATEGORIES", PARTIAL_CREDIT)
    epochs = 8
    task, models = graded_task(epochs), [model("a", "110")]

    with caplog.at_level(logging.INFO, logger="adapters.harness"):
        if transport == "state":
            state = tmp_path / "state.db"
            monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
            (log,) = await evaluate(task, models, tmp_path / "logs")
            with Monitor(SqliteStore(state, read_only=True)) as monitor:
                status, config = monitor.status("graded"), monitor.config("graded")
        else:
            async with (
                Service(Monitor()) as service,
                serving(create_app(service, HttpSettings())) as base,
            ):
                monkeypatch.setenv("SCORIO_MONITOR_URL", base)
                (log,) = await evaluate(task, models, tmp_path / "logs")
                monitor = service.monitor
                status, config = monitor.status("graded"), monitor.config("graded")

    assert config.weights == [0.0, 0.5, 1.0]
    assert status.trials == len(QUESTIONS) * epochs == 80
    assert status.rejected == 0
    assert log.results is not None
    inspect_accuracy = log.results.scores[0].metrics["accuracy"].value
    (row,) = status.models
    assert row.avg == pytest.approx(inspect_accuracy)
    # Every letter happened: the comparison is not a binary one in disguise.
    letters = {s.scores["graded"].value for s in log.samples or [] if s.scores}
    assert letters == {CORRECT, PARTIAL, INCORRECT}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_mapping_the_run_cannot_take_is_refused_once_before_the_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state.db"
    with Monitor(state) as monitor:
        monitor.configure(RunConfig(run="graded"))  # binary: weights [0, 1]
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
    monkeypatch.setenv("SCORIO_MONITOR_CATEGORIES", PARTIAL_CREDIT)

    with caplog.at_level(logging.INFO, logger="adapters.harness"):
        (log,) = await evaluate(graded_task(4), [model("a", "110")], tmp_path / "l")

    assert len(log.samples or []) == len(QUESTIONS) * 4  # the eval itself ran
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1, loud
    assert "not reporting run 'graded'" in loud[0]
    assert "{'C': 2} outside 0..1" in loud[0]
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert monitor.status("graded").trials == 0
        assert monitor.status("graded").rejected == 0


# -- 8. a URL that is not a monitor -----------------------------------------


async def test_a_url_that_is_not_a_monitor_fails_once_at_the_first_contact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        Service(Monitor()) as service,
        serving(create_app(service, HttpSettings())) as base,
    ):
        # A wrong path prefix: every route under it answers 404.
        monkeypatch.setenv("SCORIO_MONITOR_URL", f"{base}/scorio")
        monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.05")
        with caplog.at_level(logging.INFO, logger="adapters.harness"):
            await evaluate(graded_task(3), [model("a", "1")], tmp_path / "logs")
        assert service.monitor.runs == []

    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1, [r.getMessage() for r in loud]
    message = loud[0].getMessage()
    assert loud[0].levelno == logging.ERROR
    assert f"{base}/scorio is not a scorio monitor" in message
    assert "404" in message
    assert not any("try again" in r.getMessage() for r in caplog.records)


# -- 7. two processes, one state file ---------------------------------------


def inspect_eval(state: Path, log_dir: Path, name: str, epochs: int) -> None:
    """One ``inspect eval`` process of ``yesno`` on model ``name``."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "INSPECT_DISPLAY": "none",
        "SCORIO_MONITOR_STATE": str(state),
    }
    finished = subprocess.run(
        [
            str(Path(sys.executable).with_name("inspect")),
            "eval",
            f"{TASKS}@yesno",
            "-T",
            f"epochs={epochs}",
            "-T",
            f"name={name}",
            "--log-dir",
            str(log_dir),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]


async def two_evals(state: Path, log_dir: Path, epochs: int) -> None:
    await asyncio.gather(
        asyncio.to_thread(inspect_eval, state, log_dir, "a", epochs),
        asyncio.to_thread(inspect_eval, state, log_dir, "b", epochs),
    )


def trials_by_model(state: Path) -> dict[str, int]:
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        return {row.model: row.trials for row in monitor.status("yesno").models}


async def test_two_inspect_processes_count_every_trial_in_one_state_file(
    tmp_path: Path,
) -> None:
    state, epochs = tmp_path / "state.db", 20

    await two_evals(state, tmp_path / "logs", epochs)

    each = len(QUESTIONS) * epochs
    assert trials_by_model(state) == {f"{PROVIDER}/a": each, f"{PROVIDER}/b": each}
    assert not list(spool_of(state).glob("*.jsonl"))


async def test_evals_spool_while_another_process_writes_and_the_writer_counts_them(
    tmp_path: Path,
) -> None:
    state, epochs = tmp_path / "state.db", 20
    async with StateFileTransport(state, close_wait_s=0.1) as writer:
        assert writer.is_writer
        await two_evals(state, tmp_path / "logs", epochs)
        # Both evals ran while this process held the file: they spooled.
        assert list(spool_of(state).glob("*.jsonl"))
        with Monitor(SqliteStore(state, read_only=True)) as monitor:
            assert monitor.runs == []  # nothing counted yet

    each = len(QUESTIONS) * epochs
    assert trials_by_model(state) == {f"{PROVIDER}/a": each, f"{PROVIDER}/b": each}
    assert not list(spool_of(state).glob("*.jsonl"))
