"""Stopping rules, futility, information time and block resolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scorio_core.stopping import (
    ConfidenceSequenceRule,
    PaperRule,
    SequentialRule,
    pair_information,
    pair_information_matrix,
    per_direction_alpha,
    resolve_boundaries,
)


def test_paper_rule_is_flat_at_phi_inverse_of_confidence() -> None:
    rule = PaperRule.from_confidence(0.95)
    assert rule.thresholds(np.array([1.0, 100.0])) == pytest.approx(
        [1.6449, 1.6449], abs=1e-4
    )
    assert not rule.futile(
        np.array([0.1]), np.array([50.0])
    ).any()  # no budget, no futility


def test_paper_futility_is_the_naive_forecast_past_the_cap() -> None:
    rule = PaperRule.from_confidence(0.95, budget=80)
    # needs t (1.645/z)^2: z = 1 at t = 20 needs 54 (< 80); z = 0.5 needs 216.
    assert rule.futile(np.array([1.0, 0.5]), np.array([20.0, 20.0])).tolist() == [
        False,
        True,
    ]


def test_sequential_boundary_falls_to_c_at_the_cap() -> None:
    rule = SequentialRule.from_confidence(0.95, budget=80)
    t = np.array([5.0, 20.0, 80.0, 160.0])
    expected = rule.constant * np.minimum(t / 80, 1.0) ** -0.4  # Delta = 0.1
    assert rule.thresholds(t) == pytest.approx(expected)
    # alpha 0.025 per direction; the constant only depends on alpha and Delta
    assert rule.constant == pytest.approx(2.2834, abs=2e-4)
    assert SequentialRule.from_confidence(0.95, budget=300).constant == rule.constant


def test_error_level_per_pair_shrinks_beyond_eleven_models() -> None:
    assert per_direction_alpha(0.95, 2) == pytest.approx(0.025)
    assert per_direction_alpha(0.95, 11) == pytest.approx(0.025)
    assert per_direction_alpha(0.95, 21) == pytest.approx(0.0125)
    assert per_direction_alpha(0.90, 1) == pytest.approx(0.05)
    eleven = SequentialRule.from_confidence(0.95, budget=80, models=11)
    twenty = SequentialRule.from_confidence(0.95, budget=80, models=20)
    assert twenty.constant > eleven.constant
    wide = ConfidenceSequenceRule.from_confidence(0.95, models=40)
    assert wide.alpha == pytest.approx(0.05 * 10 / 39)


def test_sequential_futility_is_optimistic_and_starts_at_t_min() -> None:
    rule = SequentialRule.from_confidence(0.95, budget=80)
    z = np.array([-1.0, 0.0, 0.2, 0.25, 2.2])
    t = np.array([9.0, 10.0, 20.0, 20.0, 20.0])
    # (z + 0.925) sqrt(80/t) < 2.2834, from t = 10: at t = 10 z = 0 gives
    # 2.62 (no); at t = 20 the limit is z < 0.217: 0.2 yes, 0.25 no; and a
    # settled pair (z above the boundary) is never futile.
    assert rule.futile(z, t).tolist() == [False, False, True, False, False]


def test_sequential_forecast_is_the_scaled_crossing_capped_at_the_budget() -> None:
    rule = SequentialRule.from_confidence(0.95, budget=80)
    z, t = 1.5, 20.0
    later = rule.forecast(z, t)
    crossing = later / rule.forecast_scale
    # the plug-in path z sqrt(s/t) meets the boundary at the unscaled crossing
    assert z * math.sqrt(crossing / t) == pytest.approx(
        float(rule.thresholds(np.array([crossing]))[0])
    )
    assert rule.forecast(0.6, t) == 80.0  # would cross past the cap
    assert rule.forecast(5.0, t) == t  # already settled
    assert rule.forecast(0.0, t) == math.inf


def test_confidence_sequence_needs_no_budget_and_holds_its_boundary() -> None:
    rule = ConfidenceSequenceRule.from_confidence(0.95)
    t = np.array([10.0, 30.0, 1000.0])
    # tightest near t = 30, growing like sqrt(log t) afterwards
    values = rule.thresholds(t)
    assert values[1] < values[0] and values[1] < values[2]
    assert not rule.futile(np.array([0.0]), np.array([1000.0])).any()
    later = rule.forecast(2.0, 30.0)
    assert 2.0 * math.sqrt(later / 30.0) == pytest.approx(
        rule.threshold(later), rel=1e-6
    )


def test_pair_information_is_the_variance_weighted_harmonic_mean() -> None:
    assert pair_information(40.0, 1.0, 40.0, 3.0) == pytest.approx(40.0)
    assert pair_information(80.0, 1.0, 20.0, 1.0) == pytest.approx(32.0)
    matrix = pair_information_matrix(
        np.array([80.0, 20.0, 0.0]), np.array([1.0, 1.0, 1.0])
    )
    assert matrix[0, 1] == pytest.approx(32.0) and matrix[0, 2] == 0.0


def test_block_resolution_needs_every_cross_pair() -> None:
    # Adjacent pairs (0,1) and (1,2) are settled but (0,2) is not (e.g. 2 has
    # a huge sigma): boundary 0 separates {0} from {1, 2} and needs (0,2) too.
    settled = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=bool)
    margin = np.array([[0, 0.5, -0.2], [0, 0, 0.4], [0, 0, 0]])
    first, second = resolve_boundaries(settled, margin)
    assert not first.resolved and first.weakest == (0, 2)
    assert not second.resolved and second.weakest == (0, 2)


def test_block_resolution_resolves_when_all_cross_pairs_settle() -> None:
    settled = np.triu(np.ones((4, 4), dtype=bool), 1)
    settled[1, 2] = False
    margin = np.where(settled, 1.0, -1.0)
    states = resolve_boundaries(settled, margin)
    assert [state.resolved for state in states] == [True, False, True]
    assert states[1].weakest == (1, 2)


def test_a_boundary_is_futile_when_an_unsettled_cross_pair_is() -> None:
    settled = np.zeros((3, 3), dtype=bool)
    futile = np.zeros((3, 3), dtype=bool)
    futile[1, 2] = True
    states = resolve_boundaries(settled, np.zeros((3, 3)), futile)
    assert [state.futile for state in states] == [False, True]
