"""Why ``next`` hands out no trials: the run's ``waiting_for``.

Liveness: whenever a run is not stable, ``next`` hands out trials to every
model that needs them, or the run's status says why not. :func:`waiting_for`
is that reason, from the run's decision and the trials each model has
(reported plus reserved): too few models to compare, room only on
questions the run has not seen, every trial left reserved by earlier plans
(until the first of their leases expires), a budget used up, or a stopping
rule that asks other models first (or nothing of anyone while an order is
open).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.decide import RunDecision
from monitor.engine.runs import RunState
from monitor.schema import Waiting

_NAMED = 5  # models a message names before "and N more"


def started_models(state: RunState) -> list[str]:
    """The run's models with at least one observed trial, sorted."""
    return sorted(name for name, table in state.tables.items() if table.trial_count)


def field_incomplete(state: RunState) -> bool:
    """Whether no order can be claimed yet for want of models.

    A ranking needs two models with trials, and every declared model.
    """
    config = state.config
    started = set(started_models(state))
    if config.models is not None and not set(config.models) <= started:
        return True
    return config.target != "width" and len(started) < 2


def waiting_for(
    state: RunState,
    decision: RunDecision,
    counts: Mapping[str, NDArray[np.int64]],
    reserved: Mapping[str, int],
    expiry: Mapping[str, float],
) -> list[Waiting]:
    """Why ``next`` gives the run (or some of its models) no trials now.

    Args:
        state: The run.
        decision: Its current decision.
        counts: Per model, trials per question reported or reserved (in
            ``state.questions`` order).
        reserved: Per model, trials reserved and not yet reported.
        expiry: Per model, when its first lease holding trials expires.
    """
    if decision.stable:
        return []
    reasons: list[Waiting] = []
    config = state.config
    started = started_models(state)
    too_few = config.models is None and config.target != "width" and len(started) < 2
    if too_few:
        reasons.append(
            Waiting(
                reason="models",
                models=started,
                message=(
                    f"run {config.run!r} has trials of {len(started)} model"
                    f"{'' if len(started) == 1 else 's'}{_listed(started, ' (')}"
                    "; an order needs two: report each model once (or declare "
                    "the run's models, or ask next for a model by name)"
                ),
            )
        )
    needing = [name for name in decision.order if name in decision.needs_trials]
    blocked, unseen, spent = _blocked(state, needing, counts, reserved)
    if blocked:
        until = min((expiry[m] for m in blocked if m in expiry), default=None)
        reasons.append(
            Waiting(
                reason="in_flight",
                models=blocked,
                until=until,
                message=(
                    f"every trial below max_trials_per_question="
                    f"{config.max_trials_per_question} of {_listed(blocked)} is "
                    "reserved by earlier plans: more once they are reported, "
                    "given back, or their first lease expires"
                    + ("" if until is None else f" ({_time(until)})")
                ),
            )
        )
    if unseen:
        seen = len(state.questions)
        declared = "?" if state.is_open else state.question_count
        reasons.append(
            Waiting(
                reason="questions",
                models=unseen,
                message=(
                    f"{_listed(unseen)} need trials only on questions the run "
                    f"has not seen ({seen} of {declared} seen), which a plan "
                    "cannot name: report a trial of each question once (or "
                    "declare the run's questions)"
                    if seen
                    else "the run has seen no question yet, which a plan needs "
                    "to name: report one trial (or declare the run's questions)"
                ),
            )
        )
    if spent:
        reasons.append(_spent(spent))
    held = {*blocked, *unseen, *spent}
    later = [n for n in needing if n not in decision.drawing and n not in held]
    if later and not too_few:
        reasons.append(_later(later))
    if not needing and not reasons:
        reasons.append(_no_model_needs_trials(decision))
    return reasons


def _later(names: list[str]) -> Waiting:
    """Models that need trials while the stopping rule draws from others."""
    return Waiting(
        reason="decisions",
        models=names,
        message=(
            f"{_listed(names)} need trials later: their places are not settled, "
            "but the stopping rule draws from the models of the weakest open "
            "pairs first; ask again once those trials are reported"
        ),
    )


def _blocked(
    state: RunState,
    needing: list[str],
    counts: Mapping[str, NDArray[np.int64]],
    reserved: Mapping[str, int],
) -> tuple[list[str], list[str], list[str]]:
    """The models that need trials but get none: for reservations, for want
    of questions the plan can name, and for a budget used up."""
    cap = state.config.max_trials_per_question
    blocked: list[str] = []
    unseen: list[str] = []
    spent: list[str] = []
    if not state.questions:
        return blocked, list(needing), spent
    if cap is None:
        return blocked, unseen, spent
    more_questions = state.is_open or state.question_count > len(state.questions)
    for name in needing:
        row = counts.get(name)
        room = len(state.questions) * cap if row is None else _room(row, cap)
        if room > 0:
            continue
        if reserved.get(name, 0) > 0:
            blocked.append(name)
        elif more_questions:
            unseen.append(name)
        else:
            spent.append(name)
    return blocked, unseen, spent


def _spent(names: list[str]) -> Waiting:
    return Waiting(
        reason="budget",
        models=names,
        message=(
            f"{_listed(names)} used max_trials_per_question on every question "
            "while their order is open: it ends unresolved unless the budget grows"
        ),
    )


def _no_model_needs_trials(decision: RunDecision) -> Waiting:
    """The run is not stable, yet the decision asks no model for trials."""
    if decision.exhausted:
        return _spent(sorted(decision.exhausted))
    open_pairs = [
        f"{pair.a} and {pair.b}"
        for pair in decision.pairs
        if not (pair.resolved or pair.unresolvable or pair.equivalent)
    ]
    names = sorted({name for pair in decision.pairs for name in (pair.a, pair.b)})
    return Waiting(
        reason="decisions",
        models=names,
        message=(
            "the stopping rule asks no model for trials now, though the order "
            f"is open between {', '.join(open_pairs[:_NAMED]) or 'some models'}"
        ),
    )


def _room(row: NDArray[np.int64], cap: int) -> int:
    return int(np.clip(cap - row, 0, None).sum())


def _listed(names: list[str], opening: str = "") -> str:
    """``a, b and 3 more`` (with ``opening`` and a closing parenthesis)."""
    if not names:
        return ""
    shown = ", ".join(names[:_NAMED])
    if len(names) > _NAMED:
        shown += f" and {len(names) - _NAMED} more"
    return f"{opening}{shown})" if opening else shown


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
