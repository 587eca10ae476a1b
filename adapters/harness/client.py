"""The harness client: report trials in batches, read status, ask what to run next.

:class:`AsyncMonitorClient` works over any transport of
:mod:`adapters.harness.transports` (HTTP, MQTT, an embedded monitor) and
adds what harness code needs around it: a buffer of reported trials sent in
batches (one request or message, a JSON array, per batch of a run;
:mod:`adapters.harness.buffer`), and retries with jittered backoff
(:mod:`adapters.harness.retry`). :class:`~adapters.harness.MonitorClient`
(:mod:`adapters.harness.sync_client`) is the same client for synchronous
code; :func:`transport_for` picks a transport from a URL.

A trial is one attempt: its id must be new for every eval and the same for
every re-delivery of that attempt. :func:`attempt_id` makes one from an eval
id (:func:`new_eval_id`, or the harness's own run id) and the attempt's
index, so a second eval adds trials instead of overwriting the first.

When the monitor is away the client goes on without it: after an operation
gives up, a circuit breaker (:mod:`adapters.harness.breaker`) makes later
operations fail at once, without waiting on the network, until a probe finds
the monitor back; it warns once per outage. Reported trials wait in a
bounded buffer meanwhile and are sent when the monitor returns; when the
buffer is full, new trials are dropped and counted (:attr:`dropped`), with
one warning per overflow.

Retrying is safe because ingestion is idempotent: the monitor counts a trial
once per ``(run, model, question, trial)`` however often it arrives, so a
batch whose answer was lost is simply sent again. Only transient failures
are retried (no connection, a timeout, HTTP 408, 429 or 5xx); a refusal
raises at once (see the error tree in :mod:`adapters.harness.transports`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TypeVar

from adapters.harness.breaker import BreakerSettings, CircuitBreaker
from adapters.harness.buffer import TrialBuffer
from adapters.harness.ids import attempt_id, new_eval_id
from adapters.harness.retry import Retry, retrying
from adapters.harness.transports import (
    BatchRefusedError,
    MonitorUnavailableError,
    NotAMonitorError,
    RequestRejectedError,
    Transport,
    check_run,
    transport_for,
)
from monitor.errors import MonitorError
from monitor.limits import DEFAULT_LEASE_S, MAX_LEASE_S
from monitor.schema import NextItem, Plan, RunConfig, Status, TrialEvent

log = logging.getLogger(__name__)
Result = TypeVar("Result")

__all__ = [
    "AsyncMonitorClient",
    "Lifecycle",
    "attempt_id",
    "new_eval_id",
    "transport_for",
]


class Lifecycle(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    CLOSED = "closed"


class AsyncMonitorClient:
    """Reports trials in batches and asks the monitor about runs.

    Reported trials wait in a buffer; a run's trials are sent once it holds
    ``batch_size`` of them, on :meth:`flush`, on close and, with
    ``flush_interval_s``, from a background task that sends whatever waits.
    Every operation retries transient failures (see :class:`Retry`).

    Args:
        transport: How to reach the monitor; the client enters and exits it.
        batch_size: Trials per request or message.
        flush_interval_s: If set, a background task sends buffered trials
            this often and as soon as a batch is full, so :meth:`report`
            never waits for the network (for callbacks that must return
            quickly). If ``None``, a full batch is sent by the ``report``
            call that filled it.
        max_buffered: The most unsent trials kept (see :attr:`is_full`).
        retry: Backoff for transient failures (default :class:`Retry`).
        breaker: Waits of the circuit breaker after an operation gave up.
        last_try_s: If set, how long the last flush on close may wait when
            the monitor is away (a monitor that hangs would otherwise hold
            the close for a whole request timeout); what it did not send is
            reported as undelivered.

    Examples:
        >>> from monitor import Monitor
        >>> from adapters.harness.transports import EmbeddedTransport
        >>> async def demo(monitor: Monitor) -> int:
        ...     async with AsyncMonitorClient(EmbeddedTransport(monitor)) as client:
        ...         event = TrialEvent(run="r", model="a", question=1, trial=0,
        ...                            category=1)
        ...         await client.report(event)
        ...         await client.flush()
        ...         return (await client.status("r")).trials
        >>> asyncio.run(demo(Monitor()))
        1
    """

    def __init__(
        self,
        transport: Transport,
        *,
        batch_size: int = 100,
        flush_interval_s: float | None = None,
        max_buffered: int = 100_000,
        retry: Retry | None = None,
        breaker: BreakerSettings | None = None,
        last_try_s: float | None = None,
    ) -> None:
        if flush_interval_s is not None and flush_interval_s <= 0:
            raise ValueError(f"flush_interval_s must be > 0; got {flush_interval_s}")
        if last_try_s is not None and not last_try_s > 0:
            raise ValueError(f"last_try_s must be > 0; got {last_try_s}")
        self._last_try_s = last_try_s
        # The first contact: done once something answered as a monitor.
        self._contacted = False
        self._refusal: NotAMonitorError | None = None
        self._refused = 0
        self._buffer = TrialBuffer(batch_size, max_buffered)
        self._transport = transport
        self._flush_interval_s = flush_interval_s
        self._retry = retry if retry is not None else Retry()
        self._breaker = CircuitBreaker(
            breaker, what=f"scorio-monitor at {transport.name}"
        )
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._state = Lifecycle.CREATED

    # -- lifecycle ---------------------------------------------------------

    async def __aenter__(self) -> AsyncMonitorClient:
        if self._state is not Lifecycle.CREATED:
            raise RuntimeError(f"client is {self._state.value}; make a new one")
        await self._transport.__aenter__()
        self._state = Lifecycle.RUNNING
        if self._flush_interval_s is not None:
            self._group = asyncio.TaskGroup()
            await self._group.__aenter__()
            self._flusher = self._group.create_task(
                self._flush_periodically(self._flush_interval_s),
                name="monitor-client-flush",
            )
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the background task, send what is buffered, close the transport.

        Raises:
            MonitorError: when the last flush failed (unless the block
                already raised; then the failure is logged).
        """
        if self._state is not Lifecycle.RUNNING:
            return
        try:
            if self._flusher is not None and self._group is not None:
                self._flusher.cancel()
                await self._group.__aexit__(None, None, None)
            if kind is None:
                await self._last_flush()
            else:
                try:
                    await self._last_flush()
                except MonitorError as exc:
                    log.error(
                        "%d trials were not delivered: %s", self._buffer.pending, exc
                    )
        finally:
            self._state = Lifecycle.CLOSED
            await self._transport.__aexit__(kind, error, traceback)

    async def _last_flush(self) -> None:
        if self._refusal is not None:
            return  # said when it was found
        # One last try even if the breaker is open: the monitor may be back.
        away = self._breaker.is_open
        self._breaker.probe_now()
        if not away or self._last_try_s is None or not self._buffer.pending:
            await self.flush()
            return
        try:
            async with asyncio.timeout(self._last_try_s):
                await self.flush()
        except TimeoutError:
            raise MonitorUnavailableError(
                f"the monitor at {self._transport.name} did not answer the last "
                f"try within {self._last_try_s} s"
            ) from None

    # -- trials ------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Trials reported but not sent yet."""
        return self._buffer.pending

    @property
    def dropped(self) -> int:
        """Trials dropped because the buffer was full while the monitor was away."""
        return self._buffer.dropped

    @property
    def monitor_away(self) -> bool:
        """Whether the last operation found the monitor unreachable."""
        return self._breaker.is_open

    @property
    def refused(self) -> int:
        """Trials not sent because the address is not a scorio monitor."""
        return self._refused

    @property
    def retry_in_s(self) -> float:
        """Seconds until an operation may try the network again (0: now)."""
        return self._breaker.retry_in_s

    @property
    def is_full(self) -> bool:
        """Whether the buffer holds ``max_buffered`` trials.

        A caller that must not wait can check this and drop a trial instead
        of reporting it (:meth:`report` would first try to flush).
        """
        return self._buffer.is_full

    async def report(self, events: TrialEvent | Iterable[TrialEvent]) -> None:
        """Buffer trials; send full batches (see the class docstring).

        When the buffer is full and cannot be sent (the monitor is away),
        these trials are dropped and counted in :attr:`dropped`, with one
        warning per overflow.

        Raises:
            ValueError: for a run id with ``/``, ``+`` or ``#`` in it.
            MonitorError: when the monitor refused a batch, or, without a
                background task, when sending a full batch failed (they
                stay buffered).
        """
        self._require_running()
        batch = [events] if isinstance(events, TrialEvent) else list(events)
        for event in batch:
            check_run(event.run)
        if self._refusal is not None:
            self._refused += len(batch)  # said once, when it was found
            return
        if not self._buffer.has_room(len(batch)):
            with contextlib.suppress(MonitorUnavailableError):
                await self.flush()
            if not self._buffer.has_room(len(batch)):
                self._buffer.drop(len(batch))
                return
        self._buffer.add(batch)
        if self._buffer.has_full_batch:
            if self._flusher is not None:
                # While the monitor is away the flusher keeps its interval:
                # waking it per trial would only fail again, at once.
                if not self._breaker.is_open:
                    self._wake.set()
            else:
                await self._send(complete_only=True)

    async def flush(self) -> int:
        """Send every buffered trial now; the number sent.

        A batch the monitor refuses is dropped (sending it again would be
        refused again) and its error raised; a batch that could not be
        delivered stays buffered for the next flush.

        Raises:
            MonitorUnavailableError: when the retries ran out.
            BatchRefusedError: when the monitor refused a batch (flush
                again to send the rest).
            NotAMonitorError: when the first contact found no monitor.
        """
        self._require_running()
        return await self._send(complete_only=False)

    async def _send(self, complete_only: bool) -> int:
        sent = 0
        async with self._lock:
            if self._refusal is not None:
                raise self._refusal
            if self._buffer.pending and not self._contacted:
                await self.check()
            for run in self._buffer.runs:
                while chunk := self._buffer.batch(run, complete_only=complete_only):
                    try:
                        await self._retrying(
                            f"sending {len(chunk)} trials of run {run!r}",
                            functools.partial(self._transport.send, run, chunk),
                        )
                    except RequestRejectedError as exc:
                        # Sending it again would be refused again.
                        self._buffer.forget(run, len(chunk))
                        if exc.status not in (None, 413, 422):
                            raise  # not about these trials (e.g. a token)
                        raise BatchRefusedError(
                            run, len(chunk), exc.detail, exc.status
                        ) from exc
                    self._buffer.forget(run, len(chunk))
                    sent += len(chunk)
        return sent

    async def _flush_periodically(self, interval_s: float) -> None:
        """Supervise background flushes: log failures, never give up."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._send(complete_only=False)
            except NotAMonitorError as exc:
                log.error(
                    "dropped %d trials (and drop later ones): %s", self._refused, exc
                )
                return  # nothing will ever be sent
            except MonitorUnavailableError as exc:
                # The breaker warned once; this repeats every interval.
                log.debug("background flush failed (%s); will try again", exc)
            except BatchRefusedError as exc:
                log.error("%s", exc)
            except MonitorError as exc:
                log.warning("background flush failed (%s); will try again", exc)
            except Exception:
                log.exception("background flush failed; will try again")

    # -- questions ---------------------------------------------------------

    async def check(self) -> None:
        """The first contact: raise unless a scorio monitor answers there.

        Call it before the work starts, so a wrong address fails once, with
        one clear message, instead of every batch failing later.

        Raises:
            NotAMonitorError: something answers, but not a scorio monitor
                (e.g. a URL with a wrong path: HTTP 404).
            MonitorUnavailableError: nothing answered (the circuit breaker
                warns once; reported trials wait in the buffer).
        """
        self._require_running()
        if self._refusal is not None:
            raise self._refusal
        try:
            await self._retrying("contacting the monitor", self._transport.check)
        except NotAMonitorError as exc:
            self._refuse(exc)
            raise
        self._contacted = True

    def _refuse(self, refusal: NotAMonitorError) -> None:
        """Stop sending: nothing sent to this address would ever be counted."""
        self._refusal = refusal
        self._refused += self._buffer.pending
        for run in self._buffer.runs:
            while chunk := self._buffer.batch(run, complete_only=False):
                self._buffer.forget(run, len(chunk))

    async def config(self, run: str) -> RunConfig:
        """The run's config (what ``GET /runs/{run}/config`` answers).

        Raises:
            UnknownRunError: when the monitor does not know the run.
            NotImplementedError: over MQTT.
        """
        self._require_running()
        return await self._retrying(
            f"reading the config of run {run!r}",
            functools.partial(self._transport.config, run),
        )

    async def status(self, run: str) -> Status:
        """The run's status (what ``GET /runs/{run}/status`` answers).

        Raises:
            UnknownRunError: when the monitor does not know the run.
        """
        self._require_running()
        return await self._retrying(
            f"reading the status of run {run!r}",
            functools.partial(self._transport.status, run),
        )

    async def next(
        self,
        run: str,
        budget: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> Plan:
        """Reserve ``budget`` trials: which (model, question, trials) to run next.

        Each item is a reservation with its ``lease`` and ``expires``: until
        its trials are reported or the lease ends (after ``lease_s``
        seconds), every later plan counts them as in flight, so two
        schedulers asking at once never get the same room. ``lease_s=0``
        only looks ahead (it reserves nothing); ``model`` plans for that
        model alone. A plan short of ``budget`` says why in ``waiting_for``.

        Raises:
            ValueError: for a negative budget, or a lease outside 0 to
                ``MAX_LEASE_S`` (a day).
            NotImplementedError: over MQTT.
            UnknownRunError: when the monitor does not know the run.
        """
        self._require_running()
        if budget < 0 or not 0 <= lease_s <= MAX_LEASE_S:
            raise ValueError(
                f"budget must be >= 0 and lease_s from 0 to {MAX_LEASE_S:g}; "
                f"got {budget} and {lease_s}"
            )
        items = await self._retrying(
            f"planning run {run!r}",
            functools.partial(self._transport.next, run, budget, lease_s, model),
        )
        # A plan says why it holds no more (waiting_for); an older monitor's
        # answer is a plan without reasons.
        return items if isinstance(items, Plan) else Plan(items)

    async def release(self, run: str, items: Iterable[NextItem]) -> int:
        """Give back reserved trials that will not run; how many were given back.

        Items as :meth:`next` answered them, with ``trials`` set to what is
        given back (without a ``lease``: the newest leases holding them).

        Raises:
            NotImplementedError: over MQTT.
            UnknownRunError: when the monitor does not know the run.
        """
        self._require_running()
        listed = list(items)
        return await self._retrying(
            f"releasing reservations of run {run!r}",
            functools.partial(self._transport.release, run, listed),
        )

    async def declare(self, config: RunConfig) -> RunConfig:
        """Declare a run, or update it (as ``POST /runs``).

        Raises:
            ConfigError: when the monitor refuses the config.
            NotImplementedError: over MQTT.
        """
        self._require_running()
        return await self._retrying(
            f"declaring run {config.run!r}",
            functools.partial(self._transport.declare, config),
        )

    # -- internals ---------------------------------------------------------

    def _require_running(self) -> None:
        if self._state is not Lifecycle.RUNNING:
            raise RuntimeError(
                f"client is {self._state.value}; use it inside `async with`"
            )

    async def _retrying(
        self, action: str, operation: Callable[[], Awaitable[Result]]
    ) -> Result:
        return await retrying(action, operation, self._retry, self._breaker)
