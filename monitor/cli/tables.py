"""Statuses and scoreboards as Markdown or CSV tables, for reports and PRs.

``status --format markdown`` prints what lm-eval prints after a run: one
table per run, a line above it saying what the numbers are. ``--format csv``
prints one table of every run's models, one row per model, for spreadsheets.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Final, Literal

from monitor.engine.scoring import Scoreboard
from monitor.schema import Status

TableFormat = Literal["table", "json", "markdown", "csv"]
FORMATS: Final = ("table", "json", "markdown", "csv")

_STATUS_COLUMNS: Final = (
    "run", "rank", "group", "model", "avg", "mu", "sigma", "lo", "hi", "trials",
    "needs_trials", "predicted_trials",
)  # fmt: skip
_SCORE_COLUMNS: Final = (
    "run", "rank", "group", "model", "avg", "mu", "sigma", "lo", "hi", "trials",
)  # fmt: skip

Row = dict[str, object]


def status_rows(status: Status) -> list[Row]:
    """One row per model, best first, with the columns of :data:`_STATUS_COLUMNS`."""
    return [
        {
            "run": status.run,
            "rank": row.rank,
            "group": row.group,
            "model": row.model,
            "avg": row.avg,
            "mu": row.mu,
            "sigma": row.sigma,
            "lo": row.lo,
            "hi": row.hi,
            "trials": row.trials,
            "needs_trials": row.needs_trials,
            "predicted_trials": row.predicted_trials,
        }
        for row in status.models
    ]


def score_rows(board: Scoreboard) -> list[Row]:
    """One row per model of a scoreboard, best first."""
    rows: list[Row] = []
    for row in board.models:
        avg = row.metrics.get("avg")
        rows.append(
            {
                "run": board.run,
                "rank": row.rank,
                "group": row.group,
                "model": row.model,
                "avg": None if avg is None else avg.mu,
                "mu": row.mu,
                "sigma": row.sigma,
                "lo": row.lo,
                "hi": row.hi,
                "trials": row.trials,
            }
        )
    return rows


def statuses_markdown(statuses: Sequence[Status]) -> str:
    """Each run as a heading, a one-line summary and a Markdown table."""
    parts = []
    for status in statuses:
        state = "stable" if status.stable else "not stable"
        summary = (
            f"{status.trials:,} trials, M={status.question_count}, {state}; "
            f"{status.confidence:.0%} credible intervals; models in one group are "
            "not separated."
        )
        parts.append(_markdown(status.run, summary, status_rows(status), True))
    return "\n".join(parts)


def boards_markdown(boards: Sequence[Scoreboard]) -> str:
    """Each scoreboard as a heading, a one-line summary and a Markdown table."""
    parts = []
    for board in boards:
        summary = (
            f"M={board.question_count}; {board.confidence:.0%} credible intervals; "
            "models in one group are not separated."
        )
        parts.append(_markdown(board.run, summary, score_rows(board), False))
    return "\n".join(parts)


def rows_csv(rows: Sequence[Row], status: bool) -> str:
    """Rows as CSV with a header (floats in full; empty cells for none)."""
    out = io.StringIO()
    columns = _STATUS_COLUMNS if status else _SCORE_COLUMNS
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row[key] is None else row[key] for key in columns})
    return out.getvalue()


def _markdown(run: str, summary: str, rows: Sequence[Row], status: bool) -> str:
    header = ["rank", "group", "model", "avg", "mu ± sigma", "interval", "trials"]
    if status:
        header.append("needs trials")
    lines = [
        f"### {_cell(run)}",
        "",
        summary,
        "",
        "| " + " | ".join(header) + " |",
        "|"
        + "|".join(
            "---:" if h not in ("model", "interval", "needs trials") else "---"
            for h in header
        )
        + "|",
    ]
    for row in rows:
        cells = [
            str(row["rank"]),
            "-" if row["group"] is None else str(row["group"]),
            _cell(str(row["model"])),
            "—" if row["avg"] is None else f"{row['avg']:.4f}",
            f"{row['mu']:.4f} ± {row['sigma']:.4f}",
            f"[{row['lo']:.4f}, {row['hi']:.4f}]",
            f"{row['trials']:,}",
        ]
        if status:
            predicted = row["predicted_trials"]
            cells.append(
                ("yes" + ("" if predicted is None else f" (~{predicted:,})"))
                if row["needs_trials"]
                else "no"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (pipes escaped, one line)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def output_format(arguments: object) -> TableFormat:
    """The ``--format`` asked for (``--json`` is ``--format json``).

    Raises:
        ValueError: when ``--json`` and another ``--format`` are both given.
    """
    chosen: TableFormat | None = getattr(arguments, "format", None)
    if getattr(arguments, "json", False):
        if chosen not in (None, "json"):
            raise ValueError(f"--json and --format {chosen} ask for two outputs")
        return "json"
    return chosen or "table"
