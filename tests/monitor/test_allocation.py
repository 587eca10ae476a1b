"""Allocation: who gets the next trials, and on which questions."""

from __future__ import annotations

import pytest

from monitor import Monitor, RunConfig
from monitor.allocation import plan


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
