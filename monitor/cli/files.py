"""Commands over finished results files: ``score`` and ``ingest``."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import signal
import sys
import zipfile
from collections.abc import Iterator
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
    looks_like_csv,
    new_state_way_out,
    print_statuses,
    remove_state_file,
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
    Item,
    ItemBatch,
    Located,
    batched,
    ingest_batches,
    ingest_matrix,
)
from monitor.inputs.columns import Parsed
from monitor.inputs.decode import decode_object
from monitor.schema import Rejection
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
    is_new_state = not state.exists()
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

    # A bad config, an unreadable .npz or rows of another format fail before
    # the state file is created.
    configs = load_run_configs(arguments.config) if arguments.config else []
    matrices = _renamed(_load_npz(path), arguments) if arguments.format == "npz" else []
    batches = _item_batches(path, arguments) if arguments.format != "npz" else None
    with Monitor(state) as monitor:
        configure_runs(monitor, configs, new_state_way_out(state))
        if batches is None:
            for matrix in matrices:
                on_report(ingest_matrix(monitor, matrix))
        else:
            if arguments.follow:
                print(
                    f"scorio-monitor: following {path}; stop with Ctrl-C",
                    file=sys.stderr,
                )
            ingest_batches(monitor, batches, on_report)
        kept = valid > 0 or not is_new_state
        printer.summarise(kept=kept)
        statuses = [monitor.status(run) for run in sorted(touched)]
        if arguments.json:
            print_statuses(statuses)
        else:
            console = terminal()
            for status in statuses:
                console.print(
                    status_view(status, [e for e in events if e.run == status.run])
                )
    if not kept:
        # Nothing counted: no state file of rejections only is left behind.
        remove_state_file(state)
    if valid == 0:
        print(
            "scorio-monitor: no valid trials read"
            + ("" if kept else f" ({state} not kept)"),
            file=sys.stderr,
        )
        return 1
    return 0


def _item_batches(path: Path, arguments: argparse.Namespace) -> Iterator[ItemBatch]:
    """The items of a rows file or of lm-eval output, checked for their format
    unless followed (see _refuse_another_format)."""
    if arguments.format == "lm-eval":
        reader = _lm_eval_reader(path, arguments)
        if arguments.follow:
            _stop_reader_on_signals(reader)
            return iter(reader.batches())
        batches: Iterator[ItemBatch] = iter(reader.batches())
    else:
        batches = _row_batches(path, arguments)
    return _refuse_another_format(batches, path, arguments.format)


def _refuse_another_format(
    batches: Iterator[ItemBatch], path: Path, kind: str
) -> Iterator[ItemBatch]:
    """``batches`` once one of their first rows is a trial.

    When the first ``_SNIFFED_ROWS`` rows are all refused, the file is taken
    for another format and refused in one line, before any state is
    written, rather than one rejection per row.

    Raises:
        ValueError: when none of the first rows is a trial.
    """
    held: list[ItemBatch] = []
    refused: list[Rejection] = []
    for batch in batches:
        held.append(batch)
        for item in batch.items:
            decoded = _decoded(item, batch.source)
            if not isinstance(decoded, Rejection):
                return itertools.chain(held, batches)
            refused.append(decoded)
            if len(refused) >= _SNIFFED_ROWS:
                raise ValueError(_another_format(path, kind, refused))
    return iter(held)  # fewer rows: each refusal said, as for any file


def _decoded(item: Item, source: str) -> Parsed:
    if isinstance(item, Rejection):
        return item
    if isinstance(item, Located):
        return decode_object(item.fields, source, item.position)
    return decode_object(item, source)


def _another_format(path: Path, kind: str, refused: list[Rejection]) -> str:
    first = refused[0]
    where = "" if first.position is None else f"line {first.position}: "
    guess = _guessed_format(path)
    hint = (
        f"; it reads as {_FORMAT_NAMES[guess]}: --format {guess}"
        if guess is not None and guess != kind
        else "; is it another --format (lm-eval, jsonl, csv, npz, inspect)?"
    )
    return (
        f"{path}: the first {len(refused)} rows were refused as --format "
        f"{kind} ({where}{first.reason}); nothing written{hint}"
    )


def _guessed_format(path: Path) -> str | None:
    if not path.is_file():
        return None
    if looks_like_csv(path):
        return "csv"
    with path.open("rb") as handle:
        head = handle.read(1 << 12).lstrip()
    return "jsonl" if head[:1] in (b"{", b"[") else None


_SNIFFED_ROWS = 10
_FORMAT_NAMES = {"csv": "CSV rows", "jsonl": "JSON lines"}


def _ingest_to_url(path: Path, arguments: argparse.Namespace) -> int:
    """``ingest --url``: the same readers, into a running service."""
    if arguments.state is not None:
        raise ValueError("--url sends to a service; it keeps no --state")
    # Only here: the harness client is the [client] extra.
    from monitor.cli.remote import ingest_to_url

    batches = _item_batches(path, arguments)
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
