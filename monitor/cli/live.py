"""``watch``: a stream into a state file, with a live view and optionally HTTP."""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import FrameType

import uvicorn
from rich.console import Console, Group
from rich.live import Live

from adapters.jsonl import Cursor, JsonLines, JsonLinesSource
from adapters.prometheus import metrics_renderer
from monitor.cli.common import (
    DEFAULT_STATE,
    RejectionPrinter,
    check_input,
    listening_socket,
    print_statuses,
    url_token,
)
from monitor.cli.remote import resume_point, watch_to_url
from monitor.cli.terminal import status_view, terminal
from monitor.config import (
    HttpSettings,
    load_run_configs,
)
from monitor.engine.monitor import Monitor
from monitor.feeds.watch import watch
from monitor.http.app import create_app
from monitor.http.connections import AcceptErrorLog, server_config
from monitor.interfaces import IngestSink, Payload, TrialSource
from monitor.schema import Status
from monitor.service.service import Service
from monitor.stores.records import IngestReport, StoredEvent


def run_watch(arguments: argparse.Namespace) -> int:
    path = None if arguments.path == "-" else Path(arguments.path)
    if path is not None:
        check_input(path, "lines", "watch")
    if arguments.url is not None:
        return _watch_to_url(path, arguments)
    state = arguments.state or (
        DEFAULT_STATE if path is None else path.with_name(path.stem + ".monitor.db")
    )
    # A bad config or a busy port fails before the state file is created.
    configs = load_run_configs(arguments.config) if arguments.config else []
    sock = (
        None
        if arguments.http is None
        else listening_socket("127.0.0.1", arguments.http)
    )
    # Every look kept: a file replayed at full speed draws its whole trace.
    with Monitor(state, history_interval_s=0.0) as monitor:
        for config in configs:
            monitor.configure(config)
        console = terminal()
        live = console.is_terminal and not arguments.json and arguments.http is None
        refresh = _Throttle(0.25)
        pending = False

        def draw() -> None:
            nonlocal pending
            pending = False
            display.update(_views(monitor, events), refresh=True)

        def idle(interval_s: float) -> None:
            # A following reader waits here on an idle file: draw what the last
            # throttled batch did not, so the screen never lags the counts.
            if live and pending:
                draw()
            time.sleep(interval_s)

        source = JsonLines(path, follow=arguments.follow)
        resume = Cursor.decode(monitor.cursor(source.name))
        source = JsonLines(
            path,
            follow=arguments.follow,
            resume=resume,
            sleep=idle,
            # Served: smaller batches, so the dashboard's trace starts near the
            # first trial instead of after the first 2,000 lines.
            batch_lines=_SERVED_BATCH_LINES if sock is not None else 2000,
        )
        events: list[StoredEvent] = []
        printer = RejectionPrinter(path)
        if sock is not None:
            view = console.is_terminal and not arguments.json
            with sock:
                final = asyncio.run(
                    _watch_serving(
                        monitor,
                        source,
                        sock,
                        console if view else None,
                        printer,
                        arguments.token,
                    )
                )
            printer.summarise()
            if arguments.json:
                print_statuses([status for status, _ in final])
            elif not view:
                for status, recent in final:
                    console.print(status_view(status, recent))
            return 0
        _stop_on_signals(source)

        def report_progress(report: IngestReport) -> None:
            nonlocal pending
            printer.show(report.rejected)
            events.extend(report.events)
            if not live:
                return
            pending = True
            if refresh.ready():
                draw()

        # auto_refresh=False: the view is redrawn explicitly (refresh=True) when
        # counts change, never from a second thread reading the engine.
        with (
            Live(console=console, auto_refresh=False, transient=False)
            if live
            else _NoLive() as display
        ):
            totals = watch(monitor, source, on_report=report_progress)
            if live:
                draw()
        printer.summarise()
        _print_final(monitor, arguments.json, live, console, events)
    if totals.items and totals.valid == 0:
        print("scorio-monitor: no valid trial events read", file=sys.stderr)
        return 1
    return 0


def _watch_to_url(path: Path | None, arguments: argparse.Namespace) -> int:
    """``watch --url``: follow the file into a running service."""
    if arguments.state is not None or arguments.http is not None:
        raise ValueError("--url sends to a service; it takes no --state or --http")
    source = JsonLines(path, follow=arguments.follow, resume=resume_point(path))
    _stop_on_signals(source)
    sent, statuses = watch_to_url(
        source, path, arguments.url, url_token(arguments), arguments.config
    )
    if arguments.json:
        print_statuses(statuses)
    else:
        console = terminal()
        for status in statuses:
            console.print(status_view(status, []))
    if sent.trials == 0 and sent.rejected:
        print("scorio-monitor: no valid trial events read", file=sys.stderr)
        return 1
    return 0


def _print_final(
    monitor: Monitor,
    as_json: bool,
    shown_live: bool,
    console: Console,
    events: Sequence[StoredEvent],
) -> None:
    """The final statuses, unless a live view already left them on screen."""
    statuses = monitor.statuses()
    if as_json:
        print_statuses(statuses)
    elif not shown_live:
        for status in statuses:
            recent = [e for e in events if e.run == status.run]
            console.print(status_view(status, recent))


async def _watch_serving(
    monitor: Monitor,
    source: JsonLines,
    sock: socket.socket,
    console: Console | None,
    printer: RejectionPrinter,
    token: str | None = None,
) -> list[tuple[Status, list[StoredEvent]]]:
    """``watch --http``: the watch loop as a service, with the API and dashboard.

    Reports as plain ``watch`` does: rejections on stderr as they happen, the
    live view with its events when ``console`` is given (a terminal). Returns
    each run's final status and events, read before the service closes.
    """
    port: int = sock.getsockname()[1]
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
                else _NoLive() as display
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
                                status_view(s, [e for e in events if e.run == s.run])
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


def _views(monitor: Monitor, events: list[StoredEvent]) -> Group:
    return Group(
        *(
            status_view(status, [e for e in events if e.run == status.run])
            for status in monitor.statuses()
        )
    )


def _stop_on_signals(source: JsonLines) -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        source.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


_SERVED_BATCH_LINES = 200


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


class _Throttle:
    """True at most once per interval."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._last = -float("inf")

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last < self._interval_s:
            return False
        self._last = now
        return True


class _NoLive:
    """Stands in for rich's Live when output is not a terminal."""

    def __enter__(self) -> _NoLive:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, renderable: object, refresh: bool = False) -> None:
        return None
