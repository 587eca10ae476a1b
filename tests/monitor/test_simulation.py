"""`simulate`: the paper's models through the engine's own loop, and its grading."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from monitor.engine.simulation import (
    FIXED_N,
    PAPER_MEANS,
    draw_categories,
    draw_world,
    grade,
    simulate,
)
from monitor.schema import Status


def test_worlds_average_to_the_means_and_keep_ties_exact() -> None:
    world = draw_world(PAPER_MEANS, 30, 5.0, np.random.default_rng(7))
    assert world.shape == (11, 30)
    assert ((world >= 0.0) & (world <= 1.0)).all()
    assert world.mean(axis=1) == pytest.approx(PAPER_MEANS, abs=1e-12)
    assert world[3].mean() == pytest.approx(world[4].mean(), abs=1e-15)


@pytest.mark.slow
def test_a_sequential_run_stops_early_and_grades_its_groups() -> None:
    statuses: list[Status] = []
    result = simulate(PAPER_MEANS, seed=1, observe=statuses.append)
    status = result.status
    assert result.fixed_trials == 11 * 30 * FIXED_N
    assert 0 < result.trials < result.fixed_trials
    assert len(statuses) == result.steps and statuses[-1] == status
    # nothing more is asked for, and no question went past the cap
    assert not any(row.needs_trials for row in status.models)
    assert all(row.trials <= 30 * FIXED_N for row in status.models)
    assert status.rule == "sequential"
    groups = {row.model: row.group for row in status.models}
    assert grade(result.true_means, groups) == (
        result.false_claims,
        result.resolved_pairs,
        result.resolvable_pairs,
    )
    assert result.resolvable_pairs == 9  # ten gaps, one of them an exact tie


@pytest.mark.slow
def test_the_paper_rule_stops_far_sooner_on_the_same_world() -> None:
    sequential = simulate(PAPER_MEANS, seed=1)
    paper = simulate(PAPER_MEANS, seed=1, rule="paper")
    assert paper.status.rule == "paper"
    assert paper.trials < sequential.trials / 2


def test_grading_counts_false_claims_both_ways_and_adjacent_resolutions() -> None:
    truth = {"a": 0.7, "b": 0.5, "c": 0.5, "d": 0.2}
    # right order, the tie kept together: two of two resolvable pairs, no claim
    assert grade(truth, {"a": 1, "b": 2, "c": 2, "d": 3}) == (0, 2, 2)
    # the tie split, and d above c: two false claims, one resolved pair
    assert grade(truth, {"a": 1, "b": 2, "c": 4, "d": 3}) == (2, 1, 2)


@pytest.mark.slow
def test_the_cli_prints_json_with_savings_against_fixed_n() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "simulate", "--seed", "2", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(completed.stdout)
    assert report["rule"] == "sequential" and report["models"] == "paper11"
    assert report["fixed_n80_trials"] == 26_400
    assert report["savings"] == pytest.approx(1 - report["trials"] / 26_400)
    assert report["status"]["trials"] == report["trials"]
    assert 0 <= report["resolved_pairs"] <= report["resolvable_pairs"] == 9


def test_question_major_arrival_fills_one_question_before_the_next() -> None:
    seen: list[Status] = []
    result = simulate(
        (0.3, 0.7),
        question_count=6,
        budget_per_question=20,
        arrival="question_major",
        trials_per_step=10,
        seed=3,
        observe=seen.append,
    )
    # after the first two steps each model has its 20 trials on question 0 only
    assert [row.trials for row in seen[1].models] == [20, 20]
    assert result.status.question_count == 6
    assert all(row.trials % 10 == 0 for row in result.status.models)


def test_rubric_outcomes_keep_the_means_and_costs_are_reported() -> None:
    rng = np.random.default_rng(5)
    draws = draw_categories(np.full(4000, 0.4), 4, (4000,), rng)
    assert set(np.unique(draws).tolist()) <= {0, 1, 2, 3}
    assert draws.mean() / 3 == pytest.approx(0.4, abs=0.02)
    result = simulate(
        (0.3, 0.6),
        categories=4,
        costs=(1.0, 4.0),
        question_count=10,
        trials_per_step=5,
        seed=1,
    )
    trials = {row.model: row.trials for row in result.status.models}
    assert result.cost == trials["model01"] + 4.0 * trials["model02"]


@pytest.mark.slow
def test_forecasts_are_recorded_while_a_model_needs_trials() -> None:
    result = simulate(PAPER_MEANS, seed=4, trials_per_step=10, record_forecasts=True)
    used = {row.model: row.trials for row in result.status.models}
    for model, history in result.forecasts.items():
        assert all(so_far <= used[model] for so_far, _ in history)
        assert all(total >= so_far for so_far, total in history)
    assert any(result.forecasts.values())
    assert result.claims >= result.false_claims


@pytest.mark.slow
def test_a_branch_keeps_the_first_steps_and_draws_another_future() -> None:
    def trials_by_step(branch: tuple[int, int] | None) -> list[dict[str, int]]:
        seen: list[dict[str, int]] = []
        simulate(
            PAPER_MEANS,
            seed=3,
            trials_per_step=10,
            branch=branch,
            observe=lambda status: seen.append(
                {row.model: row.trials for row in status.models}
            ),
        )
        return seen

    def ones_by_step(branch: tuple[int, int] | None) -> list[list[float]]:
        seen: list[list[float]] = []
        simulate(
            PAPER_MEANS,
            seed=3,
            trials_per_step=10,
            branch=branch,
            observe=lambda status: seen.append([row.mu for row in status.models]),
        )
        return seen

    whole = ones_by_step(None)
    assert ones_by_step((0, 0)) != whole  # a branch at the start: another run
    branched = [ones_by_step((2, seed)) for seed in (1, 2)]
    for other in branched:
        assert other[:2] == whole[:2]  # the same first two steps...
        assert other[2] != whole[2]  # ...then other outcomes
    assert branched[0] != branched[1]
    assert trials_by_step((2, 1))[:2] == trials_by_step(None)[:2]


@pytest.mark.slow
def test_the_cli_takes_error_control_arrival_and_a_margin() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "simulate",
            "--seed",
            "2",
            "--error-control",
            "pair",
            "--equivalence-margin",
            "0.02",
            "--arrival",
            "question_major",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(completed.stdout)
    assert report["error_control"] == "pair"
    assert report["status"]["error_control"] == "pair"
