"""Domain events: facts a run reaches once, such as a pair being resolved.

Kinds, in the order one look fires them:

- ``pair_resolved``: the boundary between two adjacent models is settled;
  the payload names the two parts of the group it split (``above``,
  ``below``: every model of ``above`` is claimed better than every model
  of ``below``), and ``z``, ``trials`` and ``look`` say when. A joiner's
  placement fires it too, with ``joiner`` naming the joiner and ``above``
  or ``below`` just the joiner (it splits no group).
- ``pair_unresolvable``: a pair cannot settle within the budget (a
  statistical tie at this budget); it stops drawing trials.
- ``pair_equivalent``: a pair is shown closer than the run's
  ``equivalence_margin``; it stops drawing trials.
- ``model_reopened``: a model that was done needs trials again, because
  ``joiners`` joined its group (``reason`` ``joined``; ``placed`` for a
  joiner that had stopped drawing and is placed after all).
- ``model_done``: a model needs no more trials (its group's boundaries are
  settled, or its budget is spent); once more after each reopening.
- ``budget_exhausted``: a model on an open boundary reached its per-question
  cap on every question; the budget, not the evidence, ends its sampling.
- ``ranking_stable``: every boundary the target asks for is settled.

Each fires at most once per run and subject, also across restarts and
workers: the store keeps the keys (see :class:`monitor.interfaces.Store`).
The subject of a pair's event is the pair; of ``model_done`` the model
(with the reopening's number, ``["m", 1]``, after a reopening); of
``model_reopened`` the model and that number.
The fired decisions are the run's settled state: :func:`settled_from_events`
rebuilds it after a restart, so no status contradicts a fired event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

from monitor.decisions.model import Reopening, RunDecision, Settled, SettledPair
from monitor.stores.records import JsonValue, PendingEvent, StoredEvent
from scorio_core import order_confidence

EVENT_KINDS: Final = (
    "pair_resolved",
    "pair_unresolvable",
    "pair_equivalent",
    "model_reopened",
    "model_done",
    "budget_exhausted",
    "ranking_stable",
)


_DECISION_EVENTS: Final = {
    "resolved": "pair_resolved",
    "unresolvable": "pair_unresolvable",
    "equivalent": "pair_equivalent",
}
_EVENT_DECISIONS: Final = {
    kind: decision for decision, kind in _DECISION_EVENTS.items()
}


def pair_subject(a: str, b: str) -> str:
    """Order-free key of a pair, so a pair fires once whichever is above."""
    return json.dumps(sorted((a, b)))


def model_subject(model: str, generation: int) -> str:
    """Key of a model's event: the model, with its reopenings once it has any."""
    return model if generation == 0 else json.dumps([model, generation])


def pending_events(
    run: str, decision: RunDecision, trials: dict[str, int], now_s: float
) -> list[PendingEvent]:
    """The events a decision implies, most specific first."""
    events: list[PendingEvent] = []

    def add(kind: str, subject: str, payload: dict[str, JsonValue]) -> None:
        events.append(
            PendingEvent(run=run, kind=kind, subject=subject, payload=payload, ts=now_s)
        )

    for settled in decision.new_decisions:
        payload: dict[str, JsonValue] = {
            "a": settled.a,
            "b": settled.b,
            "z": settled.z,
            "rho": order_confidence(settled.z),
            "trials": {settled.a: trials[settled.a], settled.b: trials[settled.b]},
            "run_trials": settled.trials,
            "look": settled.look,
            "above": list[JsonValue](settled.above),
            "below": list[JsonValue](settled.below),
        }
        if settled.joiner:
            payload["joiner"] = settled.joiner
        add(_DECISION_EVENTS[settled.kind], pair_subject(settled.a, settled.b), payload)
    for reopening in decision.reopenings:
        model = reopening.model
        add(
            "model_reopened",
            model_subject(model, reopening.generation),
            {
                "model": model,
                "reason": "placed" if model in reopening.joiners else "joined",
                "joiners": list[JsonValue](reopening.joiners),
                "group": decision.groups.get(model),
                "trials": trials[model],
                "run_trials": reopening.trials,
                "look": reopening.look,
                "reopening": reopening.generation,
            },
        )
    for model in decision.order:
        if model in decision.done and trials[model] > 0:
            add(
                "model_done",
                model_subject(model, decision.settled.generation(model)),
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


def settled_from_events(events: Iterable[StoredEvent]) -> Settled:
    """A run's settled decisions, rebuilt from its fired events in order."""
    decisions: list[SettledPair] = []
    done: set[str] = set()
    reopened: list[Reopening] = []
    looks = 0
    for event in sorted(events, key=lambda e: e.seq):
        payload = event.payload
        if event.kind == "model_done":
            done.add(str(payload.get("model", event.subject)))
            continue
        if event.kind == "model_reopened":
            model = str(payload.get("model"))
            done.discard(model)
            reopened.append(
                Reopening(
                    model=model,
                    joiners=_names(payload.get("joiners")),
                    generation=_integer(payload.get("reopening")),
                    look=_integer(payload.get("look")),
                    trials=_integer(payload.get("run_trials")),
                )
            )
            continue
        kind = _EVENT_DECISIONS.get(event.kind)
        if kind is None:
            continue
        look = _integer(payload.get("look"))
        looks = max(looks, look)
        decisions.append(
            SettledPair(
                kind=kind,  # type: ignore[arg-type]
                a=str(payload.get("a")),
                b=str(payload.get("b")),
                z=_number(payload.get("z")),
                trials=_integer(payload.get("run_trials")),
                look=look,
                above=_names(payload.get("above")),
                below=_names(payload.get("below")),
                joiner=str(payload.get("joiner") or ""),
            )
        )
    return Settled.replay(decisions, done, looks, reopened)


def _names(value: JsonValue | None) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _number(value: JsonValue | None) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _integer(value: JsonValue | None) -> int:
    return int(value) if isinstance(value, int | float) else 0
