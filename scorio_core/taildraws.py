r"""Shared Monte Carlo draws of a TailPass@k posterior profile.

:meth:`~scorio_core.tailprofile.TailPassProfile.sample` draws each
question's category probabilities from its Dirichlet posterior; a
:class:`TailPassDraws` turns those draws into one value per draw of the
profile or of a scalar utility (linear, power mean, QRS, rollout, harmonic,
shortfall, ...), and :meth:`TailPassDraws.summary` into a Monte Carlo mean,
sd and equal-tailed interval. The argument checks both share live here too.

References:
    Hariri, Hinczewski, Ayday, Chaudhary (2026), "Success Has a Shape:
    TailPass@k for Repeated Sampling Evaluation", Sections 2-3, Appendix C.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp, xlogy

from scorio_core import _validation as check
from scorio_core.posterior import z_value

if TYPE_CHECKING:
    from scorio_core.tailprofile import TailPassProfile

FloatArray = NDArray[np.float64]


Summary = (
    tuple[float, float, float, float]
    | tuple[FloatArray, FloatArray, FloatArray, FloatArray]
)


@dataclass(frozen=True, eq=False)
class TailPassDraws:
    """Shared posterior draws from :meth:`TailPassProfile.sample`.

    Each utility returns one value per draw; :meth:`summary` gives the Monte
    Carlo mean, sd and equal-tailed interval.
    """

    _source: TailPassProfile = field(repr=False)
    _probabilities: FloatArray = field(repr=False)

    def _bank_pmfs(self) -> list[tuple[int, int, FloatArray]]:
        """Bank-count pmfs given each drawn p, in (start, stop, pmf) batches."""
        counts, _, log_coefficients = self._source._grid
        batch = max(1, 1_000_000 // max(len(counts), len(self._source.thresholds)))
        draws = len(self._probabilities)
        pieces = []
        for question in range(self._source.question_count):
            for start in range(0, draws, batch):
                probabilities = self._probabilities[start : start + batch, question]
                pieces.append(
                    (
                        start,
                        start + len(probabilities),
                        _conditional(counts, probabilities, log_coefficients),
                    )
                )
        return pieces

    @cached_property
    def profile(self) -> FloatArray:
        """Dataset profile draws, ``draws x thresholds``."""
        values = np.zeros((len(self._probabilities), len(self._source.thresholds)))
        for start, stop, pmf in self._bank_pmfs():
            values[start:stop] += self._source._tails(pmf)
        return readonly_copy(values / self._source.question_count)

    def linear(self, weights: ArrayLike) -> FloatArray:
        """A convex combination of the thresholds, per draw."""
        chosen = convex_weights(weights, len(self._source.thresholds))
        return np.asarray(self.profile @ chosen, dtype=np.float64)

    def moment(self, lam: float) -> FloatArray:
        """E[(average score of k fresh trials) ** lam] per draw."""
        power = positive_scalar(lam, "lam")
        values = np.zeros(len(self._probabilities))
        if power == 1.0:
            for question in range(self._source.question_count):
                values += self._probabilities[:, question] @ self._source._scores
        else:
            payoff = self._source._grid[1] ** power
            for start, stop, pmf in self._bank_pmfs():
                values[start:stop] += pmf @ payoff
        return values / self._source.question_count

    def _apply(
        self,
        transform: Callable[[FloatArray], FloatArray],
        aggregation: str = "question",
    ) -> FloatArray:
        if aggregation == "profile":
            return transform(self.profile)
        if aggregation != "question":
            raise ValueError("aggregation must be 'question' or 'profile'")
        values = np.zeros(len(self._probabilities))
        for start, stop, pmf in self._bank_pmfs():
            values[start:stop] += transform(self._source._tails(pmf))
        return values / self._source.question_count

    def power_mean(
        self,
        q: float,
        weights: ArrayLike | None = None,
        *,
        aggregation: Literal["question", "profile"] = "question",
    ) -> FloatArray:
        """Weighted power mean of the profile (question-first by default)."""
        power = positive_scalar(q, "q")
        size = len(self._source.thresholds)
        chosen = convex_weights(
            np.full(size, 1.0 / size) if weights is None else weights, size
        )

        def transform(values: FloatArray) -> FloatArray:
            if power == 1.0:
                return np.asarray(values @ chosen, dtype=np.float64)
            active = chosen > 0
            selected = values[:, active]
            scale = selected.max(axis=1)
            normalized = np.divide(
                selected,
                scale[:, None],
                out=np.zeros_like(selected),
                where=scale[:, None] > 0,
            )
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                logs = power * np.log(normalized)
                delta = np.expm1(logs) @ chosen[active]
                # log1p keeps the geometric-mean limit as q approaches zero.
                log_mean = logsumexp(logs + np.log(chosen[active]), axis=1)
                small = np.abs(delta) < 0.25
                log_mean[small] = np.log1p(delta[small])
                result = scale * np.exp(log_mean / power)
            return np.asarray(np.where(scale == 0, 0.0, result), dtype=np.float64)

        return self._apply(transform, aggregation)

    def qrs(
        self,
        weights: ArrayLike | None = None,
        *,
        aggregation: Literal["question", "profile"] = "question",
    ) -> FloatArray:
        """Quadratic (q = 2) power mean of the profile."""
        return self.power_mean(2.0, weights, aggregation=aggregation)

    def rollout(self, m: int, weights: ArrayLike | None = None) -> FloatArray:
        """Chance that m independent k-trial rollouts all reach a threshold."""
        rollouts = check.integer(m, "m")
        if rollouts < 2:
            raise ValueError("m must be at least two")
        size = len(self._source.thresholds)
        chosen = convex_weights(
            np.full(size, 1.0 / size) if weights is None else weights, size
        )
        return self._apply(
            lambda values: np.asarray(values**rollouts @ chosen, dtype=np.float64)
        )

    def harmonic(self, alpha: float = 0.5) -> FloatArray:
        """Harmonic balance of discovery (weight alpha) and stability, per draw."""
        share = unit_scalar(alpha, "alpha")
        scores, k = self._source._scores, self._source.k
        values = np.zeros(len(self._probabilities))
        for question in range(self._source.question_count):
            probabilities = self._probabilities[:, question]
            zero = np.clip(probabilities[:, scores == 0].sum(axis=1), 0, 1)
            one = np.clip(probabilities[:, scores == 1].sum(axis=1), 0, 1)
            with np.errstate(divide="ignore"):
                discovery = -np.expm1(k * np.log(zero))
            stability = one**k
            if share == 1:
                values += discovery
            elif share == 0:
                values += stability
            else:
                positive = (discovery > 0) & (stability > 0)
                with np.errstate(over="ignore"):
                    values[positive] += 1.0 / (
                        share / discovery[positive] + (1 - share) / stability[positive]
                    )
        return values / self._source.question_count

    def discovery(self) -> FloatArray:
        """Draws of the chance of positive bank credit."""
        return self.harmonic(1.0)

    def stability(self) -> FloatArray:
        """Draws of the chance of full bank credit."""
        return self.harmonic(0.0)

    def shortfall(
        self,
        target: ArrayLike,
        weights: ArrayLike | None = None,
        *,
        epsilon: float = 0.01,
    ) -> FloatArray:
        """Per question max + epsilon * sum of weighted gaps below ``target``."""
        size = len(self._source.thresholds)
        goal = check.real_vector(target, "target")
        if (
            goal.shape != (size,)
            or np.any((goal < 0) | (goal > 1))
            or np.any(np.diff(goal) > 0)
        ):
            raise ValueError(
                "target must be a nonincreasing [0, 1] vector matching thresholds"
            )
        scale = check.real_vector(
            np.ones(size) if weights is None else weights, "weights"
        )
        if scale.shape != (size,) or np.any(scale <= 0):
            raise ValueError("shortfall weights must be positive and match thresholds")
        slack = positive_scalar(epsilon, "epsilon")

        def transform(values: FloatArray) -> FloatArray:
            gaps = np.maximum(goal - values, 0.0) * scale
            return np.asarray(
                gaps.max(axis=1) + slack * gaps.sum(axis=1), dtype=np.float64
            )

        return self._apply(transform)

    def at_k(self, k: int, *, thresholds: ArrayLike | None = None) -> TailPassDraws:
        """The same draws at another reporting budget."""
        return TailPassDraws(
            self._source.at_k(k, thresholds=thresholds), self._probabilities
        )

    def summary(
        self, values: ArrayLike | None = None, *, confidence: float = 0.95
    ) -> Summary:
        """Monte Carlo mean, sd (ddof 1) and equal-tailed interval per column."""
        z_value(confidence)
        samples = (
            self.profile if values is None else check.real_vector(values, "values")
        )
        if samples.ndim not in (1, 2) or samples.shape[0] != len(self._probabilities):
            raise ValueError(
                "values must have this draw set's sample count on the first axis"
            )
        low, high = np.quantile(
            samples, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0
        )
        mean, sd = samples.mean(axis=0), samples.std(axis=0, ddof=1)
        if samples.ndim == 1:
            return float(mean), float(sd), float(low), float(high)
        return mean, sd, low, high


def _conditional(
    counts: NDArray[np.int64], probabilities: FloatArray, log_coefficients: FloatArray
) -> FloatArray:
    """Multinomial pmfs of the bank counts for a batch of category probabilities."""
    k = int(counts[0].sum())
    if probabilities.shape[1] == 2:
        # scipy.stats loads in about half a second: deferred to first use.
        from scipy.stats import binom

        return np.asarray(
            binom.pmf(counts[:, 1], k, probabilities[:, 1, None]), dtype=np.float64
        )
    logs = np.broadcast_to(log_coefficients, (len(probabilities), len(counts))).copy()
    for category in range(counts.shape[1]):
        logs += xlogy(counts[:, category], probabilities[:, category, None])
    return np.asarray(
        np.exp(logs - logsumexp(logs, axis=1, keepdims=True)), dtype=np.float64
    )


def readonly_copy(values: FloatArray) -> FloatArray:
    array = np.array(values, dtype=np.float64, copy=True)
    array.setflags(write=False)
    return array


def unit_scalar(value: object, name: str) -> float:
    array = check.real_vector(value, name)
    if array.ndim != 0 or not 0.0 <= float(array) <= 1.0:
        raise ValueError(f"{name} must be a scalar in [0, 1]")
    return float(array)


def positive_scalar(value: object, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise ValueError(f"{name} must be a finite positive scalar; got {value!r}.")
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a finite positive scalar; got {value!r}.")
    return number


def convex_weights(weights: ArrayLike, size: int) -> FloatArray:
    values = check.real_vector(weights, "weights")
    if values.shape != (size,):
        raise ValueError(f"weights must be a length-{size} 1D array")
    if np.any(values < 0.0) or not math.isclose(
        float(np.sum(values)), 1.0, rel_tol=0.0, abs_tol=1e-12
    ):
        raise ValueError("weights must be non-negative and sum to one")
    return values
