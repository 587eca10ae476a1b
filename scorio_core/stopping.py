r"""Stopping rules on the pairwise z, and block resolution of rank boundaries.

A rule answers, for a pair of models separated by ``z`` after information
``t`` (trials per question, see :func:`posterior_information`): is the
order settled (``z >= threshold(t)``), can it still settle within the budget
cap ``T`` (futility), is the pair closer than a margin (equivalence), and,
by simulating the rest of the procedure, where is it forecast to end.

How boundaries share the run's error is Holm's step-down
(:mod:`scorio_core.multiplicity`); how pairs combine into rank boundaries
is :mod:`monitor.decisions.decide`' business.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.special import lambertw, ndtri

from scorio_core import _validation as check
from scorio_core.boundaries import wang_tsiatis_constant

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def per_direction_alpha(confidence: float, boundaries: int = 1) -> float:
    r"""The error level per direction of one test: ``(1 - confidence) / (2 L)``.

    ``L`` is the number of rank boundaries that share the run's error
    (Holm's step-down over open boundaries, see
    :func:`scorio_core.multiplicity.holm_step_down`);
    with ``L = 1`` a tied pair is split in either direction with probability
    at most ``1 - confidence``.

    Examples:
        >>> [round(per_direction_alpha(0.95, k), 5) for k in (1, 2, 10)]
        [0.025, 0.0125, 0.0025]
    """
    level = check.confidence(confidence)
    count = int(boundaries)
    if count < 1:
        raise ValueError(f"boundaries must be >= 1; got {boundaries!r}")
    return (1.0 - level) / (2.0 * count)


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

    @property
    def horizon(self) -> float | None:
        """The information at the budget cap (``None``: no cap)."""
        ...

    def equivalent(
        self, z: FloatArray, information: FloatArray, margin_z: FloatArray
    ) -> BoolArray:
        """Which pairs are shown closer than a margin (``margin_z`` in z units)."""
        ...


def _tost(
    thresholds: FloatArray, z: FloatArray, information: FloatArray, margin_z: FloatArray
) -> BoolArray:
    # Two one-sided tests: the difference is above -margin and below +margin,
    # each at the boundary the order claims use.
    return np.asarray((information > 0.0) & (margin_z - z >= thresholds), dtype=bool)


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

    @property
    def horizon(self) -> float | None:
        return self.budget

    def thresholds(self, information: FloatArray) -> FloatArray:
        return np.where(information > 0.0, self.z_star, np.inf)

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        if self.budget is None:
            return np.zeros(np.shape(z), dtype=bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = information * (self.z_star / z) ** 2
        return (z < self.z_star) & (information > 0.0) & (needed > self.budget)

    def equivalent(
        self, z: FloatArray, information: FloatArray, margin_z: FloatArray
    ) -> BoolArray:
        return _tost(self.thresholds(information), z, information, margin_z)


@dataclass(frozen=True, slots=True)
class SequentialRule:
    r"""Alpha-spending boundary against a budget, with an optimistic futility stop.

    Settled when :math:`z \ge b(t) = c\,(t/T)^{\Delta - 1/2}` (Wang-Tsiatis
    shape, :math:`\Delta = 0.1`), where ``c`` is the continuous-monitoring
    constant for ``alpha`` per direction: however often the monitor looks,
    and whatever the data-driven order of trials, a tied pair is declared
    in a given direction with probability at most ``alpha`` before the cap
    ``T``. ``t`` is information in trials per question (see
    :func:`posterior_information`), ``T`` its value at the cap.

    Futile (a statistical tie at this budget) once :math:`t \ge t_{min}` and
    even a ``z`` larger by ``optimism`` would not reach ``c`` at the cap:
    :math:`(z + \gamma)\sqrt{T/t} < c`. Stopping for futility never declares
    an order, so it cannot add false claims.

    The defaults (``delta`` 0.1, ``optimism`` 0.925) come from simulations of
    the paper's 11 models and a 20-model AIME-like set;
    benchmarks/results/stopping.md has the evidence.

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

    @classmethod
    def from_confidence(
        cls,
        confidence: float,
        budget: float,
        boundaries: int = 1,
        delta: float = 0.1,
        optimism: float = 0.925,
        futility_from: float = 10.0,
    ) -> SequentialRule:
        """Calibrated for :func:`per_direction_alpha` (confidence, boundaries)."""
        alpha = per_direction_alpha(confidence, boundaries)
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

    @property
    def horizon(self) -> float | None:
        return self.budget

    def thresholds(self, information: FloatArray) -> FloatArray:
        # Beyond the cap the calibration ends; hold the boundary flat there.
        fraction = np.minimum(information / self.budget, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
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

    def equivalent(
        self, z: FloatArray, information: FloatArray, margin_z: FloatArray
    ) -> BoolArray:
        return _tost(self.thresholds(information), z, information, margin_z)


@dataclass(frozen=True, slots=True)
class ConfidenceSequenceRule:
    r"""A normal-mixture confidence sequence: valid at any look, no budget needed.

    Settled when :math:`|z| \ge \sqrt{(1 + \rho/t)(\log(1 + t/\rho) +
    2\log(1/\alpha_2))}`, which a tied pair crosses in either direction with
    probability at most :math:`\alpha_2` over all time (Ville's inequality);
    :math:`\alpha_2` is twice :func:`per_direction_alpha`. ``rho`` makes the
    boundary tightest at ``t = tightest_at``. Without a budget nothing is
    futile: a tie keeps drawing trials until the user sets
    ``max_trials_per_question`` (or an ``equivalence_margin``).

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
        cls, confidence: float, tightest_at: float = 30.0, boundaries: int = 1
    ) -> ConfidenceSequenceRule:
        alpha = 2.0 * per_direction_alpha(confidence, boundaries)
        # Minimising the boundary at t0 gives rho = t0 / y with
        # y = -W_{-1}(-exp(-(1 + 2 log(1/alpha)))) - 1 (Lambert W, branch -1).
        log_term = 2.0 * math.log(1.0 / alpha)
        y = -float(lambertw(-math.exp(-(1.0 + log_term)), k=-1).real) - 1.0
        return cls(alpha=alpha, rho=check.positive(tightest_at, "tightest_at") / y)

    @property
    def name(self) -> str:
        return "sequential"

    @property
    def horizon(self) -> float | None:
        return None

    def thresholds(self, information: FloatArray) -> FloatArray:
        safe = np.maximum(information, 1e-300)
        values = np.sqrt(
            (1.0 + self.rho / safe)
            * (np.log1p(safe / self.rho) + 2.0 * math.log(1.0 / self.alpha))
        )
        return np.where(information > 0.0, values, np.inf)

    def futile(self, z: FloatArray, information: FloatArray) -> BoolArray:
        return np.zeros(np.shape(z), dtype=bool)

    def equivalent(
        self, z: FloatArray, information: FloatArray, margin_z: FloatArray
    ) -> BoolArray:
        return _tost(self.thresholds(information), z, information, margin_z)


# The simulated ends' quantile a forecast reports. The one boundary's pair
# simulated alone ends later than the procedure does (its weakest pair is
# the least of several and the boundary's models stop drawing once others
# are weaker), so forecasts made halfway at the median ran high. Of the
# quantiles 0.15-0.3, 0.2 lands within +-25 % most often over the paper's
# models, eight identical models, five ties and 20 AIME-like models
# (benchmarks/forecast_hits.py, seeds 0-9, checked on seeds 10-19).
FORECAST_QUANTILE: Final = 0.2


def forecast_information(
    rule: StoppingRule,
    z: float,
    information: float,
    margin_z: float | None = None,
    *,
    rng: np.random.Generator,
    futility: StoppingRule | None = None,
    paths: int = 256,
    steps: int = 32,
    quantile: float = FORECAST_QUANTILE,
) -> float:
    r"""Median information at which a pair ends, however it ends.

    Simulates the rest of the procedure from the posterior: the pair's
    ``S(t) = z(t) \sqrt{t}`` is a Brownian motion with drift ``theta`` per
    unit of information, drawn from its posterior given ``S(t_0)`` under a
    normal prior fitted to the pair (empirical Bayes: a z that noise alone
    explains gets none), observed at ``steps`` looks up to the horizon. A
    path ends at the first look where the pair settles (either order), is
    shown equivalent (``margin_z``: the margin in z units now, growing like
    ``sqrt(t)``), turns futile (by ``futility``'s test when given, else
    the rule's own), or reaches the cap.

    Returns:
        The ``quantile`` of the simulated ends, in the units of
        ``information``; ``inf`` when more than that share of the paths
        never end (no cap and no way to end).

    Examples:
        >>> rule = SequentialRule.from_confidence(0.95, budget=80)
        >>> rng = np.random.default_rng(0)
        >>> forecast_information(rule, 8.0, 10.0, rng=rng)  # settled already
        10.0
        >>> 10.0 < forecast_information(rule, 1.0, 10.0, rng=rng) <= 80.0
        True
    """
    start = check.real(information, "information")
    if start <= 0.0:
        return math.inf
    here = np.array([start])
    now_z = np.array([abs(z)])
    hopeless = futility if futility is not None else rule
    if (now_z >= rule.thresholds(here)).any() or hopeless.futile(now_z, here).any():
        return start
    horizon = rule.horizon
    end = horizon if horizon is not None else 64.0 * start
    if end <= start:
        return start
    times = np.linspace(start, end, steps + 1)[1:]
    if horizon is None:
        times = start * np.geomspace(1.0, 64.0, steps + 1)[1:]
    spans = np.diff(np.concatenate(([start], times)))
    # The pair's effect, shrunk by a prior N(0, tau^2) fitted to this pair
    # (tau^2 = (z^2 - 1)^+ / t, the method of moments): a z that noise
    # explains gets no drift, a clear one keeps almost all of it.
    spread = max(z * z - 1.0, 0.0) / start
    shrink = spread / (1.0 + start * spread)
    drift = z * math.sqrt(start) * shrink + rng.standard_normal(paths) * math.sqrt(
        shrink
    )
    noise = rng.standard_normal((paths, times.size)) * np.sqrt(spans)
    walk = z * math.sqrt(start) + np.cumsum(drift[:, None] * spans + noise, axis=1)
    path_z = np.abs(walk) / np.sqrt(times)
    grid = np.broadcast_to(times, path_z.shape)
    ended = (path_z >= rule.thresholds(times)) | hopeless.futile(path_z, grid)
    if margin_z is not None:
        grown = margin_z * np.sqrt(grid / start)
        ended |= rule.equivalent(path_z, grid, grown)
    if horizon is not None:
        ended[:, -1] = True
    first = np.where(ended.any(axis=1), ended.argmax(axis=1), -1)
    stops = np.where(first >= 0, times[np.maximum(first, 0)], math.inf)
    # No interpolation: some ends may be infinite (no cap, no way to end).
    return float(np.quantile(stops, quantile, method="inverted_cdf"))


def posterior_information(
    unit_variances: FloatArray, variances: FloatArray, prior_information: float
) -> FloatArray:
    r"""Information of every pair of models, from their posteriors.

    A model's posterior variance is ``sigma^2 = u / I``: ``u`` is the
    variance its score would have with one unit of information per question
    (each question's Dirichlet total plus one equal to 1) and ``I`` the
    variance-weighted information it has. For a pair, the information of
    the difference, less what the prior alone holds:

    Formula:
        :math:`t_{ij} = (u_i + u_j) / (\sigma_i^2 + \sigma_j^2) - I_0`,
        with :math:`I_0 = C + 2` for the uniform Dirichlet prior.

    With every question at ``n`` trials, ``t = n`` exactly; a question with
    no trials keeps its prior variance and adds nothing, so trials piled on
    a few questions are not mistaken for progress. The result is in trials
    per question, the unit of ``max_trials_per_question``.

    Examples:
        >>> u = np.array([0.25, 0.25]) / 30
        >>> sigma2 = u / (40 + 3)  # 40 trials on each of 30 binary questions
        >>> posterior_information(u, sigma2, 3.0).round(9).tolist()
        [[40.0, 40.0], [40.0, 40.0]]
    """
    units = unit_variances[:, None] + unit_variances[None, :]
    spread = variances[:, None] + variances[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        information = units / spread - prior_information
    valid = np.isfinite(information) & (spread > 0.0)
    return np.where(valid, np.maximum(information, 0.0), 0.0)
