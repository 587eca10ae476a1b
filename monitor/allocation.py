"""Allocation: which (model, question, trials) to run next with a budget.

Only models that need trials get any: a resolved or unresolvable model gets
none. Within a model, questions are sampled evenly, least-sampled first (the
study found variance-driven question choice saves little and raises false
claims). Across models, trials go out one at a time in proportion to each
model's share; the engine sets shares to ``s / sqrt(cost)`` (``s`` the sd of
one trial), which for a pair minimises the cost of reaching a given
precision (``n_a / n_b = (s_a / s_b) sqrt(c_b / c_a)``), so a costlier model
gets fewer trials.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from monitor.schema import NextItem


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
    if budget < 0:
        raise ValueError(f"budget must be >= 0; got {budget}")
    share = {model: (shares or {}).get(model, 1.0) for model in models}
    if any(value <= 0.0 for value in share.values()):
        raise ValueError(f"shares must be > 0; got {share}")
    queues: dict[str, list[tuple[int, int, str]]] = {}
    for model in models:
        queue = [
            (trials, order, question)
            for order, (question, trials) in enumerate(question_trials[model].items())
            if cap is None or trials < cap
        ]
        heapq.heapify(queue)
        if queue:
            queues[model] = queue
    spent = [
        (0.0, priority, model)
        for priority, model in enumerate(models)
        if model in queues
    ]
    heapq.heapify(spent)
    planned: dict[tuple[str, str], int] = {}
    for _ in range(budget):
        if not spent:
            break
        cost, priority, model = heapq.heappop(spent)
        queue = queues[model]
        trials, order, question = heapq.heappop(queue)
        planned[(model, question)] = planned.get((model, question), 0) + 1
        if cap is None or trials + 1 < cap:
            heapq.heappush(queue, (trials + 1, order, question))
        if queue:
            heapq.heappush(spent, (cost + 1.0 / share[model], priority, model))
    priority_of = {model: index for index, model in enumerate(models)}
    question_order = {
        model: {
            question: index for index, question in enumerate(question_trials[model])
        }
        for model in models
    }
    return [
        NextItem(model=model, question=question, trials=trials)
        for (model, question), trials in sorted(
            planned.items(),
            key=lambda item: (
                priority_of[item[0][0]],
                question_order[item[0][0]][item[0][1]],
            ),
        )
    ]
