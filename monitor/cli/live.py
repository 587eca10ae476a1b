"""``watch``: a stream into a state file, with a live view and optionally HTTP."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console, Group
from rich.live import Live

from adapters.jsonl import Cursor, JsonLines
from monitor.cli.common import (
    DEFAULT_STATE,
    RejectionPrinter,
    check_input,
    checked_state,
    configure_runs,
    listening_socket,
    new_state_way_out,
    print_statuses,
    state_next_to,
    url_token,
)
from monitor.cli.terminal import NoLive, ViewOptions, status_view, terminal
from monitor.config import load_run_configs
from monitor.engine.monitor import Monitor
from monitor.feeds.watch import watch
from monitor.stores.records import IngestReport, StoredEvent


def run_watch(arguments: argparse.Namespace) -> int:
    path = None if arguments.path == "-" else Path(arguments.path)
    if path is not None:
        check_input(path, "lines", "watch")
    if arguments.url is not None:
        return _watch_to_url(path, arguments)
    if path is not None and not arguments.follow and path.stat().st_size == 0:
        # Said before a state file is made for it.
        print(f"scorio-monitor: no trial events read: {path} is empty", file=sys.stderr)
        return 1
    state = checked_state(
        arguments.state or (DEFAULT_STATE if path is None else state_next_to(path))
    )
    # A bad config, a missing [http] extra or a busy port fails before the
    # state file is created.
    configs = load_run_configs(arguments.config) if arguments.config else []
    if arguments.http is not None:
        # Only here: FastAPI, uvicorn and the Prometheus client are the
        # [http] extra, which plain `watch` does without.
        from monitor.cli import watch_serving
    sock = (
        None
        if arguments.http is None
        else listening_socket("127.0.0.1", arguments.http)
    )
    view = ViewOptions(arguments.groups, state=state)
    # A look after every batch, each kept in the history, and batches that
    # grow with the file (_batch_lines): a file replayed at full speed draws
    # its whole trace, points spaced by lines read rather than by time.
    with Monitor(state, look_interval_s=0.0, history_interval_s=0.0) as monitor:
        configure_runs(monitor, configs, new_state_way_out(state))
        console = terminal()
        live = console.is_terminal and not arguments.json and arguments.http is None
        refresh = _Throttle(0.25)
        pending = False

        def draw() -> None:
            nonlocal pending
            pending = False
            display.update(_views(monitor, events, view), refresh=True)

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
            # Served: batches of at most 200 lines, so the dashboard follows
            # the replay closely.
            batch_lines=_served_batch_lines if sock is not None else _batch_lines,
        )
        events: list[StoredEvent] = []
        printer = RejectionPrinter(path)
        if sock is not None:
            shown = console.is_terminal and not arguments.json
            with sock:
                final = asyncio.run(
                    watch_serving.serve_watch(
                        monitor,
                        source,
                        sock,
                        console if shown else None,
                        printer,
                        arguments.token,
                        view,
                    )
                )
            printer.summarise()
            if arguments.json:
                print_statuses([status for status, _ in final])
            elif not shown:
                for status, recent in final:
                    console.print(status_view(status, recent, view))
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
            else NoLive() as display
        ):
            totals = watch(monitor, source, on_report=report_progress)
            if live:
                draw()
        printer.summarise()
        _print_final(monitor, arguments.json, live, console, events, view)
    where = "stdin" if path is None else str(path)
    if totals.items == 0 and resume is not None:
        print(
            f"scorio-monitor: no new lines in {where} since the last watch "
            f"(state: {state})",
            file=sys.stderr,
        )
    elif totals.items == 0:
        print(
            f"scorio-monitor: no trial events read: {where} is empty",
            file=sys.stderr,
        )
        return 1
    elif totals.valid == 0:
        print("scorio-monitor: no valid trial events read", file=sys.stderr)
        return 1
    return 0


def _watch_to_url(path: Path | None, arguments: argparse.Namespace) -> int:
    """``watch --url``: follow the file into a running service."""
    if arguments.state is not None or arguments.http is not None:
        raise ValueError("--url sends to a service; it takes no --state or --http")
    # Only here: the harness client is the [client] extra.
    from monitor.cli.remote import watch_to_url

    def open_source(resume: Cursor | None) -> JsonLines:
        source = JsonLines(path, follow=arguments.follow, resume=resume)
        _stop_on_signals(source)
        return source

    sent, statuses = watch_to_url(
        path,
        open_source,
        arguments.url,
        url_token(arguments),
        arguments.config,
        follow=arguments.follow,
    )
    if arguments.json:
        print_statuses(statuses)
    else:
        console = terminal()
        view = ViewOptions(arguments.groups, url=arguments.url)
        for status in statuses:
            console.print(status_view(status, [], view))
    if sent.refused:
        return 1  # said once per run, with the first reason
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
    view: ViewOptions,
) -> None:
    """The final statuses, unless a live view already left them on screen."""
    statuses = monitor.statuses()
    if as_json:
        print_statuses(statuses)
    elif not shown_live:
        for status in statuses:
            recent = [e for e in events if e.run == status.run]
            console.print(status_view(status, recent, view))


def _views(monitor: Monitor, events: list[StoredEvent], view: ViewOptions) -> Group:
    return Group(
        *(
            status_view(status, [e for e in events if e.run == status.run], view)
            for status in monitor.statuses()
        )
    )


def _stop_on_signals(source: JsonLines) -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        source.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _batch_lines(read: int) -> int:
    """Lines in the next batch, after ``read`` lines: 100 at first, then a
    fiftieth of those read (the trace's points 2 % of the trials apart), at
    most 2,000 (a batch is a durable write and a look)."""
    return min(2000, max(100, read // 50))


def _served_batch_lines(read: int) -> int:
    return min(200, _batch_lines(read))


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
