"""Domain events: facts a run reaches once, such as a pair being resolved.

Kinds, in the order one look fires them:

- ``pair_resolved``: the boundary between two adjacent models is settled.
- ``pair_unresolvable``: a pair cannot settle within the budget (a
  statistical tie at this budget); it stops drawing trials.
- ``model_done``: a model needs no more trials (its group's boundaries are
  settled, or its budget is spent).
- ``budget_exhausted``: a model on an open boundary reached its per-question
  cap on every question; the budget, not the evidence, ends its sampling.
- ``ranking_stable``: every boundary the target asks for is settled.

Each fires at most once per run and subject, also across restarts and
workers: the store keeps the keys (see :class:`monitor.interfaces.Store`).
"""

from __future__ import annotations

import json
from typing import Final

from monitor.decisions import RunDecision
from monitor.store import JsonValue, PendingEvent

EVENT_KINDS: Final = (
    "pair_resolved",
    "pair_unresolvable",
    "model_done",
    "budget_exhausted",
    "ranking_stable",
)


def pair_subject(a: str, b: str) -> str:
    """Order-free key of a pair, so a pair fires once whichever is above."""
    return json.dumps(sorted((a, b)))


def pending_events(
    run: str, decision: RunDecision, trials: dict[str, int], now_s: float
) -> list[PendingEvent]:
    """The events a decision implies, most specific first."""
    events: list[PendingEvent] = []

    def add(kind: str, subject: str, payload: dict[str, JsonValue]) -> None:
        events.append(
            PendingEvent(run=run, kind=kind, subject=subject, payload=payload, ts=now_s)
        )

    for pair in decision.pairs:
        if pair.resolved or pair.unresolvable:
            add(
                "pair_resolved" if pair.resolved else "pair_unresolvable",
                pair_subject(pair.a, pair.b),
                {
                    "a": pair.a,
                    "b": pair.b,
                    "z": pair.z,
                    "rho": pair.rho,
                    "trials": {pair.a: trials[pair.a], pair.b: trials[pair.b]},
                },
            )
    for model in decision.order:
        if model in decision.done and trials[model] > 0:
            add(
                "model_done",
                model,
                {
                    "model": model,
                    "group": decision.groups[model],
                    "trials": trials[model],
                },
            )
    if decision.exhausted:
        add(
            "budget_exhausted",
            "",
            {"models": list[JsonValue](sorted(decision.exhausted))},
        )
    if decision.stable:
        add(
            "ranking_stable",
            "",
            {
                "order": list[JsonValue](decision.order),
                "groups": dict[str, JsonValue](decision.groups),
                "trials": sum(trials.values()),
            },
        )
    return events
