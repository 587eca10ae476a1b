"""The asyncio service around the engine: sources in, statuses and events out.

One :class:`Service` owns one :class:`~monitor.engine.Monitor`. The engine is
synchronous (its stores block on disk or network), so every engine call runs
on one dedicated worker thread, which also serialises them. Sources hand in
payloads through :meth:`Service.ingest_payloads`, which returns only after
the store committed them, so a source may then acknowledge its transport.

Background tasks, each supervised (logged and restarted with backoff when
it fails, cancelled on exit): every source, every publisher, the status
refresher (after ingestion, at most every ``status_interval_s`` per pass)
and a look timer (fires events due to time or to other workers).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TypeVar

from monitor.engine import DEFAULT_LEASE_S, Monitor
from monitor.interfaces import Payload, Publisher, TrialSource
from monitor.parsing import Parsed, parse_payload
from monitor.rejections import RecentRejection, RecentRejections
from monitor.schema import NextItem, Rejection, RunConfig, Status
from monitor.snapshot import Snapshot
from monitor.store import IngestReport, StoredEvent

log = logging.getLogger(__name__)
Result = TypeVar("Result")

_RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# How long a cancelled task may take to end before it is cancelled again.
_CANCEL_RETRY_S = 1.0
TRACE_POINTS = 2000


@dataclass(frozen=True, slots=True)
class TracePoint:
    """A run's ranking at one moment, for the dashboard's trace."""

    ts: float
    trials: int
    order: tuple[str, ...]
    mu: dict[str, float]


_REFRESH_ALL_EVERY_S = 1.0


class Lifecycle(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    CLOSED = "closed"


class Service:
    """Runs sources, publishers and timers around one engine.

    Args:
        monitor: The engine (it owns its store).
        sources: Transports delivering trial payloads.
        publishers: Outputs for statuses and events.
        status_interval_s: Least time between two status refresh passes.
        look_interval_s: How often the look timer fires.
        clock: Monotonic seconds, for latencies.
    """

    def __init__(
        self,
        monitor: Monitor,
        sources: Sequence[TrialSource] = (),
        publishers: Sequence[Publisher] = (),
        *,
        status_interval_s: float = 0.05,
        look_interval_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._monitor = monitor
        self._sources = list(sources)
        self._publishers = list(publishers)
        self._status_interval_s = status_interval_s
        self._look_interval_s = look_interval_s
        self._clock = clock
        self._state = Lifecycle.CREATED
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._snapshot = Snapshot()
        self._dirty_runs: set[str] = set()
        self._status_wanted = asyncio.Event()
        self._subscribers: set[asyncio.Queue[StoredEvent | Status | None]] = set()
        self._traces: dict[str, collections.deque[TracePoint]] = {}
        self._rejections = RecentRejections()

    # -- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> Service:
        if self._state is not Lifecycle.CREATED:
            raise RuntimeError(f"service is {self._state.value}; start a new one")
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self._monitor.subscribe(self._event_from_engine)
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        self._state = Lifecycle.RUNNING
        for source in self._sources:
            self._spawn(f"source:{source.name}", functools.partial(source.run, self))
        for publisher in self._publishers:
            self._spawn(f"publisher:{publisher.name}", publisher.run)
        self._spawn("status", self._refresh_statuses)
        self._spawn("looks", self._look_timer)
        self._dirty_runs.update(await self.call(lambda: self._monitor.runs))
        self._status_wanted.set()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for queue in list(self._subscribers):
            self._end(queue)
        try:
            await _cancel_until_done(self._tasks)
            if self._group is not None:
                await self._group.__aexit__(None, None, None)
        finally:
            if self._executor is not None:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._monitor.close
                )
                self._executor.shutdown(wait=True)
            self._state = Lifecycle.CLOSED

    @property
    def snapshot(self) -> Snapshot:
        """The latest picture of every run (replaced whole, never mutated)."""
        return self._snapshot

    @property
    def monitor(self) -> Monitor:
        return self._monitor

    # -- engine access -----------------------------------------------------

    async def call(self, function: Callable[[], Result]) -> Result:
        """Run an engine call on the engine thread and await its result."""
        if self._executor is None or self._state is not Lifecycle.RUNNING:
            raise RuntimeError("the service is not running")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function)

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        """Parse and count payloads; returns once the store committed them.

        ``cursor`` (name, position) is committed with them (see
        :meth:`Monitor.ingest_parsed`).
        """
        started = self._clock()
        report = await self.call(
            functools.partial(self._ingest, list(payloads), cursor)
        )
        elapsed = self._clock() - started
        self._account(report, elapsed, len(payloads))
        return report

    async def status(self, run: str) -> Status:
        return await self.call(functools.partial(self._monitor.status, run))

    async def next(
        self,
        run: str,
        budget: int,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> list[NextItem]:
        return await self.call(
            functools.partial(
                self._monitor.next, run, budget, lease_s=lease_s, model=model
            )
        )

    async def release(self, run: str, items: list[NextItem]) -> int:
        return await self.call(functools.partial(self._monitor.release, run, items))

    async def configure(self, config: RunConfig) -> RunConfig:
        configured = await self.call(functools.partial(self._monitor.configure, config))
        self._want_status(config.run)
        return configured

    async def runs(self) -> list[str]:
        return await self.call(lambda: self._monitor.runs)

    async def events_after(self, run: str, seq: int) -> list[StoredEvent]:
        return await self.call(functools.partial(self._monitor.events_after, run, seq))

    async def config(self, run: str) -> RunConfig:
        return await self.call(functools.partial(self._monitor.config, run))

    def subscribe(self) -> asyncio.Queue[StoredEvent | Status | None]:
        """A queue of every event fired and status refreshed from now on.

        ``None`` ends it: the service is closing, or the subscriber fell
        10,000 items behind and was dropped (it may resume from the store's
        event log). Call :meth:`unsubscribe` when done.
        """
        queue: asyncio.Queue[StoredEvent | Status | None] = asyncio.Queue(
            maxsize=10_000
        )
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[StoredEvent | Status | None]) -> None:
        self._subscribers.discard(queue)

    def rejections(self, run: str, limit: int = 100) -> list[RecentRejection]:
        """The run's latest rejected inputs, newest first (see RecentRejections)."""
        return self._rejections.newest_first(run, limit)

    def trace(self, run: str) -> list[TracePoint]:
        """Recent (time, trials, order, mu per model) points of a run, oldest first."""
        return list(self._traces.get(run, ()))

    def _notify(self, item: StoredEvent | Status) -> None:
        for queue in list(self._subscribers):
            if queue.full():
                log.warning("a subscriber fell behind; dropping it")
                self._end(queue)
            else:
                queue.put_nowait(item)

    def _end(self, queue: asyncio.Queue[StoredEvent | Status | None]) -> None:
        self._subscribers.discard(queue)
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(None)

    # -- internals ---------------------------------------------------------

    def _ingest(
        self, payloads: list[Payload], cursor: tuple[str, str] | None
    ) -> IngestReport:
        parsed: list[Parsed] = []
        sources: list[str] = []
        positions: list[int | None] = []
        for payload in payloads:
            items: list[Parsed]
            if payload.oversize:
                items = [
                    Rejection(
                        reason=f"line of {payload.oversize} bytes exceeds the limit",
                        kind="too_large",
                        source=payload.source,
                        position=payload.position,
                        raw=f"({payload.oversize} bytes, not kept)",
                        run=payload.run,
                    )
                ]
            else:
                items = parse_payload(
                    payload.data, payload.source, payload.position, run=payload.run
                )
                if payload.run is not None:
                    # Unreadable input on a run's channel is that run's to see.
                    items = [
                        item.model_copy(update={"run": payload.run})
                        if isinstance(item, Rejection) and item.run is None
                        else item
                        for item in items
                    ]
            parsed.extend(items)
            sources.extend([payload.source] * len(items))
            positions.extend([payload.position] * len(items))
        return self._monitor.ingest_parsed(
            parsed, source=sources, positions=positions, cursor=cursor
        )

    def _record_trace(self, status: Status) -> None:
        points = self._traces.setdefault(
            status.run, collections.deque(maxlen=TRACE_POINTS)
        )
        if not status.models or (points and points[-1].trials == status.trials):
            return
        points.append(
            TracePoint(
                ts=time.time(),
                trials=status.trials,
                order=tuple(row.model for row in status.models),
                mu={row.model: row.mu for row in status.models},
            )
        )

    def _statuses(self, runs: list[str]) -> list[Status]:
        known = set(self._monitor.runs)
        return [self._monitor.status(run) for run in runs if run in known]

    def _account(self, report: IngestReport, elapsed_s: float, payloads: int) -> None:
        rejected = dict(self._snapshot.rejected)
        for rejection in report.rejected:
            rejected[rejection.kind] = rejected.get(rejection.kind, 0) + 1
        self._rejections.record(report.rejected)
        self._snapshot = replace(
            self._snapshot,
            ingested=self._snapshot.ingested + report.accepted,
            duplicates=self._snapshot.duplicates + report.duplicates,
            corrections=self._snapshot.corrections + report.corrections,
            rejected=rejected,
            latency=self._snapshot.latency.observe(elapsed_s, max(payloads, 1)),
        )
        for run in report.runs:
            self._want_status(run)

    def _want_status(self, run: str | None) -> None:
        if run is None:
            self._dirty_runs.add("*")
        else:
            self._dirty_runs.add(run)
        self._status_wanted.set()

    def _event_from_engine(self, event: StoredEvent) -> None:
        """Engine-thread callback: hand the event to the loop."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._deliver_event, event)

    def _deliver_event(self, event: StoredEvent) -> None:
        for publisher in self._publishers:
            publisher.publish_event(event)
        self._notify(event)
        self._want_status(event.run)

    async def _refresh_statuses(self) -> None:
        last_full = self._clock()
        while True:
            await self._status_wanted.wait()
            self._status_wanted.clear()
            wanted, self._dirty_runs = self._dirty_runs, set()
            if "*" in wanted or self._clock() - last_full >= _REFRESH_ALL_EVERY_S:
                wanted = set(await self.call(lambda: self._monitor.runs))
                last_full = self._clock()
            statuses = await self.call(
                functools.partial(self._statuses, sorted(wanted))
            )
            merged = dict(self._snapshot.statuses)
            for status in statuses:
                merged[status.run] = status
                for publisher in self._publishers:
                    publisher.publish_status(status)
                self._notify(status)
                self._record_trace(status)
            self._snapshot = replace(
                self._snapshot, statuses=merged, taken_s=self._clock()
            )
            await asyncio.sleep(self._status_interval_s)

    async def _look_timer(self) -> None:
        last_full = self._clock()
        while True:
            await asyncio.sleep(self._look_interval_s)
            if self._monitor.store.is_shared and self._clock() - last_full >= 1.0:
                # Other workers change shared counts: look at every run.
                await self.call(self._monitor.look)
                self._want_status(None)
                last_full = self._clock()
            else:
                await self.call(self._monitor.look_pending)

    def _spawn(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        if self._group is None:
            raise RuntimeError("the service is not running")
        self._tasks.append(
            self._group.create_task(self._supervise(name, work), name=name)
        )

    async def _supervise(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` forever: log and restart it with backoff when it fails."""
        failures = 0
        while True:
            try:
                await work()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = _RESTART_DELAYS_S[min(failures, len(_RESTART_DELAYS_S) - 1)]
                failures += 1
                log.exception("task %s failed; restarting in %.1f s", name, delay)
                await asyncio.sleep(delay)


async def _cancel_until_done(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks, again and again until each has ended.

    A cancellation can be lost inside a library: redis-py's blocking reads
    under Python 3.11's ``asyncio.timeout`` swallow one that arrives as
    their own timeout fires, and the task reads on. Repeating it ends them.
    """
    pending = [task for task in tasks if not task.done()]
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=_CANCEL_RETRY_S)
        pending = [task for task in pending if not task.done()]
