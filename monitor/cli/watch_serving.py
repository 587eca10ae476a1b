"""``watch --http``: the watch loop as a service, with the API and dashboard.

Apart from :mod:`monitor.cli.live` because it needs the ``[http]`` extra
(FastAPI, uvicorn, the Prometheus client): plain ``watch`` imports none of it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType

import uvicorn
from rich.console import Console, Group
from rich.live import Live

from adapters.jsonl import JsonLines, JsonLinesSource
from adapters.prometheus import metrics_renderer
from monitor.cli.common import RejectionPrinter
from monitor.cli.terminal import NoLive, ViewOptions, status_view
from monitor.config import HttpSettings
from monitor.engine.monitor import Monitor
from monitor.http.app import create_app
from monitor.http.connections import AcceptErrorLog, server_config
from monitor.interfaces import IngestSink, Payload, TrialSource
from monitor.schema import Status
from monitor.service import rejections
from monitor.service.service import Service
from monitor.stores.records import IngestReport, StoredEvent

__all__ = ["serve_watch"]


async def serve_watch(
    monitor: Monitor,
    source: JsonLines,
    sock: socket.socket,
    console: Console | None,
    printer: RejectionPrinter,
    token: str | None,
    view: ViewOptions,
) -> list[tuple[Status, list[StoredEvent]]]:
    """``watch --http``: the watch loop as a service, with the API and dashboard.

    Reports as plain ``watch`` does: rejections on stderr as they happen, the
    live view (drawn as ``view`` says) with its events when ``console`` is
    given (a terminal). Returns each run's final status and events, read
    before the service closes.
    """
    port: int = sock.getsockname()[1]
    # The printer shows every rejection as plain watch does (file:line);
    # the service's own log of them would print each a second time.
    logging.getLogger(rejections.__name__).setLevel(logging.ERROR)
    settings = HttpSettings(listen=f"127.0.0.1:{port}", token=token or None)

    async def reported(report: IngestReport) -> None:
        printer.show(report.rejected)
        # A file's batches are light engine calls and a status pass a heavy
        # one, which waits while light ones are queued: at full speed the
        # replay would leave the trace without its first points. Wait for
        # the next pass (1 s at most) so each batch gets its trace point.
        if report.accepted:
            taken = service.snapshot.taken_s
            deadline = time.monotonic() + 1.0
            while service.snapshot.taken_s == taken and time.monotonic() < deadline:
                await asyncio.sleep(0.002)

    reporting = _ReportingSource(JsonLinesSource(source), reported)
    # A status (and a trace point) after every batch, not every 50 ms: a file
    # replayed at full speed still draws its whole history.
    async with Service(monitor, [reporting], status_interval_s=0.0) as service:
        app = create_app(service, settings, metrics_renderer(lambda: service.snapshot))
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        server = uvicorn.Server(server_config(app, settings, settings.host, port))

        def stop(signum: int, frame: FrameType | None) -> None:
            source.stop()
            server.should_exit = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(
            f"scorio-monitor: dashboard at http://{settings.listen}/", file=sys.stderr
        )

        async def show() -> None:
            updates = service.subscribe()
            latest: dict[str, Status] = {}
            events: list[StoredEvent] = []
            with (
                Live(console=console, auto_refresh=False)
                if console is not None
                else NoLive() as display
            ):
                while True:
                    item = await updates.get()
                    if item is None:  # fell behind: start afresh
                        updates = service.subscribe()
                        continue
                    if isinstance(item, Status):
                        latest[item.run] = item
                    else:
                        events.append(item)
                    display.update(
                        Group(
                            *(
                                status_view(
                                    s, [e for e in events if e.run == s.run], view
                                )
                                for s in latest.values()
                            )
                        ),
                        refresh=True,
                    )

        viewer = asyncio.create_task(show())
        try:
            await server.serve(sockets=[sock])
        finally:
            viewer.cancel()
        source.stop()

        def final() -> list[tuple[Status, list[StoredEvent]]]:
            return [
                (monitor.status(run), monitor.events_after(run)) for run in monitor.runs
            ]

        return await service.call(final)


class _ReportingSource:
    """A trial source whose ingest reports are also handed to ``on_report``."""

    def __init__(
        self, source: TrialSource, on_report: Callable[[IngestReport], Awaitable[None]]
    ) -> None:
        self._source = source
        self._on_report = on_report

    @property
    def name(self) -> str:
        return self._source.name

    async def run(self, sink: IngestSink) -> None:
        await self._source.run(_ReportingSink(sink, self._on_report))


class _ReportingSink:
    def __init__(
        self, sink: IngestSink, on_report: Callable[[IngestReport], Awaitable[None]]
    ) -> None:
        self._sink = sink
        self._on_report = on_report

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        report = await self._sink.ingest_payloads(payloads, cursor)
        await self._on_report(report)
        return report
