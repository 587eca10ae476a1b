"""Inspect AI early stopping: skip the sample-epochs the monitor no longer needs.

:class:`MonitorEarlyStopping` implements Inspect's ``EarlyStopping``
protocol (``inspect_ai.util``); pass it as ``Task(early_stopping=...)``.
It reads the monitor that :class:`~adapters.harness.inspect_ai.MonitorHook`
(or any other reporter) feeds; :func:`skip_reason` is its decision, a pure
function of the monitor's answers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from inspect_ai.dataset import Sample
from inspect_ai.log import EvalSpec
from inspect_ai.model import get_model
from inspect_ai.scorer import SampleScore
from inspect_ai.util import EarlyStop
from pydantic import JsonValue

from adapters.harness.client import AsyncMonitorClient, Retry
from adapters.harness.inspect_ai import InspectSettings, connect, run_name
from monitor.errors import ConfigError, MonitorError, UnknownRunError
from monitor.schema import Status

log = logging.getLogger(__name__)

Connect = Callable[[], AbstractAsyncContextManager[AsyncMonitorClient]]


def skip_reason(
    status: Status | None,
    asked: Mapping[str, Collection[str]] | None,
    known: Collection[str],
    model: str,
    question: str,
    *,
    min_models: int = 2,
) -> str | None:
    """Why the monitor no longer needs a trial of ``model`` on ``question``.

    Args:
        status: The run's status (``None``: the run is unknown).
        asked: Per model, the questions allocation asks for now (``None``:
            no plan available).
        known: Questions the monitor has been seen to know (named in some
            plan), so that a question it has never seen is never skipped.
        model: The model about to run.
        question: The question about to run.
        min_models: Judge models only once the status lists this many.

    Returns:
        A reason to skip, or ``None`` to run the trial.
    """
    if status is None or len(status.models) < min_models:
        return None
    row = next((row for row in status.models if row.model == model), None)
    if row is None:
        return None
    if not row.needs_trials:
        return f"{model} needs no more trials in run {status.run!r}"
    wanted = asked.get(model) if asked is not None else None
    if not wanted or question in wanted or question not in known:
        return None
    return f"allocation asks for other questions of {model} first"


@dataclass(slots=True)
class _TaskRun:
    """One task run (one model) the early stopping serves."""

    run: str
    model: str
    questions: tuple[str, ...]
    connect: Connect | None
    lock: asyncio.Lock
    status: Status | None = None
    asked: dict[str, set[str]] | None = None
    known: set[str] = field(default_factory=set)
    taken_s: float = float("-inf")
    warned: bool = False
    scheduled: int = 0
    skipped: int = 0


class MonitorEarlyStopping:
    """Skips sample-epochs the monitor no longer needs (Inspect ``EarlyStopping``).

    Use it as ``Task(..., early_stopping=MonitorEarlyStopping())``. Before
    each sample-epoch it reads the monitor (at most every ``refresh_s``) and
    skips the sample-epoch when

    - its model needs no more trials (every comparison it is part of is
      resolved or unresolvable, or its budget is spent); judged only once
      the status lists ``min_models`` models, since a model alone looks
      resolved (declare the run's ``models`` to have all of them listed
      from the start);
    - or its model needs trials but allocation (``next`` with one round's
      budget: the task's questions times the models that need trials) asks
      for other questions of that model and not this one (it has more
      trials than they do, or reached ``max_trials_per_question``).

    Otherwise the sample-epoch runs: also when the monitor cannot be
    reached, does not know the run, or has never seen the question.

    It can only skip, never add or reorder sample-epochs: give the task a
    generous ``epochs`` (the most trials per question worth paying for) and
    let the monitor stop it early. It sees what reporters (the hook) have
    delivered, not sample-epochs still running or buffered, so a modest
    ``max_samples`` sharpens its decisions. Over MQTT it reads statuses
    only (no question-level skips). One instance may serve one task run
    per model at once (``eval(task, model=[...])``): it tells them apart by
    the model being evaluated.

    Args:
        connect: Opens a client for each look; by default one from the
            environment (as :class:`MonitorHook`), read when a task starts,
            reading a state file read-only.
        run: The run id; by default ``SCORIO_MONITOR_RUN`` or the task name.
        min_models: Judge models only once the status lists this many (1
            for a single model with an interval-width target).
        refresh_s: Reuse a look at the monitor for this long.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        connect: Connect | None = None,
        *,
        run: str | None = None,
        min_models: int = 2,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_models < 1 or refresh_s < 0:
            raise ValueError(
                "need min_models >= 1 and refresh_s >= 0; got "
                f"{min_models} and {refresh_s}"
            )
        self._connect = connect
        self._run = run
        self._min_models = min_models
        self._refresh_s = refresh_s
        self._clock = clock
        self._tasks: dict[str, _TaskRun] = {}

    async def start_task(
        self, task: EvalSpec, samples: list[Sample], epochs: int
    ) -> str:
        """Note the task run's model, run id and questions; the manager name."""
        connect, run = self._connect, self._run
        if connect is None:
            try:
                settings = InspectSettings.from_environment(os.environ)
            except ConfigError as exc:
                log.warning("early stopping is off: %s", exc)
            else:
                run = run or settings.run
                connect = _reader(settings)
        self._tasks[task.model] = _TaskRun(
            run=run or run_name(task.task),
            model=task.model,
            questions=tuple(str(sample.id) for sample in samples),
            connect=connect,
            lock=asyncio.Lock(),
        )
        return "scorio-monitor"

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        """An ``EarlyStop`` (with the reason) to skip this sample-epoch, else None."""
        task = self._current()
        if task is None:
            return None
        task.scheduled += 1
        await self._refresh(task)
        reason = skip_reason(
            task.status,
            task.asked,
            task.known,
            task.model,
            str(id),
            min_models=self._min_models,
        )
        if reason is None:
            return None
        task.skipped += 1
        return EarlyStop(id=id, epoch=epoch, reason=reason, metadata={"run": task.run})

    async def complete_sample(
        self, id: str | int, epoch: int, scores: dict[str, SampleScore]
    ) -> None:
        """Nothing to do: results reach the monitor through the reporters."""
        return None

    async def complete_task(self) -> dict[str, JsonValue]:
        """Forget the task run; what it scheduled and skipped, for the log."""
        task = self._current()
        if task is None:
            return {}
        del self._tasks[task.model]
        return {
            "run": task.run,
            "model": task.model,
            "scheduled": task.scheduled,
            "skipped": task.skipped,
        }

    def _current(self) -> _TaskRun | None:
        if len(self._tasks) == 1:
            return next(iter(self._tasks.values()))
        return self._tasks.get(str(get_model()))

    async def _refresh(self, task: _TaskRun) -> None:
        if task.connect is None:
            return
        async with task.lock:
            if self._clock() - task.taken_s < self._refresh_s:
                return
            task.status, task.asked = await _look(task.connect, task)
            task.taken_s = self._clock()
            for questions in (task.asked or {}).values():
                task.known.update(questions)


def _reader(settings: InspectSettings) -> Connect:
    # Few, quick retries: a sample-epoch waits for this look.
    return lambda: connect(settings, read_only=True, retry=Retry(attempts=2))


async def _look(
    open_client: Connect, task: _TaskRun
) -> tuple[Status | None, dict[str, set[str]] | None]:
    """The run's status and, if some model needs trials, one round's plan."""
    try:
        async with open_client() as client:
            try:
                status = await client.status(task.run)
            except UnknownRunError:
                return None, None
            needing = sum(row.needs_trials for row in status.models)
            if not needing:
                return status, None
            try:
                plan = await client.next(task.run, len(task.questions) * needing)
            except NotImplementedError:
                return status, None
    except MonitorError as exc:
        if not task.warned:
            task.warned = True
            log.warning("early stopping cannot read the monitor yet: %s", exc)
        return None, None
    asked: dict[str, set[str]] = {}
    for item in plan:
        asked.setdefault(item.model, set()).add(item.question)
    return status, asked
