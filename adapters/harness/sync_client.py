"""The harness client for synchronous code, on a private event-loop thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

from adapters.harness.breaker import BreakerSettings
from adapters.harness.client import AsyncMonitorClient, Lifecycle
from adapters.harness.retry import Retry
from adapters.harness.transports import Transport
from monitor.limits import DEFAULT_LEASE_S
from monitor.schema import NextItem, Plan, RunConfig, Status, TrialEvent

Result = TypeVar("Result")


class MonitorClient:
    """The client for synchronous code (a plain script); a context manager.

    It runs an :class:`AsyncMonitorClient` on a private event-loop thread
    (so MQTT keep-alives and the background flush go on between calls);
    every method blocks until its operation is done and raises what the
    async method raises. Arguments are those of :class:`AsyncMonitorClient`.
    Do not use it from inside a running event loop's thread.

    Examples:
        >>> from monitor import Monitor
        >>> from adapters.harness.transports import EmbeddedTransport
        >>> with MonitorClient(EmbeddedTransport(Monitor())) as client:
        ...     for trial in range(3):
        ...         client.report(TrialEvent(run="r", model="a", question=1,
        ...                                  trial=trial, correct=True))
        ...     client.flush()
        ...     client.status("r").trials
        3
        3
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
    ) -> None:
        self._client = AsyncMonitorClient(
            transport,
            batch_size=batch_size,
            flush_interval_s=flush_interval_s,
            max_buffered=max_buffered,
            retry=retry,
            breaker=breaker,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._closed: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._state = Lifecycle.CREATED

    def __enter__(self) -> MonitorClient:
        if self._state is not Lifecycle.CREATED:
            raise RuntimeError(f"client is {self._state.value}; make a new one")
        opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(opened,), name="scorio-monitor-client"
        )
        self._thread.start()
        try:
            opened.result()
        except BaseException:
            self._thread.join()
            self._state = Lifecycle.CLOSED
            raise
        self._state = Lifecycle.RUNNING
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Send what is buffered and stop the thread.

        Raises:
            MonitorError: when the last flush failed.
        """
        if self._state is not Lifecycle.RUNNING:
            return
        self._state = Lifecycle.CLOSED
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join()
        self._closed.result()

    def _serve(self, opened: concurrent.futures.Future[None]) -> None:
        # A Runner rather than asyncio.run, which a process may have patched
        # (nest_asyncio, as Inspect AI does) into never closing its loop.
        with asyncio.Runner() as runner:
            runner.run(self._hold(opened))

    async def _hold(self, opened: concurrent.futures.Future[None]) -> None:
        """Keep the async client open, on the thread's loop, until closed."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with self._client:
                opened.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            # Hand the failure to the thread that waits for it.
            (self._closed if opened.done() else opened).set_exception(exc)
            return
        self._closed.set_result(None)

    def _run(self, coroutine: Coroutine[Any, Any, Result]) -> Result:
        if self._state is not Lifecycle.RUNNING or self._loop is None:
            coroutine.close()
            raise RuntimeError(f"client is {self._state.value}; use it inside `with`")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def pending(self) -> int:
        """Trials reported but not sent yet."""
        return self._client.pending

    @property
    def dropped(self) -> int:
        """Trials dropped because the buffer was full while the monitor was away."""
        return self._client.dropped

    def report(self, events: TrialEvent | Iterable[TrialEvent]) -> None:
        """Buffer trials; send full batches (see :meth:`AsyncMonitorClient.report`)."""
        self._run(self._client.report(events))

    def flush(self) -> int:
        """Send every buffered trial now; the number sent."""
        return self._run(self._client.flush())

    def check(self) -> None:
        """The first contact (see :meth:`AsyncMonitorClient.check`)."""
        self._run(self._client.check())

    def config(self, run: str) -> RunConfig:
        """The run's config."""
        return self._run(self._client.config(run))

    def status(self, run: str) -> Status:
        """The run's status."""
        return self._run(self._client.status(run))

    def next(
        self,
        run: str,
        budget: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> Plan:
        """Reserve trials to run next (see :meth:`AsyncMonitorClient.next`)."""
        return self._run(self._client.next(run, budget, lease_s=lease_s, model=model))

    def release(self, run: str, items: Iterable[NextItem]) -> int:
        """Give back reserved trials (see :meth:`AsyncMonitorClient.release`)."""
        return self._run(self._client.release(run, items))

    def declare(self, config: RunConfig) -> RunConfig:
        """Declare a run, or update it."""
        return self._run(self._client.declare(config))
