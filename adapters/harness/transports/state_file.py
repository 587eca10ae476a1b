"""The state-file transport: one state file that several harness processes feed.

One process at a time writes a state file (it holds the file's writer lock).
A harness process that finds the lock taken neither waits for it nor drops
its trials: it writes each batch to the spool beside the file
(``<state file>.spool/``, one JSON line per trial, a file appearing whole or
not at all), and the process that holds the lock counts the spooled files
before its own batch at every send, and once more when it closes. A
spooling process that later finds the lock free becomes the writer and
counts the spool itself; one that closes while another still writes leaves
its files to that writer.

Counting stays exactly once: a spooled trial goes through the monitor's one
decoder like any other, and is counted once however often it is read (a
crash between counting a file and removing it reads it again as
duplicates). Should no writer come back, ``scorio-monitor ingest
<file>.spool/*.jsonl --state <file>`` counts what waits there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from adapters.harness.transports.base import MonitorUnavailableError, check_run
from adapters.harness.transports.embedded import check_report
from monitor.engine.monitor import Monitor
from monitor.errors import StoreError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent
from monitor.stores.lock import StateFileBusyError
from monitor.stores.records import IngestReport
from monitor.stores.sqlite import SqliteStore

log = logging.getLogger(__name__)
Result = TypeVar("Result")


def spool_of(path: Path) -> Path:
    """The spool folder of a state file: ``<state file>.spool``."""
    return path.with_name(path.name + ".spool")


class StateFileTransport:
    """A state file this process writes when it can, and spools to when not.

    Engine calls run on a worker thread, one at a time. Reading a run
    (status, config) while another process writes opens the file read-only
    for that call; planning and declaring need the writer's lock and are
    unavailable meanwhile.

    Args:
        path: The state file.
        close_wait_s: When closing with trials in the spool, how long to
            wait for the writer lock so as to count them here (the writer
            counts them otherwise, at its next send or when it closes).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, close_wait_s: float = 5.0
    ) -> None:
        self._path = Path(path)
        self._spool = spool_of(self._path)
        self._close_wait_s = close_wait_s
        self._monitor: Monitor | None = None
        self._lock = asyncio.Lock()
        self._spooled = 0
        self._said_busy = False

    @property
    def name(self) -> str:
        return f"state file {self._path}"

    @property
    def is_writer(self) -> bool:
        """Whether this process holds the state file's writer lock."""
        return self._monitor is not None

    async def __aenter__(self) -> StateFileTransport:
        async with self._lock:
            await self._try_writing()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        async with self._lock:
            deadline = time.monotonic() + self._close_wait_s
            wait_s = 0.02
            # Our own spooled trials are counted here if the writer lets go
            # soon (it may be closing too); else the writer counts them.
            while self._monitor is None and self._spooled and _has_files(self._spool):
                if await self._try_writing() or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(wait_s)
                wait_s = min(2 * wait_s, 0.5)
            monitor, self._monitor = self._monitor, None
            if monitor is not None:
                try:
                    await asyncio.to_thread(self._count_spool, monitor)
                finally:
                    await asyncio.to_thread(monitor.close)
            elif self._spooled and _has_files(self._spool):
                log.info(
                    "%d trials wait in %s for the process writing %s to count them",
                    self._spooled,
                    self._spool,
                    self._path,
                )

    # -- operations --------------------------------------------------------

    async def check(self) -> None:
        return None  # a file, not a service: nothing to contact

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        check_run(run)
        async with self._lock:
            if await self._try_writing():
                monitor = self._monitor
                if monitor is None:
                    raise RuntimeError("the writer closed while sending")
                report = await self._call(
                    functools.partial(self._count, monitor, list(events))
                )
                check_report(report, run)
                return
            await self._call(functools.partial(self._write_spool, list(events)))
            self._spooled += len(events)

    async def status(self, run: str) -> Status:
        return await self._read(run, lambda monitor: monitor.status(run))

    async def config(self, run: str) -> RunConfig:
        return await self._read(run, lambda monitor: monitor.config(run))

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        return await self._as_writer(
            "planning",
            lambda monitor: monitor.next(run, budget, lease_s=lease_s, model=model),
        )

    async def declare(self, config: RunConfig) -> RunConfig:
        return await self._as_writer(
            "declaring a run", lambda monitor: monitor.configure(config)
        )

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        listed = list(items)
        return await self._as_writer(
            "releasing reservations", lambda monitor: monitor.release(run, listed)
        )

    # -- internals ---------------------------------------------------------

    async def _try_writing(self) -> bool:
        """Become the writer if the lock is free (the caller holds ``_lock``)."""
        if self._monitor is not None:
            return True
        try:
            self._monitor = await self._call(self._open_writer)
        except StateFileBusyError:
            if not self._said_busy:
                self._said_busy = True
                log.info(
                    "another process writes %s: trials go to %s, and that "
                    "process counts them",
                    self._path,
                    self._spool,
                )
            return False
        return True

    def _open_writer(self) -> Monitor:
        monitor = Monitor(SqliteStore(self._path), shared_refresh_s=0.0)
        try:
            self._count_spool(monitor)
        except BaseException:
            monitor.close()
            raise
        return monitor

    def _count(self, monitor: Monitor, events: list[TrialEvent]) -> IngestReport:
        self._count_spool(monitor)
        return monitor.ingest(events, source="client")

    def _count_spool(self, monitor: Monitor) -> None:
        """Count every spooled file, oldest first, and remove it once counted."""
        if not _has_files(self._spool):
            return
        for path in sorted(self._spool.glob("*.jsonl")):
            lines = path.read_bytes().splitlines()
            payload = b"[" + b",".join(line for line in lines if line.strip()) + b"]"
            report = monitor.ingest_payload(payload, source=f"file:{path}")
            if report.rejected:
                log.warning(
                    "%d spooled trials of %s were refused (see the rejections): %s",
                    len(report.rejected),
                    path.name,
                    report.rejected[0].reason,
                )
            path.unlink(missing_ok=True)

    def _write_spool(self, events: list[TrialEvent]) -> None:
        self._spool.mkdir(parents=True, exist_ok=True)
        # Named by time first: the writer counts files in the order written.
        name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        partial = self._spool / f".{name}.part"
        with partial.open("wb") as handle:
            for event in events:
                handle.write(event.model_dump_json(exclude_none=True).encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, self._spool / f"{name}.jsonl")

    async def _read(self, run: str, read: Callable[[Monitor], Result]) -> Result:
        async with self._lock:
            if await self._try_writing() and self._monitor is not None:
                return await self._call(functools.partial(read, self._monitor))

            def read_only() -> Result:
                with Monitor(SqliteStore(self._path, read_only=True, run=run)) as view:
                    return read(view)

            return await self._call(read_only)

    async def _as_writer(
        self, action: str, work: Callable[[Monitor], Result]
    ) -> Result:
        async with self._lock:
            if await self._try_writing() and self._monitor is not None:
                return await self._call(functools.partial(work, self._monitor))
        raise MonitorUnavailableError(
            f"{action} needs the writer lock of {self._path}, which another "
            "process holds"
        )

    async def _call(self, function: Callable[[], Result]) -> Result:
        try:
            return await asyncio.to_thread(function)
        except StateFileBusyError:
            raise
        except StoreError as exc:
            raise MonitorUnavailableError(f"the state store failed: {exc}") from exc


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*.jsonl"))
