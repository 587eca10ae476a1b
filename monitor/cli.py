"""The ``scorio-monitor`` command line: the composition root.

This is the one module of ``monitor`` allowed to import ``adapters``: it
parses arguments, builds the adapters a command needs and hands them to the
engine. Exit status: 0 on success, 1 when nothing valid was read, 2 for usage
errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from adapters.results_files import RowError, load_results_npz, read_trial_rows
from monitor.scoring import Scoreboard, score_matrix, score_tables, tables_from_trials
from monitor.view import scoreboard_table, terminal


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        code: int = arguments.handler(arguments)
    except ValueError as exc:
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
    return parser


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
