"""Allocation: which (model, question, trials) to run next with a budget.

Only models that need trials get any: a resolved or unresolvable model gets
none. Within a model, questions are sampled evenly, least-sampled first (the
study found variance-driven question choice saves little and raises false
claims). Across models, trials go out one at a time in proportion to each
model's share; the engine sets shares to ``s / sqrt(cost)`` (``s`` the sd of
one trial), which for a pair minimises the cost of reaching a given
precision (``n_a / n_b = (s_a / s_b) sqrt(c_b / c_a)``), so a costlier model
gets fewer trials.

The rule is a one-trial-at-a-time loop (the cheapest model so far, then its
least-sampled question); it is computed in closed form with numpy, because a
plan of 1,000 trials over 40 x 1,000 questions took 30-50 ms of the engine
thread as a loop and takes a few ms so (see ``tests/monitor/test_allocation``
for the loop it must equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.schema import NextItem

Counts = NDArray[np.int64]
# (model, question, trials), ordered by model priority, then question order.
Planned = list[tuple[str, str, int]]


def plan(
    models: Sequence[str],
    question_trials: Mapping[str, Mapping[str, int]],
    budget: int,
    cap: int | None = None,
    shares: Mapping[str, float] | None = None,
) -> list[NextItem]:
    """Spread ``budget`` trials over ``models``, least-sampled questions first.

    Args:
        models: The models that need trials, in priority order.
        question_trials: Per model, observed trials per question (every
            question the plan may name, unseen ones with 0).
        budget: Trials to hand out in total.
        cap: ``max_trials_per_question``; no question goes beyond it.
        shares: Optional relative share of trials per model (default equal).

    Returns:
        Items ordered by model priority, then question order.
    """
    questions = [list(question_trials[model]) for model in models]
    trials = [
        np.fromiter(question_trials[model].values(), np.int64, len(names))
        for model, names in zip(models, questions, strict=True)
    ]
    return [
        NextItem(model=model, question=question, trials=count)
        for model, question, count in plan_counts(
            models, questions, trials, budget, cap, shares
        )
    ]


def plan_counts(
    models: Sequence[str],
    questions: Sequence[Sequence[str]],
    trials: Sequence[Counts],
    budget: int,
    cap: int | None = None,
    shares: Mapping[str, float] | None = None,
) -> Planned:
    """:func:`plan` over arrays: ``trials[i]`` counts ``questions[i]`` of
    ``models[i]``; returns (model, question, trials) in the same order."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0; got {budget}")
    share = [(shares or {}).get(model, 1.0) for model in models]
    if any(value <= 0.0 for value in share):
        raise ValueError(
            f"shares must be > 0; got {dict(zip(models, share, strict=True))}"
        )
    given = _per_model(trials, budget, cap, share)
    planned: Planned = []
    for index in np.flatnonzero(given).tolist():
        counts = _fill(trials[index], int(given[index]), cap)
        names, model = questions[index], models[index]
        rows = np.flatnonzero(counts)
        planned.extend(
            zip(
                [model] * len(rows),
                [names[row] for row in rows.tolist()],
                counts[rows].tolist(),
                strict=True,
            )
        )
    return planned


def _per_model(
    trials: Sequence[Counts], budget: int, cap: int | None, share: list[float]
) -> NDArray[np.int64]:
    """How many of the budget's trials each model gets.

    The loop hands the next trial to the model with the least ``spent``
    (ties to the earlier model) and adds ``1 / share`` to its ``spent``; a
    model leaves when all its questions reach the cap. So the models' j-th
    picks happen at ``spent`` = the j-fold running sum of ``1 / share`` (the
    same float additions as the loop), and the plan takes the ``budget``
    smallest of these over all models.
    """
    keys: list[NDArray[np.float64]] = []
    for counts, value in zip(trials, share, strict=True):
        room = len(counts) * budget if cap is None else _room(counts, cap)
        picks = min(budget, room)
        spent = np.full(picks, 1.0 / value)
        if picks:
            spent[0] = 0.0
        keys.append(np.cumsum(spent))
    owner = np.repeat(np.arange(len(keys)), [len(key) for key in keys])
    spent_all = np.concatenate(keys) if keys else np.zeros(0)
    take = min(budget, len(spent_all))
    if take < len(spent_all):
        if take == 0:
            return np.zeros(len(keys), dtype=np.int64)
        last = np.partition(spent_all, take - 1)[take - 1]
        chosen = spent_all < last
        # Ties at the last value go to the earlier model, as in the loop
        # (the keys are laid out in model order).
        tied = np.flatnonzero(spent_all == last)[: take - int(chosen.sum())]
        chosen[tied] = True
        owner = owner[chosen]
    return np.bincount(owner, minlength=len(keys)).astype(np.int64)


def _room(counts: Counts, cap: int) -> int:
    return int(np.clip(cap - counts, 0, None).sum())


def _fill(counts: Counts, given: int, cap: int | None) -> Counts:
    """Trials per question when ``given`` go one at a time to the least sampled.

    That is water-filling: every open question below a level ``L`` is raised
    to ``L``, and the ``r`` left over go to the first ``r`` questions (in
    question order) at ``L``. ``given`` never exceeds the room below the cap.
    """
    open_rows = np.arange(len(counts)) if cap is None else np.flatnonzero(counts < cap)
    level_of = np.sort(counts[open_rows])
    # cost[i]: trials that raise the i lowest to level_of[i].
    below = np.concatenate(([0], np.cumsum(level_of)[:-1]))
    cost = np.arange(len(level_of)) * level_of - below
    i = int(np.searchsorted(cost, given, side="right")) - 1
    level = int(level_of[i]) + (given - int(cost[i])) // (i + 1)
    planned = np.zeros(len(counts), dtype=np.int64)
    open_counts = counts[open_rows]
    raise_by = np.clip(level - open_counts, 0, None)
    left = given - int(raise_by.sum())
    if left:
        at_level = np.flatnonzero(open_counts <= level)[:left]
        raise_by[at_level] += 1
    planned[open_rows] = raise_by
    return planned
