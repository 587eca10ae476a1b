"""``status --compare A,B``: runs side by side as Markdown, CSV or JSON.

Markdown: one table, a row per model, for each run its rank, group, avg,
mu ± sigma and interval ("absent" where the run has no such model). CSV: one
row per model and run (empty cells where absent), for spreadsheets. JSON:
the :class:`~monitor.engine.comparison.Comparison` that ``GET /compare``
serves.
"""

from __future__ import annotations

import argparse
import csv
import io
from typing import Final

from monitor.cli.tables import TableFormat, output_format
from monitor.engine.comparison import Comparison, compare, compared_runs
from monitor.engine.monitor import Monitor

_CSV_COLUMNS: Final = (
    "model", "run", "present", "rank", "group", "avg", "mu", "sigma", "lo", "hi",
    "trials",
)  # fmt: skip


def comparison_text(comparison: Comparison, shape: TableFormat) -> str:
    """The comparison in ``shape`` (``table`` prints the Markdown table)."""
    if shape == "json":
        return comparison.model_dump_json(indent=2) + "\n"
    if shape == "csv":
        return comparison_csv(comparison)
    return comparison_markdown(comparison)


def comparison_markdown(comparison: Comparison) -> str:
    runs = [compared.run for compared in comparison.runs]
    summary = "; ".join(
        f"{_cell(r.run)}: {r.trials:,} trials, {r.confidence:.0%} intervals, "
        f"{'stable' if r.stable else 'not stable'}"
        for r in comparison.runs
    )
    header = ["model"]
    for run in runs:
        name = _cell(run)
        header += [
            f"{name} rank", f"{name} group", f"{name} avg", f"{name} mu ± sigma",
            "interval",
        ]  # fmt: skip
    lines = [
        "### " + " vs ".join(_cell(run) for run in runs),
        "",
        summary + ". Models in one group are not separated within their run.",
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|---:|---:|---:|---|" * len(runs),
    ]
    for model in comparison.models:
        cells = [_cell(model.model)]
        for run in runs:
            cell = model.runs[run]
            if cell is None:
                cells += ["absent", "", "", "", ""]
            else:
                cells += [
                    str(cell.rank),
                    "-" if cell.group is None else str(cell.group),
                    "—" if cell.avg is None else f"{cell.avg:.4f}",
                    f"{cell.mu:.4f} ± {cell.sigma:.4f}",
                    f"[{cell.lo:.4f}, {cell.hi:.4f}]",
                ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def comparison_csv(comparison: Comparison) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=_CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for model in comparison.models:
        for compared in comparison.runs:
            cell = model.runs[compared.run]
            row: dict[str, object] = {
                "model": model.model,
                "run": compared.run,
                "present": cell is not None,
            }
            if cell is not None:
                row.update(cell.model_dump())
                row["avg"] = "" if cell.avg is None else cell.avg
            writer.writerow(row)
    return out.getvalue()


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (pipes escaped, one line)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def print_comparison(monitor: Monitor, arguments: argparse.Namespace) -> int:
    """``status --compare``: the runs side by side, in ``--format``.

    Raises:
        ValueError: for ``--run`` with ``--compare``, or a bad list of runs.
        UnknownRunError: for a run the state file does not have.
    """
    if arguments.run:
        raise ValueError("--compare names its runs: leave --run out")
    runs = compared_runs(arguments.compare)
    comparison = compare([monitor.status(run) for run in runs])
    print(comparison_text(comparison, output_format(arguments)), end="")
    return 0
