"""The embedded transport: a :class:`monitor.Monitor` in this process.

For tests and single-machine runs: engine calls run on a worker thread, and
a store failure becomes :class:`MonitorUnavailableError` as an unreachable
service would.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TypeVar

from adapters.harness.transports.base import (
    MonitorUnavailableError,
    RequestRejectedError,
    check_run,
)
from monitor.engine.monitor import Monitor
from monitor.errors import StoreError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent
from monitor.stores.records import IngestReport

log = logging.getLogger(__name__)
Result = TypeVar("Result")


class EmbeddedTransport:
    """A :class:`monitor.Monitor` in this process (tests, single-machine runs).

    Engine calls run on a worker thread, one at a time, so a slow store
    does not stall the event loop. The caller keeps owning the monitor: it
    closes it, and does not use it from another thread meanwhile.
    """

    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return "embedded"

    async def __aenter__(self) -> EmbeddedTransport:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    async def check(self) -> None:
        return None  # in this process: nothing to contact

    async def config(self, run: str) -> RunConfig:
        return await self._call(functools.partial(self._monitor.config, run))

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        check_run(run)
        report = await self._call(
            functools.partial(self._monitor.ingest, list(events), source="client")
        )
        check_report(report, run)

    async def status(self, run: str) -> Status:
        return await self._call(functools.partial(self._monitor.status, run))

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        return await self._call(
            functools.partial(
                self._monitor.next, run, budget, lease_s=lease_s, model=model
            )
        )

    async def declare(self, config: RunConfig) -> RunConfig:
        return await self._call(functools.partial(self._monitor.configure, config))

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        return await self._call(
            functools.partial(self._monitor.release, run, list(items))
        )

    async def _call(self, function: Callable[[], Result]) -> Result:
        async with self._lock:
            try:
                return await asyncio.to_thread(function)
            except StoreError as exc:
                raise MonitorUnavailableError(f"the state store failed: {exc}") from exc


def check_report(report: IngestReport, run: str) -> None:
    """Raise when the whole batch was refused (as HTTP does), else log refusals.

    One line per batch, with each reason once: not one per trial.
    """
    if not report.rejected:
        return
    if report.accepted or report.duplicates or report.corrections:
        reasons = dict.fromkeys(rejection.reason for rejection in report.rejected)
        log.warning(
            "the monitor refused %d trials of run %r: %s",
            len(report.rejected),
            run,
            "; ".join(reasons),
        )
    else:
        raise RequestRejectedError(
            "; ".join(dict.fromkeys(r.reason for r in report.rejected))
            + f" ({len(report.rejected)} trials)"
        )
