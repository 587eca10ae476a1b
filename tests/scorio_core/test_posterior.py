"""The closed-form Dirichlet moments against numerical quadrature."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import beta as beta_distribution

from scorio_core import credible_interval, posterior_from_counts, z_value


@given(st.integers(1, 30), st.integers(1, 30), st.floats(-4, 4), st.floats(-4, 4))
def test_binary_moments_equal_beta_quadrature(
    wrong: int, right: int, w0: float, w1: float
) -> None:
    density = beta_distribution(right, wrong).pdf

    def score(p: float) -> float:
        return w0 * (1 - p) + w1 * p

    mean = integrate.quad(lambda p: score(p) * density(p), 0, 1)[0]
    # Integrate the centred square: second - mean**2 would cancel.
    variance = integrate.quad(lambda p: (score(p) - mean) ** 2 * density(p), 0, 1)[0]
    posterior = posterior_from_counts([[wrong, right]], [w0, w1])
    assert posterior.mu == pytest.approx(mean, abs=1e-10)
    assert posterior.sigma == pytest.approx(math.sqrt(variance), abs=1e-9)


def test_three_category_moments_equal_dirichlet_quadrature() -> None:
    nu = np.array([2.0, 3.0, 4.0])
    weights = np.array([-1.0, 0.25, 2.0])
    norm = math.gamma(nu.sum()) / np.prod([math.gamma(x) for x in nu])

    def density(p1: float, p0: float) -> float:
        p2 = 1.0 - p0 - p1
        return float(norm * p0 ** (nu[0] - 1) * p1 ** (nu[1] - 1) * p2 ** (nu[2] - 1))

    def score(p1: float, p0: float) -> float:
        return float(weights[0] * p0 + weights[1] * p1 + weights[2] * (1.0 - p0 - p1))

    def moment(power: int) -> float:
        return float(
            integrate.dblquad(
                lambda p1, p0: score(p1, p0) ** power * density(p1, p0),
                0,
                1,
                0,
                lambda p0: 1 - p0,
                epsabs=1e-12,
            )[0]
        )

    mean, second = moment(1), moment(2)
    posterior = posterior_from_counts([nu], weights)
    assert posterior.mu == pytest.approx(mean, abs=1e-9)
    assert posterior.sigma == pytest.approx(math.sqrt(second - mean**2), abs=1e-8)


def test_question_average_divides_variance_by_m_squared() -> None:
    single = posterior_from_counts([[2, 5]], [0.0, 1.0])
    four = posterior_from_counts([[2, 5]] * 4, [0.0, 1.0])
    assert four.mu == pytest.approx(single.mu)
    assert four.sigma == pytest.approx(single.sigma / 2)


def test_equal_weights_give_zero_sigma() -> None:
    posterior = posterior_from_counts([[3, 4, 1]], [0.5, 0.5, 0.5])
    assert (posterior.mu, posterior.sigma) == (0.5, 0.0)


def test_counts_below_one_are_rejected() -> None:
    with pytest.raises(ValueError, match="nu must hold finite counts >= 1"):
        posterior_from_counts([[0, 3]], [0.0, 1.0])


def test_interval_uses_the_two_sided_quantile() -> None:
    assert z_value(0.95) == pytest.approx(1.959963984540054)
    assert credible_interval(0.5, 0.1, 0.9) == pytest.approx((0.33551463, 0.66448537))


def test_negative_sigma_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"sigma must be >= 0; got -0\.1"):
        credible_interval(0.5, -0.1)
