"""Pairwise z, ranks and the paper's CI-aware rank groups."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scorio.sinf as oracle_sinf
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import kendalltau

from scorio_core import (
    ci_groups,
    competition_ranks,
    convergence_at_n,
    kendall_tau,
    order_confidence,
    ranking_confidence,
    z_score,
    z_threshold,
)

SIGMA = 0.01


def groups_for(gaps_in_sigma: list[float]) -> list[int]:
    """Groups for models whose adjacent z (equal sigmas) are the given values."""
    spread = math.sqrt(2) * SIGMA
    means = [1.0]
    for gap in gaps_in_sigma:
        means.append(means[-1] - gap * spread)
    groups: list[int] = ci_groups(means, [SIGMA] * len(means)).tolist()
    return groups


@given(st.floats(-1, 1), st.floats(0.001, 0.3), st.floats(-1, 1), st.floats(0.001, 0.3))
def test_z_and_rho_equal_scorio(
    mu_a: float, sigma_a: float, mu_b: float, sigma_b: float
) -> None:
    rho, z = oracle_sinf.ranking_confidence(mu_a, sigma_a, mu_b, sigma_b)
    assert z_score(mu_a, sigma_a, mu_b, sigma_b) == pytest.approx(z, abs=1e-12)
    assert order_confidence(z) == pytest.approx(rho, abs=1e-12)
    ours_rho, ours_z = ranking_confidence(mu_a, sigma_a, mu_b, sigma_b)
    assert ours_z == pytest.approx(z, abs=1e-12)
    assert ours_rho == pytest.approx(rho, abs=1e-12)


@pytest.mark.parametrize("mu_b", [0.5, 0.4])
def test_ranking_confidence_of_exact_posteriors_matches_scorio(mu_b: float) -> None:
    assert ranking_confidence(0.5, 0.0, mu_b, 0.0) == oracle_sinf.ranking_confidence(
        0.5, 0.0, mu_b, 0.0
    )


def test_exact_posteriors_give_infinite_or_zero_z() -> None:
    assert z_score(0.6, 0.0, 0.5, 0.0) == math.inf
    assert z_score(0.5, 0.0, 0.5, 0.0) == 0.0


def test_paper_table_one_pattern_of_groups() -> None:
    # 1 2 2 3 3 4 5 5 5 6 7: a gap >= 1.645 starts a new group.
    gaps = [2.0, 1.0, 3.0, 0.5, 2.5, 1.7, 0.2, 1.0, 4.0, 1.645]
    assert groups_for(gaps) == [1, 2, 2, 3, 3, 4, 5, 5, 5, 6, 7]


def test_a_chain_of_small_gaps_shares_one_group_even_if_its_ends_separate() -> None:
    assert groups_for([1.5, 1.5, 1.5]) == [1, 1, 1, 1]


def test_all_resolved_and_none_resolved() -> None:
    assert groups_for([2.0, 2.0, 2.0]) == [1, 2, 3, 4]
    assert groups_for([0.0, 0.1, 0.0]) == [1, 1, 1, 1]


def test_groups_come_back_in_input_order() -> None:
    means = [0.2, 0.9, 0.5]
    assert ci_groups(means, [0.001] * 3).tolist() == [3, 1, 2]


def test_threshold_is_the_one_sided_quantile_of_confidence() -> None:
    assert z_threshold(0.95) == pytest.approx(1.6448536269514722)
    assert z_threshold(0.99) == pytest.approx(2.3263478740408408)


def test_competition_ranks_share_the_best_rank_and_skip() -> None:
    assert competition_ranks([0.9, 0.7, 0.7, 0.1]).tolist() == [1, 2, 2, 4]


@given(
    st.lists(
        st.floats(0, 1, allow_subnormal=False), min_size=2, max_size=12, unique=True
    ),
)
def test_permuting_models_permutes_their_ranks_and_groups_alike(
    means: list[float],
) -> None:
    permutation = np.random.default_rng(len(means)).permutation(len(means))
    sigmas = [0.02] * len(means)
    ranks = competition_ranks(means)
    groups = ci_groups(means, sigmas)
    permuted_means = [means[i] for i in permutation]
    assert competition_ranks(permuted_means).tolist() == ranks[permutation].tolist()
    assert ci_groups(permuted_means, sigmas).tolist() == groups[permutation].tolist()


def test_equal_means_are_ordered_by_input_position() -> None:
    groups = ci_groups([0.5, 0.5, 0.9], [0.0, 0.0, 0.0])
    assert groups.tolist() == [2, 2, 1]


def test_kendall_tau_b_uses_scipy() -> None:
    a, b = [1, 2, 2, 4, 5], [2, 1, 3, 3, 5]
    assert kendall_tau(a, b) == pytest.approx(kendalltau(a, b).statistic)


def test_convergence_is_none_when_the_last_ranking_differs() -> None:
    assert convergence_at_n([[1, 2], [1, 2], [2, 1]], [1, 2]) is None
    assert convergence_at_n([[1, 2]], [1, 2], ns=[80]) == 80
