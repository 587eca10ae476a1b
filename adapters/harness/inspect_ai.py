"""Inspect AI: stream finished sample-epochs to the monitor; skip unneeded ones.

**Reporting.** :class:`MonitorHook` is an Inspect hook (registered with
``@hooks`` when this module is imported; Inspect imports it through the
``inspect_ai`` entry point of the scorio-monitor package). One environment
variable enables it: ``SCORIO_MONITOR_URL`` (``http(s)://`` for the
service's HTTP API, ``mqtt(s)://`` for its MQTT topics) or
``SCORIO_MONITOR_STATE`` (a state file: the embedded monitor, one machine).
Every finished sample-epoch becomes one trial:

=========  ==========================================================
run        the task name (``SCORIO_MONITOR_RUN`` to choose another);
           ``/``, ``+`` and ``#`` become ``.``
model      the evaluated model, e.g. ``openai/gpt-4o``
question   the dataset sample id
trial      the attempt: ``<eval id>:<epoch - 1>`` (see below)
category   the score, mapped as below
cost       the model's output tokens; working time (else total time)
=========  ==========================================================

A trial is one attempt. Its id joins the eval's own id (Inspect's
``eval_id``, new for every ``inspect eval`` of a task and model) and the
epoch, so a second eval of the same task and model adds trials instead of
overwriting the first one's, while a re-delivery of the same sample-epoch
(the hook retrying a batch) is counted once. State files written when the
trial id was the bare epoch (``0``, ``1``, ...) keep their trials: new ids
never collide with them.

Scores become categories: a string through ``SCORIO_MONITOR_CATEGORIES`` (a
JSON object), by default ``C`` → 1, ``I`` → 0, ``P`` → 0, ``N`` → 0 (a
binary run: partial credit is not a success, no answer is a wrong answer;
for partial credit map ``{"C": 2, "P": 1, "I": 0, "N": 0}``); true and
false → 1 and 0; a whole number → itself. Before a task's samples run, the
mapping is checked against the run (:func:`categories_refusal`): a run the
monitor knows must weigh every category the mapping names, else the hook
says so once and reports nothing from that run; a new run is declared from
an explicit mapping with Inspect's own value of each score as its weight (C
1, P 0.5, I and N 0), so the status avg is Inspect's accuracy. NaN
(``Score.unscored``), other numbers, lists, dicts, unmapped strings and
errored samples are not outcomes: they are logged and not sent. With
several scorers, ``SCORIO_MONITOR_SCORER`` names the one to use (default:
the first). Also read: ``SCORIO_MONITOR_TOKEN`` (bearer token),
``SCORIO_MONITOR_TOPIC_PREFIX`` (MQTT, default ``scorio``),
``SCORIO_MONITOR_BATCH_SIZE`` (50) and ``SCORIO_MONITOR_FLUSH_INTERVAL_S``
(0.5), ``SCORIO_MONITOR_MAX_BUFFERED`` (100000). Callbacks only buffer; a
background task sends the batches, the end of each task flushes, and the
end of the run flushes and closes.

The first contact, before any sample runs, checks that a scorio monitor
answers at the URL: one that is not (a wrong path: HTTP 404) is said once,
and nothing of the run is reported. Several processes may share one state
file: the one holding its lock writes, the others spool beside it for that
one to count (:class:`~adapters.harness.transports.StateFileTransport`).

A monitor that is away or hangs never holds the eval up: the first contact
waits ``FIRST_CONTACT_S`` at most, each send is one attempt, and after a
failure the client's circuit breaker answers at once (no network) until a
probe in the background finds the monitor back; it warns once. Trials wait
in the buffer (up to ``SCORIO_MONITOR_MAX_BUFFERED``; beyond, new ones are
dropped with one warning) and go out when the monitor returns; the end of a
task does not wait for them, and what is still unsent after the run's last
try (``LAST_TRY_S`` at most) is logged as an error with its count.

**Early stopping** lives in :mod:`adapters.harness.early_stopping`; it reads
the monitor this hook feeds.

Both need the asyncio backend (Inspect's default).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from inspect_ai.hooks import (
    Hooks,
    RunEnd,
    RunStart,
    SampleEnd,
    TaskEnd,
    TaskStart,
    hooks,
)
from inspect_ai.log import EvalSample
from inspect_ai.scorer import Score

from adapters.harness.client import AsyncMonitorClient
from adapters.harness.inspect_setup import (
    DEFAULT_CATEGORIES,
    FIRST_CONTACT_S,
    LAST_TRY_S,
    STATE,
    URL,
    InspectSettings,
    categories_refusal,
    category_of,
    connect,
    inspect_weights,
    is_enabled,
    run_name,
)
from adapters.harness.retry import Retry
from adapters.harness.transports import MonitorUnavailableError
from monitor.errors import ConfigError, MonitorError
from monitor.schema import Cost, TrialEvent

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CATEGORIES",
    "FIRST_CONTACT_S",
    "LAST_TRY_S",
    "STATE",
    "URL",
    "InspectSettings",
    "MonitorHook",
    "attempt_id",
    "categories_refusal",
    "category_of",
    "connect",
    "inspect_weights",
    "is_enabled",
    "run_name",
    "trial_event",
]


def attempt_id(eval_id: str, epoch: int) -> str:
    """The trial id of an eval's sample-epoch (``epoch`` counts from 1).

    Examples:
        >>> attempt_id("Xk3fPq", 1)
        'Xk3fPq:0'
    """
    return f"{eval_id}:{epoch - 1}"


def trial_event(
    sample: EvalSample,
    *,
    run: str,
    model: str,
    eval_id: str,
    settings: InspectSettings,
) -> TrialEvent | None:
    """The trial a finished sample-epoch stands for; ``None`` (logged) if none.

    ``eval_id`` is the eval's id (``EvalSpec.eval_id``): with the epoch it
    makes the trial id (:func:`attempt_id`).
    """
    where = f"{model} on sample {sample.id!r}, epoch {sample.epoch}"
    if sample.error is not None:
        log.info("not counted: %s failed: %s", where, sample.error.message)
        return None
    score = _chosen_score(sample.scores, settings.scorer)
    if score is None:
        log.info("not counted: %s has no score", where)
        return None
    category = category_of(score.value, settings.categories)
    if category is None:
        if isinstance(score.value, float) and score.value != score.value:
            log.info("not counted: %s is unscored (%s)", where, score.reason)
        else:
            log.warning(
                "not counted: %s scored %r, which is no category (map it with "
                "SCORIO_MONITOR_CATEGORIES)",
                where,
                score.value,
            )
        return None
    return TrialEvent(
        run=run,
        model=model,
        question=str(sample.id),
        trial=attempt_id(eval_id, sample.epoch),
        category=category,
        cost=_cost(sample, model),
        ts=_timestamp(sample.completed_at),
    )


def _chosen_score(
    scores: Mapping[str, Score] | None, scorer: str | None
) -> Score | None:
    if not scores:
        return None
    if scorer is not None:
        return scores.get(scorer)
    return next(iter(scores.values()))


def _cost(sample: EvalSample, model: str) -> Cost | None:
    usage = sample.model_usage.get(model)
    tokens = usage.output_tokens if usage is not None else None
    seconds = sample.working_time
    if seconds is None:
        seconds = sample.total_time
    if tokens is None and seconds is None:
        return None
    return Cost(tokens=tokens, seconds=None if seconds is None else max(seconds, 0.0))


def _timestamp(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# -- the hook --------------------------------------------------------------


@dataclass(slots=True)
class _Reporter:
    settings: InspectSettings
    client: AsyncMonitorClient
    stack: contextlib.AsyncExitStack
    # Per run: why its trials are not reported (None: they are).
    refusals: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _TaskReport:
    run_id: str
    eval_id: str
    run: str
    model: str


@hooks(
    name="scorio_monitor",
    description="Streams finished sample-epochs to scorio-monitor",
)
class MonitorHook(Hooks):
    """Reports every finished sample-epoch to the monitor (see the module doc).

    Inspect makes one instance per process and shares it between runs,
    tasks and samples, so its state is keyed: a client per Inspect run,
    the run id and model per task (``SampleEnd`` names neither). A failure
    to reach the monitor is logged; it never stops the eval.
    """

    def __init__(self) -> None:
        self._reporters: dict[str, _Reporter] = {}
        self._tasks: dict[str, _TaskReport] = {}

    def enabled(self) -> bool:
        """Whether ``SCORIO_MONITOR_URL`` or ``SCORIO_MONITOR_STATE`` is set."""
        return is_enabled(os.environ)

    async def on_run_start(self, data: RunStart) -> None:
        """Read the settings and open a client for this Inspect run."""
        try:
            settings = InspectSettings.from_environment(os.environ)
        except ConfigError as exc:
            log.error("not reporting to scorio-monitor: %s", exc)
            return
        stack = contextlib.AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                # One attempt per send: the client's circuit breaker and
                # background flush do the retrying, so a monitor that is
                # away never holds the eval up.
                connect(
                    settings,
                    flush_interval_s=settings.flush_interval_s,
                    retry=Retry(attempts=1),
                    last_try_s=LAST_TRY_S,
                )
            )
        except MonitorError as exc:
            await stack.aclose()
            log.error("not reporting to scorio-monitor: %s", exc)
            return
        try:
            # The first contact, before any sample runs: a URL that is not a
            # monitor stops here, once, instead of failing every batch.
            await client.check()
        except MonitorUnavailableError:
            pass  # the client warned once; trials wait in its buffer
        except MonitorError as exc:
            await stack.aclose()
            log.error("not reporting to scorio-monitor: %s", exc)
            return
        self._reporters[data.run_id] = _Reporter(settings, client, stack)

    async def on_task_start(self, data: TaskStart) -> None:
        """Remember the task's run id and model."""
        reporter = self._reporters.get(data.run_id)
        if reporter is None:
            return
        run = reporter.settings.run or run_name(data.spec.task)
        if run not in reporter.refusals:
            refusal = None
            if not reporter.client.monitor_away:
                refusal = await categories_refusal(
                    reporter.client, run, reporter.settings
                )
                if refusal is not None:
                    log.error(
                        "not reporting run %r to scorio-monitor: %s", run, refusal
                    )
            reporter.refusals[run] = refusal
        if reporter.refusals[run] is not None:
            return
        self._tasks[data.eval_id] = _TaskReport(
            run_id=data.run_id, eval_id=data.eval_id, run=run, model=data.spec.model
        )

    async def on_sample_end(self, data: SampleEnd) -> None:
        """Buffer the finished sample-epoch's trial (never waits for the network)."""
        task = self._tasks.get(data.eval_id)
        reporter = self._reporters.get(data.run_id)
        if task is None or reporter is None:
            return
        event = trial_event(
            data.sample,
            run=task.run,
            model=task.model,
            eval_id=task.eval_id,
            settings=reporter.settings,
        )
        if event is None:
            return
        try:
            await reporter.client.report(event)
        except MonitorError as exc:
            log.warning("could not report %s: %s", event, exc)

    async def on_task_end(self, data: TaskEnd) -> None:
        """Send the buffered trials."""
        task = self._tasks.pop(data.eval_id, None)
        reporter = self._reporters.get(data.run_id)
        if task is None or reporter is None:
            return
        if reporter.client.monitor_away:
            # Waiting would hold the eval: the background flush and the last
            # try at the run's end send them when the monitor is back.
            log.info(
                "%d trials of task %s wait for the monitor",
                reporter.client.pending,
                task.run,
            )
            return
        try:
            await reporter.client.flush()
        except MonitorUnavailableError as exc:
            # The client warned when the monitor went away; its trials wait.
            log.info(
                "%d trials of task %s wait for the monitor: %s",
                reporter.client.pending,
                task.run,
                exc,
            )
        except MonitorError as exc:
            log.warning("could not send the trials of task %s: %s", task.run, exc)

    async def on_run_end(self, data: RunEnd) -> None:
        """Send what is left and close the client."""
        reporter = self._reporters.pop(data.run_id, None)
        for eval_id, task in list(self._tasks.items()):
            if task.run_id == data.run_id:
                del self._tasks[eval_id]
        if reporter is None:
            return
        client = reporter.client
        try:
            await reporter.stack.aclose()
        except MonitorError as exc:
            log.error(
                "%d trials of this run were not delivered (the monitor is away): %s",
                client.pending,
                exc,
            )
        if client.dropped:
            log.error(
                "%d trials were dropped while the monitor was away and the "
                "buffer was full",
                client.dropped,
            )
