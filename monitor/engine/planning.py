"""Planning: which trials to run next, the reservations they make, and why not more.

``next`` asks the run's decision which models need trials, adds the trials
in flight (reserved by earlier plans, not yet reported, and those lent by
other questions' reports) to the reported ones, and lets
:func:`~monitor.decisions.allocation.plan_counts` share the budget; the
plan is then reserved as a lease in
:class:`~monitor.engine.reservations.Reservations`. Reports settle leases by
counts: only the cells whose reports (new trials, duplicates and
corrections alike) changed since the last settling are handed over, with
how many each gained since. When the plan
leaves a model that needs trials without any, the answer says why
(:mod:`~monitor.engine.waiting`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.allocation import plan_counts
from monitor.decisions.decide import RunDecision
from monitor.engine.looks import Looks
from monitor.engine.registry import Registry
from monitor.engine.reservations import Key, Reservations
from monitor.engine.runs import RunState
from monitor.engine.waiting import field_incomplete, waiting_for
from monitor.limits import DEFAULT_LEASE_S
from monitor.schema import NextItem, Plan, Waiting


class Planner:
    """Plans trials per run and keeps the leases they reserve.

    Args:
        registry: The runs' live state (reported trials per question).
        looks: The runs' current decisions (which models need trials).
        clock: Seconds since the epoch (leases expire by it).
    """

    def __init__(
        self, registry: Registry, looks: Looks, clock: Callable[[], float]
    ) -> None:
        self._registry = registry
        self._looks = looks
        self._clock = clock
        self._reservations = Reservations()
        # Per run with leases, each model's reported trials per question when
        # its reservations last settled: only rows that changed since are
        # handed to them (settling every reserved cell took 30 ms and more
        # once leases covered a run of 40 x 1,000).
        self._settled_counts: dict[str, dict[str, NDArray[np.int64]]] = {}

    def next(
        self,
        run: str,
        budget: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> Plan:
        """:meth:`Monitor.next <monitor.engine.monitor.Monitor.next>`."""
        if budget < 0 or not lease_s >= 0:
            raise ValueError(
                f"budget and lease_s must be >= 0; got {budget} and {lease_s}"
            )
        state = self._registry.run(run)
        decision = self._looks.decision(run)
        now = self._clock()
        models, refused = self._models(state, decision, model)
        self._settle(run, state, now)
        reported = {name: state.trials_array(name) for name in state.tables}
        trials, lent, held = self._with_reserved(run, state, reported, models)
        planned = self._plan(state, models, trials, lent, held, budget)
        lease = None
        if lease_s > 0:
            lease = self._reservations.reserve(run, planned, now, lease_s)
            if lease is not None:
                self._settled_counts[run] = _reports(state)
                for name, question, count in planned:
                    row = state.question_index()[question]
                    trials[name][row] += count
                    held[name][row] += count
        if lease is None:
            items = [NextItem(model=m, question=q, trials=n) for m, q, n in planned]
        else:
            items = [
                NextItem(
                    model=m, question=q, trials=n, lease=lease.id, expires=lease.expires
                )
                for m, q, n in planned
            ]
        if sum(count for _, _, count in planned) >= budget:
            return Plan(items, stable=decision.stable)
        waiting = refused + self._waiting(run, state, decision, trials, lent, held)
        if model is not None:
            waiting = [w for w in waiting if model in w.models]
            if not items and not waiting and not decision.stable:
                waiting = [_not_asked(model)]
        return Plan(items, waiting, stable=decision.stable)

    def waiting_for(self, run: str, decision: RunDecision) -> list[Waiting]:
        """Why ``next`` gives the run, or some of its models, no trials now."""
        if decision.stable:
            return []
        state = self._registry.run(run)
        self._settle(run, state, self._clock())
        reported = {name: state.trials_array(name) for name in state.tables}
        trials, lent, held = self._with_reserved(run, state, reported, [])
        return self._waiting(run, state, decision, trials, lent, held)

    def _plan(
        self,
        state: RunState,
        models: list[str],
        trials: dict[str, NDArray[np.int64]],
        lent: dict[str, NDArray[np.int64]],
        held: dict[str, NDArray[np.int64]],
        budget: int,
    ) -> list[tuple[str, str, int]]:
        """Share the budget: first as if lent trials still ran, then, for
        what that leaves, without them.

        A lent trial (released by a report on another question) may still
        run, so plans avoid its room while there is other room below the
        cap; a scheduler that runs its own choice of questions never
        releases it, so it never blocks a plan for good either.
        """
        cap = state.config.max_trials_per_question
        shares = state.cost_shares(models)
        questions = [state.questions] * len(models)
        planned = plan_counts(
            models,
            questions,
            [trials[name] + lent[name] for name in models],
            budget,
            cap,
            shares,
        )
        given = sum(count for _, _, count in planned)
        # Lent room goes again only to models that hold no trials: a
        # scheduler that follows its plan still holds some while its lent
        # trials may run; one that runs its own questions holds none once it
        # reported a round.
        free = [m for m in models if lent[m].any() and not held[m].any()]
        if cap is None or given >= budget or not free:
            return planned
        index = state.question_index()
        first = {name: trials[name].copy() for name in free}
        for name, question, count in planned:
            if name in first:
                first[name][index[question]] += count
        more = plan_counts(
            free,
            [state.questions] * len(free),
            [first[name] for name in free],
            budget - given,
            cap,
            shares,
        )
        merged: dict[tuple[str, str], int] = {}
        for name, question, count in (*planned, *more):
            merged[(name, question)] = merged.get((name, question), 0) + count
        return [(name, question, count) for (name, question), count in merged.items()]

    def release(self, run: str, items: Sequence[NextItem]) -> int:
        """Give back reserved trials that will not run; how many were given back.

        Each item names (model, question), the trials to give back and
        optionally its ``lease`` (else the newest leases holding them).
        """
        self._registry.run(run)
        return self._reservations.release(run, list(items))

    def in_flight(self, run: str) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question)."""
        state = self._registry.run(run)
        return self._settle(run, state, self._clock())

    def _models(
        self, state: RunState, decision: RunDecision, model: str | None
    ) -> tuple[list[str], list[Waiting]]:
        """The models the plan may give trials, best first, and a refusal.

        The run's plan goes to the models the stopping rule draws trials
        from (some of those that need trials; the others wait). A model
        asked for by name also gets trials while it is not placed: before
        its first trial (a model joining an undeclared field), or while too
        few models have reported to compare any; so a scheduler can
        reserve every trial it runs, from the first one on.
        """
        drawing = decision.drawing
        if model is None:
            return [name for name in decision.order if name in drawing], []
        declared = state.config.models
        if declared is not None and model not in declared:
            return [], [
                Waiting(
                    reason="models",
                    models=[model],
                    message=(
                        f"model {model!r} is not declared for run "
                        f"{state.config.run!r}: its trials would be refused"
                    ),
                )
            ]
        placed = model in decision.order and state.tables[model].trial_count > 0
        wanted = model in drawing or (
            field_incomplete(state) and model in decision.needs_trials
        )
        if not placed or wanted:
            return [model], []
        return [], []

    def _waiting(
        self,
        run: str,
        state: RunState,
        decision: RunDecision,
        trials: dict[str, NDArray[np.int64]],
        lent: dict[str, NDArray[np.int64]],
        held: dict[str, NDArray[np.int64]],
    ) -> list[Waiting]:
        """:func:`~monitor.engine.waiting.waiting_for`, with the room each
        model's plan sees: its lent trials block it while it holds others
        (see :meth:`_plan`)."""
        blocking = {
            name: counts + lent[name] if held[name].any() else counts
            for name, counts in trials.items()
        }
        reserved: dict[str, int] = {}
        for (name, _), count in self._reservations.in_flight(
            run, {}, self._clock()
        ).items():
            reserved[name] = reserved.get(name, 0) + count
        for (name, _), count in self._reservations.lent(run).items():
            reserved[name] = reserved.get(name, 0) + count
        expiry = self._reservations.first_expiry(run)
        return waiting_for(state, decision, blocking, reserved, expiry)

    def _settle(self, run: str, state: RunState, now: float) -> dict[Key, int]:
        """Settle the run's reservations with the trials reported since last.

        Reports count, not trials: a duplicate or a correction of a trial
        settles a reservation as a new trial does (a harness that reran the
        attempt it was handed with an id it had used before still ran it).
        Only cells whose reports changed since the last settling (or
        reservation) are handed over, with how many they gained; the
        reservations take the others as unchanged.
        """
        before = self._settled_counts.pop(run, None)
        if not self._reservations.holds(run):
            return {}
        reported = _reports(state)
        questions = state.questions
        changed: dict[Key, int] = {}
        for name, counts in reported.items() if before is not None else ():
            last = before.get(name) if before is not None else None
            if last is None:
                last = np.zeros(0, dtype=np.int64)  # no trials when last settled
            size = min(len(last), len(counts))
            gained = counts.copy()
            gained[:size] -= last[:size]
            rows = np.flatnonzero(gained > 0)
            for row, count in zip(rows.tolist(), gained[rows].tolist(), strict=True):
                changed[(name, questions[row])] = count
        flying = self._reservations.in_flight(run, changed, now)
        if self._reservations.holds(run):
            self._settled_counts[run] = reported
        return flying

    def _with_reserved(
        self,
        run: str,
        state: RunState,
        reported: dict[str, NDArray[np.int64]],
        models: list[str],
    ) -> tuple[
        dict[str, NDArray[np.int64]],
        dict[str, NDArray[np.int64]],
        dict[str, NDArray[np.int64]],
    ]:
        """Each model's reported trials per question plus its in-flight ones;
        its lent ones; its in-flight ones alone: for every model with trials,
        leases or a plan.

        In bulk (numpy), not cell by cell: a run's leases may hold every one
        of its 40 x 1,000 cells.
        """
        size = len(state.questions)
        held = self._reservations.in_flight(run, {}, self._clock())
        lent = self._reservations.lent(run)
        names = list(
            dict.fromkeys([*reported, *models, *(name for name, _ in (*held, *lent))])
        )
        position = {name: i for i, name in enumerate(names)}
        grid = np.zeros((len(names), size), dtype=np.int64)
        for row, name in enumerate(names):
            counts = reported.get(name)
            if counts is not None:
                grid[row, : len(counts)] = counts
        held_grid = np.zeros_like(grid)
        _add_cells(held_grid, held, position, state.question_index())
        lent_grid = np.zeros_like(grid)
        _add_cells(lent_grid, lent, position, state.question_index())
        grid += held_grid
        return (
            {name: grid[i] for i, name in enumerate(names)},
            {name: lent_grid[i] for i, name in enumerate(names)},
            {name: held_grid[i] for i, name in enumerate(names)},
        )


def _reports(state: RunState) -> dict[str, NDArray[np.int64]]:
    """Every model's reports per question (:meth:`RunState.reports_array`)."""
    return {name: state.reports_array(name) for name in state.tables}


def _add_cells(
    grid: NDArray[np.int64],
    cells: dict[Key, int],
    position: dict[str, int],
    index: dict[str, int],
) -> None:
    """Add trials per (model, question) to a models x questions grid."""
    if not cells:
        return
    count = len(cells)
    rows = np.fromiter((position[key[0]] for key in cells), np.int64, count)
    columns = np.fromiter((index.get(key[1], -1) for key in cells), np.int64, count)
    counts = np.fromiter(cells.values(), np.int64, count)
    known = columns >= 0
    np.add.at(grid, (rows[known], columns[known]), counts[known])


def _not_asked(model: str) -> Waiting:
    return Waiting(
        reason="decisions",
        models=[model],
        message=(
            f"{model} needs no more trials: its place is settled (or, for a "
            "model that joined late, can no longer be)"
        ),
    )
