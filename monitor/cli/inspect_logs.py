"""``ingest --format inspect``: Inspect AI logs (a file or a directory) into state."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.cli.common import (
    RejectionPrinter,
    checked_state,
    configure_runs,
    new_state_way_out,
    print_statuses,
)
from monitor.cli.terminal import status_view, terminal
from monitor.config import load_run_configs
from monitor.engine.monitor import Monitor
from monitor.stores.factory import missing_extra_message
from monitor.stores.records import IngestReport, StoredEvent


def run_ingest_inspect(arguments: argparse.Namespace) -> int:
    """Count every scored sample-epoch of the logs at ``arguments.path``."""
    path: Path = arguments.path
    if arguments.url is not None:
        raise ValueError(
            "--format inspect reads into a state file; to feed a running service, "
            "use the live hook (SCORIO_MONITOR_URL)"
        )
    if not path.exists():
        raise ValueError(f"no such file or directory: {path}")
    try:
        from adapters.harness.inspect_logs import ingest_logs
    except ImportError as exc:
        library = (exc.name or "").partition(".")[0] or None
        raise ValueError(
            missing_extra_message("ingest --format inspect", "inspect", library)
        ) from exc
    state = checked_state(arguments.state or _state_for(path))
    printer = RejectionPrinter(path)
    events: list[StoredEvent] = []
    totals = {"accepted": 0, "duplicates": 0}

    def on_report(report: IngestReport) -> None:
        totals["accepted"] += report.accepted + report.corrections
        totals["duplicates"] += report.duplicates
        events.extend(report.events)
        printer.show(report.rejected)

    configs = load_run_configs(arguments.config) if arguments.config else []
    with Monitor(state) as monitor:
        configure_runs(monitor, configs, new_state_way_out(state))
        read = ingest_logs(
            monitor,
            path,
            run=arguments.run,
            scorer=arguments.scorer,
            on_report=on_report,
        )
        printer.summarise()
        for log in read.logs:
            skipped = [
                f"{count} {what}"
                for count, what in (
                    (log.errored, "errored"),
                    (log.not_scored, "unscored"),
                )
                if count
            ]
            if skipped or log.status != "success":
                print(
                    f"{log.path}: {log.model}, {log.status}: {len(log.trials)} trials"
                    + (f"; not trials: {', '.join(skipped)}" if skipped else ""),
                    file=sys.stderr,
                )
        for run, weights in read.declared.items():
            print(
                f"scorio-monitor: run {run!r} declared with weights {weights}",
                file=sys.stderr,
            )
        statuses = [
            monitor.status(run) for run in sorted({log.run for log in read.logs})
        ]
        if arguments.json:
            print_statuses(statuses)
        else:
            console = terminal()
            for status in statuses:
                console.print(
                    status_view(status, [e for e in events if e.run == status.run])
                )
    print(
        f"scorio-monitor: {totals['accepted']} new trials, {totals['duplicates']} "
        "already counted",
        file=sys.stderr,
    )
    if totals["accepted"] + totals["duplicates"] == 0:
        print("scorio-monitor: no valid trials read", file=sys.stderr)
        return 1
    return 0


def _state_for(path: Path) -> Path:
    absolute = path.resolve()
    return absolute.with_name(absolute.name + ".monitor.db")
