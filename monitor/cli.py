"""The ``scorio-monitor`` command line: the composition root.

This is the one module of ``monitor`` allowed to import ``adapters``: it
parses arguments, builds the adapters a command needs and hands them to the
engine. Exit status: 0 on success, 1 when nothing valid was read, 2 for usage
errors.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import uvicorn
from rich.console import Console, Group
from rich.live import Live

from adapters.jsonl import Cursor, JsonLines, JsonLinesSource
from adapters.mqtt import MqttPublisher, MqttSource
from adapters.prometheus import metrics_renderer
from adapters.redis import RedisStore, RedisStreamSource
from adapters.results_files import RowError, load_results_npz, read_trial_rows
from adapters.webhooks import Target, WebhookPublisher
from monitor.config import (
    HttpSettings,
    ServiceConfig,
    StoreSettings,
    load_run_configs,
    load_service_config,
)
from monitor.engine import Monitor
from monitor.errors import MonitorError
from monitor.http import create_app
from monitor.interfaces import Publisher, Store, TrialSource
from monitor.schema import Status
from monitor.scoring import Scoreboard, score_matrix, score_tables, tables_from_trials
from monitor.service import Service
from monitor.simulation import MODEL_SETS, simulate
from monitor.sqlite_store import SqliteStore
from monitor.store import IngestReport, MemoryStore, StoredEvent
from monitor.view import scoreboard_table, simulation_view, status_view, terminal
from monitor.watching import watch

DEFAULT_STATE = Path("scorio-monitor.db")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        code: int = arguments.handler(arguments)
    except (ValueError, MonitorError) as exc:
        print(f"scorio-monitor: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); that is not an error of ours.
        sys.stderr.close()
        return 0
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scorio-monitor",
        description="Streaming Bayes@N evaluation monitor with adaptive stopping.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser(
        "score",
        help="batch Bayes@N over a results file",
        description=(
            "Score a finished results file: an .npz of (models, questions, trials) "
            "arrays, or CSV/JSONL trial rows with model, question, trial and "
            "category (or correct)."
        ),
    )
    score.add_argument("file", type=Path, help=".npz, .csv or .jsonl results")
    score.add_argument("--json", action="store_true", help="print JSON, not a table")
    score.add_argument("--confidence", type=float, default=0.95, help="interval level")
    score.add_argument(
        "--weights",
        type=_weights,
        default=None,
        help="category weights, comma separated (default 0,1 for binary results)",
    )
    score.add_argument(
        "--question-count",
        type=int,
        default=None,
        help="the benchmark's M for row files (default: questions seen)",
    )
    score.set_defaults(handler=run_score)

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
    watch_command.set_defaults(handler=run_watch)

    status = commands.add_parser(
        "status", help="print the status of runs in a state file"
    )
    status.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state file")
    status.add_argument("--run", help="one run (default: all)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=run_status)

    serve = commands.add_parser(
        "serve",
        help="run the service: sources, shared state, status and metrics",
        description=(
            "Run the asyncio service from a TOML config: the embedded SQLite "
            "store by default, or Redis shared by several workers; trials over "
            "HTTP, MQTT or Redis Streams; status over HTTP and MQTT; Prometheus "
            "metrics at /metrics. Every config key may come from the environment "
            "as SCORIO_MONITOR_<SECTION>_<KEY> (for secrets)."
        ),
    )
    serve.add_argument("--config", type=Path, help="service config TOML (optional)")
    serve.set_defaults(handler=run_serve)

    simulation = commands.add_parser(
        "simulate",
        help="the paper's biased-coin models driven through the monitor's own loop",
        description=(
            "Simulate a benchmark: biased-coin models with per-question difficulty "
            "(Beta around each model's mean), driven through the engine: ask next, "
            "draw outcomes, ingest, until no model needs trials. Prints the trials "
            "used against the paper's fixed N=80 and the final grouping against the "
            "true order."
        ),
    )
    simulation.add_argument("--models", choices=sorted(MODEL_SETS), default="paper11")
    simulation.add_argument(
        "--rule", choices=["sequential", "paper"], default="sequential"
    )
    simulation.add_argument("--seed", type=int, default=0)
    simulation.add_argument(
        "--cap", type=int, default=80, help="max trials per question"
    )
    simulation.add_argument(
        "--kappa", type=float, default=None, help="Beta concentration"
    )
    simulation.add_argument("--json", action="store_true", help="print JSON")
    simulation.set_defaults(handler=run_simulate)

    plan = commands.add_parser("next", help="which trials to run next")
    plan.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state file")
    plan.add_argument("--run", required=True, help="the run")
    plan.add_argument("--budget", type=int, required=True, help="trials to allocate")
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(handler=run_next)
    return parser


def run_watch(arguments: argparse.Namespace) -> int:
    path = None if arguments.path == "-" else Path(arguments.path)
    if path is not None and not path.exists():
        raise ValueError(f"no such file: {path}")
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
                _print_statuses(monitor.statuses())
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
            _print_statuses(statuses)
        elif not live:
            for status in statuses:
                console.print(
                    status_view(status, [e for e in events if e.run == status.run])
                )
    if totals.lines and totals.valid == 0:
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
        updates = service.subscribe()
        live = console.is_terminal

        async def show() -> None:
            latest: dict[str, Status] = {}
            with (
                Live(console=console, auto_refresh=False)
                if live
                else _NoLive() as display
            ):
                while True:
                    item = await updates.get()
                    if isinstance(item, Status):
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
            _print_statuses(statuses)
        else:
            console = terminal()
            for status in statuses:
                console.print(status_view(status, monitor.events_after(status.run)))
    return 0


def run_next(arguments: argparse.Namespace) -> int:
    with Monitor(SqliteStore(arguments.state, read_only=True)) as monitor:
        items = monitor.next(arguments.run, arguments.budget)
    if arguments.json:
        print(json.dumps([item.model_dump() for item in items], indent=2))
    else:
        for item in items:
            print(f"{item.model}\t{item.question}\t{item.trials}")
    return 0


def run_serve(arguments: argparse.Namespace) -> int:
    config = load_service_config(arguments.config, os.environ)
    logging.basicConfig(
        level=os.environ.get("SCORIO_MONITOR_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(_serve(config))
    return 0


async def _serve(config: ServiceConfig) -> None:
    monitor = Monitor(_store(config.store))
    for run in config.runs:
        monitor.configure(run)
    sources: list[TrialSource] = []
    publishers: list[Publisher] = []
    if config.mqtt is not None:
        sources.append(MqttSource(config.mqtt))
        publishers.append(MqttPublisher(config.mqtt))
    if config.redis_stream is not None:
        sources.append(RedisStreamSource(config.redis_stream))
    publishers.append(
        WebhookPublisher(
            [Target.from_settings(settings) for settings in config.webhooks],
            lambda run: monitor.config(run).webhooks if run in monitor.runs else (),
        )
    )
    service = Service(
        monitor,
        sources,
        publishers,
        status_interval_s=config.status_interval_s,
        look_interval_s=config.look_interval_s,
    )
    async with service:
        app = create_app(
            service, config.http, metrics_renderer(lambda: service.snapshot)
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app, host=config.http.host, port=config.http.port, log_level="warning"
            )
        )

        def stop(signum: int, frame: FrameType | None) -> None:
            server.should_exit = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(
            f"scorio-monitor: serving http://{config.http.listen} "
            f"(store {config.store.kind}"
            + (f", mqtt {config.mqtt.host}:{config.mqtt.port}" if config.mqtt else "")
            + (", redis streams" if config.redis_stream else "")
            + ")",
            file=sys.stderr,
            flush=True,
        )
        await server.serve()


def _store(settings: StoreSettings) -> Store:
    if settings.kind == "memory":
        return MemoryStore()
    if settings.kind == "redis":
        return RedisStore(settings.url, settings.prefix)
    return SqliteStore(settings.path, synchronous=settings.synchronous)


def run_simulate(arguments: argparse.Namespace) -> int:
    means, kappa = MODEL_SETS[arguments.models]
    result = simulate(
        means,
        rule=arguments.rule,
        budget_per_question=arguments.cap,
        kappa=arguments.kappa or kappa,
        seed=arguments.seed,
    )
    if arguments.json:
        report = {
            "models": arguments.models,
            "rule": arguments.rule,
            "seed": arguments.seed,
            "trials": result.trials,
            "fixed_n80_trials": result.fixed_trials,
            "savings": 1.0 - result.trials / result.fixed_trials,
            "false_claims": result.false_claims,
            "resolved_pairs": result.resolved_pairs,
            "resolvable_pairs": result.resolvable_pairs,
            "true_means": result.true_means,
            "status": result.status.model_dump(mode="json"),
        }
        print(json.dumps(report, indent=2))
        return 0
    console = terminal()
    console.print(simulation_view(result))
    return 0


def _views(monitor: Monitor, events: list[StoredEvent]) -> Group:
    return Group(
        *(
            status_view(status, [e for e in events if e.run == status.run])
            for status in monitor.statuses()
        )
    )


def _print_statuses(statuses: list[Status]) -> None:
    if len(statuses) == 1:
        print(statuses[0].model_dump_json(indent=2))
    else:
        print(
            json.dumps(
                [status.model_dump(mode="json") for status in statuses], indent=2
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


def run_score(arguments: argparse.Namespace) -> int:
    path: Path = arguments.file
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    boards: list[Scoreboard]
    if path.suffix.lower() == ".npz":
        boards = []
        for matrix in load_results_npz(path):
            if arguments.weights is not None:
                matrix = dataclasses.replace(matrix, weights=arguments.weights)
            boards.append(score_matrix(matrix, arguments.confidence))
    else:
        boards = _score_rows(path, arguments)
        if not boards:
            return 1
    if arguments.json:
        print(json.dumps([_board_json(board) for board in boards], indent=2))
    else:
        console = terminal()
        for board in boards:
            console.print(scoreboard_table(board))
    return 0


def _score_rows(path: Path, arguments: argparse.Namespace) -> list[Scoreboard]:
    trials = []
    for row in read_trial_rows(path):
        if isinstance(row, RowError):
            print(f"{path}:{row.line}: skipped: {row.reason}", file=sys.stderr)
            continue
        trials.append((row.run, row.model, row.question, row.trial, row.category))
    if not trials:
        print(f"{path}: no valid trial rows", file=sys.stderr)
        return []
    highest = max(trial[4] for trial in trials)
    weights = arguments.weights if arguments.weights is not None else [0.0, 1.0]
    if highest >= len(weights):
        raise ValueError(
            f"category {highest} needs --weights with at least {highest + 1} entries"
        )
    tables = tables_from_trials(trials, weights, arguments.question_count)
    return [
        score_tables(run, tables[run], arguments.confidence) for run in sorted(tables)
    ]


def _board_json(board: Scoreboard) -> dict[str, object]:
    return {
        "run": board.run,
        "confidence": board.confidence,
        "question_count": board.question_count,
        "open": board.is_open,
        "models": [dataclasses.asdict(row) for row in board.models],
    }


def _weights(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"weights must be numbers separated by commas; got {text!r}"
        ) from exc


if __name__ == "__main__":
    sys.exit(main())
