"""Terminal rendering with rich: leaderboards with intervals, groups, events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from monitor.engine.scoring import Scoreboard
from monitor.schema import Status
from monitor.stores.records import StoredEvent

if TYPE_CHECKING:
    # Types only: the simulation is imported by `simulate` alone.
    from monitor.engine.simulation import SimulationResult

_BAR_WIDTH = 20
PIPED_WIDTH: Final = 200

# Two groupings answer two questions; each column says which one it shows.
SETTLED_GROUP: Final = "settled\ngroup"
CI_GROUP: Final = "CI\ngroup"
STATUS_GROUPS_CAPTION: Final = (
    "settled group: models split only where the stopping rule settled every "
    "pair across (what stopping acts on); CI group: the paper's Table 1, "
    "neighbours split where z >= z* at this confidence (what `score` shows)"
)
SCORE_GROUPS_CAPTION: Final = (
    "CI group: the paper's Table 1, neighbours split where z >= z* at this "
    "confidence; `watch` and `status` also show the settled group of the "
    "stopping rule, which splits only where every pair across has settled"
)


class Row(Protocol):
    """A leaderboard row: what scoring and statuses have in common."""

    @property
    def model(self) -> str: ...
    @property
    def mu(self) -> float: ...
    @property
    def sigma(self) -> float: ...
    @property
    def lo(self) -> float: ...
    @property
    def hi(self) -> float: ...
    @property
    def trials(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def group(self) -> int | None: ...


def terminal() -> Console:
    """A console for stdout; when piped, wide enough for a leaderboard.

    Piped output has no width to fit, so it gets one where a leaderboard
    keeps ``org/model`` names of up to ~90 characters on one line; a table
    stays as narrow as its cells (rich does not stretch it).
    """
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def scoreboard_table(board: Scoreboard) -> Table:
    """A leaderboard: rank, group, model, mu +- sigma, interval drawn as a bar."""
    questions = f"M={board.question_count}" + (
        " (open: questions seen)" if board.is_open else ""
    )
    table = _leaderboard(
        f"{board.run}  ·  {questions}  ·  {board.confidence:.0%} intervals",
        (CI_GROUP,),
    )
    table.caption = SCORE_GROUPS_CAPTION
    names = list(board.models[0].metrics) if board.models else []
    for name in names:
        table.add_column(name, justify="right", no_wrap=True)
    low = min(row.lo for row in board.models)
    high = max(row.hi for row in board.models)
    for row in board.models:
        shown = [row.metrics.get(name) for name in names]
        metric_cells = [
            "—" if value is None else f"{value.mu:.4f} ± {value.sigma:.4f}"
            for value in shown
        ]
        table.add_row(*_cells(row, low, high, _group(row.group)), *metric_cells)
    return table


def _leaderboard(title: str | None, groupings: Sequence[str], *extra: str) -> Table:
    table = Table(title=title, title_justify="left", caption_justify="left")
    table.add_column("rank", justify="right", no_wrap=True)
    for name in groupings:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("model", overflow="fold", min_width=8)
    table.add_column("mu", justify="right", no_wrap=True)
    table.add_column("sigma", justify="right", no_wrap=True)
    table.add_column("interval", no_wrap=True)
    table.add_column("", no_wrap=True, min_width=_BAR_WIDTH)
    table.add_column("trials", justify="right", no_wrap=True)
    for name in extra:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def _group(group: int | None) -> str:
    """A settled group, or "-" for a joiner not yet placed by its tests."""
    return "-" if group is None else str(group)


def _cells(row: Row, low: float, high: float, *groups: str) -> list[str | Text]:
    return [
        str(row.rank),
        *groups,
        row.model,
        f"{row.mu:.4f}",
        f"{row.sigma:.4f}",
        f"[{row.lo:.4f}, {row.hi:.4f}]",
        interval_bar(row.lo, row.mu, row.hi, low, high),
        str(row.trials),
    ]


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


def status_view(status: Status, events: Sequence[StoredEvent] = ()) -> Group:
    """The live view of one run: leaderboard, open pairs, recent events."""
    table = _leaderboard(None, (SETTLED_GROUP, CI_GROUP), "needs")
    table.caption = STATUS_GROUPS_CAPTION
    low = min((row.lo for row in status.models), default=0.0)
    high = max((row.hi for row in status.models), default=1.0)
    for row in status.models:
        needs = "—"
        if row.needs_trials:
            # Without a budget a forecast has no bound to be read against.
            needs = (
                "no budget"
                if status.max_trials_per_question is None
                else "yes"
                if row.predicted_trials is None
                else f"~{row.predicted_trials:,}"
            )
        table.add_row(
            *_cells(row, low, high, _group(row.group), str(row.adjacent_group)), needs
        )
    parts: list[Table | Text] = [*status_header(status), table]
    open_pairs = [pair for pair in status.pairs if not pair.resolved]
    if open_pairs:
        lines = [
            f"  {pair.a} vs {pair.b}: z={pair.z:.2f}"
            + ("" if pair.threshold is None else f" of {pair.threshold:.2f} needed")
            + f", rho={pair.rho:.3f}"
            + ("  statistical tie at this budget" if pair.unresolvable else "")
            + ("  equivalent within the margin" if pair.equivalent else "")
            for pair in open_pairs
        ]
        parts.append(Text("unresolved pairs:\n" + "\n".join(lines)))
    if status.waiting_for:
        # Why next hands out no trials now (Liveness: never a bare nothing).
        reasons = [f"  {item.reason}: {item.message}" for item in status.waiting_for]
        parts.append(Text("waiting for:\n" + "\n".join(reasons)))
    if events:
        parts.append(
            Text(
                "events:\n"
                + "\n".join(f"  #{e.seq} {describe_event(e)}" for e in events[-8:])
            )
        )
    return Group(*parts)


def status_header(status: Status) -> tuple[Text, Text]:
    """Two short lines above a run's table: what it is, and what was counted.

    Kept apart from the table's title, which rich wraps to the table's width.
    """
    questions = f"M={status.question_count}" + (" (open)" if status.open else "")
    state = "[green]stable[/]" if status.stable else "[yellow]running[/]"
    what = Text.from_markup(
        f"[bold]{status.run}[/]  ·  {questions}  ·  rule {status.rule}  ·  {state}"
    )
    counts = [
        plural(status.trials, "trial"),
        plural(status.duplicates, "duplicate"),
        plural(status.corrections, "correction"),
        f"{status.rejected:,} rejected",
    ]
    if status.prior_trials:
        counts.append(plural(status.prior_trials, "prior outcome"))
    return what, Text(", ".join(counts))


def plural(count: int, noun: str) -> str:
    """``1 trial``, ``2 trials``, ``1,200 trials``."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def describe_event(event: StoredEvent) -> str:
    """One line for an event."""
    payload = event.payload
    if event.kind in ("pair_resolved", "pair_unresolvable", "pair_equivalent"):
        z = payload.get("z")
        z_text = f"{z:.2f}" if isinstance(z, float) else "?"
        relation = {"pair_resolved": ">", "pair_equivalent": "≈"}.get(event.kind, "~")
        pair = f"{payload.get('a')} {relation} {payload.get('b')}"
        return f"{event.kind}: {pair} (z={z_text})"
    if event.kind == "model_done":
        return f"model_done: {payload.get('model')} ({payload.get('trials')} trials)"
    if event.kind == "budget_exhausted":
        return f"budget_exhausted: {payload.get('models')}"
    return f"{event.kind}"


def simulation_view(result: SimulationResult) -> Group:
    """A simulated run: trials against fixed N=80, grouping against the truth."""
    status = result.status
    truth = result.true_means
    true_rank = {
        name: 1 + sum(other > mean for other in truth.values())
        for name, mean in truth.items()
    }
    table = Table(
        title=f"simulated · rule {status.rule} · M={status.question_count}",
        title_justify="left",
    )
    for header in ("group", "model", "true mean", "true rank", "mu", "sigma", "trials"):
        table.add_column(header, justify="left" if header == "model" else "right")
    for row in status.models:
        table.add_row(
            _group(row.group),
            row.model,
            f"{truth[row.model]:.4f}",
            str(true_rank[row.model]),
            f"{row.mu:.4f}",
            f"{row.sigma:.4f}",
            str(row.trials),
        )
    saving = 1.0 - result.trials / result.fixed_trials
    summary = Text(
        f"trials used: {result.trials:,} vs {result.fixed_trials:,} at fixed N=80 "
        f"({saving:+.0%} saved)\n"
        f"pairs resolved (adjacent, truly different): {result.resolved_pairs} of "
        f"{result.resolvable_pairs}\n"
        f"false claims (a truly equal or worse model in a better group): "
        f"{result.false_claims}"
    )
    return Group(table, summary)


class NoLive:
    """Stands in for rich's Live when output is not a terminal."""

    def __enter__(self) -> NoLive:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, renderable: object, refresh: bool = False) -> None:
        return None
