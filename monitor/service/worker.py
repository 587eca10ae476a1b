"""The one thread that runs engine calls, light ones before heavy ones.

The engine is synchronous and not thread-safe, so every call runs on one
thread, one at a time. A plain executor runs them first come, first served:
a one-trial request then waits behind every large piece of work queued
before it (a plan of 1,000 trials, pieces of a 10,000-event batch). Here a
call marked heavy waits while light ones are queued, so a light call waits
for at most the one call already running.

Each call's CPU time on the thread (``time.thread_time``: the work itself,
not the time it waited for a CPU or the GIL) goes into a histogram per kind,
exported as ``scorio_engine_call_cpu_seconds``: how long one call can hold
the engine, whatever else runs on the machine.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from monitor.service.snapshot import LatencyHistogram

Result = TypeVar("Result")
_LIGHT, _HEAVY, _STOP = 0, 1, 2


class EngineWorker:
    """Runs functions on one named thread; results come back to the loop."""

    def __init__(self, name: str = "engine") -> None:
        self._calls: queue.PriorityQueue[
            tuple[int, int, Callable[[], Any] | None, asyncio.Future[Any] | None]
        ] = queue.PriorityQueue()
        self._order = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        # Replaced whole on the thread; readers take the current objects.
        self.cpu: dict[str, LatencyHistogram] = {
            "light": LatencyHistogram(),
            "heavy": LatencyHistogram(),
        }

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    async def run(self, function: Callable[[], Result], heavy: bool = False) -> Result:
        """Run ``function`` on the thread (after queued light calls if heavy)."""
        if self._loop is None:
            raise RuntimeError("the engine worker is not started")
        future: asyncio.Future[Result] = self._loop.create_future()
        priority = _HEAVY if heavy else _LIGHT
        self._calls.put((priority, next(self._order), function, future))
        return await future

    async def stop(self) -> None:
        """Finish every queued call, then end the thread."""
        self._calls.put((_STOP, next(self._order), None, None))
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)

    def _work(self) -> None:
        while True:
            priority, _, function, future = self._calls.get()
            if function is None or future is None:
                return
            started = time.thread_time()
            try:
                result = function()
            except Exception as error:  # handed to the awaiting caller
                self._settle(future, None, error)
            else:
                self._settle(future, result, None)
            kind = "heavy" if priority == _HEAVY else "light"
            self.cpu = {
                **self.cpu,
                kind: self.cpu[kind].observe(time.thread_time() - started),
            }

    def _settle(
        self, future: asyncio.Future[Any], result: object, error: BaseException | None
    ) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        try:
            self._loop.call_soon_threadsafe(_set, future, result, error)
        except RuntimeError:  # the loop closed meanwhile: nobody is waiting
            return


def _set(
    future: asyncio.Future[Any], result: object, error: BaseException | None
) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
