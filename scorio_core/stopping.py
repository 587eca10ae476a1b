r"""Stopping rules on the pairwise z, and block resolution of rank boundaries.

A rule answers, for a pair of models separated by ``z`` after information
``t`` (trials per question, see :func:`pair_information`): is the order
settled (``z >= threshold(t)``), can it still settle within the budget cap
``T`` (futility), and at what information is it forecast to settle.

A rank boundary splits the current order into the models above and below it.
It is resolved only when *every* pair across it is settled ("block"
resolution): once models stop at different times their sigmas differ, and
resolving adjacent pairs alone would imply orders nobody tested.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import lambertw, ndtri

from scorio_core import _validation as check
from scorio_core.boundaries import wang_tsiatis_constant

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# Rank boundaries up to which the error level is the confidence's own; beyond,
# it shrinks like 1/(K-1) (see per_direction_alpha).
FULL_LEVEL_BOUNDARIES: Final = 10


def per_direction_alpha(confidence: float, models: int = 2) -> float:
    r"""The error level per pair and direction of the sequential rules.

    ``(1 - confidence) / 2`` (0.025 at 0.95) for up to 11 models; with more,
    scaled by :math:`10/(K-1)`, a partial Bonferroni split over the ``K - 1``
    rank boundaries. Almost every false claim is a truly tied pair split
    apart, and bigger model sets hold more near-ties: without the scaling a
    20-model run at a cap of 300 made a false claim in 5.8 % of simulated
    runs, with it 2.65 % (design evidence in benchmarks/results/stopping.md).

    Examples:
        >>> [round(per_direction_alpha(0.95, k), 5) for k in (2, 11, 20)]
        [0.025, 0.025, 0.01316]
    """
    level = check.confidence(confidence)
    boundaries = max(int(models) - 1, 1)
    return (1.0 - level) / 2.0 * min(1.0, FULL_LEVEL_BOUNDARIES / boundaries)


@functools.lru_cache(maxsize=64)
def _constant(alpha: float, delta: float) -> float:
    return wang_tsiatis_constant(alpha, delta)


class StoppingRule(Protocol):
    """The contract every rule meets; ``t`` is a pair's information.

    ``thresholds`` and ``futile`` work elementwise on arrays, so a look over
    all pairs of a run is a handful of NumPy operations.
    """

    @property
    def name(self) -> str:
        """Short rule name, shown in statuses."""
        ...

    def thresholds(self, information: FloatArray) -> FloatArray:
        """The ``z`` each pair needs at its information ``t`` to be settled."""
        ...

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        """Which unsettled pairs cannot settle within the budget."""
        ...

    def forecast(self, z: float, information: float) -> float:
        """Information at which the pair is expected to settle (``inf``: never)."""
        ...


@dataclass(frozen=True, slots=True)
class PaperRule:
    r"""The paper's rule: settled when :math:`z \ge z^* = \Phi^{-1}(\text{conf})`.

    Valid for one look at a fixed N. Checked after every trial it declares
    orders far more often than ``1 - confidence`` (a tie: 58-67 % of runs in
    our simulations), so statuses label it as unsafe under continuous looks.

    Futility is the naive forecast: settling would need
    :math:`t (z^*/z)^2` trials per question, more than the cap ``T``.

    Examples:
        >>> rule = PaperRule.from_confidence(0.95, budget=80)
        >>> rule.thresholds(np.array([10.0])).round(3).tolist()
        [1.645]
        >>> rule.futile(np.array([0.5, 1.5]), np.array([20.0, 20.0])).tolist()
        [True, False]
    """

    z_star: float
    budget: float | None = None

    @classmethod
    def from_confidence(
        cls, confidence: float, budget: float | None = None
    ) -> PaperRule:
        level = check.confidence(confidence)
        cap = None if budget is None else check.positive(budget, "budget")
        return cls(z_star=float(ndtri(level)), budget=cap)

    @property
    def name(self) -> str:
        return "paper"

    def thresholds(self, information: FloatArray) -> FloatArray:
        return np.where(information > 0.0, self.z_star, np.inf)

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        if self.budget is None:
            return np.zeros(np.shape(z), dtype=bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = information * (self.z_star / z) ** 2
        return (z < self.z_star) & (information > 0.0) & (needed > self.budget)

    def forecast(self, z: float, information: float) -> float:
        if z >= self.z_star:
            return information
        if z <= 0.0:
            return math.inf
        return information * (self.z_star / z) ** 2


@dataclass(frozen=True, slots=True)
class SequentialRule:
    r"""Alpha-spending boundary against a budget, with an optimistic futility stop.

    Settled when :math:`z \ge b(t) = c\,(t/T)^{\Delta - 1/2}` (Wang-Tsiatis
    shape, :math:`\Delta = 0.1`), where ``c`` is the continuous-monitoring
    constant for ``alpha`` per direction: however often the monitor looks,
    and whatever the data-driven order of trials, a tied pair is declared
    in a given direction with probability at most ``alpha`` before the cap
    ``T``.

    Futile (a statistical tie at this budget) once :math:`t \ge t_{min}` and
    even a ``z`` larger by ``optimism`` would not reach ``c`` at the cap:
    :math:`(z + \gamma)\sqrt{T/t} < c`. Stopping for futility never declares
    an order, so it cannot add false claims; it is re-checked at every look,
    so a pair whose z recovers draws trials again.

    The defaults (``delta`` 0.1, ``optimism`` 0.925, ``forecast_scale``
    1.15) come from simulations of the paper's 11 models and a 20-model
    AIME-like set; benchmarks/results/stopping.md has the evidence.

    Examples:
        >>> rule = SequentialRule.from_confidence(0.95, budget=80)
        >>> round(rule.constant, 4), rule.thresholds(np.array([80.0])).round(4).tolist()
        (2.2834, [2.2834])
        >>> rule.futile(np.array([0.1, 2.0]), np.array([20.0, 20.0])).tolist()
        [True, False]
    """

    constant: float
    budget: float
    delta: float = 0.1
    optimism: float = 0.925
    futility_from: float = 10.0
    forecast_scale: float = 1.15

    @classmethod
    def from_confidence(
        cls,
        confidence: float,
        budget: float,
        models: int = 2,
        delta: float = 0.1,
        optimism: float = 0.925,
        futility_from: float = 10.0,
    ) -> SequentialRule:
        """Calibrate for :func:`per_direction_alpha` of ``confidence`` and ``models``.

        Reading ``confidence`` two-sided keeps a tied pair's chance of any
        declared order at ``1 - confidence`` (for up to 11 models).
        """
        alpha = per_direction_alpha(confidence, models)
        return cls(
            constant=_constant(alpha, delta),
            budget=check.positive(budget, "budget"),
            delta=delta,
            optimism=optimism,
            futility_from=futility_from,
        )

    @property
    def name(self) -> str:
        return "sequential"

    def thresholds(self, information: FloatArray) -> FloatArray:
        # Beyond the cap the calibration ends; hold the boundary flat there.
        fraction = np.minimum(information / self.budget, 1.0)
        with np.errstate(divide="ignore"):
            values = self.constant * fraction ** (self.delta - 0.5)
        return np.where(information > 0.0, values, np.inf)

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        safe = np.maximum(information, 1e-300)
        hopeless = (z + self.optimism) * np.sqrt(self.budget / safe) < self.constant
        return (
            (information >= self.futility_from)
            & (z < self.thresholds(information))
            & hopeless
        )

    def forecast(self, z: float, information: float) -> float:
        r"""Where the plug-in path :math:`z\sqrt{s/t}` meets the boundary, scaled.

        The plug-in is optimistic (the look that makes a forecast tends to
        catch z high, and z regresses), so it is scaled by
        ``forecast_scale`` and capped at the budget.

        Formula:
            :math:`t' = \min\bigl(T,\; k\,(c/z)^{1/(1-\Delta)}\,
            T^{(1/2-\Delta)/(1-\Delta)}\,t^{1/(2(1-\Delta))}\bigr)`.
        """
        if z <= 0.0 or information <= 0.0:
            return math.inf
        if z >= float(self.thresholds(np.array([information]))[0]):
            return information
        power = 1.0 / (1.0 - self.delta)
        crossing = (
            (self.constant / z) ** power
            * self.budget ** ((0.5 - self.delta) * power)
            * information ** (0.5 * power)
        )
        return float(max(min(self.forecast_scale * crossing, self.budget), information))


@dataclass(frozen=True, slots=True)
class ConfidenceSequenceRule:
    r"""A normal-mixture confidence sequence: valid at any look, no budget needed.

    Settled when :math:`|z| \ge \sqrt{(1 + \rho/t)(\log(1 + t/\rho) +
    2\log(1/\alpha_2))}`, which a tied pair crosses in either direction with
    probability at most :math:`\alpha_2` over all time (Ville's inequality);
    :math:`\alpha_2` is twice :func:`per_direction_alpha` (``1 -
    confidence`` for up to 11 models). ``rho`` makes the boundary tightest at
    ``t = tightest_at``. Without a budget nothing is futile: a tie keeps
    drawing trials until the user sets ``max_trials_per_question``.

    References:
        Robbins (1970); Howard, Ramdas, McAuliffe & Sekhon (2021), Ann. Stat.

    Examples:
        >>> rule = ConfidenceSequenceRule.from_confidence(0.95)
        >>> rule.thresholds(np.array([30.0])).round(3).tolist()
        [3.035]
    """

    alpha: float
    rho: float

    @classmethod
    def from_confidence(
        cls, confidence: float, tightest_at: float = 30.0, models: int = 2
    ) -> ConfidenceSequenceRule:
        alpha = 2.0 * per_direction_alpha(confidence, models)
        # Minimising the boundary at t0 gives rho = t0 / y with
        # y = -W_{-1}(-exp(-(1 + 2 log(1/alpha)))) - 1 (Lambert W, branch -1).
        log_term = 2.0 * math.log(1.0 / alpha)
        y = -float(lambertw(-math.exp(-(1.0 + log_term)), k=-1).real) - 1.0
        return cls(alpha=alpha, rho=check.positive(tightest_at, "tightest_at") / y)

    @property
    def name(self) -> str:
        return "sequential"

    def thresholds(self, information: FloatArray) -> FloatArray:
        safe = np.maximum(information, 1e-300)
        values = np.sqrt(
            (1.0 + self.rho / safe)
            * (np.log1p(safe / self.rho) + 2.0 * math.log(1.0 / self.alpha))
        )
        return np.where(information > 0.0, values, np.inf)

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        return np.zeros(np.shape(z), dtype=bool)

    def threshold(self, information: float) -> float:
        """Scalar :meth:`thresholds`."""
        return float(self.thresholds(np.array([information]))[0])

    def forecast(self, z: float, information: float) -> float:
        if z <= 0.0 or information <= 0.0:
            return math.inf
        if z >= self.threshold(information):
            return information

        def gap(later: float) -> float:
            return z * math.sqrt(later / information) - self.threshold(later)

        upper = information * 2.0
        while gap(upper) < 0.0:
            upper *= 2.0
            if upper > 1e12:
                return math.inf
        return float(brentq(gap, information, upper, xtol=1e-6 * information))


def pair_information(
    trials_a: float, variance_a: float, trials_b: float, variance_b: float
) -> float:
    r"""Information of a pair in trials per question, when trial counts differ.

    Each model's posterior variance falls like ``s^2 / n`` with ``n`` trials
    per question, so the pair's variance is ``s_a^2/n_a + s_b^2/n_b``. The
    pair carries as much information as ``t`` trials per question on both:

    Formula:
        :math:`t = (s_a^2 + s_b^2) / (s_a^2/n_a + s_b^2/n_b)`, the
        variance-weighted harmonic mean of ``n_a`` and ``n_b``; with equal
        counts it is ``n``.

    Examples:
        >>> round(pair_information(40.0, 1.0, 40.0, 2.0), 9)
        40.0
        >>> round(pair_information(80.0, 1.0, 20.0, 1.0), 6)
        32.0
    """
    if trials_a <= 0.0 or trials_b <= 0.0:
        return 0.0
    total = variance_a + variance_b
    if total <= 0.0:
        return 2.0 / (1.0 / trials_a + 1.0 / trials_b)
    return total / (variance_a / trials_a + variance_b / trials_b)


def pair_information_matrix(trials: FloatArray, variances: FloatArray) -> FloatArray:
    """:func:`pair_information` for every pair of models at once (0 if untried)."""
    per_trial = variances[:, None] + variances[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = variances / trials
        information = per_trial / (spread[:, None] + spread[None, :])
    tried = (trials[:, None] > 0.0) & (trials[None, :] > 0.0)
    return np.where(tried & np.isfinite(information), information, 0.0)


@dataclass(frozen=True, slots=True)
class BoundaryState:
    """A rank boundary after position ``index`` of the order (0-based)."""

    index: int
    resolved: bool
    futile: bool
    weakest: tuple[int, int]
    margin: float


def resolve_boundaries(
    settled: ArrayLike, margin: ArrayLike, futile: ArrayLike | None = None
) -> list[BoundaryState]:
    """Block resolution of the boundaries of an order of ``L`` models.

    Args:
        settled: ``L x L`` booleans, ``settled[i, j]`` for positions ``i < j``
            of the order: the rule counts that pair as settled.
        margin: ``L x L`` how far each pair is from settling (e.g. ``z -
            threshold``); the pair with the smallest margin across a boundary
            is its weakest, the one that gets trials.
        futile: Optional ``L x L`` booleans: the pair cannot settle in budget.

    Returns:
        One state per boundary ``0 .. L-2``: boundary ``i`` separates
        positions ``<= i`` from positions ``> i``; it is resolved only when
        every pair across it is settled, futile when any unsettled pair
        across it is futile.

    Examples:
        >>> settled = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]], dtype=bool)
        >>> margin = np.array([[0, 1.0, 2.0], [0, 0, -0.5], [0, 0, 0]])
        >>> [b.resolved for b in resolve_boundaries(settled, margin)]
        [True, False]
    """
    settled_matrix = np.asarray(settled, dtype=bool)
    margin_matrix = np.asarray(margin, dtype=np.float64)
    size = settled_matrix.shape[0]
    futile_matrix = (
        np.zeros((size, size), dtype=bool)
        if futile is None
        else np.asarray(futile, dtype=bool)
    )
    if not (
        settled_matrix.shape
        == margin_matrix.shape
        == futile_matrix.shape
        == (size, size)
    ):
        raise ValueError(
            f"settled, margin and futile must be square and alike; got "
            f"{settled_matrix.shape}, {margin_matrix.shape}, {futile_matrix.shape}"
        )
    # Boundary k is open when some pair (i <= k < j) fails: the OR over the
    # block, computed for all k at once with running ORs along rows and columns.
    upper = np.triu(np.ones((size, size), dtype=bool), 1)
    failing = _block_any(upper & ~settled_matrix)
    futile_any = _block_any(upper & futile_matrix & ~settled_matrix)
    states = []
    for index in range(size - 1):
        block = (slice(0, index + 1), slice(index + 1, size))
        cross = margin_matrix[block]
        row, column = divmod(int(np.argmin(cross)), cross.shape[1])
        states.append(
            BoundaryState(
                index=index,
                resolved=not failing[index],
                futile=bool(failing[index] and futile_any[index]),
                weakest=(row, index + 1 + column),
                margin=float(cross[row, column]),
            )
        )
    return states


def _block_any(flags: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``out[k] = flags[:k+1, k+1:].any()`` for every boundary ``k``."""
    size = flags.shape[0]
    if size < 2:
        return np.zeros(0, dtype=bool)
    tail = np.logical_or.accumulate(flags[:, ::-1], axis=1)[:, ::-1]
    prefix = np.logical_or.accumulate(tail, axis=0)
    return np.asarray(prefix[np.arange(size - 1), np.arange(1, size)], dtype=bool)
