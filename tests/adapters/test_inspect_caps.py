"""Caps: real Inspect evals never pass max_trials_per_question, at any load.

A cap is a guarantee, not a timing: the early stopping lets a sample-epoch
of a capped run through only on a reservation, so the trials run for a
question never exceed the cap, however the checks and the reports
interleave. Three kinds of test hold it:

- undeclared models, run by one ``eval`` at Inspect's default concurrency
  on ``scorio-latency`` (tests/adapters/inspect_models.py) with the hook and
  early stopping over HTTP, whether the run lists its questions, only
  counts them, or leaves them open;
- the same eval with the default wait budget while two processes keep
  both cores busy, over HTTP and over a state file (a monitor slower than
  the budget must cost sample-epochs, never the cap);
- the early stopping alone, driven without Inspect: many asks at once
  before any trial is reported, and a monitor that goes away after its
  first answer.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import pytest
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec

from adapters.harness import (
    AsyncMonitorClient,
    EmbeddedTransport,
    MonitorUnavailableError,
    Retry,
)
from adapters.harness.early_stopping import MonitorEarlyStopping
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.schema import NextItem, Status, TrialEvent
from monitor.service.service import Service
from monitor.stores.records import ModelCounts
from monitor.stores.sqlite import SqliteStore
from tests.adapters.test_inspect_ai import INSPECT_OWN_WARNINGS
from tests.adapters.test_inspect_loop import (
    PROVIDER,
    QUESTIONS,
    evaluate,
    model,
    yes_no,
)
from tests.helpers import serving

pytestmark = [
    pytest.mark.slow,  # each test runs real Inspect evals
    *(pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS),
]


@pytest.fixture(autouse=True)
def quiet_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    for name in ("SCORIO_MONITOR_URL", "SCORIO_MONITOR_STATE", "SCORIO_MONITOR_RUN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Two processes that keep two cores busy while the test runs."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait(timeout=30)


def over_the_cap(logs: Sequence[EvalLog], cap: int) -> dict[tuple[str, str], int]:
    """(model, question) -> sample-epochs run, where more than ``cap`` ran."""
    over: dict[tuple[str, str], int] = {}
    for log in logs:
        ran = Counter(str(sample.id) for sample in log.samples or [])
        over.update({(log.eval.model, q): n for q, n in ran.items() if n > cap})
    return over


def most_trials(counts: dict[str, ModelCounts]) -> int:
    return max(sum(row) for table in counts.values() for row in table.observed)


@pytest.mark.slow
@pytest.mark.parametrize("declared", ["questions", "question_count", "open"])
async def test_undeclared_models_never_run_a_question_beyond_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: str
) -> None:
    cap, epochs = 10, 30
    # Three models that answer alike in pairs: the ranking needs the budget.
    models = [model("a", "10"), model("b", "01"), model("c", "1100")]
    config = RunConfig(
        run="yesno",
        questions=QUESTIONS if declared == "questions" else None,
        question_count=len(QUESTIONS) if declared == "question_count" else None,
        max_trials_per_question=cap,
    )
    monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.05")
    async with Service(Monitor()) as service:
        service.monitor.configure(config)
        async with serving(create_app(service, HttpSettings())) as base:
            monkeypatch.setenv("SCORIO_MONITOR_URL", base)
            # The service shares the eval's event loop here, so on a loaded
            # machine it may answer slower than the default wait budget,
            # past which sample-epochs run unreserved (docs/harness-hooks.md).
            stopping = MonitorEarlyStopping(refresh_s=0.2, wait_budget_s=30)
            logs = await evaluate(yes_no(epochs, stopping), models, tmp_path)
        counts = service.monitor.store.counts("yesno")

    assert len(logs) == 3
    assert over_the_cap(logs, cap) == {}
    assert len(counts) == 3
    assert most_trials(counts) <= cap


@pytest.mark.slow
@pytest.mark.usefixtures("busy_cores")
@pytest.mark.parametrize("transport", ["http", "state"])
async def test_the_cap_holds_with_every_core_busy_and_the_default_wait_budget(
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
    # Answers slower than the default budget of 0.3 s, on busy cores and
    # from the eval's own event loop: they must cost sample-epochs, never
    # the cap.
    stopping = MonitorEarlyStopping(refresh_s=0.2)
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

    assert over_the_cap(logs, cap) == {}
    assert len(counts) == 2
    assert 0 < most_trials(counts) <= cap


# -- the early stopping alone ----------------------------------------------


class AwayAfterFirstLook:
    """An embedded monitor that answers one status, then is unreachable."""

    def __init__(self, monitor: Monitor) -> None:
        self._inner = EmbeddedTransport(monitor)
        self.looks = 0

    @property
    def name(self) -> str:
        return "away after the first look"

    async def __aenter__(self) -> AwayAfterFirstLook:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def _away(self) -> None:
        self.looks += 1
        if self.looks > 1:
            raise MonitorUnavailableError("unreachable")

    async def check(self) -> None:
        self._away()

    async def config(self, run: str) -> RunConfig:
        self._away()
        return await self._inner.config(run)

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        self._away()

    async def status(self, run: str) -> Status:
        self._away()
        return await self._inner.status(run)

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        self._away()
        return await self._inner.next(run, budget, lease_s, model)

    async def declare(self, config: RunConfig) -> RunConfig:
        self._away()
        return await self._inner.declare(config)

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        self._away()
        return await self._inner.release(run, items)


def capped_run(cap: int) -> Monitor:
    monitor = Monitor()
    monitor.configure(
        RunConfig(
            run="yesno",
            questions=QUESTIONS,
            models=["mockllm/a", "mockllm/b"],
            max_trials_per_question=cap,
        )
    )
    return monitor


async def start(stopping: MonitorEarlyStopping, epochs: int) -> None:
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="yesno",
        dataset=EvalDataset(),
        model="mockllm/a",
        config=EvalConfig(),
    )
    samples = [Sample(id=question, input=question) for question in QUESTIONS]
    await stopping.start_task(spec, samples, epochs=epochs)


async def let_through(
    stopping: MonitorEarlyStopping, question: str, epochs: int
) -> int:
    """Ask for every epoch of ``question`` at once; how many may run."""
    answers = await asyncio.gather(
        *(stopping.schedule_sample(question, epoch) for epoch in range(1, epochs + 1))
    )
    return sum(answer is None for answer in answers)


async def test_many_asks_at_once_before_any_report_get_the_cap_and_no_more() -> None:
    cap, epochs = 3, 40
    monitor = capped_run(cap)
    stopping = MonitorEarlyStopping(
        lambda: AsyncMonitorClient(EmbeddedTransport(monitor)), refresh_s=0.0
    )
    await start(stopping, epochs)

    # No trial is reported meanwhile: only reservations stand between the
    # asks and the cap.
    assert await let_through(stopping, "q0", epochs) == cap
    assert monitor.in_flight("yesno")[("mockllm/a", "q0")] == cap
    await stopping.complete_task()
    assert monitor.in_flight("yesno") == {("mockllm/a", "q0"): cap}


async def test_a_monitor_away_after_one_answer_costs_sample_epochs_not_the_cap() -> (
    None
):
    cap, epochs = 3, 40
    monitor = capped_run(cap)
    transport = AwayAfterFirstLook(monitor)
    stopping = MonitorEarlyStopping(
        lambda: AsyncMonitorClient(transport, retry=Retry(attempts=1)), refresh_s=0.0
    )
    await start(stopping, epochs)

    ran = await let_through(stopping, "q0", epochs)
    await stopping.complete_task()
    # The first answer gave the cap; no reservation came after it.
    assert transport.looks > 1
    assert ran == 0
    assert monitor.in_flight("yesno") == {}
