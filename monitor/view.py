"""Terminal rendering with rich: leaderboards with intervals and groups."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from monitor.scoring import Scoreboard

_BAR_WIDTH = 20


def terminal() -> Console:
    """A console for stdout; when piped, wide enough for a leaderboard."""
    console = Console()
    return console if console.is_terminal else Console(width=120)


def scoreboard_table(board: Scoreboard) -> Table:
    """A leaderboard: rank, group, model, mu +- sigma, interval drawn as a bar."""
    questions = f"M={board.question_count}" + (
        " (open: questions seen)" if board.is_open else ""
    )
    table = Table(
        title=f"{board.run}  ·  {questions}  ·  {board.confidence:.0%} intervals",
        title_justify="left",
    )
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("group", justify="right", no_wrap=True)
    table.add_column("model", overflow="fold", min_width=8)
    table.add_column("mu", justify="right", no_wrap=True)
    table.add_column("sigma", justify="right", no_wrap=True)
    table.add_column("interval", no_wrap=True)
    table.add_column("", no_wrap=True, min_width=_BAR_WIDTH)
    table.add_column("trials", justify="right", no_wrap=True)
    low = min(row.lo for row in board.models)
    high = max(row.hi for row in board.models)
    for row in board.models:
        table.add_row(
            str(row.rank),
            str(row.group),
            row.model,
            f"{row.mu:.4f}",
            f"{row.sigma:.4f}",
            f"[{row.lo:.4f}, {row.hi:.4f}]",
            interval_bar(row.lo, row.mu, row.hi, low, high),
            str(row.trials),
        )
    return table


def interval_bar(lo: float, mu: float, hi: float, low: float, high: float) -> Text:
    """A fixed-width forest-plot bar of [lo, hi] with mu marked, on [low, high]."""
    span = high - low or 1.0

    def cell(value: float) -> int:
        return min(
            _BAR_WIDTH - 1, max(0, round((value - low) / span * (_BAR_WIDTH - 1)))
        )

    chars = [" "] * _BAR_WIDTH
    for index in range(cell(lo), cell(hi) + 1):
        chars[index] = "─"
    chars[cell(mu)] = "●"
    return Text("".join(chars), style="cyan")
