"""Decisions: groups, who needs trials, targets, budget and forecasts."""

from __future__ import annotations

import pytest

from monitor.decisions import Standing, build_rule, decide
from monitor.run import RunState
from monitor.schema import RunConfig
from scorio_core.stopping import PaperRule, SequentialRule

M = 30


def standing(
    model: str,
    mu: float,
    sigma: float,
    per_question: float = 20.0,
    least: int | None = None,
) -> Standing:
    trials = int(per_question * M)
    return Standing(
        model=model,
        mu=mu,
        sigma=sigma,
        lo=mu - 1.96 * sigma,
        hi=mu + 1.96 * sigma,
        trials=trials,
        question_count=M,
        least_sampled=int(per_question) if least is None else least,
    )


def config(**values: object) -> RunConfig:
    return RunConfig.model_validate(
        {"run": "r", "question_count": M, "max_trials_per_question": 80, **values}
    )


def test_clear_pairs_resolve_and_separate_into_groups() -> None:
    run = config()
    models = [
        standing("a", 0.8, 0.01),
        standing("b", 0.5, 0.01),
        standing("c", 0.2, 0.01),
    ]
    decision = decide(models, run, build_rule(run))
    assert decision.order == ("a", "b", "c")
    assert decision.groups == {"a": 1, "b": 2, "c": 3}
    assert all(pair.resolved for pair in decision.pairs)
    assert decision.stable and not decision.needs_trials
    assert decision.done == {"a", "b", "c"}


def test_a_close_pair_needs_trials_and_a_forecast() -> None:
    run = config()
    models = [
        standing("a", 0.8, 0.01),
        standing("b", 0.52, 0.01),
        standing("c", 0.5, 0.01),
    ]
    decision = decide(models, run, build_rule(run))
    assert decision.needs_trials == {"b", "c"}
    assert decision.groups == {"a": 1, "b": 2, "c": 2}
    predicted = decision.predicted_trials["b"]
    assert predicted is not None and 0 < predicted <= (80 - 20) * M
    assert decision.predicted_trials["a"] == 0
    assert "a" in decision.done and not decision.stable


def test_a_hopeless_pair_is_unresolvable_and_draws_no_trials() -> None:
    run = config()
    models = [
        standing("a", 0.501, 0.01, per_question=40),
        standing("b", 0.5, 0.01, per_question=40),
    ]
    decision = decide(models, run, build_rule(run))
    assert decision.pairs[0].unresolvable and not decision.pairs[0].resolved
    assert not decision.needs_trials and decision.stable
    assert decision.groups == {"a": 1, "b": 1}


def test_block_grouping_refuses_an_untested_implied_order() -> None:
    # a and b are tied; b is far above c, but c's sigma is large so a vs c
    # does not pass at t=20 although the adjacent pair b vs c would.
    run = config(rule="paper")
    models = [
        standing("a", 0.600, 0.010),
        standing("b", 0.599, 0.001),
        standing("c", 0.590, 0.004),
    ]
    decision = decide(models, run, PaperRule.from_confidence(0.95, 80))
    adjacent_z = (0.599 - 0.590) / (0.001**2 + 0.004**2) ** 0.5
    assert adjacent_z > 1.645
    assert decision.groups["b"] == decision.groups["c"] == decision.groups["a"]


def test_models_at_their_cap_stop_and_report_the_exhausted_budget() -> None:
    run = config()
    models = [
        standing("a", 0.55, 0.01, per_question=80),
        standing("b", 0.5, 0.01, per_question=80),
    ]
    decision = decide(models, run, build_rule(run))
    assert not decision.needs_trials
    assert decision.pairs[0].resolved or decision.pairs[0].unresolvable


def test_leader_target_only_cares_about_the_top_boundary() -> None:
    run = config(target="leader")
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.52, 0.01),
        standing("c", 0.5, 0.01),
    ]
    decision = decide(models, run, build_rule(run))
    assert not decision.needs_trials and decision.stable


def test_top_k_target_watches_the_boundary_after_k() -> None:
    run = config(target="top_k", top_k=2)
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.52, 0.01),
        standing("c", 0.5, 0.01),
    ]
    decision = decide(models, run, build_rule(run))
    assert decision.needs_trials == {"b", "c"}


def test_width_target_needs_trials_until_the_interval_is_narrow() -> None:
    run = config(target="width", interval_width=0.05)
    models = [standing("a", 0.9, 0.02), standing("b", 0.5, 0.005)]
    decision = decide(models, run, build_rule(run))
    assert decision.needs_trials == {"a"}
    assert decision.predicted_trials["a"] == pytest.approx(
        (20 * (0.0784 / 0.05) ** 2 - 20) * M, rel=0.01
    )


def test_a_minimum_keeps_models_sampling() -> None:
    run = config(min_trials_per_question=30)
    models = [standing("a", 0.9, 0.01), standing("b", 0.1, 0.01)]
    decision = decide(models, run, build_rule(run))
    assert decision.needs_trials == {"a", "b"} and not decision.stable


def test_nothing_is_done_before_two_models_report() -> None:
    run = config()
    decision = decide([standing("a", 0.9, 0.01)], run, build_rule(run))
    assert not decision.done and not decision.stable


def test_declared_models_must_all_report_before_the_ranking_is_stable() -> None:
    run = config(models=["a", "b", "c"])
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.1, 0.01),
        standing("c", 0.5, 0.3, per_question=0),
    ]
    decision = decide(models, run, build_rule(run))
    assert not decision.stable and "c" in decision.needs_trials


def test_exactly_equal_means_are_ordered_by_model_id() -> None:
    run = config()
    decision = decide(
        [standing("b", 0.5, 0.01), standing("a", 0.5, 0.01)], run, build_rule(run)
    )
    assert decision.order == ("a", "b")
    assert decision.ranks == {"a": 1, "b": 1}


def test_build_rule_follows_the_config() -> None:
    assert isinstance(build_rule(config()), SequentialRule)
    assert isinstance(build_rule(config(rule="paper")), PaperRule)
    no_budget = RunConfig(run="r")
    assert build_rule(no_budget).name == "sequential"


def test_build_rule_tightens_the_sequential_level_for_many_models() -> None:
    eleven, twenty = build_rule(config(), 11), build_rule(config(), 20)
    assert isinstance(eleven, SequentialRule) and isinstance(twenty, SequentialRule)
    assert eleven.constant == pytest.approx(2.2834, abs=2e-4)
    assert twenty.constant > eleven.constant


def test_a_runs_rule_follows_its_declared_or_seen_model_count() -> None:
    declared = RunState(config(models=[f"m{i}" for i in range(20)]))
    assert declared.rule == build_rule(config(), 20)
    open_run = RunState(config())
    assert open_run.rule == build_rule(config(), 2)
    for index in range(20):
        open_run.table(f"m{index}")
    assert open_run.rule == build_rule(config(), 20)
