"""Allocation: who gets the next trials, and on which questions."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.harness import AsyncMonitorClient, HttpTransport
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.decisions.allocation import plan
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving


def test_least_sampled_questions_come_first_and_the_cap_holds() -> None:
    items = plan(["a"], {"a": {"q1": 3, "q2": 0, "q3": 1}}, budget=4, cap=3)
    assert {item.question: item.trials for item in items} == {"q2": 3, "q3": 1}


def test_the_budget_is_split_across_models() -> None:
    trials = {"a": {"q": 0, "r": 0}, "b": {"q": 0, "r": 0}}
    items = plan(["a", "b"], trials, budget=4)
    assert sum(i.trials for i in items if i.model == "a") == 2
    assert sum(i.trials for i in items if i.model == "b") == 2


def test_a_model_with_a_smaller_share_gets_fewer_trials() -> None:
    trials = {"cheap": {"q": 0}, "dear": {"q": 0}}
    items = plan(
        ["cheap", "dear"], trials, budget=30, shares={"cheap": 2.0, "dear": 1.0}
    )
    given = {item.model: item.trials for item in items}
    assert given == {"cheap": 20, "dear": 10}


def test_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget must be >= 0"):
        plan(["a"], {"a": {"q": 0}}, budget=-1)


def feed(
    monitor: Monitor,
    model: str,
    rate: float,
    per_question: int,
    seconds: float | None = None,
) -> None:
    events = []
    for q in range(10):
        for t in range(per_question):
            event: dict[str, object] = {
                "run": "r",
                "model": model,
                "question": q,
                "trial": t,
                # spread over the questions so each model's accuracy is ``rate``
                "correct": (37 * t + 11 * q) % 100 < rate * 100,
            }
            if seconds is not None:
                event["cost"] = {"seconds": seconds}
            events.append(event)
    monitor.ingest(events)


def test_a_resolved_model_gets_no_trials() -> None:
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="r", question_count=10, max_trials_per_question=200)
    )
    feed(monitor, "top", 0.95, 40)
    feed(monitor, "mid", 0.5, 40)
    feed(monitor, "low", 0.48, 40)
    items = monitor.next("r", 100)
    assert {item.model for item in items} == {"mid", "low"}
    assert sum(item.trials for item in items) == 100


def test_a_costlier_model_gets_fewer_trials() -> None:
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="r", question_count=10, max_trials_per_question=200)
    )
    feed(monitor, "fast", 0.5, 20, seconds=1.0)
    feed(monitor, "slow", 0.48, 20, seconds=16.0)
    items = monitor.next("r", 100)
    given = {
        model: sum(i.trials for i in items if i.model == model)
        for model in ("fast", "slow")
    }
    assert given == {"fast": 80, "slow": 20}  # shares 1/sqrt(1) : 1/sqrt(16) = 4 : 1


def loop_plan(
    models: list[str],
    question_trials: dict[str, dict[str, int]],
    budget: int,
    cap: int | None,
    shares: dict[str, float],
) -> list[tuple[str, str, int]]:
    """The allocation rule as the loop it was written as: one trial at a time."""
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
    spent = [(0.0, p, model) for p, model in enumerate(models) if model in queues]
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
            heapq.heappush(spent, (cost + 1.0 / shares[model], priority, model))
    order_of = {
        (model, question): (p, q)
        for p, model in enumerate(models)
        for q, question in enumerate(question_trials[model])
    }
    return sorted(
        ((m, q, n) for (m, q), n in planned.items()), key=lambda i: order_of[i[:2]]
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 6), min_size=0, max_size=8),
            st.sampled_from([1.0, 0.5, 0.3, 2.0 / 3.0, 1 / 7, 3.0, 0.1]),
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 60),
    st.none() | st.integers(1, 7),
)
def test_the_closed_form_plan_equals_the_one_trial_at_a_time_loop(
    spec: list[tuple[list[int], float]], budget: int, cap: int | None
) -> None:
    models = [f"m{i}" for i in range(len(spec))]
    trials = {
        model: {f"q{q}": count for q, count in enumerate(counts)}
        for model, (counts, _) in zip(models, spec, strict=True)
    }
    shares = {model: share for model, (_, share) in zip(models, spec, strict=True)}
    items = plan(models, trials, budget, cap, shares)
    expected = loop_plan(models, trials, budget, cap, shares)
    assert [(i.model, i.question, i.trials) for i in items] == expected


def test_a_large_plan_equals_the_loop() -> None:
    generator = np.random.default_rng(7)
    models = [f"m{i}" for i in range(40)]
    trials = {
        model: {f"q{q}": int(n) for q, n in enumerate(generator.integers(0, 9, 1000))}
        for model in models
    }
    shares = {model: float(generator.uniform(0.1, 3.0)) for model in models}
    for cap in (None, 8, 12):
        items = plan(models, trials, 1000, cap, shares)
        expected = loop_plan(models, trials, 1000, cap, shares)
        assert [(i.model, i.question, i.trials) for i in items] == expected


@pytest.mark.parametrize(
    "costs",
    [
        {"a": 1e308, "b": 1e308},  # the sums overflow to infinity
        {"a": 1e308, "b": 1.0},
        {"a": 5e-324, "b": 1e308},
    ],
)
def test_huge_or_tiny_costs_never_stop_allocation(
    tmp_path: Path, costs: dict[str, float]
) -> None:
    state = tmp_path / "state.db"
    config = RunConfig(run="r", question_count=10, max_trials_per_question=50)
    with Monitor(state) as monitor:
        monitor.configure(config)
        for model, seconds in costs.items():
            # Two costed trials each: 2 x 1e308 s is more than a float holds.
            feed(monitor, model, 0.5, 2, seconds=seconds)
        first = monitor.next("r", 40, lease_s=0)
    # A restart rebuilds the costs from the store: still a plan.
    with Monitor(state) as monitor:
        again = monitor.next("r", 40, lease_s=0)
    for items in (first, again):
        given = {m: sum(i.trials for i in items if i.model == m) for m in costs}
        assert sum(given.values()) == 40
        assert all(count > 0 for count in given.values()), given


async def test_huge_costs_never_fail_next_over_http() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=10))
    for model in ("a", "b"):
        feed(monitor, model, 0.5, 2, seconds=1e308)
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, AsyncMonitorClient(HttpTransport(base)) as c:
            items = await c.next("r", 10)
            status = await c.status("r")
    assert sum(item.trials for item in items) == 10
    assert {row.model for row in status.models} == {"a", "b"}
