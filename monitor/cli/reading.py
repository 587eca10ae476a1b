"""Commands that only read a state file: ``status`` and ``next``.

Apart from ``watch`` so that they import no web stack: they answer in well
under a second (``benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import json
import sys

from monitor.cli.common import find_state, print_statuses
from monitor.engine import Monitor
from monitor.sqlite_store import SqliteStore
from monitor.view import status_view, terminal


def run_status(arguments: argparse.Namespace) -> int:
    state = find_state(arguments.state)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
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
    state = find_state(arguments.state)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        items = monitor.next(arguments.run, arguments.budget)
    if arguments.json:
        print(json.dumps([item.model_dump() for item in items], indent=2))
    else:
        # Tab-separated for scripts, with a header a reader can follow.
        print("model\tquestion\ttrials")
        for item in items:
            print(f"{item.model}\t{item.question}\t{item.trials}")
        if not items:
            print("scorio-monitor: no trials needed", file=sys.stderr)
    return 0
