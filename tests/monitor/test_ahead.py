"""Forecasts from the whole procedure rolled on, and the rollout's start."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor.decisions.decide import Standing, build_rule, decide, forecast_trials
from monitor.plans.ahead import forecast_by_rollout
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
