"""Commands over finished results files: ``score`` and ``ingest``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import FrameType

from adapters.lm_eval import LmEvalOptions, LmEvalSamples
from adapters.results_files import (
    RowError,
    RowMapping,
    load_results_npz,
    read_row_items,
    read_trial_rows,
)
from monitor.cli.common import (
    Subparsers,
    add_url_arguments,
    print_statuses,
    url_token,
)
from monitor.cli.remote import ingest_to_url
from monitor.config import (
    load_run_configs,
)
from monitor.engine import Monitor
from monitor.ingesting import (
    CategoryMap,
    ItemBatch,
    batched,
    ingest_batches,
    ingest_matrix,
)
from monitor.schema import Rejection
from monitor.scoring import (
    ResultsMatrix,
    Scoreboard,
    score_matrix,
    score_tables,
    tables_from_trials,
)
from monitor.store import IngestReport, StoredEvent
from monitor.view import scoreboard_table, status_view, terminal


def add_commands(commands: Subparsers) -> None:
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

    ingest = commands.add_parser(
        "ingest",
        help="ingest a harness's results files into a state file",
        description=(
            "Ingest finished results: lm-eval --log_samples output (a samples "
            "file, or the --output_path directory, optionally followed for new "
            "files), JSONL or CSV trial rows (with a column and value mapping), "
            "or an .npz of (models, questions, trials) arrays. Counts go into a "
            "SQLite state file like watch; prints the final status."
        ),
    )
    _add_ingest_arguments(ingest)
    ingest.set_defaults(handler=run_ingest)


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


# -- ingest ------------------------------------------------------------------

INGEST_FORMATS = ("lm-eval", "jsonl", "csv", "npz")
TRIAL_FIELDS = ("run", "model", "question", "trial", "category", "correct")
_PRINTED_REJECTIONS = 50


def _add_ingest_arguments(ingest: argparse.ArgumentParser) -> None:
    ingest.add_argument("path", type=Path, help="file, or an lm-eval output directory")
    ingest.add_argument("--format", required=True, choices=INGEST_FORMATS)
    ingest.add_argument(
        "--run",
        help="run of every trial (default: the lm-eval task, the rows' run "
        "column or the file's stem, the .npz array's key)",
    )
    ingest.add_argument(
        "--model",
        help="model of every trial (default: the lm-eval model name, the rows' "
        "model column, the .npz models array)",
    )
    ingest.add_argument(
        "--columns",
        type=_column_mapping,
        metavar="THEIRS=OURS,...",
        help="jsonl/csv: rename columns to run, model, question, trial, category "
        "or correct, e.g. sample_id=question,epoch=trial,score=category",
    )
    ingest.add_argument(
        "--values",
        type=_value_mapping,
        metavar="VALUE=CATEGORY,...",
        help="map outcome values onto categories, e.g. C=1,I=0 (lm-eval: "
        "logged fractions, e.g. 0=0,0.5=1,1=2)",
    )
    ingest.add_argument(
        "--repeats",
        action="store_true",
        help="lm-eval: one trial per generation, re-scored with the task's "
        "filter and exact_match settings (default: one trial per document)",
    )
    ingest.add_argument(
        "--filter", help="lm-eval: whose lines to read (default: the task's first)"
    )
    ingest.add_argument(
        "--metric", help="lm-eval: the logged metric (default: each line's first)"
    )
    ingest.add_argument(
        "--follow",
        action="store_true",
        help="lm-eval: keep reading new samples files until interrupted",
    )
    ingest.add_argument(
        "--config", type=Path, help="run config TOML (one run or [[runs]])"
    )
    ingest.add_argument(
        "--state",
        type=Path,
        help="state file (default: <input>.monitor.db next to the input)",
    )
    ingest.add_argument(
        "--json", action="store_true", help="print the final status JSON"
    )
    add_url_arguments(ingest)


def run_ingest(arguments: argparse.Namespace) -> int:
    path: Path = arguments.path
    _check_ingest_options(arguments)
    if not path.exists() and not arguments.follow:
        raise ValueError(f"no such file or directory: {path}")
    if arguments.url is not None:
        return _ingest_to_url(path, arguments)
    state = arguments.state or _ingest_state(path)
    printer = _RejectionPrinter(path)
    events: list[StoredEvent] = []
    touched: set[str] = set()
    valid = 0

    def on_report(report: IngestReport) -> None:
        nonlocal valid
        valid += report.accepted + report.duplicates + report.corrections
        touched.update(report.runs)
        events.extend(report.events)
        printer.show(report.rejected)

    with Monitor(state) as monitor:
        for config in load_run_configs(arguments.config) if arguments.config else []:
            monitor.configure(config)
        if arguments.format == "npz":
            for matrix in _renamed(load_results_npz(path), arguments):
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
    if arguments.format == "npz":
        raise ValueError("--url takes --format lm-eval, jsonl or csv, not npz")
    if arguments.state is not None:
        raise ValueError("--url sends to a service; it keeps no --state")
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
    if sent.trials == 0:
        print("scorio-monitor: no valid trials read", file=sys.stderr)
        return 1
    return 0


def _check_ingest_options(arguments: argparse.Namespace) -> None:
    kind = arguments.format
    only = {
        "--columns": ("jsonl", "csv"),
        "--values": ("lm-eval", "jsonl", "csv"),
        "--repeats": ("lm-eval",),
        "--filter": ("lm-eval",),
        "--metric": ("lm-eval",),
        "--follow": ("lm-eval",),
    }
    for option, formats in only.items():
        given = getattr(arguments, option.removeprefix("--"))
        if given not in (None, False) and kind not in formats:
            raise ValueError(f"{option} applies to --format {' or '.join(formats)}")


def _ingest_state(path: Path) -> Path:
    absolute = path.resolve()
    if absolute.is_dir():
        return absolute.with_name(absolute.name + ".monitor.db")
    return absolute.with_name(absolute.stem + ".monitor.db")


def _row_batches(path: Path, arguments: argparse.Namespace) -> Iterator[ItemBatch]:
    mapping = RowMapping(
        columns=arguments.columns or {},
        values=CategoryMap(arguments.values) if arguments.values else None,
        run=arguments.run,
        model=arguments.model,
    )
    return batched(str(path), read_row_items(path, mapping))


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


class _RejectionPrinter:
    """Rejections on stderr as ``file:line: rejected: reason``, the first few."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._count = 0

    def show(self, rejections: Sequence[Rejection]) -> None:
        for rejection in rejections:
            self._count += 1
            if self._count > _PRINTED_REJECTIONS:
                continue
            where = rejection.source
            reason = rejection.reason
            if rejection.source == "columns":
                # A cell of a results tensor: its fields say where it is.
                where, reason = str(self._path), f"{reason}: {rejection.raw}"
            elif rejection.position is not None:
                where = f"{where}:{rejection.position}"
            print(f"{where}: rejected: {reason}", file=sys.stderr)

    def summarise(self) -> None:
        if self._count > _PRINTED_REJECTIONS:
            print(
                f"scorio-monitor: {self._count - _PRINTED_REJECTIONS} more rejected "
                "(kept as dead letters in the state file)",
                file=sys.stderr,
            )


def _column_mapping(text: str) -> dict[str, str]:
    pairs = _pairs(text)
    for theirs, ours in pairs.items():
        if ours not in TRIAL_FIELDS:
            raise argparse.ArgumentTypeError(
                f"{theirs}={ours}: a column maps to one of {', '.join(TRIAL_FIELDS)}"
            )
    return pairs


def _value_mapping(text: str) -> dict[str, int]:
    mapping = {}
    for value, category in _pairs(text).items():
        if not category.isdigit():
            raise argparse.ArgumentTypeError(
                f"{value}={category}: a value maps to a category, an integer >= 0"
            )
        mapping[value] = int(category)
    return mapping


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for part in text.split(","):
        key, equals, value = part.partition("=")
        if not equals or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(
                f"expected NAME=VALUE pairs separated by commas; got {text!r}"
            )
        pairs[key.strip()] = value.strip()
    return pairs
