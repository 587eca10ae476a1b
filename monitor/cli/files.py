"""Commands over finished results files: ``score`` and ``ingest``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType

from adapters.lm_eval import LmEvalOptions, LmEvalSamples
from adapters.results_files import (
    RowError,
    RowFormat,
    RowMapping,
    load_results_npz,
    read_row_items,
    read_trial_rows,
)
from monitor.cli.common import (
    RejectionPrinter,
    archive_kind,
    check_input,
    checked_state,
    configure_runs,
    new_state_way_out,
    print_statuses,
    state_next_to,
    url_token,
)
from monitor.cli.tables import boards_markdown, output_format, rows_csv, score_rows
from monitor.cli.terminal import scoreboard_table, status_view, terminal
from monitor.config import (
    load_run_configs,
)
from monitor.engine.monitor import Monitor
from monitor.engine.scoring import (
    ResultsMatrix,
    Scoreboard,
    score_matrix,
    score_tables,
    tables_from_trials,
)
from monitor.feeds.files import (
    CategoryMap,
    ItemBatch,
    batched,
    ingest_batches,
    ingest_matrix,
)
from monitor.stores.records import IngestReport, StoredEvent


def run_score(arguments: argparse.Namespace) -> int:
    path: Path = arguments.file
    if not path.is_file():
        check_input(path, "lines", "score")  # says why: missing or a directory
    boards: list[Scoreboard]
    if path.suffix.lower() == ".npz" or archive_kind(path) is not None:
        check_input(path, "npz", "score")
        boards = []
        for matrix in _load_npz(path):
            if arguments.weights is not None:
                matrix = dataclasses.replace(matrix, weights=arguments.weights)
            boards.append(score_matrix(matrix, arguments.confidence, arguments.metrics))
    else:
        boards = _score_rows(path, arguments)
        if not boards:
            return 1
    shape = output_format(arguments)
    if shape == "json":
        print(json.dumps([_board_json(board) for board in boards], indent=2))
    elif shape == "markdown":
        print(boards_markdown(boards), end="")
    elif shape == "csv":
        rows = [row for board in boards for row in score_rows(board)]
        print(rows_csv(rows, status=False), end="")
    else:
        console = terminal()
        for board in boards:
            console.print(scoreboard_table(board))
    return 0


def _score_rows(path: Path, arguments: argparse.Namespace) -> list[Scoreboard]:
    check_input(path, "csv" if path.suffix.lower() == ".csv" else "jsonl", "score")
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
        score_tables(run, tables[run], arguments.confidence, arguments.metrics)
        for run in sorted(tables)
    ]


def _board_json(board: Scoreboard) -> dict[str, object]:
    return {
        "run": board.run,
        "confidence": board.confidence,
        "question_count": board.question_count,
        "open": board.is_open,
        "models": [dataclasses.asdict(row) for row in board.models],
    }


# -- ingest ------------------------------------------------------------------


def run_ingest(arguments: argparse.Namespace) -> int:
    path: Path = arguments.path
    _check_ingest_options(arguments)
    if arguments.format == "inspect":
        from monitor.cli.inspect_logs import run_ingest_inspect

        return run_ingest_inspect(arguments)
    if path.exists() or not arguments.follow:
        check_input(path, arguments.format, "ingest")
    if arguments.url is not None:
        return _ingest_to_url(path, arguments)
    state = checked_state(arguments.state or _ingest_state(path))
    printer = RejectionPrinter(path)
    events: list[StoredEvent] = []
    touched: set[str] = set()
    valid = 0

    def on_report(report: IngestReport) -> None:
        nonlocal valid
        valid += report.accepted + report.duplicates + report.corrections
        touched.update(report.runs)
        events.extend(report.events)
        printer.show(report.rejected)

    # A bad config or an unreadable .npz fails before the state file is created.
    configs = load_run_configs(arguments.config) if arguments.config else []
    matrices = _renamed(_load_npz(path), arguments) if arguments.format == "npz" else []
    with Monitor(state) as monitor:
        configure_runs(monitor, configs, new_state_way_out(state))
        if arguments.format == "npz":
            for matrix in matrices:
                on_report(ingest_matrix(monitor, matrix))
        elif arguments.format == "lm-eval":
            reader = _lm_eval_reader(path, arguments)
            if arguments.follow:
                _stop_reader_on_signals(reader)
                print(
                    f"scorio-monitor: following {path}; stop with Ctrl-C",
                    file=sys.stderr,
                )
            ingest_batches(monitor, reader.batches(), on_report)
        else:
            ingest_batches(monitor, _row_batches(path, arguments), on_report)
        printer.summarise()
        statuses = [monitor.status(run) for run in sorted(touched)]
        if arguments.json:
            print_statuses(statuses)
        else:
            console = terminal()
            for status in statuses:
                console.print(
                    status_view(status, [e for e in events if e.run == status.run])
                )
    if valid == 0:
        print("scorio-monitor: no valid trials read", file=sys.stderr)
        return 1
    return 0


def _ingest_to_url(path: Path, arguments: argparse.Namespace) -> int:
    """``ingest --url``: the same readers, into a running service."""
    if arguments.state is not None:
        raise ValueError("--url sends to a service; it keeps no --state")
    # Only here: the harness client is the [client] extra.
    from monitor.cli.remote import ingest_to_url

    if arguments.format == "lm-eval":
        reader = _lm_eval_reader(path, arguments)
        if arguments.follow:
            _stop_reader_on_signals(reader)
        batches: Iterable[ItemBatch] = reader.batches()
    else:
        batches = _row_batches(path, arguments)
    sent, statuses = ingest_to_url(
        batches, arguments.url, url_token(arguments), arguments.config
    )
    if arguments.json:
        print_statuses(statuses)
    else:
        console = terminal()
        for status in statuses:
            console.print(status_view(status, []))
    if sent.refused:
        return 1  # said once per run, above
    if sent.trials == 0:
        print("scorio-monitor: no valid trials read", file=sys.stderr)
        return 1
    return 0


def _check_ingest_options(arguments: argparse.Namespace) -> None:
    kind = arguments.format
    if arguments.url is not None and kind == "npz":
        raise ValueError("--url takes --format lm-eval, jsonl or csv, not npz")
    only = {
        "--columns": ("jsonl", "csv"),
        "--values": ("lm-eval", "jsonl", "csv"),
        "--repeats": ("lm-eval",),
        "--filter": ("lm-eval",),
        "--metric": ("lm-eval",),
        "--follow": ("lm-eval",),
        "--scorer": ("inspect",),
    }
    for option, formats in only.items():
        given = getattr(arguments, option.removeprefix("--"))
        if given not in (None, False) and kind not in formats:
            raise ValueError(f"{option} applies to --format {' or '.join(formats)}")


def _ingest_state(path: Path) -> Path:
    # A file or an lm-eval output directory alike: from its whole name.
    return state_next_to(path.resolve())


def _row_batches(path: Path, arguments: argparse.Namespace) -> Iterator[ItemBatch]:
    mapping = RowMapping(
        columns=arguments.columns or {},
        values=CategoryMap(arguments.values) if arguments.values else None,
        run=arguments.run,
        model=arguments.model,
    )
    kind: RowFormat = "csv" if arguments.format == "csv" else "jsonl"
    return batched(str(path), read_row_items(path, mapping, kind))


def _load_npz(path: Path) -> list[ResultsMatrix]:
    try:
        return load_results_npz(path)
    except (OSError, EOFError, NotImplementedError, zipfile.BadZipFile) as exc:
        # NotImplementedError: a member in a compression zipfile cannot read.
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from exc


def _lm_eval_reader(path: Path, arguments: argparse.Namespace) -> LmEvalSamples:
    options = LmEvalOptions(
        run=arguments.run,
        model=arguments.model,
        filter=arguments.filter,
        metric=arguments.metric,
        repeats=arguments.repeats,
        values=CategoryMap(arguments.values) if arguments.values else None,
    )
    return LmEvalSamples(path, options, follow=arguments.follow, poll_interval_s=0.5)


def _stop_reader_on_signals(reader: LmEvalSamples) -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        reader.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _renamed(
    matrices: list[ResultsMatrix], arguments: argparse.Namespace
) -> list[ResultsMatrix]:
    """The file's run tensors with --run and --model applied."""
    if arguments.run is not None:
        if len(matrices) != 1:
            raise ValueError(
                f"--run names one run; the file holds {len(matrices)}: "
                + ", ".join(matrix.run for matrix in matrices)
            )
        matrices = [dataclasses.replace(matrices[0], run=arguments.run)]
    if arguments.model is not None:
        for matrix in matrices:
            if len(matrix.models) != 1:
                raise ValueError(
                    f"--model names one model; run {matrix.run!r} has "
                    f"{len(matrix.models)}"
                )
        matrices = [
            dataclasses.replace(matrix, models=(arguments.model,))
            for matrix in matrices
        ]
    return matrices
