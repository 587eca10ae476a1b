"""Boundary calibration against closed forms and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from scorio_core.boundaries import (
    binding_constant,
    binding_constants,
    crossing_probability,
    wang_tsiatis_constant,
)


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


def _crossing_rate_with_futility(
    constant: float, looks: int, paths: int, seed: int
) -> float:
    """Monte Carlo P(cross c u^-0.4 before the floor) of the engine's defaults
    (futility at one boundary's 2.2834, optimism 0.925, from u = 0.125)."""
    rng = np.random.default_rng(seed)
    fine = 1600
    every = fine // looks
    position = np.zeros(paths)
    alive = np.ones(paths, dtype=bool)
    crossed = np.zeros(paths, dtype=bool)
    for step in range(1, fine + 1):
        position += rng.standard_normal(paths) * math.sqrt(1 / fine)
        if step % every:
            continue
        u = step / fine
        z = position / math.sqrt(u)
        new = alive & (z >= constant * u**-0.4)
        crossed |= new
        alive &= ~new
        if u >= 0.125:
            alive &= (z + 0.925) / math.sqrt(u) >= 2.2834
    return float(crossed.mean())


@pytest.mark.slow
def test_a_binding_constant_holds_alpha_when_futile_paths_stop() -> None:
    alpha, paths = 0.025, 40000
    plain = wang_tsiatis_constant(alpha, 0.1)
    constant = binding_constant(alpha, 0.1, plain, 0.925, 0.125)
    assert constant == pytest.approx(2.037, abs=1e-3)
    error = math.sqrt(alpha * (1 - alpha) / paths)
    rate = _crossing_rate_with_futility(constant, 1600, paths, seed=20261127)
    assert alpha - 0.003 <= rate <= alpha + 3 * error
    # Looks at every 1/20 .. 1/200 of the horizon (futility checked only
    # there too) cross less, not more: the engine looks in batches.
    for looks in (200, 40, 20):
        coarse = _crossing_rate_with_futility(constant, looks, paths, seed=looks)
        assert coarse <= alpha + 3 * error


def test_a_floor_that_never_binds_gives_the_plain_constant() -> None:
    plain = wang_tsiatis_constant(0.01, 0.1)
    # A futility constant this low puts the floor far below any path.
    assert binding_constant(0.01, 0.1, -50.0, 0.925, 0.125) == pytest.approx(
        plain, abs=2e-3
    )


def test_harder_futility_lowers_the_binding_constant() -> None:
    constants = binding_constants(np.array([0.025, 0.005]), 0.1, 2.2834, 0.925, 0.125)
    later = binding_constants(np.array([0.025, 0.005]), 0.1, 2.2834, 0.925, 0.5)
    bolder = binding_constants(np.array([0.025, 0.005]), 0.1, 2.2834, 0.5, 0.125)
    plain = [wang_tsiatis_constant(a, 0.1) for a in (0.025, 0.005)]
    assert (bolder < constants).all() and (constants < later).all()
    assert (later < np.array(plain)).all()
