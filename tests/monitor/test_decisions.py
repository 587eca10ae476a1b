"""Decisions: groups, who needs trials, targets, budget, error control, forecasts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from monitor.decisions.decide import (
    RunDecision,
    Settled,
    Standing,
    build_rule,
    decide,
    forecast_trials,
)
from monitor.engine.runs import RunState
from monitor.schema import RunConfig
from scorio_core.stopping import PaperRule, SequentialRule, StoppingRule
from tests.monitor.standings import M, standing


def rules(run: RunConfig) -> Callable[[int], StoppingRule]:
    return lambda boundaries: build_rule(run, boundaries)


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
    decision = decide(models, run, rules(run))
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
    decision = decide(models, run, rules(run))
    assert decision.needs_trials == {"b", "c"}
    assert decision.groups == {"a": 1, "b": 2, "c": 2}
    models_ahead, _ = forecast_trials(decision, lambda name: np.full(M, 20), M, 80)
    predicted = models_ahead["b"]
    assert predicted is not None and 0 < predicted <= (80 - 20) * M
    assert models_ahead["a"] == 0
    assert "a" in decision.done and not decision.stable


def test_a_hopeless_pair_is_unresolvable_and_draws_no_trials() -> None:
    run = config()
    models = [
        standing("a", 0.501, 0.01, per_question=40),
        standing("b", 0.5, 0.01, per_question=40),
    ]
    decision = decide(models, run, rules(run))
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
    decision = decide(models, run, lambda _: PaperRule.from_confidence(0.95, 80))
    adjacent_z = (0.599 - 0.590) / (0.001**2 + 0.004**2) ** 0.5
    assert adjacent_z > 1.645
    assert decision.groups["b"] == decision.groups["c"] == decision.groups["a"]


def test_models_at_their_cap_stop_and_report_the_exhausted_budget() -> None:
    run = config()
    models = [
        standing("a", 0.55, 0.01, per_question=80),
        standing("b", 0.5, 0.01, per_question=80),
    ]
    decision = decide(models, run, rules(run))
    assert not decision.needs_trials
    assert decision.pairs[0].resolved or decision.pairs[0].unresolvable


def test_leader_target_only_cares_about_the_top_boundary() -> None:
    run = config(target="leader")
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.52, 0.01),
        standing("c", 0.5, 0.01),
    ]
    decision = decide(models, run, rules(run))
    assert not decision.needs_trials and decision.stable


def test_top_k_target_watches_the_boundary_after_k() -> None:
    run = config(target="top_k", top_k=2)
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.52, 0.01),
        standing("c", 0.5, 0.01),
    ]
    decision = decide(models, run, rules(run))
    assert decision.needs_trials == {"b", "c"}


def test_width_target_needs_trials_until_the_interval_is_narrow() -> None:
    run = config(target="width", interval_width=0.05)
    models = [standing("a", 0.9, 0.02), standing("b", 0.5, 0.005)]
    decision = decide(models, run, rules(run))
    assert decision.needs_trials == {"a"}
    assert decision.predicted_trials["a"] == pytest.approx(
        (20 * (0.0784 / 0.05) ** 2 - 20) * M, rel=0.01
    )


def test_a_minimum_keeps_models_sampling() -> None:
    run = config(min_trials_per_question=30)
    models = [standing("a", 0.9, 0.01), standing("b", 0.1, 0.01)]
    decision = decide(models, run, rules(run))
    assert decision.needs_trials == {"a", "b"} and not decision.stable


def test_nothing_is_done_before_two_models_report() -> None:
    run = config()
    decision = decide([standing("a", 0.9, 0.01)], run, rules(run))
    assert not decision.done and not decision.stable


def test_declared_models_must_all_report_before_the_ranking_is_stable() -> None:
    run = config(models=["a", "b", "c"])
    models = [
        standing("a", 0.9, 0.01),
        standing("b", 0.1, 0.01),
        standing("c", 0.5, 0.3, per_question=0),
    ]
    decision = decide(models, run, rules(run))
    assert not decision.stable and "c" in decision.needs_trials


def test_exactly_equal_means_are_ordered_by_model_id() -> None:
    run = config()
    decision = decide(
        [standing("b", 0.5, 0.01), standing("a", 0.5, 0.01)], run, rules(run)
    )
    assert decision.order == ("a", "b")
    assert decision.ranks == {"a": 1, "b": 1}


def test_build_rule_follows_the_config() -> None:
    assert isinstance(build_rule(config()), SequentialRule)
    assert isinstance(build_rule(config(rule="paper")), PaperRule)
    no_budget = RunConfig(run="r")
    assert build_rule(no_budget).name == "sequential"


def test_build_rule_shares_the_error_under_ranking_control() -> None:
    one, ten = build_rule(config(), 1), build_rule(config(), 10)
    assert isinstance(one, SequentialRule) and isinstance(ten, SequentialRule)
    assert one.constant == pytest.approx(2.2834, abs=2e-4)  # 0.025 per direction
    assert ten.constant == pytest.approx(3.057, abs=2e-3)  # 0.0025
    pair = build_rule(config(error_control="pair"), 10)
    assert pair == one


def test_a_runs_rule_is_cached_per_share() -> None:
    state = RunState(config())
    assert state.rule_for(4) is state.rule_for(4)
    assert state.rule_for(4) == build_rule(config(), 4)


def between(run: RunConfig, boundaries: int, t: float = 20.0) -> float:
    """A z that settles with the error shared once but not ``boundaries`` ways."""
    low = float(build_rule(run, 1).thresholds(np.array([t]))[0])
    high = float(build_rule(run, boundaries).thresholds(np.array([t]))[0])
    assert low < high
    return (low + high) / 2.0


def chain(z_gap: float, count: int, sigma: float = 0.01) -> list[Standing]:
    """``count`` models each ``z_gap`` (in z units) above the next."""
    step = z_gap * sigma * 2**0.5
    return [standing(f"m{i}", 0.9 - i * step, sigma) for i in range(count)]


def test_ranking_control_tests_each_boundary_at_its_share() -> None:
    run = config()
    models = chain(between(run, 2), 3)
    shared = decide(models, run, rules(run))
    assert not any(pair.resolved for pair in shared.pairs)
    per_pair = config(error_control="pair")
    alone = decide(models, per_pair, rules(per_pair))
    assert all(pair.resolved for pair in alone.pairs)


def test_a_resolved_boundary_frees_its_share_within_the_look() -> None:
    # top is far above; m0 vs m1 passes only once top's boundary freed its share.
    run = config()
    z_gap = between(run, 2)
    models = [standing("top", 0.99, 0.001), *chain(z_gap, 2)]
    decision = decide(models, run, rules(run))
    assert [pair.resolved for pair in decision.pairs] == [True, True]
    assert [d.look for d in decision.new_decisions] == [1, 1]


def test_settled_boundaries_stay_settled_when_later_trials_disagree() -> None:
    run = config()
    first = decide(chain(8.0, 2), run, rules(run), run_trials=1200)
    assert first.pairs[0].resolved and first.done == {"m0", "m1"}
    cut = first.new_decisions[0]
    assert (cut.kind, cut.a, cut.b, cut.trials, cut.look) == (
        "resolved",
        "m0",
        "m1",
        1200,
        1,
    )
    # later trials pull m1 above m0: the order claim stands, z is current
    flipped = [standing("m0", 0.5, 0.01), standing("m1", 0.52, 0.01)]
    later = decide(flipped, run, rules(run), first.settled)
    assert later.order == ("m0", "m1") and later.groups == {"m0": 1, "m1": 2}
    assert later.pairs[0].resolved and later.pairs[0].decision == cut
    assert later.pairs[0].z == pytest.approx(0.02 / (2 * 0.01**2) ** 0.5)
    assert later.done == {"m0", "m1"} and not later.new_decisions


def test_a_tie_stays_a_tie_and_done_stays_done() -> None:
    run = config()
    tied = [
        standing("a", 0.501, 0.01, per_question=40),
        standing("b", 0.5, 0.01, per_question=40),
    ]
    first = decide(tied, run, rules(run))
    assert first.pairs[0].unresolvable and first.done == {"a", "b"}
    apart = [standing("a", 0.7, 0.01), standing("b", 0.5, 0.01)]
    later = decide(apart, run, rules(run), first.settled)
    assert later.pairs[0].unresolvable and not later.pairs[0].resolved
    assert later.done == {"a", "b"} and not later.needs_trials


def test_a_model_joining_reopens_its_group() -> None:
    run = config()
    first = decide(
        [standing("a", 0.9, 0.01), standing("b", 0.5, 0.01)], run, rules(run)
    )
    assert first.done == {"a", "b"}
    joined = [
        standing("a", 0.9, 0.01),
        standing("b", 0.5, 0.01),
        standing("c", 0.51, 0.02, per_question=5),
    ]
    later = decide(joined, run, rules(run), first.settled)
    assert later.groups == {"a": 1, "c": 2, "b": 2}
    assert "a" in later.done and "b" not in later.done
    assert later.needs_trials == {"b", "c"}


def test_an_equivalence_margin_settles_close_pairs() -> None:
    run = config(equivalence_margin=0.05)
    close = [
        standing("a", 0.501, 0.004, per_question=60),
        standing("b", 0.5, 0.004, per_question=60),
        standing("c", 0.1, 0.004, per_question=60),
    ]
    decision = decide(close, run, rules(run))
    assert decision.pairs[0].equivalent and not decision.pairs[0].unresolvable
    assert [d.kind for d in decision.new_decisions] == ["resolved", "equivalent"]
    without = decide(close, config(), rules(config()))
    assert not without.pairs[0].equivalent


def test_a_wide_gap_is_never_equivalent() -> None:
    run = config(equivalence_margin=0.05)
    models = [
        standing("a", 0.54, 0.004, per_question=60),
        standing("b", 0.5, 0.004, per_question=60),
    ]
    decision = decide(models, run, rules(run))
    assert not decision.pairs[0].equivalent


def test_settled_state_replays_from_its_decisions() -> None:
    run = config()
    models = [
        standing("m0", 0.9, 0.01),
        standing("m1", 0.6, 0.01),
        standing("m2", 0.3, 0.01),
        standing("m3", 0.2995, 0.01, per_question=40),
    ]
    decision = decide(models, run, rules(run))
    settled = decision.settled
    replayed = Settled.replay(settled.decisions, settled.done, settled.looks)
    assert replayed == replace(settled, models=frozenset())


def test_forecasts_know_that_pairs_can_end_by_futility() -> None:
    run = config()
    decision: RunDecision = decide(chain(0.9, 2), run, rules(run))
    trials, pairs = forecast_trials(decision, lambda name: np.full(M, 20), M, 80)
    assert 0 < (trials["m0"] or 0) < 60 * M  # ends before the cap, by futility
    assert pairs[0] == (trials["m0"] or 0) + (trials["m1"] or 0)


def test_boundaries_resolving_in_one_look_replay_to_the_same_groups() -> None:
    run = config()
    models = [standing(f"m{i}", 0.9 - 0.2 * i, 0.005) for i in range(4)]
    decision = decide(models, run, rules(run))
    assert [d.kind for d in decision.new_decisions] == ["resolved"] * 3
    settled = decision.settled
    assert settled.segments == (("m0",), ("m1",), ("m2",), ("m3",))
    replayed = Settled.replay(settled.decisions, settled.done, settled.looks)
    assert replayed.segments == settled.segments
    assert replayed.cuts == settled.cuts
