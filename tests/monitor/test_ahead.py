"""Forecasts from the whole procedure rolled on, and the rollout's start."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from monitor.decisions.decide import (
    RunDecision,
    Standing,
    build_rule,
    decide,
    forecast_trials,
)
from monitor.plans.ahead import (
    RolloutForecasts,
    combine,
    forecast_by_rollout,
    rollout_totals,
)
from monitor.plans.outcomes import Outcomes
from monitor.plans.rollout import Field, Start, roll
from monitor.plans.rules import rule_family
from monitor.schema import RunConfig
from tests.monitor.standings import M, standing


@dataclass(frozen=True)
class Table:
    mu: float
    sigma: float
    trial_count: int
    unit_variance: float


def config() -> RunConfig:
    return RunConfig(run="r", question_count=M, max_trials_per_question=80)


def forecast(models: list[Standing]) -> dict[str, int | None]:
    run = config()
    decision = decide(models, run, lambda share: build_rule(run, share))
    single, _ = forecast_trials(
        decision, lambda name: np.full(M, 10, dtype=np.int64), M, 80
    )
    tables = {s.model: Table(s.mu, s.sigma, s.trials, s.unit_variance) for s in models}
    return forecast_by_rollout(decision, tables, run, M, single)


def field(size: int) -> Field:
    run = RunConfig(run="r", question_count=M, max_trials_per_question=40)
    means = np.linspace(0.3, 0.7, size)
    return Field(
        (Outcomes.build(means, 2, 0.2),),
        M,
        40,
        tuple(range(size - 1)),
        rule_family(run),
        40,
    )


def test_without_a_start_the_rollout_plays_as_it_always_has() -> None:
    # Figures of the rollout before it took a start.
    run = RunConfig(run="r", question_count=M, max_trials_per_question=40)
    means = np.array([0.3, 0.45, 0.5, 0.52, 0.7])
    played = roll(
        Field(
            (Outcomes.build(means, 2, 0.2),),
            M,
            40,
            tuple(range(4)),
            rule_family(run),
            40,
        ),
        32,
        np.random.default_rng(5),
    )
    assert float(played.trials_per_question.sum()) == 3323.0
    assert int(played.groups.sum()) == 199
    assert played.trials_per_question[:2].tolist() == [
        [13.0, 31.0, 36.0, 36.0, 15.0],
        [13.0, 14.0, 12.0, 13.0, 9.0],
    ]


def test_a_start_at_zero_plays_as_no_start() -> None:
    size = 5
    zero = Start(
        trials=np.zeros(size),
        sums=np.zeros(size),
        segments=np.zeros(size, dtype=np.int64),
        linked=np.zeros((size, size), dtype=bool),
        done=np.zeros(size, dtype=bool),
        needs=np.ones(size, dtype=bool),
    )
    plain = roll(field(size), 16, np.random.default_rng(3))
    started = roll(field(size), 16, np.random.default_rng(3), zero)
    np.testing.assert_array_equal(
        plain.trials_per_question, started.trials_per_question
    )
    np.testing.assert_array_equal(plain.groups, started.groups)


def test_a_start_at_the_cap_draws_nothing_more() -> None:
    size = 3
    capped = Start(
        trials=np.full(size, 40.0),
        sums=np.array([0.6, 0.5, 0.4]) * 42.0 - 1.0,
        segments=np.zeros(size, dtype=np.int64),
        linked=np.zeros((size, size), dtype=bool),
        done=np.zeros(size, dtype=bool),
        needs=np.ones(size, dtype=bool),
    )
    ends = roll(field(size), 8, np.random.default_rng(0), capped)
    assert (ends.trials_per_question == 40.0).all()


def test_the_same_counts_give_the_same_forecast() -> None:
    models = [
        standing("a", 0.62, 0.02, 10),
        standing("b", 0.58, 0.02, 10),
        standing("c", 0.50, 0.02, 10),
    ]
    first = forecast(models)
    assert first == forecast(models)
    assert all(value is not None and value > 0 for value in first.values())


def test_a_model_on_two_open_boundaries_covers_both() -> None:
    # b is close to a above and to c below: both boundaries draw on it.
    models = [
        standing("a", 0.64, 0.02, 10),
        standing("b", 0.60, 0.02, 10),
        standing("c", 0.56, 0.02, 10),
    ]
    predicted = forecast(models)
    a, b, c = (predicted[name] for name in "abc")
    assert a is not None and b is not None and c is not None
    assert b >= max(a, c)


def grown(tables: dict[str, Table], factor: float) -> dict[str, Table]:
    """The same means after ``factor`` times the trials (binary questions)."""
    result = {}
    for name, t in tables.items():
        trials = round(t.trial_count * factor)
        sigma = math.sqrt(t.unit_variance / (trials / M + 3.0))
        result[name] = Table(t.mu, sigma, trials, t.unit_variance)
    return result


def field_now() -> tuple[
    RunConfig, RunDecision, dict[str, int | None], dict[str, Table]
]:
    models = [
        standing("a", 0.66, 0.02, 10),
        standing("b", 0.60, 0.02, 10),
        standing("c", 0.55, 0.02, 10),
    ]
    run = config()
    decision = decide(models, run, lambda share: build_rule(run, share))
    single, _ = forecast_trials(
        decision, lambda name: np.full(M, 10, dtype=np.int64), M, 80
    )
    tables = {s.model: Table(s.mu, s.sigma, s.trials, s.unit_variance) for s in models}
    return run, decision, single, tables


def test_a_rollout_is_reused_until_the_run_grew_a_tenth() -> None:
    run, decision, single, tables = field_now()
    rollouts = RolloutForecasts(growth=0.1)
    first = rollouts.forecast("r", decision, tables, run, M, single)
    assert first == forecast_by_rollout(decision, tables, run, M, single)
    assert rollouts.rollouts == 1
    # 5 % more trials: the same rollout, combined with the counts now.
    later = grown(tables, 1.05)
    reused = rollouts.forecast("r", decision, later, run, M, single)
    assert rollouts.rollouts == 1
    low = rollout_totals(decision, tables, run, M)
    assert low is not None
    assert reused == combine(low, decision, later, single)
    assert reused != first
    # A tenth more (and some): played on again, from the counts now.
    rollouts.forecast("r", decision, grown(tables, 1.11), run, M, single)
    assert rollouts.rollouts == 2
    # Fewer trials than the rollout saw (a run started over): again.
    rollouts.forecast("r", decision, tables, run, M, single)
    assert rollouts.rollouts == 3
    # Runs are kept apart.
    rollouts.forecast("other", decision, tables, run, M, single)
    assert rollouts.rollouts == 4


def test_a_settled_change_plays_the_run_on_again() -> None:
    run, decision, single, tables = field_now()
    rollouts = RolloutForecasts(growth=0.1)
    rollouts.forecast("r", decision, tables, run, M, single)
    done = replace(decision, done=frozenset({"a"}))
    rollouts.forecast("r", done, tables, run, M, single)
    assert rollouts.rollouts == 2


def test_only_models_that_need_trials_take_the_rollout() -> None:
    _run, decision, single, tables = field_now()
    low = {name: 1.0 for name in decision.order}  # below every model's trials
    needing = replace(decision, needs_trials=frozenset({"a", "b"}))
    combined = combine(low, needing, tables, {**single, "c": 0})
    assert combined["c"] == 0
    # A model that needs trials is never told it needs none.
    assert combined["a"] is not None and combined["a"] >= 1
    assert combined["b"] is not None and combined["b"] >= 1
