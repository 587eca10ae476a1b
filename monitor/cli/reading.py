"""Commands that only read a state file: ``status`` and ``next``.

Apart from ``watch`` so that they import no web stack: they answer in well
under a second (``benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from monitor.cli.common import find_state, print_statuses, require_run
from monitor.cli.compare_tables import print_comparison
from monitor.cli.tables import output_format, rows_csv, status_rows, statuses_markdown
from monitor.cli.terminal import ViewOptions, status_view, terminal
from monitor.engine.monitor import Monitor
from monitor.schema import Plan
from monitor.stores.sqlite import SqliteStore


def run_status(arguments: argparse.Namespace) -> int:
    state = find_state(arguments.state)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        if getattr(arguments, "compare", None):
            return print_comparison(monitor, arguments)
        if arguments.run:
            require_run(monitor, arguments.run, state)
        runs = [arguments.run] if arguments.run else monitor.runs
        statuses = [monitor.status(run) for run in runs]
        shape = output_format(arguments)
        if shape == "json":
            print_statuses(statuses)
        elif shape == "markdown":
            print(statuses_markdown(statuses), end="")
        elif shape == "csv":
            rows = [row for status in statuses for row in status_rows(status)]
            print(rows_csv(rows, status=True), end="")
        else:
            console = terminal()
            view = ViewOptions(arguments.groups, state=state)
            for status in statuses:
                events = monitor.events_after(status.run)
                console.print(status_view(status, events, view))
    return 0


def run_next(arguments: argparse.Namespace) -> int:
    if arguments.url is not None:
        if arguments.run is None:
            raise ValueError("next --url needs --run: the run to plan at the service")
        # The client's modules load only when a service is asked.
        from adapters.harness import MonitorClient, Retry, transport_for
        from monitor.limits import DEFAULT_LEASE_S

        lease_s = DEFAULT_LEASE_S if arguments.lease_s is None else arguments.lease_s
        transport = transport_for(arguments.url, token=arguments.token)
        with MonitorClient(transport, retry=Retry(attempts=3)) as client:
            items = client.next(arguments.run, arguments.budget, lease_s=lease_s)
    else:
        # A read-only file holds no reservation: the plan is a look ahead.
        state = find_state(arguments.state)
        with Monitor(SqliteStore(state, read_only=True)) as monitor:
            run = arguments.run or _only_run(monitor.runs, state)
            require_run(monitor, run, state)
            items = monitor.next(run, arguments.budget, lease_s=0)
    if arguments.json:
        print(json.dumps([item.model_dump() for item in items], indent=2))
    else:
        # Tab-separated for scripts, with a header a reader can follow.
        leased = any(item.lease is not None for item in items)
        print("model\tquestion\ttrials" + ("\tlease\texpires" if leased else ""))
        for item in items:
            lease = (
                ""
                if item.lease is None
                else f"\t{item.lease}\t{_readable_time(item.expires)}"
            )
            print(f"{item.model}\t{item.question}\t{item.trials}{lease}")
    if isinstance(items, Plan) and (items.stable or items.waiting_for):
        # Why the plan holds no (more) trials, beside any output format.
        print(f"scorio-monitor: {items.why_empty()}", file=sys.stderr)
    elif not items:
        print("scorio-monitor: no trials planned", file=sys.stderr)
    return 0


def _readable_time(epoch_s: float | None) -> str:
    """ISO 8601 in UTC to the second, e.g. ``2026-12-01T22:30:00Z`` (``--json``
    keeps the seconds since the epoch)."""
    if epoch_s is None:
        return ""
    moment = datetime.datetime.fromtimestamp(epoch_s, tz=datetime.UTC)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _only_run(runs: Sequence[str], state: Path) -> str:
    """The run ``next`` plans without ``--run``: the state's only one."""
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise ValueError(f"{state} holds no run yet; nothing to plan")
    raise ValueError(
        f"{state} holds {len(runs)} runs ({', '.join(runs)}); choose one with --run"
    )
