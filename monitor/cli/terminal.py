"""Terminal rendering with rich: leaderboards that fit the terminal, pairs, events.

A leaderboard keeps rank, model and mu at every width; the other columns
give way in a fixed order when the terminal is narrow (the interval plot
first), and a line under the table names the ones it left out. Under a
run's table: a key to its columns, the unresolved pairs, what the run waits
for, its events and, last, what to run next.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol
from urllib.parse import quote

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from monitor.engine.scoring import Scoreboard
from monitor.schema import ModelStatus, PairStatus, Status, WaitingReason
from monitor.stores.records import StoredEvent
from scorio_core import z_threshold

if TYPE_CHECKING:
    # Types only: the simulation is imported by `simulate` alone.
    from monitor.engine.simulation import SimulationResult

_BAR_WIDTH = 20
PIPED_WIDTH: Final = 200
# Names longer than this fold within their cell before a number gives way.
MODEL_WIDTH: Final = 20
# The budget the last line suggests for one `next` (less if the forecast is less).
NEXT_BUDGET: Final = 100
# Wider than any terminal: a table measured at it takes its natural width.
_UNBOUNDED = 100_000

# The order in which columns give way (the plot first); rank, model and mu
# never do. A score's extra metrics go between trials and avg.
_DROP_PLOT: Final = 1
_DROP_SIGMA: Final = 2
_DROP_INTERVAL: Final = 3
_DROP_TRIALS: Final = 4
_DROP_SECOND_GROUP: Final = 5
_DROP_METRICS: Final = 5
_DROP_NEEDS: Final = 6
_DROP_AVG: Final = 50
_DROP_GROUP: Final = 100

Groupings = Literal["settled", "ci", "both"]


@dataclass(frozen=True, slots=True)
class ViewOptions:
    """How a run's view is drawn.

    ``groups``: the grouping the table shows: ``settled`` (the stopping
    rule's, what ``next`` and ``stable`` act on), ``ci`` (the paper's Table
    1) or ``both``. ``state`` or ``url``: where the run is, for the commands
    the last line suggests (neither: those commands find the state file).
    """

    groups: Groupings = "settled"
    state: Path | None = None
    url: str | None = None


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


@dataclass(frozen=True, slots=True, eq=False)
class Column:
    """A leaderboard column: its header, its cells, and when it gives way.

    ``drop_order``: columns are hidden from the lowest up; ``None``: never.
    ``name`` is what the line under the table calls it (default: the header).
    """

    header: str
    cells: tuple[str | Text, ...]
    drop_order: int | None = None
    justify: Literal["left", "right"] = "right"
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or " ".join(self.header.split())


class Leaderboard:
    """A table of models that fits the width it is drawn at.

    The model column stands between the columns ``before`` and ``after``
    it and is never hidden. Columns with a ``drop_order`` give way, lowest
    first, until the table fits; once the first has gone, names longer than
    :data:`MODEL_WIDTH` fold within their cell. No other cell is ever cut:
    a number shows whole or its column is hidden, and a line under the
    table names the hidden ones.
    """

    def __init__(
        self, before: Sequence[Column], models: Sequence[str], after: Sequence[Column]
    ) -> None:
        self._before = list(before)
        self._models = list(models)
        self._after = list(after)

    def __rich_console__(
        self, console: Console, options: ConsoleOptions
    ) -> RenderResult:
        hidden = self.hidden(console, options)
        yield self._table(hidden, None)
        if hidden:
            names = ", ".join(column.label for column in hidden)
            them = "it" if len(hidden) == 1 else "them"
            yield Text(
                f"not shown at {options.max_width} columns: {names} (a wider "
                f"terminal shows {them}; --json has every value)",
                style="dim",
            )

    def hidden(self, console: Console, options: ConsoleOptions) -> list[Column]:
        """The fewest columns to hide for the table to fit ``options.max_width``."""
        order = sorted(
            (c for c in self._before + self._after if c.drop_order is not None),
            key=lambda column: column.drop_order or 0,
        )
        longest = max((len(name) for name in self._models), default=0)
        folded = min(longest, MODEL_WIDTH)
        # Whole names until the first column (the plot) has gone; then names
        # fold, and the other columns give way one by one.
        steps = [(0, longest), (1, longest)]
        steps += [(count, folded) for count in range(1, len(order) + 1)]
        unbounded = options.update_width(_UNBOUNDED)
        for count, model_width in steps:
            table = self._table(order[:count], model_width)
            if Measurement.get(console, unbounded, table).maximum <= options.max_width:
                return order[:count]
        return order

    def _table(self, hidden: Sequence[Column], model_width: int | None) -> Table:
        before = [c for c in self._before if c not in hidden]
        after = [c for c in self._after if c not in hidden]
        table = Table()
        for column in before:
            _add_column(table, column)
        table.add_column("model", overflow="fold", max_width=model_width)
        for column in after:
            _add_column(table, column)
        for index, model in enumerate(self._models):
            table.add_row(
                *(column.cells[index] for column in before),
                Text(model),  # not markup: a name may hold brackets
                *(column.cells[index] for column in after),
            )
        return table


def _add_column(table: Table, column: Column) -> None:
    # no_wrap: a number never splits over lines; the fit hides its column
    # rather than let rich cut it to an ellipsis.
    table.add_column(column.header, justify=column.justify, no_wrap=True)


def terminal() -> Console:
    """A console for stdout; when piped, wide enough for a leaderboard.

    Piped output has no width to fit, so it gets one where a leaderboard
    shows every column with ``org/model`` names of up to ~70 characters on
    one line; a table stays as narrow as its cells (rich does not stretch
    it). Text around it is not wrapped at all (soft wrap): a paragraph is
    one line, for the pager or editor that shows it to wrap.
    """
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=PIPED_WIDTH, soft_wrap=True)


def _leaderboard(
    rows: Sequence[Row],
    groups: Sequence[Column],
    averages: Sequence[float | None],
    extra: Sequence[Column] = (),
) -> Leaderboard:
    """Rank, ``groups``, model, avg, mu, sigma, interval, plot, trials, ``extra``."""
    low = min((row.lo for row in rows), default=0.0)
    high = max((row.hi for row in rows), default=1.0)
    numbers = [
        Column(
            "avg",
            tuple("—" if avg is None else f"{avg:.4f}" for avg in averages),
            _DROP_AVG,
        ),
        Column("mu", tuple(f"{row.mu:.4f}" for row in rows)),
        Column("sigma", tuple(f"{row.sigma:.4f}" for row in rows), _DROP_SIGMA),
        Column(
            "interval",
            tuple(f"[{row.lo:.4f}, {row.hi:.4f}]" for row in rows),
            _DROP_INTERVAL,
            justify="left",
        ),
        Column(
            "",
            tuple(interval_bar(row.lo, row.mu, row.hi, low, high) for row in rows),
            _DROP_PLOT,
            justify="left",
            name="interval plot",
        ),
        Column("trials", tuple(f"{row.trials:,}" for row in rows), _DROP_TRIALS),
    ]
    return Leaderboard(
        [Column("rank", tuple(str(row.rank) for row in rows)), *groups],
        [row.model for row in rows],
        [*numbers, *extra],
    )


def scoreboard_table(board: Scoreboard) -> Group:
    """A run's scores: a title line, the leaderboard and a key to its columns."""
    questions = (
        "M="
        + plural(board.question_count, "question")
        + (" (open: questions seen)" if board.is_open else "")
    )
    title = Text.assemble(
        (board.run, "bold"),
        f"  ·  {questions}  ·  {board.confidence:.0%} credible intervals",
    )
    rows = board.models
    # avg stands beside mu; the metrics asked for follow the numbers.
    names = [name for name in (rows[0].metrics if rows else {}) if name != "avg"]
    metrics = [
        Column(
            name,
            tuple(
                "—" if value is None else f"{value.mu:.4f} ± {value.sigma:.4f}"
                for value in (row.metrics.get(name) for row in rows)
            ),
            _DROP_METRICS,
        )
        for name in names
    ]
    averages = [row.metrics.get("avg") for row in rows]
    table = _leaderboard(
        rows,
        [Column("group", tuple(str(row.group) for row in rows), _DROP_GROUP)],
        [None if avg is None else avg.mu for avg in averages],
        metrics,
    )
    key = Text(
        f"group: the paper's Table 1: neighbours split where z >= "
        f"{z_threshold(board.confidence):.2f} ({board.confidence:.0%}, read "
        "once); `watch` and `status` group by the stopping rule instead. "
        + _numbers_key(board.confidence),
        style="dim",
    )
    return Group(title, table, key)


def _numbers_key(confidence: float) -> str:
    return (
        "avg: the mean observed score (a harness's accuracy); mu ± sigma: the "
        f"Bayes@N posterior mean and sd; interval: {confidence:.0%} credible."
    )


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


def status_view(
    status: Status,
    events: Sequence[StoredEvent] = (),
    options: ViewOptions = ViewOptions(),
) -> Group:
    """The view of one run: leaderboard, open pairs, events, what to run next."""
    parts: list[Text | Leaderboard] = [
        *status_header(status),
        _status_table(status, options.groups),
        _status_key(status, options.groups),
    ]
    open_pairs = [pair for pair in status.pairs if not pair.resolved]
    if open_pairs:
        parts.append(
            Text(
                "unresolved pairs (z: the gap in standard deviations; P: the "
                "posterior chance the first is better; a pair settles only when "
                f"z reaches the bar the stopping rule sets{_why_bar(status)}):\n"
                + "\n".join(_pair_line(pair) for pair in open_pairs)
            )
        )
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
    parts.append(next_step(status, options))
    return Group(*parts)


def _status_table(status: Status, groups: Groupings) -> Leaderboard:
    rows = status.models
    settled = tuple(_group(row.group) for row in rows)
    ci = tuple(str(row.adjacent_group) for row in rows)
    columns = {
        "settled": [Column("group", settled, _DROP_GROUP)],
        "ci": [Column("CI group", ci, _DROP_GROUP)],
        "both": [
            Column("settled\ngroup", settled, _DROP_GROUP),
            Column("CI\ngroup", ci, _DROP_SECOND_GROUP),
        ],
    }[groups]
    needs = Column("needs", tuple(_needs(row, status) for row in rows), _DROP_NEEDS)
    return _leaderboard(rows, columns, [row.avg for row in rows], [needs])


def _needs(row: ModelStatus, status: Status) -> str:
    """What the model still needs: ``~225 trials`` by the forecast, or why not."""
    if row.budget_exhausted:
        return "budget used"
    if not row.needs_trials:
        return "no"
    # Without a budget a forecast has no bound to be read against.
    if status.max_trials_per_question is None or not row.predicted_trials:
        return "yes"
    return "~" + plural(row.predicted_trials, "trial")


def _status_key(status: Status, groups: Groupings) -> Text:
    """What the columns mean, under the table."""
    settled = (
        "group: models the stopping rule has not yet told apart; a group splits "
        "once every pair across it is settled (`next` and `stable` act on this)"
    )
    ci = (
        f"CI group: the paper's Table 1, neighbours split where z >= "
        f"{z_threshold(status.confidence):.2f} ({status.confidence:.0%}, read "
        "once; shown for reference, the stopping rule does not act on it)"
    )
    sentences = {
        "settled": [settled],
        "ci": [ci],
        "both": ["settled " + settled, ci],
    }[groups]
    if groups != "ci" and any(row.group is None for row in status.models):
        sentences.append("-: joined after a split, not yet placed")
    sentences.append(
        "needs: the forecast of trials the model still needs"
        + (
            " (no forecast without a budget)"
            if status.max_trials_per_question is None
            else ""
        )
    )
    return Text(
        ". ".join(sentences) + ". " + _numbers_key(status.confidence), style="dim"
    )


def _why_bar(status: Status) -> str:
    """Why a pair whose P reads near-certain may still be open."""
    if status.rule != "sequential":
        return ""
    shared = " and shares its error over the ranking"
    return ", high because it checks after every batch" + (
        shared if status.error_control == "ranking" else ""
    )


def _pair_line(pair: PairStatus) -> str:
    line = f"  {pair.a} vs {pair.b}: z {_z(pair.z)}"
    if pair.unresolvable:
        return line + ", a statistical tie at this budget (final)"
    if pair.equivalent:
        return line + ", equivalent within the margin (final)"
    bar = (
        "no trials yet"
        if pair.threshold is None
        else f"needs {_z(pair.threshold)} to settle"
    )
    return f"{line}, {bar}; P({pair.a} better) {_chance(pair.rho)}"


def _z(z: float) -> str:
    # A status writes an infinite z (both sigmas zero) as the largest float.
    return "∞" if z >= 1e308 else f"{z:.2f}"


def _chance(probability: float) -> str:
    """A probability as a percentage that never rounds up to a certainty."""
    if probability > 0.9999:
        return ">99.99%"
    return f"{probability:.2%}" if probability >= 0.999 else f"{probability:.1%}"


def _group(group: int | None) -> str:
    """A settled group, or "-" for a joiner not yet placed by its tests."""
    return "-" if group is None else str(group)


# What to do about each reason `next` hands out nothing.
_ACTIONS: Final[dict[WaitingReason, str]] = {
    "models": "report a trial of each model, or declare the run's models",
    "questions": "report a trial of each question once, or declare the run's questions",
    "in_flight": "report the trials already planned, or wait for their leases "
    "to expire",
    "budget": "raise max_trials_per_question in the run's config, or let those "
    "pairs end unresolved",
    "decisions": "wait: the stopping rule asks no model for trials now",
}
# Reasons that hold back some models while others may still get trials.
_HOLDING: Final = ("in_flight", "questions", "budget")


def next_step(status: Status, options: ViewOptions = ViewOptions()) -> Text:
    """The view's last lines: what to do next, from the run's state.

    Stable: the ranking is settled; export it or gate a model. Models that
    need trials and can get them: the ``next`` command that plans them (with
    the forecast). Nothing to hand out: what would change that (the reasons
    are listed above it). No budget declared: how to declare one.
    """
    run = shlex.quote(status.run)
    state = (
        "" if options.state is None else f" --state {shlex.quote(str(options.state))}"
    )
    commands: list[str] = []
    if status.stable:
        sentence = "the ranking is settled (stable): no more trials are needed"
        if options.url is not None:
            sentence += "; the service serves its status"
            url = f"{options.url}/runs/{quote(status.run, safe='')}/status"
            commands.append(f"curl {shlex.quote(url)}")
        else:
            sentence += "; export it for a report, or gate a model in CI"
            commands += [
                f"scorio-monitor status{state} --run {run} --format markdown",
                f"scorio-monitor gate{state} --run {run} --candidate A --baseline B",
            ]
        return _step([sentence], commands)
    held = {
        model
        for item in status.waiting_for
        if item.reason in _HOLDING
        for model in item.models
    }
    given = [row for row in status.models if row.needs_trials and row.model not in held]
    no_budget = status.max_trials_per_question is None
    sentences: list[str] = []
    if no_budget:
        sentences.append(
            "no budget is declared (add max_trials_per_question = N to the run's "
            "config, so that a tie can be called and forecasts have a bound)"
        )
    if given:
        forecasts = [row.predicted_trials for row in given]
        total = (
            None
            if no_budget or None in forecasts
            else sum(forecast or 0 for forecast in forecasts)
        )
        models = plural(len(given), "model")
        sentence = f"run the trials `next` plans for the {models} that need them"
        if total:
            sentence += f" (the forecast: ~{plural(total, 'trial')} more in all)"
        if held:
            sentence += "; the others wait (see above)"
        sentences.append(sentence)
        where = state if options.url is None else f" --url {shlex.quote(options.url)}"
        budget = NEXT_BUDGET if not total else min(NEXT_BUDGET, total)
        commands.append(f"scorio-monitor next{where} --run {run} --budget {budget}")
    elif status.waiting_for:
        reasons = dict.fromkeys(item.reason for item in status.waiting_for)
        sentences.append(
            "nothing to run until what the run waits for changes: "
            + "; ".join(_ACTIONS[reason] for reason in reasons)
        )
    else:
        sentences.append("report trials as they finish; the status follows them")
    return _step(sentences, commands)


def _step(sentences: Sequence[str], commands: Sequence[str]) -> Text:
    """``next:`` and the sentences, then each command on its own line."""
    text = Text("next: ", style="bold")
    capitalised = [sentences[0], *(s[0].upper() + s[1:] for s in sentences[1:])]
    text.append(". ".join(capitalised) + (":" if commands else "."))
    for command in commands:
        text.append("\n  ")
        text.append(command, style="bold")
    return text


def status_header(status: Status) -> tuple[Text, Text]:
    """Two short lines above a run's table: what it is, and what was counted.

    Kept apart from the table's title, which rich wraps to the table's width.
    """
    questions = (
        "M="
        + plural(status.question_count, "question")
        + (" (open: questions seen)" if status.open else "")
    )
    # Assembled, not markup: a run's name may hold brackets.
    what = Text.assemble(
        (status.run, "bold"),
        f"  ·  {questions}  ·  rule {status.rule}  ·  ",
        ("stable", "green") if status.stable else ("running", "yellow"),
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
    if event.kind == "model_reopened":
        joiners = payload.get("joiners")
        names = ", ".join(str(m) for m in joiners) if isinstance(joiners, list) else ""
        return f"model_reopened: {payload.get('model')} (joined by {names})"
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
