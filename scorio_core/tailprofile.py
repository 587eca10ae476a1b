r"""TailPass@k's posterior profile: reaching each bank score with k fresh trials.

:func:`tailpass` fits one Dirichlet posterior per question (prior
concentrations + counts + ``eta`` x prior outcomes, categories of equal score
merged) and returns a :class:`TailPassProfile`: for each threshold ``t`` the
posterior of ``P(average score of k fresh trials >= t)``, averaged over
questions, with exact means, covariance and scalar utilities, and
:meth:`TailPassProfile.sample` for shared Monte Carlo draws
(:class:`TailPassDraws`). Names, arguments and results follow
``scorio.eval.tailpass`` (0.2.3); the draws use the same generator calls, so a
seed gives the same draws.

Exact moments enumerate the bank counts ``x`` of ``k`` trials: the predictive
law of ``x`` is Dirichlet-multinomial, and the covariance of two payoffs'
expectations is ``E[f(X) g(X')] - E f E g`` with ``X'`` drawn from the
posterior updated by ``X`` (two banks sharing one latent p).

One difference: ``moment(2)`` and ``moment(4)`` (profile and draws)
enumerate the bank counts like every other payoff, so past 20,000 count
states (many score levels and a large k) they raise ValueError where scorio
expands a low-degree polynomial and answers.

References:
    Hariri, Hinczewski, Ayday, Chaudhary (2026), "Success Has a Shape:
    TailPass@k for Repeated Sampling Evaluation", Sections 2-3, Appendix C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp

from scorio_core import _validation as check
from scorio_core.counts import category_counts
from scorio_core.credit import Credit, state_moments
from scorio_core.posterior import z_value
from scorio_core.taildraws import (
    FloatArray,
    Summary,
    TailPassDraws,
    convex_weights,
    positive_scalar,
    readonly_copy,
    unit_scalar,
)
from scorio_core.tailpass import count_grid, thresholds_for

Generator = int | np.random.Generator | None
MAX_COVARIANCE_PAIRS = 4_000_000


def tailpass(
    R: ArrayLike,
    k: int,
    w: ArrayLike | None = None,
    R0: ArrayLike | None = None,
    *,
    eta: float = 1.0,
    prior: ArrayLike = 1.0,
    thresholds: ArrayLike | None = None,
) -> TailPassProfile:
    """A reusable posterior TailPass profile.

    Args:
        R: ``M x N`` categories; 1-D is one question.
        k: Reporting budget >= 1 (any size: the trials are fresh).
        w: Category scores in [0, 1]; default ``[0, 1]`` for binary R.
        R0: Optional prior outcomes, weighted by ``eta``.
        eta: Weight of an R0 outcome, in [0, 1].
        prior: Positive Dirichlet concentrations: a scalar, one per category,
            or an ``M x (C+1)`` matrix.
        thresholds: Increasing required bank scores in [0, 1]; default
            ``1/k, ..., 1``.

    Returns:
        A :class:`TailPassProfile`.

    Raises:
        ValueError: for bad input, as scorio.

    Examples:
        >>> profile = tailpass([[0, 1, 1], [1, 1, 1]], k=4)
        >>> profile.mean.shape
        (4,)
        >>> round(profile.moment(lam=1)[0], 3)
        0.7
    """
    count = _latent_k(k)
    grid = thresholds_for(count, thresholds)
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    prior_results = check.prior_matrix(R0, results.shape[0])
    check.category_range(results, weights.size, "R")
    check.category_range(prior_results, weights.size, "R0")
    if np.any((weights < 0) | (weights > 1)):
        raise ValueError("TailPass rubric scores w must lie in [0, 1]")
    share = unit_scalar(eta, "eta")
    base = check.real_vector(prior, "prior")
    if base.ndim > 2 or np.any(base <= 0):
        raise ValueError("prior must contain positive Dirichlet concentrations")
    observed = category_counts(results, weights.size)
    try:
        base = np.broadcast_to(base, observed.shape)
    except ValueError as exc:
        raise ValueError(
            "prior must be a scalar, category vector, or question-by-category matrix"
        ) from exc
    with np.errstate(over="ignore"):
        parameters = (
            base + observed + share * category_counts(prior_results, weights.size)
        )
        totals = parameters.sum(axis=1)
    if not np.all(np.isfinite(totals)):
        raise ValueError("Posterior concentration totals must be finite")
    scores, inverse = np.unique(weights, return_inverse=True)
    grouped = np.zeros((results.shape[0], scores.size))
    for category, level in enumerate(inverse.tolist()):
        grouped[:, level] += parameters[:, category]
    return TailPassProfile(count, grid, readonly_copy(grouped), readonly_copy(scores))


@dataclass(frozen=True, eq=False)
class TailPassProfile:
    """Posterior TailPass profile of :func:`tailpass`.

    ``mean`` and ``std`` have one entry per threshold, ``covariance`` their
    joint uncertainty, ``question_mean`` one row per question.
    """

    k: int
    thresholds: FloatArray
    _parameters: FloatArray = field(repr=False)
    _scores: FloatArray = field(repr=False)

    @property
    def question_count(self) -> int:
        """Number of questions."""
        return len(self._parameters)

    @cached_property
    def _states(self) -> tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]]:
        states, inverse, frequencies = np.unique(
            self._parameters, axis=0, return_inverse=True, return_counts=True
        )
        return states, inverse.reshape(-1), frequencies

    @cached_property
    def _grid(self) -> tuple[NDArray[np.int64], FloatArray, FloatArray]:
        counts = count_grid(self.k, len(self._scores))
        scores = np.asarray(
            counts.astype(np.longdouble) @ self._scores.astype(np.longdouble) / self.k,
            dtype=np.float64,
        )
        log_coefficients = gammaln(counts.sum(axis=1) + 1) - gammaln(counts + 1).sum(
            axis=1
        )
        return counts, scores, log_coefficients

    @cached_property
    def _events(self) -> FloatArray:
        return (self._grid[1][:, None] >= self.thresholds).astype(float)

    def _tails(self, pmf: FloatArray) -> FloatArray:
        order = np.argsort(self._grid[1], kind="stable")
        indices = np.searchsorted(self._grid[1][order], self.thresholds)
        tails = np.cumsum(pmf[..., order][..., ::-1], axis=-1)[..., ::-1]
        padded = np.concatenate((tails, np.zeros((*tails.shape[:-1], 1))), axis=-1)
        return np.asarray(padded[..., indices], dtype=np.float64)

    def _predictive(self, alpha: FloatArray) -> FloatArray:
        counts, _, log_coefficients = self._grid
        if alpha.size == 2:
            # scipy.stats loads in about half a second: deferred to first use.
            from scipy.stats import betabinom

            return np.asarray(
                betabinom.pmf(np.arange(self.k + 1), self.k, alpha[1], alpha[0]),
                dtype=np.float64,
            )
        logs = log_coefficients.copy()
        for category, concentration in enumerate(alpha.tolist()):
            rising = np.r_[0.0, np.cumsum(np.log(concentration + np.arange(self.k)))]
            logs += rising[counts[:, category]]
        return np.asarray(np.exp(logs - logsumexp(logs)), dtype=np.float64)

    def _covariance(self, alpha: FloatArray, values: FloatArray) -> FloatArray:
        """Posterior covariance of E[values(X) | p] over the bank counts X."""
        counts = self._grid[0]
        if len(counts) ** 2 > MAX_COVARIANCE_PAIRS:
            raise ValueError(
                f"Exact covariance needs {len(counts) ** 2} count pairs; the limit "
                f"is {MAX_COVARIANCE_PAIRS}. Use shared posterior draws."
            )
        pmf = self._predictive(alpha)
        centered = values - pmf @ values
        result = np.zeros((values.shape[1], values.shape[1]))
        for index, count in enumerate(counts):
            conditional = self._predictive(alpha + count)
            result += pmf[index] * np.outer(centered[index], conditional @ centered)
        return np.asarray((result + result.T) / 2, dtype=np.float64)

    @cached_property
    def _state_means(self) -> FloatArray:
        return np.array([self._tails(self._predictive(a)) for a in self._states[0]])

    @cached_property
    def question_mean(self) -> FloatArray:
        """Exact per-question mean profiles, ``M x thresholds``."""
        return readonly_copy(self._state_means[self._states[1]])

    @cached_property
    def mean(self) -> FloatArray:
        """Exact posterior mean of the dataset profile."""
        return readonly_copy(self._states[2] @ self._state_means / self.question_count)

    @cached_property
    def covariance(self) -> FloatArray:
        """Exact joint posterior covariance of the dataset profile."""
        size = max(len(self._grid[0]), len(self.thresholds))
        if size**2 > MAX_COVARIANCE_PAIRS:
            raise ValueError(
                "Exact covariance is too large; use shared posterior draws"
            )
        result = np.zeros((len(self.thresholds), len(self.thresholds)))
        for alpha, frequency in zip(self._states[0], self._states[2], strict=True):
            result += frequency * self._covariance(alpha, self._events)
        result /= self.question_count**2
        for index in range(len(result)):
            result[index, index] = _nonnegative(float(result[index, index]))
        return readonly_copy(result)

    @cached_property
    def std(self) -> FloatArray:
        """Exact marginal posterior standard deviations."""
        return readonly_copy(np.sqrt(np.diag(self.covariance)))

    def _aggregate(
        self, means: FloatArray, variances: FloatArray
    ) -> tuple[float, float]:
        frequencies = self._states[2]
        mean = float(frequencies @ means / self.question_count)
        variance = _nonnegative(float(frequencies @ variances / self.question_count**2))
        return mean, math.sqrt(variance)

    def _payoff_moments(self, values: FloatArray) -> tuple[float, float]:
        parameters = self._states[0]
        if len(self._scores) == 2:
            credit = Credit(self.k, tuple(float(v) for v in values))
            means, variances = state_moments(credit, parameters[:, 1], parameters[:, 0])
            return self._aggregate(means, variances)
        means = np.array([self._predictive(a) @ values for a in parameters])
        variances = np.array(
            [self._covariance(a, values[:, None])[0, 0] for a in parameters]
        )
        return self._aggregate(means, variances)

    def linear(self, weights: ArrayLike) -> tuple[float, float]:
        """Exact mean and sd of a convex combination of the thresholds."""
        chosen = convex_weights(weights, len(self.thresholds))
        cumulative = np.r_[0.0, np.cumsum(chosen)]
        payoff = cumulative[np.searchsorted(self.thresholds, self._grid[1], "right")]
        return self._payoff_moments(payoff)

    def moment(self, lam: float) -> tuple[float, float]:
        """Exact mean and sd of E[(average score of k fresh trials) ** lam]."""
        power = positive_scalar(lam, "lam")
        parameters = self._states[0]
        if power == 1.0:
            totals = parameters.sum(axis=1)
            probabilities = parameters / totals[:, None]
            means = probabilities @ self._scores
            spread = probabilities * (self._scores - means[:, None]) ** 2
            return self._aggregate(means, spread.sum(axis=1) / (totals + 1))
        return self._payoff_moments(self._grid[1] ** power)

    def _endpoint(self, full_credit: bool) -> tuple[float, float]:
        mask = self._scores == 1 if full_credit else self._scores > 0
        if np.all(mask) or not np.any(mask):
            return float(np.all(mask)), 0.0
        parameters = self._states[0]
        credit = Credit.pass_hat_k(self.k) if full_credit else Credit.pass_at_k(self.k)
        means, variances = state_moments(
            credit, parameters[:, mask].sum(axis=1), parameters[:, ~mask].sum(axis=1)
        )
        return self._aggregate(means, variances)

    def discovery(self) -> tuple[float, float]:
        """Exact mean and sd of positive bank credit (at least some score)."""
        return self._endpoint(False)

    def stability(self) -> tuple[float, float]:
        """Exact mean and sd of every trial receiving full credit 1."""
        return self._endpoint(True)

    def at_k(self, k: int, *, thresholds: ArrayLike | None = None) -> TailPassProfile:
        """The same posterior at another reporting budget."""
        count = _latent_k(k)
        return TailPassProfile(
            count, thresholds_for(count, thresholds), self._parameters, self._scores
        )

    def sample(self, n_draws: int = 4000, *, rng: Generator = None) -> TailPassDraws:
        """Independent draws of every question's category probabilities."""
        draws = check.integer(n_draws, "n_draws")
        if draws < 2:
            raise ValueError("n_draws must be at least two")
        generator = np.random.default_rng(rng)
        values = np.empty((draws, *self._parameters.shape))
        for question, alpha in enumerate(self._parameters):
            values[:, question] = (
                1.0 if len(alpha) == 1 else generator.dirichlet(alpha, size=draws)
            )
        values.setflags(write=False)
        return TailPassDraws(self, values)

    def ci(
        self,
        confidence: float = 0.95,
        *,
        method: Literal["mc", "normal"] = "mc",
        n_draws: int = 4000,
        rng: Generator = None,
    ) -> Summary:
        """Profile (mean, sd, lo, hi) per threshold: MC draws or exact normal."""
        z = z_value(confidence)
        if method == "mc":
            return self.sample(n_draws, rng=rng).summary(confidence=confidence)
        if method != "normal":
            raise ValueError("method must be 'mc' or 'normal'")
        return (
            self.mean,
            self.std,
            np.clip(self.mean - z * self.std, 0, 1),
            np.clip(self.mean + z * self.std, 0, 1),
        )

    def linear_ci(
        self,
        weights: ArrayLike,
        confidence: float = 0.95,
        *,
        method: Literal["mc", "normal"] = "mc",
        n_draws: int = 4000,
        rng: Generator = None,
    ) -> Summary:
        """Linear-utility summary; intervals as :meth:`ci`."""
        chosen = convex_weights(weights, len(self.thresholds))
        z_value(confidence)
        if method == "normal":
            return _normal(*self.linear(chosen), confidence)
        if method != "mc":
            raise ValueError("method must be 'mc' or 'normal'")
        draws = self.sample(n_draws, rng=rng)
        return draws.summary(draws.linear(chosen), confidence=confidence)

    def moment_ci(
        self,
        lam: float,
        confidence: float = 0.95,
        *,
        method: Literal["mc", "normal"] = "mc",
        n_draws: int = 4000,
        rng: Generator = None,
    ) -> Summary:
        """Moment-utility summary; intervals as :meth:`ci`."""
        power = positive_scalar(lam, "lam")
        z_value(confidence)
        if method == "normal":
            return _normal(*self.moment(power), confidence)
        if method != "mc":
            raise ValueError("method must be 'mc' or 'normal'")
        draws = self.sample(n_draws, rng=rng)
        return draws.summary(draws.moment(power), confidence=confidence)


def _latent_k(k: object) -> int:
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got k={count}")
    return count


def _normal(mu: float, sigma: float, confidence: float) -> Summary:
    half = z_value(confidence) * sigma
    low = min(max(mu - half, 0.0), 1.0)
    high = min(max(mu + half, 0.0), 1.0)
    return mu, sigma, low, high


def _nonnegative(value: float) -> float:
    """Clip variance roundoff; a materially negative variance is an error."""
    if not math.isfinite(value) or value < -1e-12:
        raise FloatingPointError(f"Invalid TailPass posterior variance: {value}")
    return max(0.0, value)
