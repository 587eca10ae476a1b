r"""Calibrating sequential boundaries for a Brownian z statistic.

Under a tie, a pair's ``z`` behaves like a standardised Brownian motion in
information time ``t``: ``S(t) = z(t) sqrt(t)`` is a standard Brownian motion.
A boundary ``b(t)`` on ``z`` keeps the chance of ever crossing it (in one
direction) at ``alpha`` however often one looks if it is calibrated for
continuous monitoring; any discrete look schedule crosses less often.

Wang-Tsiatis shapes ``b(t) = c (t/T)^(Delta - 1/2)`` on ``(0, T]`` have a
constant ``c`` that, for continuous monitoring, depends on ``alpha`` and
``Delta`` only (scale invariance); ``Delta = 0`` is O'Brien-Fleming, whose
constant is exactly ``Phi^-1(1 - alpha/2)`` by the reflection principle.

Method: the Armitage-McPherson-Rowe recursion computes exact crossing
probabilities of a discretely monitored Brownian motion on a grid (FFT
convolutions, trapezoid rule with an end correction at the moving boundary).
Siegmund's corrected-diffusion shift ``rho sqrt(du)`` (``rho = 0.5826``)
carries the answer from ``K0`` coarse looks to continuous monitoring, and a
linear extrapolation in ``1/K0`` removes the remaining ``O(1/K0)`` error.
Accuracy about 1e-5 in ``c``; about 0.1 s per constant.

References:
    Armitage, McPherson & Rowe (1969), J. R. Stat. Soc. A 132, 235-244.
    Siegmund (1979), Adv. Appl. Probab. 11, 701-719.
    Wang & Tsiatis (1987), Biometrics 43, 193-199.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

from scorio_core import _validation as check

SIEGMUND_RHO: Final = 0.5825971579390106  # -zeta(1/2) / sqrt(2 pi)
_GRID_STEPS_PER_SD: Final = 4.0
_COARSE_LOOKS: Final = 400
# With a futility floor the grid's own error is smooth in 1/looks from
# about 100 looks on; 200 and 100 agree with 800 and 400 within 1e-3 in c
# (on the conservative side) at a quarter of the cost.
_BINDING_LOOKS: Final = 200


def wang_tsiatis_constant(alpha: float, delta: float = 0.25) -> float:
    r"""Continuous-monitoring constant ``c`` of ``b(t) = c (t/T)^(delta - 1/2)``.

    ``P(z(t) >= b(t) for some t in (0, T]) = alpha`` for a standardised
    Brownian ``z`` watched continuously; valid (conservative) for any look
    schedule, including a monitor that looks after every trial.

    Args:
        alpha: One-direction error, in (0, 0.5).
        delta: Shape: 0.25 (Wang-Tsiatis, the default), 0 (O'Brien-Fleming).

    Examples:
        >>> round(wang_tsiatis_constant(0.05, 0.0), 3)  # OBF: Phi^-1(0.975)
        1.96
        >>> round(wang_tsiatis_constant(0.05), 3)
        2.114
    """
    level = check.real(alpha, "alpha")
    if not 0.0 < level < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5); got {alpha!r}")
    shape = check.real(delta, "delta")
    if not 0.0 <= shape < 0.5:
        raise ValueError(f"delta must be in [0, 0.5); got {delta!r}")
    levels = np.array([level])
    fine = _continuous_estimate(levels, shape, _COARSE_LOOKS)[0]
    coarse = _continuous_estimate(levels, shape, _COARSE_LOOKS // 2)[0]
    # The transferred answer errs like B / K0; extrapolate to 1/K0 = 0.
    return float(fine + (fine - coarse))


def crossing_probability(
    times: NDArray[np.float64],
    upper: NDArray[np.float64],
    lower: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    r"""Probability that ``S`` reaches ``upper`` at one of the looks ``times``.

    Args:
        times: Increasing look times ``t_1 < ... < t_K`` (variance units).
        upper: ``(batch, K)`` boundaries on ``S = z sqrt(t)``; each row is a
            separate problem on the same looks.
        lower: Optional ``(batch, K)`` absorbing floors (``-inf`` where
            none): a path below the floor at a look stops there without
            crossing (a binding futility stop).

    Returns:
        ``(batch,)`` probabilities of crossing at some look.

    Formula:
        :math:`f_1(x) = \phi(x/\sqrt{t_1})/\sqrt{t_1}`,
        :math:`f_{k+1}(y) = \int_{-\infty}^{b_k} f_k(x)\,\phi_{D_k}(y - x)\,dx`,
        :math:`P = \sum_k \int_{b_k}^{\infty} f_k`.
    """
    # scipy.fft loads in tens of ms; only calibrating a new level needs it.
    from scipy import fft

    steps = np.diff(times)
    smallest = float(steps.min()) if steps.size else float(times[0])
    largest = float(steps.max()) if steps.size else float(times[0])
    h = math.sqrt(smallest) / _GRID_STEPS_PER_SD
    bottom = min(
        -6.0 * math.sqrt(float(times[-1])),
        float(upper.min()) - 9.0 * math.sqrt(smallest),
    )
    top = float(upper.max()) + 9.0 * math.sqrt(largest)
    size = math.ceil((top - bottom) / h) + 6
    grid = bottom + h * np.arange(size)
    index, weights = _boundary_weights(bottom, h, upper)
    batch, looks = upper.shape
    first = math.sqrt(float(times[0]))
    density = np.tile(
        np.exp(-0.5 * (grid / first) ** 2) / (first * math.sqrt(2 * math.pi)),
        (batch, 1),
    )
    crossed = ndtr(-upper[:, 0] / first)
    kernels: dict[float, tuple[int, NDArray[np.complex128]]] = {}
    rows = np.arange(batch)[:, None]
    columns = np.arange(size)[None, :]
    nodes = np.arange(4)[None, :]
    for look in range(1, looks):
        step = float(steps[look - 1])
        length, kernel = kernels.get(round(step, 12)) or _kernel(step, h, size)
        kernels[round(step, 12)] = (length, kernel)
        edge = index[:, look - 1, None]
        surviving = np.where(columns < edge, h * density, 0.0)
        local = edge + nodes
        surviving[rows, local] = weights[:, look - 1] * density[rows, local]
        if lower is not None:
            # Nodes below the floor stop; the node it falls beside keeps
            # the share of its cell above the floor (midpoint rule).
            kept = np.clip((grid - lower[:, look - 1, None]) / h + 0.5, 0.0, 1.0)
            surviving *= kept
        density = fft.irfft(
            fft.rfft(surviving, length, axis=-1) * kernel, length, axis=-1
        )[:, :size]
        edge = index[:, look, None]
        tail = h * np.where(columns >= edge + 4, density, 0.0).sum(axis=1)
        local = edge + nodes
        crossed += tail + ((h - weights[:, look]) * density[rows, local]).sum(axis=1)
    return np.asarray(crossed, dtype=np.float64)


def binding_constant(
    alpha: float,
    delta: float,
    futility_constant: float,
    optimism: float,
    futility_from: float,
) -> float:
    r"""Constant ``c`` of ``b(u) = c u^(delta - 1/2)`` with a binding futility stop.

    On ``u = t / T`` in ``(0, 1]``, a path stops for futility at the first
    ``u >= futility_from`` where :math:`(z + \gamma) / \sqrt{u} < c_F`
    (``optimism`` :math:`\gamma`, ``futility_constant`` :math:`c_F`): it
    can never cross after that. ``c`` is the smallest constant with
    ``P(z crosses b before stopping) <= alpha`` under continuous looks at
    both. Valid only where every futile pair is stopped for good and its
    ``z`` is a Brownian motion from 0; coarser, evenly spaced looks cross
    less (``tests/scorio_core``). The engine does not count on it: a pair
    whose models hold unequal information (a late model, a harness that
    runs models one after another) starts with a ``z`` the prior's
    shrinkage pushes away from 0, which futility then rarely stops
    (docs/stopping-evidence.md has the measurement).

    Examples:
        >>> plain = wang_tsiatis_constant(0.025, 0.1)
        >>> bound = binding_constant(0.025, 0.1, plain, 0.925, 0.125)
        >>> round(plain, 3), round(bound, 3)
        (2.283, 2.037)
    """
    return float(
        binding_constants(
            np.array([alpha]), delta, futility_constant, optimism, futility_from
        )[0]
    )


def binding_constants(
    alphas: NDArray[np.float64],
    delta: float,
    futility_constant: float,
    optimism: float,
    futility_from: float,
) -> NDArray[np.float64]:
    """:func:`binding_constant` at several levels, in one recursion."""
    levels = np.asarray(alphas, dtype=np.float64)
    if not ((levels > 0.0) & (levels < 0.5)).all():
        raise ValueError(f"alpha must be in (0, 0.5); got {alphas!r}")
    start = check.real(futility_from, "futility_from")
    if not 0.0 < start <= 1.0:
        raise ValueError(f"futility_from must be in (0, 1]; got {futility_from!r}")
    floor = (float(futility_constant), float(optimism), start)
    fine = _continuous_estimate(levels, delta, _BINDING_LOOKS, floor)
    coarse = _continuous_estimate(levels, delta, _BINDING_LOOKS // 2, floor)
    return np.asarray(fine + (fine - coarse), dtype=np.float64)


def _continuous_estimate(
    alphas: NDArray[np.float64],
    delta: float,
    looks: int,
    floor: tuple[float, float, float] | None = None,
) -> NDArray[np.float64]:
    """Constants from ``looks`` coarse looks, Siegmund-shifted to continuous.

    ``floor`` is ``(c_F, gamma, u_F)``: the binding futility stop of
    :func:`binding_constant`, shifted inward like the upper boundary.
    """
    u = np.arange(1, looks + 1) / looks
    shift = -SIEGMUND_RHO / math.sqrt(looks)
    target = np.repeat(np.asarray(ndtri(1.0 - alphas), dtype=np.float64), 3)
    lower = None
    if floor is not None:
        c_f, gamma, start = floor
        # A look exactly where futility starts, so every grid sees the same
        # first stop and the extrapolation in 1/looks stays smooth.
        u = np.union1d(u, [start])
        stop = c_f * u - gamma * np.sqrt(u) - shift
        lower = np.where(u >= start, stop, -np.inf)[None, :]

    def score(constants: NDArray[np.float64]) -> NDArray[np.float64]:
        upper = constants[:, None] * u[None, :] ** delta + shift
        floors = None if lower is None else np.repeat(lower, constants.size, axis=0)
        probability = np.clip(crossing_probability(u, upper, floors), 1e-300, 1.0)
        return np.asarray(ndtri(1.0 - probability) - target, dtype=np.float64)

    # Phi^-1(1 - P(c)) is nearly linear in c: a few secant steps on 3
    # points per level, all levels in one recursion.
    c = np.asarray(ndtri(1.0 - alphas / 2.0), dtype=np.float64) + 0.6 * delta
    offsets = np.array([-1.0, 0.0, 1.0])
    for spread in (0.05, 0.005, 0.0005):
        points = (c[:, None] + spread * offsets[None, :]).ravel()
        scores = score(points).reshape(-1, 3)
        slope = (scores[:, 2] - scores[:, 0]) / (2.0 * spread)
        # The least-squares line through 3 evenly spaced points.
        c = c - scores.mean(axis=1) / slope
    return c


def _kernel(step: float, h: float, size: int) -> tuple[int, NDArray[np.complex128]]:
    from scipy import fft

    half = math.ceil(9.0 * math.sqrt(step) / h)
    length = fft.next_fast_len(size + 2 * half + 2, real=True)
    offsets = np.arange(-half, half + 1)
    values = np.zeros(length)
    sd = math.sqrt(step)
    values[offsets % length] = np.exp(-0.5 * (offsets * h / sd) ** 2) / (
        sd * math.sqrt(2 * math.pi)
    )
    return length, np.asarray(fft.rfft(values), dtype=np.complex128)


def _boundary_weights(
    origin: float, h: float, upper: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    r"""Quadrature of :math:`\int_{-\infty}^{b} g` on the grid, to O(h^4).

    Trapezoid rule up to the last node ``x_m <= b``, an Euler-Maclaurin end
    correction, and the exact integral of the cubic through nodes
    ``m-1 .. m+2`` over ``[x_m, b]``. Returns the first local node ``m-1``
    (nodes before it weigh ``h``, after ``m+2`` zero) and the 4 local weights.
    """
    position = (upper - origin) / h
    last = np.floor(position).astype(np.int64)
    theta = position - last
    t2, t3, t4 = theta**2, theta**3, theta**4
    partial = np.stack(
        [
            -(t4 / 4 - t3 + t2) / 6,
            (t4 / 4 - 2 * t3 / 3 - t2 / 2 + 2 * theta) / 2,
            -(t4 / 4 - t3 / 3 - t2) / 2,
            (t4 / 4 - t2 / 2) / 6,
        ],
        axis=-1,
    )
    local = h * partial + np.array([h + h / 24.0, 0.5 * h, -h / 24.0, 0.0])
    return last - 1, local
