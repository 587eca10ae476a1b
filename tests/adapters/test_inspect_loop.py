"""The harness loop with real Inspect evals: attempts, reservations, an absent monitor.

The evals run on ``scorio-latency`` (tests/adapters/inspect_models.py), a
provider of our own that waits per call, at Inspect's default concurrency
(no ``max_samples``), with the monitor's hook and early stopping.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai import Task, eval_async
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalLog, read_eval_log_async
from inspect_ai.model import Model, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate
from inspect_ai.util import EarlyStopping

from adapters.harness.early_stopping import MonitorEarlyStopping
from monitor import Monitor, RunConfig, TrialEvent
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.adapters import inspect_models
from tests.adapters.hung_server import hung_server
from tests.adapters.test_inspect_ai import INSPECT_OWN_WARNINGS
from tests.helpers import serving
from tests.services import free_port

pytestmark = [
    pytest.mark.slow,  # each test runs real Inspect evals or reads their logs
    *(pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS),
]
QUESTIONS = [f"q{index}" for index in range(10)]
PROVIDER = "scorio-latency"
assert issubclass(inspect_models.LatencyModel, object)  # registers the provider


def model(name: str, pattern: str, latency_s: float = 0.02) -> Model:
    with contextlib.redirect_stdout(io.StringIO()):
        return get_model(
            f"{PROVIDER}/{name}", pattern=pattern, latency_s=latency_s, memoize=False
        )


def yes_no(epochs: int, early_stopping: EarlyStopping | None = None) -> Task:
    dataset = MemoryDataset([Sample(id=q, input=q, target="yes") for q in QUESTIONS])
    return Task(
        name="yesno",
        dataset=dataset,
        solver=generate(),
        scorer=includes(),
        epochs=epochs,
        early_stopping=early_stopping,
    )


async def evaluate(task: Task, models: list[Model], log_dir: Path) -> list[EvalLog]:
    """Run the task for every model at Inspect's default concurrency."""
    with contextlib.redirect_stdout(io.StringIO()):
        logs = await eval_async(
            task, model=models, log_dir=str(log_dir), fail_on_error=False
        )
    gc.collect()
    return [await read_eval_log_async(log.location) for log in logs]


def trials_in(state: Path, run: str) -> int:
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        return monitor.status(run).trials


@pytest.fixture(autouse=True)
def quiet_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    for name in ("SCORIO_MONITOR_URL", "SCORIO_MONITOR_STATE", "SCORIO_MONITOR_RUN"):
        monkeypatch.delenv(name, raising=False)


# -- 1. a trial is one attempt ---------------------------------------------


async def test_a_second_eval_adds_trials_instead_of_overwriting_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.db"
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
    models = [model("a", "1"), model("b", "10")]

    await evaluate(yes_no(epochs=5), models, tmp_path / "logs")
    once = trials_in(state, "yesno")
    await evaluate(yes_no(epochs=5), models, tmp_path / "logs")
    twice = trials_in(state, "yesno")

    assert once == 2 * len(QUESTIONS) * 5
    assert twice == 2 * once
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        status = monitor.status("yesno")
    assert status.duplicates == 0 and status.corrections == 0
    by_model = {row.model: row for row in status.models}
    # a always answers yes; b alternates, over both evals.
    assert by_model[f"{PROVIDER}/a"].trials == by_model[f"{PROVIDER}/b"].trials == 100


async def test_a_state_file_with_epoch_ids_keeps_its_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.db"
    # Written the old way: the trial id was the bare epoch.
    with Monitor(state) as monitor:
        monitor.ingest(
            [
                TrialEvent(
                    run="yesno",
                    model=f"{PROVIDER}/a",
                    question=q,
                    trial=str(epoch),
                    correct=True,
                )
                for q in QUESTIONS
                for epoch in range(3)
            ]
        )
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))

    await evaluate(yes_no(epochs=3), [model("a", "1")], tmp_path / "logs")

    assert trials_in(state, "yesno") == 2 * len(QUESTIONS) * 3


# -- 2. reservations keep every question within its budget -----------------


@pytest.mark.parametrize("transport", ["state", "http"])
async def test_early_stopping_never_runs_a_question_beyond_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    cap, epochs = 10, 40
    # Two models that answer alike: their pair needs the whole budget.
    models = [model("a", "10"), model("b", "01")]
    config = RunConfig(
        run="yesno",
        questions=QUESTIONS,
        models=[f"{PROVIDER}/a", f"{PROVIDER}/b"],
        max_trials_per_question=cap,
    )
    monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.05")
    # The service below answers from the eval's own event loop, on a shared
    # machine: let a look wait for it (a monitor that does not answer within
    # the wait budget is taken for away, and the cap is not enforced then).
    stopping = MonitorEarlyStopping(refresh_s=0.2, wait_budget_s=30.0)
    if transport == "state":
        state = tmp_path / "state.db"
        with Monitor(state) as monitor:
            monitor.configure(config)
        monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
        logs = await evaluate(yes_no(epochs, stopping), models, tmp_path / "logs")
        with Monitor(SqliteStore(state, read_only=True)) as monitor:
            counts = monitor.store.counts("yesno")
    else:
        async with Service(Monitor()) as service:
            service.monitor.configure(config)
            async with serving(create_app(service, HttpSettings())) as base:
                monkeypatch.setenv("SCORIO_MONITOR_URL", base)
                logs = await evaluate(yes_no(epochs, stopping), models, tmp_path)
            counts = service.monitor.store.counts("yesno")
            # Every trial let through was reported; unused ones were given back.
            assert service.monitor.in_flight("yesno") == {}

    for log in logs:
        ran = Counter(str(sample.id) for sample in log.samples or [])
        assert max(ran.values()) <= cap, ran
        assert log.results is not None and log.results.early_stopping is not None
        stops = log.results.early_stopping.early_stops
        assert len(ran) == len(QUESTIONS)
        assert sum(ran.values()) + len(stops) == len(QUESTIONS) * epochs
    for table in counts.values():
        per_question = [sum(row) for row in table.observed]
        assert max(per_question) <= cap
    # The pair needed the whole budget: some question reached the cap.
    assert max(sum(row) for t in counts.values() for row in t.observed) == cap


# -- 3. a monitor that is away, or hangs -----------------------------------
# What it costs in wall time is measured by benchmarks/monitor_away.py.


@pytest.mark.parametrize("case", ["away", "hung"])
async def test_a_monitor_that_is_away_or_hangs_is_said_once_and_the_eval_runs_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    case: str,
) -> None:
    models = [model("a", "1"), model("b", "10")]
    epochs = 5
    with contextlib.ExitStack() as stack:
        if case == "away":
            url = f"http://127.0.0.1:{free_port()}"
        else:
            url = stack.enter_context(hung_server())
        monkeypatch.setenv("SCORIO_MONITOR_URL", url)
        with caplog.at_level(logging.INFO, logger="adapters.harness"):
            logs = await evaluate(
                yes_no(epochs, MonitorEarlyStopping()), models, tmp_path
            )

    assert all(len(log.samples or []) == len(QUESTIONS) * epochs for log in logs)
    assert all(
        log.results is not None
        and log.results.early_stopping is not None
        and not log.results.early_stopping.early_stops
        for log in logs
    )
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    # Said once, not once per trial: unreachable (the hook's client and each
    # task's early-stopping client), and the undelivered trials at the end.
    assert 1 <= len(warnings) <= 4, [r.getMessage() for r in warnings]
    assert any("unreachable" in r.getMessage() for r in warnings)
    undelivered = [r for r in warnings if "were not delivered" in r.getMessage()]
    assert len(undelivered) == 1
    assert f"{2 * len(QUESTIONS) * epochs} trials" in undelivered[0].getMessage()
