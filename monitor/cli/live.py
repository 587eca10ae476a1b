"""Commands over a stream and a state file: ``watch``, ``status``, ``next``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import uvicorn
from rich.console import Console, Group
from rich.live import Live

from adapters.harness.client import MonitorClient, Retry, transport_for
from adapters.jsonl import Cursor, JsonLines, JsonLinesSource
from adapters.prometheus import metrics_renderer
from monitor.cli.common import (
    DEFAULT_STATE,
    Subparsers,
    add_url_arguments,
    print_statuses,
    url_token,
)
from monitor.cli.remote import resume_point, watch_to_url
from monitor.config import (
    HttpSettings,
    load_run_configs,
)
from monitor.engine import DEFAULT_LEASE_S, Monitor
from monitor.http import create_app
from monitor.schema import Status
from monitor.service import Service
from monitor.sqlite_store import SqliteStore
from monitor.store import IngestReport, StoredEvent
from monitor.view import status_view, terminal
from monitor.watching import watch


def add_commands(commands: Subparsers) -> None:
    watch_command = commands.add_parser(
        "watch",
        help="ingest JSON-lines trial events and show where every model stands",
        description=(
            "Ingest trial events (one JSON object, or an array, per line) from a "
            "file or '-' for stdin; show a live leaderboard. State is kept in a "
            "SQLite file, so a restarted watch resumes where it stopped."
        ),
    )
    watch_command.add_argument("path", help="JSONL file, or - for stdin")
    watch_command.add_argument(
        "--follow", action="store_true", help="keep reading as the file grows"
    )
    watch_command.add_argument(
        "--config", type=Path, help="run config TOML (one run or [[runs]])"
    )
    watch_command.add_argument(
        "--state",
        type=Path,
        help="state file (default: <input>.monitor.db next to the input, or "
        f"{DEFAULT_STATE} for stdin)",
    )
    watch_command.add_argument(
        "--json", action="store_true", help="print the final status JSON"
    )
    watch_command.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="also serve the API and live dashboard on 127.0.0.1:PORT until stopped",
    )
    add_url_arguments(watch_command)
    watch_command.set_defaults(handler=run_watch)

    status = commands.add_parser(
        "status", help="print the status of runs in a state file"
    )
    status.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state file")
    status.add_argument("--run", help="one run (default: all)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=run_status)

    plan = commands.add_parser(
        "next",
        help="which trials to run next",
        description=(
            "Plan BUDGET trials. Asked of a running service (--url), the plan "
            "is a reservation: its trials count as in flight in every later "
            "plan until reported or until the lease expires. A state file is "
            "read as it is: its plan reserves nothing."
        ),
    )
    plan.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state file")
    plan.add_argument(
        "--url", help="a running service's HTTP API, e.g. http://127.0.0.1:8000"
    )
    plan.add_argument("--token", help="bearer token for --url")
    plan.add_argument("--run", required=True, help="the run")
    plan.add_argument("--budget", type=int, required=True, help="trials to allocate")
    plan.add_argument(
        "--lease-s",
        type=float,
        default=DEFAULT_LEASE_S,
        help=f"--url: how long the reservation lasts (default {DEFAULT_LEASE_S:g})",
    )
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(handler=run_next)


def run_watch(arguments: argparse.Namespace) -> int:
    path = None if arguments.path == "-" else Path(arguments.path)
    if path is not None and not path.exists():
        raise ValueError(f"no such file: {path}")
    if arguments.url is not None:
        return _watch_to_url(path, arguments)
    state = arguments.state or (
        DEFAULT_STATE if path is None else path.with_name(path.stem + ".monitor.db")
    )
    with Monitor(state) as monitor:
        for config in load_run_configs(arguments.config) if arguments.config else []:
            monitor.configure(config)
        source = JsonLines(path, follow=arguments.follow)
        resume = Cursor.decode(monitor.cursor(source.name))
        source = JsonLines(path, follow=arguments.follow, resume=resume)
        console = terminal()
        if arguments.http is not None:
            asyncio.run(_watch_serving(monitor, source, arguments.http, console))
            if arguments.json:
                print_statuses(monitor.statuses())
            return 0
        _stop_on_signals(source)
        events: list[StoredEvent] = []
        live = console.is_terminal and not arguments.json
        refresh = _Throttle(0.25)

        def report_progress(report: IngestReport) -> None:
            for rejection in report.rejected:
                where = rejection.source.removeprefix("file:")
                print(
                    f"{where}:{rejection.position}: rejected: {rejection.reason}",
                    file=sys.stderr,
                )
            events.extend(report.events)
            if live and refresh.ready():
                display.update(_views(monitor, events))

        with (
            Live(console=console, auto_refresh=False, transient=False)
            if live
            else _NoLive() as display
        ):
            totals = watch(monitor, source, on_report=report_progress)
            if live:
                display.update(_views(monitor, events), refresh=True)
        statuses = monitor.statuses()
        if arguments.json:
            print_statuses(statuses)
        elif not live:
            for status in statuses:
                console.print(
                    status_view(status, [e for e in events if e.run == status.run])
                )
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


async def _watch_serving(
    monitor: Monitor, source: JsonLines, port: int, console: Console
) -> None:
    """``watch --http``: the watch loop as a service, with the API and dashboard."""
    settings = HttpSettings(listen=f"127.0.0.1:{port}")
    async with Service(monitor, [JsonLinesSource(source)]) as service:
        app = create_app(service, settings, metrics_renderer(lambda: service.snapshot))
        server = uvicorn.Server(
            uvicorn.Config(app, host=settings.host, port=port, log_level="warning")
        )

        def stop(signum: int, frame: FrameType | None) -> None:
            source.stop()
            server.should_exit = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(
            f"scorio-monitor: dashboard at http://{settings.listen}/", file=sys.stderr
        )
        live = console.is_terminal

        async def show() -> None:
            updates = service.subscribe()
            latest: dict[str, Status] = {}
            with (
                Live(console=console, auto_refresh=False)
                if live
                else _NoLive() as display
            ):
                while True:
                    item = await updates.get()
                    if item is None:  # fell behind: start afresh
                        updates = service.subscribe()
                    elif isinstance(item, Status):
                        latest[item.run] = item
                        display.update(
                            Group(*(status_view(s) for s in latest.values())),
                            refresh=True,
                        )

        viewer = asyncio.create_task(show())
        try:
            await server.serve()
        finally:
            viewer.cancel()


def run_status(arguments: argparse.Namespace) -> int:
    with Monitor(SqliteStore(arguments.state, read_only=True)) as monitor:
        runs = [arguments.run] if arguments.run else monitor.runs
        statuses = [monitor.status(run) for run in runs]
        if arguments.json:
            print_statuses(statuses)
        else:
            console = terminal()
            for status in statuses:
                console.print(status_view(status, monitor.events_after(status.run)))
    return 0


def run_next(arguments: argparse.Namespace) -> int:
    if arguments.url is not None:
        transport = transport_for(arguments.url, token=arguments.token)
        with MonitorClient(transport, retry=Retry(attempts=3)) as client:
            items = client.next(
                arguments.run, arguments.budget, lease_s=arguments.lease_s
            )
    else:
        # A read-only file holds no reservation: the plan is a look ahead.
        with Monitor(SqliteStore(arguments.state, read_only=True)) as monitor:
            items = monitor.next(arguments.run, arguments.budget, lease_s=0)
    if arguments.json:
        print(json.dumps([item.model_dump() for item in items], indent=2))
    else:
        for item in items:
            lease = "" if item.lease is None else f"\t{item.lease}\t{item.expires}"
            print(f"{item.model}\t{item.question}\t{item.trials}{lease}")
    return 0


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
