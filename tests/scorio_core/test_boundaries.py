"""Boundary calibration against closed forms and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from scorio_core.boundaries import crossing_probability, wang_tsiatis_constant


@pytest.mark.parametrize("alpha", [0.05, 0.025])
def test_obrien_fleming_continuous_constant_equals_the_reflection_principle(
    alpha: float,
) -> None:
    # P(sup_{t<=T} W_t >= c sqrt(T)) = 2 Phi(-c) = alpha.
    assert wang_tsiatis_constant(alpha, delta=0.0) == pytest.approx(
        ndtri(1 - alpha / 2), abs=5e-5
    )


def test_two_looks_match_a_bivariate_normal_integral() -> None:
    times = np.array([0.5, 1.0])
    upper = np.array([[1.5, 1.8]])
    # P(S_.5 >= 1.5) + P(S_.5 < 1.5, S_1 >= 1.8), the second by quadrature.
    first = float(ndtr(-1.5 / math.sqrt(0.5)))
    grid = np.linspace(-8.0, 1.5, 20001)
    density = np.exp(-(grid**2) / (2 * 0.5)) / math.sqrt(2 * math.pi * 0.5)
    later = ndtr(-(1.8 - grid) / math.sqrt(0.5))
    second = float(np.trapezoid(density * later, grid))
    assert crossing_probability(times, upper)[0] == pytest.approx(
        first + second, abs=2e-5
    )


def test_wang_tsiatis_constant_holds_alpha_under_fine_monte_carlo_looks() -> None:
    alpha = 0.05
    constant = wang_tsiatis_constant(alpha)
    assert constant == pytest.approx(2.1137, abs=2e-4)
    rng = np.random.default_rng(20261122)
    looks, paths = 2400, 20000
    t = np.arange(1, looks + 1) / looks
    crossed = np.zeros(paths, dtype=bool)
    position = np.zeros(paths)
    for index in range(looks):
        position += rng.standard_normal(paths) * math.sqrt(1 / looks)
        crossed |= position / math.sqrt(t[index]) >= constant * t[index] ** -0.25
    rate = crossed.mean()
    error = math.sqrt(alpha * (1 - alpha) / paths)
    # Discrete looks cross less than continuous monitoring, never more.
    assert rate <= alpha + 3 * error
    assert rate >= alpha - 0.01


def test_alpha_outside_zero_to_a_half_is_rejected() -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        wang_tsiatis_constant(0.6)
