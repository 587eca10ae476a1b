"""The asyncio service around the engine: sources in, statuses and events out.

One :class:`Service` owns one :class:`~monitor.engine.monitor.Monitor`. The engine is
synchronous (its stores block on disk or network), so every engine call runs
on one dedicated worker thread (light calls before heavy ones, see
:mod:`monitor.service.worker`), which also serialises them. Sources hand in
payloads through :meth:`Service.ingest_payloads`, which returns only after
the store committed them, so a source may then acknowledge its transport
(decoding and counting in pieces: :mod:`monitor.service.pipe`).

Background tasks, each supervised (logged and restarted with backoff when
it fails, cancelled on exit): every source, every publisher, the status
refresher (after ingestion, at most every ``status_interval_s`` per pass)
and a look timer (fires events due to time or to other workers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TypeVar

from monitor.engine.monitor import Monitor
from monitor.errors import SourceConflictError
from monitor.feeds.files import with_implied_run
from monitor.interfaces import Payload, Publisher, TrialSource
from monitor.limits import DEFAULT_LEASE_S
from monitor.schema import NextItem, RunConfig, Status
from monitor.service.pipe import (
    PARSE_INLINE_BYTES,
    SHARED_GROUP,
    count_in_pieces,
    decode_all,
)
from monitor.service.rejections import RecentRejection, RecentRejections
from monitor.service.snapshot import Snapshot
from monitor.service.subscriptions import Subscription
from monitor.service.worker import EngineWorker
from monitor.stores.records import IngestReport, StoredEvent

log = logging.getLogger(__name__)
Result = TypeVar("Result")

_RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# A task that ran this long before failing meets a new fault: its restarts
# start from the first delay again (a store blip a day must not cost 30 s).
_HEALTHY_S = 60.0
# How long a cancelled task may take to end before it is cancelled again.
_CANCEL_RETRY_S = 1.0
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
        subscriber_max_bytes: Unread event bytes a live subscriber may hold.
        subscriber_stall_s: How long a subscriber may leave items unread
            before it is dropped.
        clock: Monotonic seconds, for latencies.
        status_turn: With several workers on a shared store: ``(run,
            seconds)`` takes the turn to refresh the run's status for that
            long (0) or says how long another worker holds it; the run's
            status then waits for its turn.
    """

    def __init__(
        self,
        monitor: Monitor,
        sources: Sequence[TrialSource] = (),
        publishers: Sequence[Publisher] = (),
        *,
        status_interval_s: float = 0.05,
        look_interval_s: float = 0.05,
        subscriber_max_bytes: int = 1 << 20,
        subscriber_stall_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        status_turn: Callable[[str, float], float] | None = None,
    ) -> None:
        self._monitor = monitor
        self._sources = list(sources)
        self._publishers = list(publishers)
        self._status_interval_s = status_interval_s
        self._look_interval_s = look_interval_s
        self._clock = clock
        self._status_turn = status_turn
        self._status_pass_s = 0.0
        self._state = Lifecycle.CREATED
        self._worker: EngineWorker | None = None
        # Large payloads are parsed on one thread of their own: parsed on
        # many at once (the default executor), they took the GIL in turns
        # with the event loop and the engine thread, and every small
        # request waited for its turn behind each of them.
        self._parser: concurrent.futures.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._snapshot = Snapshot()
        self._dirty_runs: set[str] = set()
        self._status_wanted = asyncio.Event()
        self._subscribers: set[Subscription] = set()
        self._subscriber_max_bytes = subscriber_max_bytes
        self._subscriber_stall_s = subscriber_stall_s
        self._rejections = RecentRejections()
        self._failure: SourceConflictError | None = None
        self._failed = asyncio.Event()
        self._sources_ended = 0

    # -- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> Service:
        if self._state is not Lifecycle.CREATED:
            raise RuntimeError(f"service is {self._state.value}; start a new one")
        self._loop = asyncio.get_running_loop()
        self._worker = EngineWorker()
        self._worker.start()
        self._parser = concurrent.futures.ThreadPoolExecutor(1, "parse")
        self._monitor.subscribe(self._event_from_engine)
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        self._state = Lifecycle.RUNNING
        for source in self._sources:
            self._spawn(f"source:{source.name}", functools.partial(self._read, source))
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
        for subscription in list(self._subscribers):
            self._end(subscription)
        try:
            await _cancel_until_done(self._tasks)
            if self._group is not None:
                await self._group.__aexit__(None, None, None)
        finally:
            if self._worker is not None:
                await self._worker.run(self._monitor.close)
                await self._worker.stop()
            if self._parser is not None:
                self._parser.shutdown(wait=False, cancel_futures=True)
            self._state = Lifecycle.CLOSED

    async def failed(self) -> SourceConflictError:
        """Wait until a task failed for good (another process took the
        worker's identity at a source); the caller should stop the service."""
        await self._failed.wait()
        assert self._failure is not None
        return self._failure

    @property
    def failure(self) -> SourceConflictError | None:
        return self._failure

    @property
    def input_ended(self) -> bool:
        """Whether every source has read its input to the end (a file read
        once, not followed), so no more trials come from them; False without
        sources, whose trials come over HTTP."""
        return 0 < len(self._sources) == self._sources_ended

    @property
    def snapshot(self) -> Snapshot:
        """The latest picture of every run (replaced whole, never mutated)."""
        return self._snapshot

    @property
    def monitor(self) -> Monitor:
        return self._monitor

    # -- engine access -----------------------------------------------------

    async def call(self, function: Callable[[], Result], heavy: bool = False) -> Result:
        """Run an engine call on the engine thread and await its result.

        A ``heavy`` call (a large plan, a piece of a large batch) lets queued
        light ones go first.
        """
        if self._worker is None or self._state is not Lifecycle.RUNNING:
            raise RuntimeError("the service is not running")
        return await self._worker.run(function, heavy)

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        """Parse and count payloads; returns once the store committed them.

        ``cursor`` (name, position) is committed with them (see
        :meth:`Monitor.ingest_parsed`). Large input is parsed off the engine
        thread and, without a cursor, counted in pieces of ``INGEST_PIECE``
        items, so other callers' engine calls run in between: a big request
        delays a small one by one piece's work, not by its own.
        """
        started = self._clock()
        payloads = list(payloads)
        if sum(len(payload.data) for payload in payloads) <= PARSE_INLINE_BYTES:
            report = await self.call(functools.partial(self._ingest, payloads, cursor))
        else:
            if self._loop is None or self._parser is None:
                raise RuntimeError("the service is not running")
            parsed, sources, positions = await self._loop.run_in_executor(
                self._parser, functools.partial(decode_all, payloads, cursor is None)
            )
            group = SHARED_GROUP if self._monitor.store.is_shared else 1
            report = await count_in_pieces(
                self.call, self._monitor, parsed, sources, positions, cursor, group
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
            ),
            heavy=budget > 100,
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

    def subscribe(self) -> Subscription:
        """A feed of every event fired and status refreshed from now on.

        ``get()`` answers ``None`` at its end: the service is closing, or the
        subscriber fell behind (``subscriber_max_bytes`` of unread events, or
        nothing read for ``subscriber_stall_s``) and was dropped; it may
        resume from the store's event log. Statuses are coalesced to the
        newest per run. Call :meth:`unsubscribe` when done.
        """
        subscription = Subscription(
            self._subscriber_max_bytes, self._subscriber_stall_s, self._clock
        )
        self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    def rejections(self, run: str, limit: int = 100) -> list[RecentRejection]:
        """The run's latest rejected inputs, newest first (see RecentRejections)."""
        return self._rejections.newest_first(run, limit)

    def _notify(self, item: StoredEvent | Status, size: int = 0) -> None:
        for subscription in list(self._subscribers):
            if not subscription.offer(item, size):
                log.warning("a subscriber fell behind; dropping it")
                self._end(subscription)

    def _end(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        subscription.end()

    # -- internals ---------------------------------------------------------

    def _ingest(
        self, payloads: list[Payload], cursor: tuple[str, str] | None
    ) -> IngestReport:
        parsed, sources, positions = decode_all(payloads)
        parsed = with_implied_run(self._monitor, parsed)
        return self._monitor.ingest_parsed(
            parsed, source=sources, positions=positions, cursor=cursor
        )

    def _statuses(self, runs: list[str]) -> list[Status]:
        known = set(self._monitor.runs)
        return [self._monitor.status(run) for run in runs if run in known]

    def _turns(self, runs: set[str]) -> dict[str, float]:
        """The runs whose status turn another worker holds, with the wait."""
        assert self._status_turn is not None
        # A turn spans a pass and the pause after it, as one worker's would.
        turn = self._status_interval_s + self._status_pass_s
        waits = {run: self._status_turn(run, turn) for run in runs}
        return {run: wait for run, wait in waits.items() if wait > 0}

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
        self._notify(event, len(json.dumps(event.document())))
        self._want_status(event.run)

    async def _refresh_statuses(self) -> None:
        last_full = self._clock()
        # Runs whose status turn another worker holds, and until when: not
        # asked again before then (each ask is a round trip to the store,
        # and every ingest wakes this loop).
        held: dict[str, float] = {}
        while True:
            await self._status_wanted.wait()
            self._status_wanted.clear()
            wanted, self._dirty_runs = self._dirty_runs, set()
            if "*" in wanted or self._clock() - last_full >= _REFRESH_ALL_EVERY_S:
                wanted = set(await self.call(lambda: self._monitor.runs))
                last_full = self._clock()
            if self._status_turn is not None and wanted:
                now = self._clock()
                later = {run for run in wanted if held.get(run, now) > now}
                wanted -= later
                self._dirty_runs.update(later)
                waits = {}
                if wanted:
                    waits = await self.call(functools.partial(self._turns, wanted))
                if waits:
                    # Another worker refreshes these now; come back after it.
                    wanted -= waits.keys()
                    self._dirty_runs.update(waits)
                    held.update((run, now + wait) for run, wait in waits.items())
                    asyncio.get_running_loop().call_later(
                        min(waits.values()), self._status_wanted.set
                    )
                if not wanted:
                    continue
            # Marked heavy: a refresh (several ms for a large run) waits for
            # the callers' light calls queued meanwhile, not they for it.
            started = self._clock()
            statuses = await self.call(
                functools.partial(self._statuses, sorted(wanted)), heavy=True
            )
            self._status_pass_s = self._clock() - started
            merged = dict(self._snapshot.statuses)
            for status in statuses:
                merged[status.run] = status
                for publisher in self._publishers:
                    publisher.publish_status(status)
                self._notify(status)
            self._snapshot = replace(
                self._snapshot,
                statuses=merged,
                taken_s=self._clock(),
                engine_cpu=self._worker.cpu if self._worker else {},
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

    async def _read(self, source: TrialSource) -> None:
        await source.run(self)
        # A source returns only when its input ended; one that fails is
        # restarted by its supervisor and has not ended.
        self._sources_ended += 1

    def _spawn(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        if self._group is None:
            raise RuntimeError("the service is not running")
        self._tasks.append(
            self._group.create_task(self._supervise(name, work), name=name)
        )

    async def _supervise(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` forever: log and restart it with backoff when it fails."""
        failures = 0
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await work()
                return
            except asyncio.CancelledError:
                raise
            except SourceConflictError as exc:
                # Retrying would take the identity back and fight for it.
                log.error("task %s stopped: %s", name, exc)
                if self._failure is None:
                    self._failure = exc
                self._failed.set()
                return
            except Exception:
                if loop.time() - started >= _HEALTHY_S:
                    failures = 0
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
