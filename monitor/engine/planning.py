"""Planning: which trials to run next, and the reservations they make.

``next`` asks the run's decision which models need trials, adds the trials
in flight (reserved by earlier plans, not yet reported) to the reported
ones, and lets :func:`~monitor.decisions.allocation.plan_counts` share the
budget; the plan is then reserved as a lease in
:class:`~monitor.engine.reservations.Reservations`. Reports settle leases by
counts: only the cells whose count changed since the last settling are
handed over.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.allocation import plan_counts
from monitor.engine.looks import Looks
from monitor.engine.registry import Registry
from monitor.engine.reservations import Key, Reservations
from monitor.engine.runs import RunState
from monitor.limits import DEFAULT_LEASE_S
from monitor.schema import NextItem


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
    ) -> list[NextItem]:
        """:meth:`Monitor.next <monitor.engine.monitor.Monitor.next>`."""
        if budget < 0 or not lease_s >= 0:
            raise ValueError(
                f"budget and lease_s must be >= 0; got {budget} and {lease_s}"
            )
        state = self._registry.run(run)
        decision = self._looks.decision(run)
        now = self._clock()
        models = [
            name
            for name in decision.order
            if name in decision.needs_trials and model in (None, name)
        ]
        reported = {name: state.trials_array(name) for name in state.tables}
        flying = self._in_flight(run, state, reported, now)
        index = state.question_index()
        trials = _with_in_flight(reported, flying, index, len(state.questions))
        for name in models:
            if name not in trials:  # no counts yet
                trials[name] = np.zeros(len(state.questions), dtype=np.int64)
        planned = plan_counts(
            models,
            [state.questions] * len(models),
            [trials[name] for name in models],
            budget,
            state.config.max_trials_per_question,
            state.cost_shares(models),
        )
        lease = None
        if lease_s > 0:
            counted = {
                (m, q): int(reported[m][index[q]]) if m in reported else 0
                for m, q, _ in planned
            }
            lease = self._reservations.reserve(run, planned, counted, now, lease_s)
            if lease is not None:
                self._settled_counts[run] = reported
        if lease is None:
            return [NextItem(model=m, question=q, trials=n) for m, q, n in planned]
        lease_id, expires = lease.id, lease.expires
        return [
            NextItem(model=m, question=q, trials=n, lease=lease_id, expires=expires)
            for m, q, n in planned
        ]

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
        reported = {name: state.trials_array(name) for name in state.tables}
        return self._in_flight(run, state, reported, self._clock())

    def _in_flight(
        self,
        run: str,
        state: RunState,
        reported: dict[str, NDArray[np.int64]],
        now: float,
    ) -> dict[Key, int]:
        """Settle the run's reservations with the trials reported since last.

        ``reported``: every model's trials per question now. Only cells
        whose count changed since the last settling (or reservation) are
        handed over; the reservations treat the others as unchanged.
        """
        before = self._settled_counts.pop(run, None)
        if before is None and not self._reservations.holds(run):
            return {}
        questions = state.questions
        changed: dict[Key, int] = {}
        for name, counts in reported.items():
            last = (before or {}).get(name)
            if last is None:
                rows = np.arange(len(counts))
            else:
                size = min(len(last), len(counts))
                rows = np.flatnonzero(counts[:size] != last[:size])
                if len(counts) > size:
                    rows = np.concatenate((rows, np.arange(size, len(counts))))
            for row, count in zip(rows.tolist(), counts[rows].tolist(), strict=True):
                changed[(name, questions[row])] = count
        flying = self._reservations.in_flight(run, changed, now)
        if self._reservations.holds(run):
            self._settled_counts[run] = reported
        return flying


def _with_in_flight(
    reported: dict[str, NDArray[np.int64]],
    flying: dict[Key, int],
    index: dict[str, int],
    size: int,
) -> dict[str, NDArray[np.int64]]:
    """Each model's reported trials per question plus its in-flight ones.

    In bulk (numpy), not cell by cell: a run's leases may hold every one of
    its 40 x 1,000 cells.
    """
    names = list(reported)
    grid = (
        np.stack([reported[name] for name in names])
        if names
        else np.zeros((0, size), dtype=np.int64)
    )
    if flying:
        position = {name: i for i, name in enumerate(names)}
        count = len(flying)
        models = map(position.get, [key[0] for key in flying], itertools.repeat(-1))
        questions = map(index.get, [key[1] for key in flying], itertools.repeat(-1))
        rows = np.fromiter(models, np.int64, count)
        columns = np.fromiter(questions, np.int64, count)
        counts = np.fromiter(flying.values(), np.int64, count)
        known = (rows >= 0) & (columns >= 0)
        np.add.at(grid, (rows[known], columns[known]), counts[known])
    return {name: grid[i] for i, name in enumerate(names)}
