"""scorio_core.passk against scorio, and its ragged kernels against direct sums."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import beta as beta_distribution

import scorio_core
from scorio_core import Credit, credit_estimate, credit_posterior
from tests.scorio_core.strategies import IntMatrix, binary_bank

TOLERANCE = 1e-12
PointMetric = Callable[..., float]
IntervalMetric = Callable[..., tuple[float, float, float, float]]


@pytest.mark.parametrize("name", ["pass_at_k", "pass_hat_k", "mg_pass_at_k"])
@given(results=binary_bank(), data=st.data())
def test_point_metrics_equal_scorio(
    name: str, results: IntMatrix, data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    ours: PointMetric = getattr(scorio_core, name)
    theirs: PointMetric = getattr(oracle, name)
    assert ours(results, k) == pytest.approx(theirs(results, k), abs=TOLERANCE)


@pytest.mark.parametrize("name", ["pass_at_k_ci", "pass_hat_k_ci", "mg_pass_at_k_ci"])
@given(
    results=binary_bank(),
    data=st.data(),
    confidence=st.floats(0.5, 0.99),
    prior=st.tuples(st.floats(0.5, 3.0), st.floats(0.5, 3.0)),
)
def test_posterior_metrics_equal_scorio(
    name: str,
    results: IntMatrix,
    data: st.DataObject,
    confidence: float,
    prior: tuple[float, float],
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    ours: IntervalMetric = getattr(scorio_core, name)
    theirs: IntervalMetric = getattr(oracle, name)
    arguments = (results, k, confidence, (0.0, 1.0), *prior)
    assert ours(*arguments) == pytest.approx(theirs(*arguments), abs=TOLERANCE)


@given(results=binary_bank(), data=st.data(), tau=st.floats(0.0, 1.0))
def test_g_pass_at_k_tau_and_its_posterior_equal_scorio(
    results: IntMatrix, data: st.DataObject, tau: float
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    assert scorio_core.g_pass_at_k_tau(results, k, tau) == pytest.approx(
        oracle.g_pass_at_k_tau(results, k, tau), abs=TOLERANCE
    )
    assert scorio_core.g_pass_at_k_tau_ci(results, k, tau) == pytest.approx(
        oracle.g_pass_at_k_tau_ci(results, k, tau), abs=TOLERANCE
    )


def test_tau_on_a_representable_boundary_asks_for_exactly_that_many() -> None:
    assert Credit.g_pass_at_k_tau(10, 0.3).values.index(1.0) == 3
    assert Credit.g_pass_at_k_tau(3, 2 / 3).values.index(1.0) == 2
    assert Credit.g_pass_at_k_tau(4, 0.0) == Credit.pass_at_k(4)


def test_documented_examples_of_the_scorio_api() -> None:
    results = np.array([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]])
    assert round(scorio_core.pass_at_k(results, 2), 6) == 0.95
    assert round(scorio_core.pass_hat_k(results, 2), 6) == 0.45
    assert round(scorio_core.mg_pass_at_k(results, 3), 6) == 0.166667
    mu, sigma, low, high = scorio_core.pass_at_k_ci(results, 2)
    assert (round(mu, 6), round(sigma, 6), round(low, 4), round(high, 4)) == (
        0.839286,
        0.097263,
        0.6487,
        1.0,
    )


@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=8),
    st.integers(1, 6),
)
def test_ragged_posterior_equals_quadrature_per_question(
    pairs: list[tuple[int, int]], k: int
) -> None:
    successes = [min(a, b) for a, b in pairs]
    trials = [max(a, b) for a, b in pairs]
    credit = Credit.mg_pass_at_k(k)
    expected_means, expected_variances = [], []
    for c, n in zip(successes, trials, strict=True):
        mean, variance = _moments_by_quadrature(credit, 1 + c, 1 + n - c)
        expected_means.append(mean)
        expected_variances.append(variance)
    posterior = credit_posterior(successes, trials, credit)
    assert posterior.mu == pytest.approx(np.mean(expected_means), abs=1e-10)
    assert posterior.sigma == pytest.approx(
        math.sqrt(max(sum(expected_variances), 0.0)) / len(pairs), abs=1e-8
    )


def test_ragged_point_estimate_averages_each_question_own_hypergeometric() -> None:
    # q1: 2 of 4 right, q2: 3 of 3 right; Pass@2 = (1 - C(2,2)/C(4,2) + 1) / 2.
    assert credit_estimate([2, 3], [4, 3], Credit.pass_at_k(2)) == pytest.approx(
        (1 - 1 / 6 + 1) / 2, abs=1e-15
    )


def test_rectangular_counts_reproduce_the_matrix_api() -> None:
    rng = np.random.default_rng(7)
    results = rng.integers(0, 2, size=(6, 9))
    successes, trials = results.sum(axis=1), np.full(6, 9)
    posterior = credit_posterior(successes, trials, Credit.pass_hat_k(3))
    mu, sigma, _, _ = oracle.pass_hat_k_ci(results, 3)
    assert (posterior.mu, posterior.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)


@pytest.mark.parametrize("k", [0, 6, -1])
def test_k_outside_one_to_n_is_rejected(k: int) -> None:
    with pytest.raises(ValueError, match=f"k must be in 1..N \\(N=5\\); got {k}"):
        scorio_core.pass_at_k([[0, 1, 1, 0, 1]], k)


@pytest.mark.parametrize("k", [2.0, True, "2"])
def test_k_must_be_an_integer(k: object) -> None:
    with pytest.raises(ValueError, match="k must be an integer"):
        scorio_core.pass_hat_k_ci([[0, 1, 1]], k)  # type: ignore[arg-type]


def test_non_binary_results_are_rejected() -> None:
    with pytest.raises(ValueError, match="R must be binary"):
        scorio_core.pass_at_k([[0, 2]], 1)


def test_tau_outside_the_unit_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"tau must be in \[0, 1\]; got 1.5"):
        scorio_core.g_pass_at_k_tau([[0, 1]], 1, 1.5)


def test_successes_above_trials_are_rejected() -> None:
    with pytest.raises(ValueError, match="successes cannot exceed trials"):
        credit_estimate([3], [2], Credit.pass_at_k(1))


def _moments_by_quadrature(
    credit: Credit, alpha: int, beta: int
) -> tuple[float, float]:
    density = beta_distribution(alpha, beta).pdf

    def value(p: float) -> float:
        return sum(
            a * math.comb(credit.k, j) * p**j * (1 - p) ** (credit.k - j)
            for j, a in enumerate(credit.values)
        )

    mean = integrate.quad(lambda p: value(p) * density(p), 0, 1, epsabs=1e-14)[0]
    second = integrate.quad(lambda p: value(p) ** 2 * density(p), 0, 1, epsabs=1e-14)[0]
    return mean, second - mean * mean
