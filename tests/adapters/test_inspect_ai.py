"""The Inspect AI integration: real evals stream every sample-epoch to the monitor.

The evals use Inspect's ``mockllm`` provider with scripted answers (and
usage set explicitly: without it mockllm counts tokens with tiktoken, which
downloads its encoding), a four-question dataset and a real scorer.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import logging
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from inspect_ai import Task, eval_async
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalSample,
    EvalSpec,
    read_eval_log_async,
)
from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    NOANSWER,
    Score,
    Scorer,
    Target,
    accuracy,
    scorer,
)
from inspect_ai.solver import TaskState, generate
from inspect_ai.tool import ToolChoice, ToolInfo
from inspect_ai.util import EarlyStopping

from adapters.harness import AsyncMonitorClient, EmbeddedTransport
from adapters.harness.early_stopping import MonitorEarlyStopping, skip_reason
from adapters.harness.inspect_ai import (
    DEFAULT_CATEGORIES,
    InspectSettings,
    category_of,
    run_name,
    trial_event,
)
from monitor import ConfigError, Monitor, RunConfig, TrialEvent
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.schema import Status
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.helpers import serving

QUESTIONS = {"q0": "Paris", "q1": "Rome", "q2": "Madrid", "q3": "Lima"}
# What each mock model answers per question: the right answer, a wrong
# one, "no answer" (scored N), "refuse" (unscored), or "boom" (an error on
# the first try, the right answer after).
GOOD = {"q0": "right", "q1": "right", "q2": "boom", "q3": "no answer"}
POOR = {"q0": "right", "q1": "wrong", "q2": "refuse", "q3": "wrong"}
ALWAYS_RIGHT = dict.fromkeys(QUESTIONS, "right")
ALWAYS_WRONG = dict.fromkeys(QUESTIONS, "wrong")
BINARY = {CORRECT: 1, INCORRECT: 0, NOANSWER: 0}
Counts = dict[str, dict[str, list[int]]]

# Warnings are errors, but two come from inspect-ai 0.3.285 itself: it calls
# tenacity's wait_exponential_jitter(initial=...), deprecated in tenacity 9.2
# (this would fail every sample), and it leaves anyio memory streams
# unclosed (also in an eval without our hook).
INSPECT_OWN_WARNINGS = (
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning",
    "ignore:Unclosed <MemoryObject:ResourceWarning",
)
pytestmark = [pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS]


@scorer(metrics=[accuracy()])
def verdict() -> Scorer:
    """C if the answer names the target, N for no answer, unscored on refusal."""

    async def score(state: TaskState, target: Target) -> Score:
        answer = state.output.completion
        if answer == "refuse":
            return Score.unscored(reason="refusal")
        if answer == "no answer":
            return Score(value=NOANSWER)
        return Score(value=CORRECT if target.text in answer else INCORRECT)

    return score


class Scripted:
    """A mockllm model answering by script; counts its generations."""

    def __init__(self, name: str, script: Mapping[str, str]) -> None:
        self.script = script
        self.calls: Counter[str] = Counter()
        with contextlib.redirect_stdout(io.StringIO()):  # Inspect's banner
            self.model: Model = get_model(
                f"mockllm/{name}", custom_outputs=self.answer, memoize=False
            )

    @property
    def generations(self) -> int:
        return sum(self.calls.values())

    def answer(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        question = input[-1].text
        self.calls[question] += 1
        plan = self.script[question]
        if plan == "boom" and self.calls[question] == 1:
            raise RuntimeError("the mock model failed")
        text = {"right": QUESTIONS[question], "wrong": "Atlantis"}.get(plan, plan)
        if plan == "boom":
            text = QUESTIONS[question]
        output = ModelOutput.from_content(model=str(self.model), content=text)
        output.usage = ModelUsage(input_tokens=4, output_tokens=3, total_tokens=7)
        return output


def capitals(epochs: int, early_stopping: EarlyStopping | None = None) -> Task:
    # The prompt is the question id, so the mock knows what it is asked.
    dataset = MemoryDataset(
        [Sample(id=key, input=key, target=answer) for key, answer in QUESTIONS.items()]
    )
    return Task(
        name="capitals",
        dataset=dataset,
        solver=generate(),
        scorer=verdict(),
        epochs=epochs,
        early_stopping=early_stopping,
    )


async def evaluate(task: Task, models: list[Scripted], log_dir: Path) -> list[EvalLog]:
    """Run the task for every model (concurrently) and read the logs back."""
    with contextlib.redirect_stdout(io.StringIO()):
        logs = await eval_async(
            task,
            model=[scripted.model for scripted in models],
            log_dir=str(log_dir),
            max_samples=1,
            fail_on_error=False,
        )
    gc.collect()  # finalize Inspect's leaked streams while the filter applies
    # The async reader: the sync one would patch asyncio (nest_asyncio) for
    # the rest of the process when called inside a running loop.
    return [await read_eval_log_async(log.location) for log in logs]


def logged_counts(logs: list[EvalLog]) -> Counts:
    """Per model and question, trials per category, from the logs alone."""
    counts: Counts = {}
    for log in logs:
        for sample in log.samples or []:
            if sample.error is not None or not sample.scores:
                continue
            value = next(iter(sample.scores.values())).value
            if isinstance(value, float) and math.isnan(value):
                continue
            row = counts.setdefault(log.eval.model, {})
            row.setdefault(str(sample.id), [0, 0])[BINARY[str(value)]] += 1
    return counts


def monitor_counts(monitor: Monitor, run: str) -> Counts:
    return {
        model: {
            question: list(observed)
            for question, observed in zip(
                counts.questions, counts.observed, strict=True
            )
            if sum(observed)
        }
        for model, counts in monitor.store.counts(run).items()
    }


@pytest.fixture(autouse=True)
def quiet_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    for name in ("SCORIO_MONITOR_URL", "SCORIO_MONITOR_STATE", "SCORIO_MONITOR_RUN"):
        monkeypatch.delenv(name, raising=False)


# -- real evals ------------------------------------------------------------


@pytest.mark.slow
async def test_every_sample_epoch_reaches_the_embedded_monitor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.db"
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
    models = [Scripted("good", GOOD), Scripted("poor", POOR)]

    logs = await evaluate(capitals(epochs=3), models, tmp_path / "logs")

    samples = [sample for log in logs for sample in log.samples or []]
    assert len(samples) == 2 * 4 * 3
    assert sum(sample.error is not None for sample in samples) == 1
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        counted = monitor_counts(monitor, "capitals")
        status = monitor.status("capitals")
    assert counted == logged_counts(logs)
    # 24 sample-epochs: one failed, three were refused (unscored).
    assert status.trials == 20
    assert {row.model for row in status.models} == {"mockllm/good", "mockllm/poor"}


@pytest.mark.slow
async def test_trials_stream_over_http_while_the_eval_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = [Scripted("good", GOOD), Scripted("poor", POOR)]
    # Trials counted when each generation after a model's first came.
    seen: list[int] = []
    async with Service(Monitor()) as service:

        async def counted_one() -> None:
            # One sample at a time per model: the first sample's trial is
            # reported while this one waits, however busy the machine.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(60):
                    while service.snapshot.ingested == 0:
                        await asyncio.sleep(0.01)
            seen.append(service.snapshot.ingested)

        for scripted in models:
            answer = scripted.answer

            async def watching(
                *args: object,
                answer: Callable[..., ModelOutput] = answer,
                scripted: Scripted = scripted,
            ) -> ModelOutput:
                if scripted.generations > 0:
                    await counted_one()
                return answer(*args)

            scripted.model = get_model(
                str(scripted.model), custom_outputs=watching, memoize=False
            )
        async with serving(create_app(service, HttpSettings())) as base:
            monkeypatch.setenv("SCORIO_MONITOR_URL", base)
            monkeypatch.setenv("SCORIO_MONITOR_RUN", "live")
            monkeypatch.setenv("SCORIO_MONITOR_BATCH_SIZE", "1")
            monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.01")
            logs = await evaluate(capitals(epochs=3), models, tmp_path / "logs")
        counted = monitor_counts(service.monitor, "live")
    assert counted == logged_counts(logs)
    assert seen and min(seen) > 0  # later generations saw earlier trials counted


@pytest.mark.slow
async def test_early_stopping_skips_sample_epochs_of_resolved_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state.db"
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(state))
    monkeypatch.setenv("SCORIO_MONITOR_BATCH_SIZE", "1")
    monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.01")
    models = [Scripted("right", ALWAYS_RIGHT), Scripted("wrong", ALWAYS_WRONG)]
    stopping = MonitorEarlyStopping(refresh_s=0.0)
    epochs = 10

    logs = await evaluate(capitals(epochs, stopping), models, tmp_path / "logs")

    planned = 4 * epochs
    for log, scripted in zip(logs, models, strict=True):
        assert log.results is not None and log.results.early_stopping is not None
        stops = log.results.early_stopping.early_stops
        ran = len(log.samples or [])
        assert scripted.generations == ran < planned
        assert ran + len(stops) == planned
        # Skipped as resolved; on a busy machine reports lag, so a question
        # may also wait while the plan's reservations of it are out.
        reasons = [stop.reason or "" for stop in stops]
        resolved = [reason for reason in reasons if "needs no more trials" in reason]
        waiting = [reason for reason in reasons if reason.startswith("allocation asks")]
        assert resolved and len(resolved) + len(waiting) == len(stops), reasons
        assert log.results.early_stopping.metadata["skipped"] == len(stops)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert monitor_counts(monitor, "capitals") == logged_counts(logs)
        assert not any(row.needs_trials for row in monitor.status("capitals").models)


# -- the pieces ------------------------------------------------------------


def test_scores_map_to_categories_by_the_documented_default() -> None:
    default = DEFAULT_CATEGORIES
    assert [category_of(value, default) for value in "CIPN"] == [1, 0, 0, 0]
    assert category_of(True, default) == 1 and category_of(False, default) == 0
    assert category_of(1.0, default) == 1 and category_of(2, default) == 2
    for value in (float("nan"), 0.5, -1, "X", [1], {"a": 1}):
        assert category_of(value, default) is None
    assert category_of("P", {"C": 2, "P": 1, "I": 0}) == 1


def test_a_finished_sample_becomes_a_trial_with_its_cost() -> None:
    sample = EvalSample(
        id=7,
        epoch=3,
        input="q",
        target="a",
        scores={"verdict": Score(value="C")},
        model_usage={"mockllm/a": ModelUsage(output_tokens=12, total_tokens=20)},
        working_time=1.5,
        total_time=2.0,
        completed_at="2026-01-01T00:00:00+00:00",
    )
    event = trial_event(
        sample, run="r", model="mockllm/a", eval_id="E1", settings=InspectSettings()
    )
    assert event is not None
    assert (event.question, event.trial, event.category) == ("7", "E1:2", 1)
    assert event.cost is not None and event.cost.tokens == 12
    assert event.cost.seconds == 1.5 and event.ts == 1767225600.0
    unscored = sample.model_copy(update={"scores": {"v": Score.unscored()}})
    settings = InspectSettings()
    assert (
        trial_event(unscored, run="r", model="m", eval_id="E1", settings=settings)
        is None
    )


def test_settings_come_from_one_environment_variable() -> None:
    settings = InspectSettings.from_environment(
        {
            "SCORIO_MONITOR_URL": "mqtt://127.0.0.1:1883",
            "SCORIO_MONITOR_CATEGORIES": '{"C": 2, "P": 1, "I": 0}',
        }
    )
    assert settings.url == "mqtt://127.0.0.1:1883" and settings.categories["P"] == 1
    for bad in (
        {},
        {"SCORIO_MONITOR_URL": "http://h:1", "SCORIO_MONITOR_STATE": "s.db"},
        {"SCORIO_MONITOR_URL": "ftp://h"},
        {"SCORIO_MONITOR_STATE": "s.db", "SCORIO_MONITOR_CATEGORIES": '{"C": -1}'},
        {"SCORIO_MONITOR_STATE": "s.db", "SCORIO_MONITOR_BATCH_SIZE": "0"},
        {"SCORIO_MONITOR_STATE": "s.db", "SCORIO_MONITOR_RUN": "a/b"},
    ):
        with pytest.raises(ConfigError):
            InspectSettings.from_environment(bad)
    assert run_name("inspect_evals/gsm8k") == "inspect_evals.gsm8k"


def status_after(outcomes: Mapping[str, str], trials: int) -> Status:
    """A run where model m answered question qi ``trials`` times with
    outcome ``outcomes[m][i]`` (``"1"`` right, ``"0"`` wrong)."""
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", questions=list(QUESTIONS)))
    monitor.ingest(
        [
            TrialEvent(
                run="r",
                model=model,
                question=f"q{index}",
                trial=str(trial),
                category=int(outcome),
            )
            for model, row in outcomes.items()
            for index, outcome in enumerate(row)
            for trial in range(trials)
        ]
    )
    return monitor.status("r")


def test_only_resolved_models_and_questions_allocation_passes_over_are_skipped() -> (
    None
):
    resolved = status_after({"a": "1111", "b": "0000"}, trials=3)
    undecided = status_after({"a": "1100", "b": "1100"}, trials=1)
    lone = status_after({"a": "1111"}, trials=3)
    known = {"q0", "q1", "q2"}
    asked = {"a": {"q1"}}
    assert skip_reason(resolved, None, known, "a", "q0") is not None
    assert skip_reason(undecided, asked, known, "a", "q1") is None
    assert skip_reason(undecided, asked, known, "a", "q0") is not None
    # Never skipped: a question the monitor has not been seen to know, a
    # model it has not seen, a lone model (unless allowed), an unknown run,
    # a model allocation names nothing for.
    assert skip_reason(undecided, asked, known, "a", "q3") is None
    assert skip_reason(resolved, asked, known, "c", "q0") is None
    assert skip_reason(lone, None, known, "a", "q0") is None
    # A lone model still needs trials (no order is claimed yet); one that
    # needs none is skipped only when judged alone.
    row = lone.models[0].model_copy(update={"needs_trials": False})
    lone_done = lone.model_copy(update={"models": [row]})
    assert skip_reason(lone, None, known, "a", "q0", min_models=1) is None
    assert skip_reason(lone_done, None, known, "a", "q0") is None
    assert skip_reason(lone_done, None, known, "a", "q0", min_models=1) is not None
    assert skip_reason(None, None, known, "a", "q0") is None
    assert skip_reason(undecided, {}, known, "a", "q0") is None


async def test_early_stopping_skips_a_question_allocation_passes_over() -> None:
    monitor = Monitor()
    monitor.configure(
        RunConfig(
            run="capitals",
            questions=list(QUESTIONS),
            models=["mockllm/a", "mockllm/b"],
            max_trials_per_question=3,
        )
    )
    # Model a already has q0 at the cap; b does not; both are alike elsewhere.
    for model, q0_trials in (("mockllm/a", 3), ("mockllm/b", 1)):
        monitor.ingest(
            [
                TrialEvent(
                    run="capitals",
                    model=model,
                    question=question,
                    trial=str(trial),
                    category=int(question == "q1") if question != "q0" else trial % 2,
                )
                for question in QUESTIONS
                for trial in range(q0_trials if question == "q0" else 1)
            ]
        )
    stopping = MonitorEarlyStopping(
        lambda: AsyncMonitorClient(EmbeddedTransport(monitor)), refresh_s=0.0
    )
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="capitals",
        dataset=EvalDataset(),
        model="mockllm/a",
        config=EvalConfig(),
    )
    samples = [Sample(id=key, input=key) for key in QUESTIONS]

    assert await stopping.start_task(spec, samples, epochs=5) == "scorio-monitor"
    assert await stopping.schedule_sample("q1", 2) is None
    skipped = await stopping.schedule_sample("q0", 2)
    assert skipped is not None and skipped.reason is not None
    assert "allocation asks for other questions" in skipped.reason
    summary = await stopping.complete_task()
    assert summary["scheduled"] == 2 and summary["skipped"] == 1
    # Each look reserved a round for model a (never q0, at the cap); at the
    # end the unused ones went back: only the trial let through is in flight.
    assert isinstance(summary["reserved"], int) and summary["reserved"] >= 3
    assert monitor.in_flight("capitals") == {("mockllm/a", "q1"): 1}


async def test_a_misconfigured_hook_logs_why_and_never_stops_the_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SCORIO_MONITOR_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SCORIO_MONITOR_STATE", str(tmp_path / "state.db"))
    models = [Scripted("good", ALWAYS_RIGHT)]

    with caplog.at_level(logging.ERROR, logger="adapters.harness"):
        [log] = await evaluate(capitals(epochs=1), models, tmp_path / "logs")

    assert log.status == "success" and len(log.samples or []) == 4
    assert "set exactly one of SCORIO_MONITOR_URL and SCORIO_MONITOR_STATE" in (
        caplog.text
    )
    assert not (tmp_path / "state.db").exists()


WITHOUT_MQTT = """
import asyncio, sys
sys.modules["aiomqtt"] = None
sys.modules["paho"] = None
from adapters.harness.inspect_ai import MonitorHook, InspectSettings, connect
from monitor.errors import ConfigError

async def main() -> None:
    url = {"SCORIO_MONITOR_URL": sys.argv[1]}
    try:
        async with connect(InspectSettings.from_environment(url)):
            print("connected")
    except ConfigError as exc:
        print(exc)

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("url", ["mqtt://127.0.0.1:9", "http://127.0.0.1:9"])
def test_the_hook_loads_without_the_mqtt_libraries(url: str) -> None:
    """As ``[inspect]`` installs it: no aiomqtt; an MQTT URL names the extra."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MQTT, url],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    if url.startswith("http"):
        assert result.stdout.split() == ["connected"]
    else:
        assert result.stdout.strip() == (
            "SCORIO_MONITOR_URL=mqtt://... needs the [mqtt] extra (aiomqtt is not "
            "installed): pip install '.[mqtt]' from a checkout of scorio-monitor"
        )
