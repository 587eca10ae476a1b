"""Inspect AI early stopping: skip the sample-epochs the monitor no longer needs.

:class:`MonitorEarlyStopping` implements Inspect's ``EarlyStopping``
protocol (``inspect_ai.util``); pass it as ``Task(early_stopping=...)``.
It reads the monitor that :class:`~adapters.harness.inspect_ai.MonitorHook`
(or any other reporter) feeds, and lets a sample-epoch through only on a
reservation (``next``): so every sample-epoch it runs is in flight at the
monitor until reported, and no question goes past
``max_trials_per_question`` at any concurrency or load (without a
reservation, a capped run's sample-epoch is skipped, never run).
:func:`skip_reason` is its judgement of a model, a pure function of the
monitor's answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Final, TypeVar

from inspect_ai.dataset import Sample
from inspect_ai.log import EvalSpec
from inspect_ai.model import get_model
from inspect_ai.scorer import SampleScore
from inspect_ai.util import EarlyStop
from pydantic import JsonValue

from adapters.harness.client import AsyncMonitorClient
from adapters.harness.inspect_ai import InspectSettings, connect, run_name
from adapters.harness.retry import Retry
from adapters.harness.transports import MonitorUnavailableError
from monitor.errors import ConfigError, MonitorError, UnknownRunError
from monitor.limits import DEFAULT_LEASE_S
from monitor.schema import NextItem, Status

log = logging.getLogger(__name__)

# How long a task run waits, in all, for a monitor that does not answer.
WAIT_BUDGET_S: Final = 0.3

Connect = Callable[[], AbstractAsyncContextManager[AsyncMonitorClient]]
Result = TypeVar("Result")


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
    client: AsyncMonitorClient | None = None
    stack: contextlib.AsyncExitStack | None = None
    status: Status | None = None
    # Reserved trials not yet let through, per question.
    held: Counter[str] = field(default_factory=Counter)
    # Questions some plan named: the monitor knows them.
    known: set[str] = field(default_factory=set)
    # Questions let through once without a reservation (never planned).
    unseen: set[str] = field(default_factory=set)
    # Sample-epochs let through without a reservation, per question, that no
    # reservation has been held back for yet (their reports settle one).
    unreserved: Counter[str] = field(default_factory=Counter)
    # The run's max_trials_per_question, from the last status that said
    # (None: no cap), once a status said (cap_known).
    cap: int | None = None
    cap_known: bool = False
    # False over MQTT: it has statuses, not plans.
    plans: bool = True
    # The questions the run's config lists (None: not read yet).
    listed: frozenset[str] | None = None
    taken_s: float = -math.inf
    retry_s: float = -math.inf
    # A look in the background while the monitor is away (None: none).
    probe: asyncio.Task[None] | None = None
    # What is left of the wait budget; the monitor did not answer in time.
    # None: no budget (wait for every answer).
    wait_budget_s: float | None = None
    wait_left_s: float | None = None
    away: bool = False
    warned: bool = False
    scheduled: int = 0
    skipped: int = 0
    reserved: int = 0


class MonitorEarlyStopping:
    """Skips sample-epochs the monitor no longer needs (Inspect ``EarlyStopping``).

    Use it as ``Task(..., early_stopping=MonitorEarlyStopping())``. Before
    each sample-epoch it reads the run's status (at most every
    ``refresh_s``) and skips the sample-epoch when its model needs no more
    trials (every comparison it is part of is resolved or unresolvable, or
    its budget is spent); judged only once the status lists ``min_models``
    models, since a model alone looks resolved (declare the run's ``models``
    to have all of them listed from the start).

    Otherwise the sample-epoch runs only on a reservation: the early
    stopping holds the trials ``next`` reserved for its model (one round
    at a time: a trial per question of the task) and lets a sample-epoch
    through when it holds one of its question, asking for a new round when
    it holds none. Reserved trials count as in flight at the monitor until
    reported, so no question ever exceeds ``max_trials_per_question``, at
    any concurrency and with several evals at once; a question allocation
    passes over (it has more trials than others, or used its budget) is
    skipped. Where it cannot reserve (the monitor cannot be reached, or
    answers neither within the wait budget nor at all), a run with a cap
    (``max_trials_per_question``) skips the sample-epoch: the cap holds
    whatever the monitor's pace or the machine's load. Sample-epochs run
    unreserved only where no cap is known (the run has none, the monitor
    has not said yet, or does not know the run), over MQTT, and once per
    question the monitor has never named nor listed (an open run's new
    question, to show it); the next plan that names such a question holds
    a trial back for each.

    It can only skip, never add or reorder sample-epochs: give the task a
    generous ``epochs`` (the most trials per question worth paying for) and
    let the monitor stop it early. Over MQTT it reads statuses only (no
    reservations). One instance may serve one task run per model at once
    (``eval(task, model=[...])``): it tells them apart by the model being
    evaluated.

    Args:
        connect: Opens the client a task run reads through (once per task
            run); by default one from the environment (as
            :class:`MonitorHook`), read when a task starts, reading a state
            file read-only (the run's trials only, and then only those
            appended since the last look).
        run: The run id; by default ``SCORIO_MONITOR_RUN`` or the task name.
        min_models: Judge models only once the status lists this many (1
            for a single model with an interval-width target).
        refresh_s: Reuse a status for this long.
        lease_s: How long a reservation lasts if its trial is never
            reported (a failed or unscored sample-epoch); longer than one
            sample-epoch takes. Reservations a task run did not use are
            given back when it ends.
        wait_budget_s: How long a task run waits, in all, for a monitor
            that does not answer, until it knows the run's cap. A look that
            finds no answer within what is left of it takes the monitor for
            away: sample-epochs run (without reservations) and looks in the
            background, which never hold a sample-epoch up, find it again
            (and refill the budget). A monitor that answers, however
            slowly, costs nothing from it. Once a status gave the run's
            cap, every look waits for its answer (the transport's own
            timeout bounds it), and while the monitor is away sample-epochs
            without a reservation are skipped. A state file (the
            environment's ``SCORIO_MONITOR_STATE``) is always waited for.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        connect: Connect | None = None,
        *,
        run: str | None = None,
        min_models: int = 2,
        refresh_s: float = 1.0,
        lease_s: float = DEFAULT_LEASE_S,
        wait_budget_s: float = WAIT_BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_models < 1 or refresh_s < 0 or not lease_s > 0 or not wait_budget_s > 0:
            raise ValueError(
                "need min_models >= 1, refresh_s >= 0, lease_s > 0 and "
                f"wait_budget_s > 0; got {min_models}, {refresh_s}, {lease_s} "
                f"and {wait_budget_s}"
            )
        self._wait_budget_s = wait_budget_s
        self._connect = connect
        self._run = run
        self._min_models = min_models
        self._refresh_s = refresh_s
        self._lease_s = lease_s
        self._clock = clock
        self._tasks: dict[str, _TaskRun] = {}

    async def start_task(
        self, task: EvalSpec, samples: list[Sample], epochs: int
    ) -> str:
        """Note the task run's model, run id and questions; the manager name."""
        connect, run = self._connect, self._run
        wait_s: float | None = self._wait_budget_s
        if connect is None:
            try:
                settings = InspectSettings.from_environment(os.environ)
            except ConfigError as exc:
                log.warning("early stopping is off: %s", exc)
            else:
                run = run or settings.run
                connect = _reader(settings, run or run_name(task.task))
                if settings.url is None:
                    wait_s = None  # a state file on this machine cannot hang
        task_run = self._tasks[task.model] = _TaskRun(
            run=run or run_name(task.task),
            model=task.model,
            questions=tuple(str(sample.id) for sample in samples),
            connect=connect,
            lock=asyncio.Lock(),
            wait_budget_s=wait_s,
            wait_left_s=wait_s,
        )
        # The first look starts now, while Inspect sets the task up: the
        # first sample-epoch waits only for what is left of it.
        task_run.probe = asyncio.create_task(
            self._first_look(task_run), name=f"early-stopping-look-{task_run.run}"
        )
        return "scorio-monitor"

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        """An ``EarlyStop`` (with the reason) to skip this sample-epoch, else None."""
        task = self._current()
        if task is None:
            return None
        task.scheduled += 1
        async with task.lock:
            reason = await self._decide(task, str(id))
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
        """Forget the task run; what it scheduled, reserved and skipped, for the log."""
        task = self._current()
        if task is None:
            return {}
        del self._tasks[task.model]
        if task.probe is not None:
            task.probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task.probe
        await self._give_back(task)
        await self._close(task)
        return {
            "run": task.run,
            "model": task.model,
            "scheduled": task.scheduled,
            "reserved": task.reserved,
            "skipped": task.skipped,
        }

    def _looked(self, task: _TaskRun, status: Status | None) -> None:
        task.status, task.taken_s = status, self._clock()
        if status is not None:
            task.cap, task.cap_known = status.max_trials_per_question, True

    def _current(self) -> _TaskRun | None:
        if len(self._tasks) == 1:
            return next(iter(self._tasks.values()))
        return self._tasks.get(str(get_model()))

    async def _decide(self, task: _TaskRun, question: str) -> str | None:
        """Why to skip ``question`` now, or None to run it (holding the lock)."""
        client = await self._client(task)
        if client is None:
            return self._unreserved(task, question, "the monitor cannot be reached")
        if task.away or client.monitor_away:
            # Never wait on a monitor that did not answer: a look in the
            # background finds the monitor again.
            if task.probe is None or task.probe.done():
                task.probe = asyncio.create_task(
                    self._probe(task, client), name=f"early-stopping-probe-{task.run}"
                )
            return self._unreserved(task, question, "the monitor is away")
        if self._clock() - task.taken_s >= self._refresh_s:
            try:
                self._looked(task, await self._read(task, client.status(task.run)))
            except UnknownRunError:
                # A state file opened before the run's first trial does not
                # list it: open it again at a later look.
                self._looked(task, None)
                # A run the monitor does not know has no cap.
                task.cap, task.cap_known = None, True
                await self._close(task)
                return self._unreserved(task, question, "the run is not known yet")
        status = task.status
        if status is None:
            return self._unreserved(task, question, "the monitor did not answer")
        if len(status.models) >= self._min_models:
            reason = skip_reason(status, None, (), task.model, question)
            if reason is not None:
                return reason
        # Every sample-epoch runs on a reservation, from the first one on:
        # the monitor plans a model before it is placed (not yet reporting,
        # or too few models to compare), so the cap holds with undeclared
        # models too.
        if task.held[question] == 0:
            try:
                plan = await self._read(
                    task,
                    client.next(
                        task.run,
                        len(task.questions),
                        lease_s=self._lease_s,
                        model=task.model,
                    ),
                )
            except UnknownRunError:
                plan = None
            if plan is None:
                return self._unreserved(task, question, "the monitor gave no plan")
            for item in plan:
                task.known.add(item.question)
                task.reserved += item.trials
                # Sample-epochs of it ran unreserved: their reports will
                # settle as many of these, so as many fewer run.
                kept = min(task.unreserved[item.question], item.trials)
                task.unreserved[item.question] -= kept
                task.held[item.question] += item.trials - kept
        if task.held[question] > 0:
            task.held[question] -= 1
            return None
        if (
            question not in task.known
            and question not in task.unseen
            and question not in await self._listed(task, client)
        ):
            # Never named by a plan: the monitor may not have seen it, and a
            # plan names only questions it has seen (a question the config
            # lists it knows). One sample-epoch runs unreserved to show it.
            task.unseen.add(question)
            task.unreserved[question] += 1
            return None
        return (
            f"allocation asks for other questions of {task.model} first "
            "(or this one has used its budget)"
        )

    def _unreserved(self, task: _TaskRun, question: str, why: str) -> str | None:
        """Run ``question`` without asking the monitor, or say why not.

        A trial held from an earlier plan still runs. Beyond that, a run
        with a cap gets no sample-epoch the monitor has not reserved: the
        cap is a guarantee, whatever the monitor's pace. A run without one,
        a monitor that never answered (it cannot say the cap) or one with
        no plans (MQTT) runs it, and the next plan that names the question
        holds one trial back for it.
        """
        if task.held[question] > 0:
            task.held[question] -= 1
            return None
        if task.cap is None or not task.plans:
            task.unreserved[question] += 1
            return None
        return (
            f"no reservation for {question} ({why}): run {task.run!r} caps it at "
            f"{task.cap} trials per question"
        )

    async def _client(self, task: _TaskRun) -> AsyncMonitorClient | None:
        """The task run's client, opened on first use (retried after a failure)."""
        if task.client is not None or task.connect is None:
            return task.client
        now = self._clock()
        if now - task.retry_s < self._refresh_s:
            return None
        task.retry_s = now
        stack = contextlib.AsyncExitStack()
        try:
            task.client = await stack.enter_async_context(task.connect())
        except MonitorError as exc:
            await stack.aclose()
            self._warn(task, exc)
            return None
        task.stack = stack
        return task.client

    async def _first_look(self, task: _TaskRun) -> None:
        async with task.lock:
            if task.taken_s > -math.inf:
                return  # a sample-epoch looked first
            client = await self._client(task)
            if client is None:
                return
            try:
                self._looked(task, await self._read(task, client.status(task.run)))
            except UnknownRunError:
                self._looked(task, None)
                await self._close(task)

    async def _probe(self, task: _TaskRun, client: AsyncMonitorClient) -> None:
        """Look again once the client's breaker lets a call through."""
        await asyncio.sleep(client.retry_in_s)
        try:
            status = await client.status(task.run)
        except UnknownRunError:
            status = None
        except MonitorError:
            return
        async with task.lock:
            self._looked(task, status)
            task.away, task.wait_left_s = False, task.wait_budget_s

    async def _give_back(self, task: _TaskRun) -> None:
        """Release the reserved trials the task run did not use."""
        unused = [
            NextItem(model=task.model, question=question, trials=count)
            for question, count in task.held.items()
            if count > 0
        ]
        if not unused or task.client is None:
            return
        if task.client.monitor_away:
            log.info("unused reservations stay until they expire: the monitor is away")
            return
        try:
            await task.client.release(task.run, unused)
        except (MonitorError, NotImplementedError) as exc:
            log.info("unused reservations stay until they expire: %s", exc)
        task.held.clear()

    async def _close(self, task: _TaskRun) -> None:
        stack, task.stack, task.client = task.stack, None, None
        if stack is not None:
            try:
                await stack.aclose()
            except MonitorError as exc:
                log.warning("early stopping: closing the monitor client: %s", exc)

    async def _listed(
        self, task: _TaskRun, client: AsyncMonitorClient
    ) -> frozenset[str]:
        """The questions the run's config lists, read once per task run."""
        if task.listed is None:
            try:
                config = await self._read(task, client.config(task.run))
            except UnknownRunError:
                return frozenset()
            if config is None:
                return frozenset()  # asked again at the next unseen question
            task.listed = frozenset(config.questions or ())
        return task.listed

    async def _read(self, task: _TaskRun, answer: Awaitable[Result]) -> Result | None:
        """The monitor's answer, or None (warned once) when it has none.

        Raises:
            UnknownRunError: when the monitor does not know the run.
        """
        started = self._clock()
        # Until a status said the run has no cap (or no plans: MQTT), wait
        # for the answer (the transport's timeout bounds it): a capped run's
        # sample-epoch runs only on a reservation, so a slow answer taken
        # for none would cost the sample-epoch or, before the cap is known,
        # the cap.
        budgeted = task.cap_known and (task.cap is None or not task.plans)
        wait_s = task.wait_left_s if budgeted else None
        try:
            async with asyncio.timeout(wait_s):
                return await answer
        except TimeoutError:
            # No answer within the budget: take the monitor for away.
            task.away, task.wait_left_s = True, 0.0
            log.info(
                "early stopping runs every sample-epoch for now: the monitor did "
                "not answer within %.2f s",
                self._clock() - started,
            )
            return None
        except NotImplementedError:
            task.plans = False  # over MQTT: no plans, so no reservations
            return None
        except UnknownRunError:
            raise  # the caller decides
        except MonitorError as exc:
            self._warn(task, exc)
            return None

    def _warn(self, task: _TaskRun, exc: MonitorError) -> None:
        if isinstance(exc, MonitorUnavailableError):
            # The client's circuit breaker said so once; sample-epochs run.
            log.info("early stopping runs every sample-epoch for now: %s", exc)
            return
        if not task.warned:
            task.warned = True
            log.warning("early stopping cannot read the monitor yet: %s", exc)


def _reader(settings: InspectSettings, run: str) -> Connect:
    # One attempt: a sample-epoch waits for this look (within the wait
    # budget), and the client's circuit breaker stops asking a monitor that
    # is away.
    return lambda: connect(settings, read_only=True, retry=Retry(attempts=1), run=run)
