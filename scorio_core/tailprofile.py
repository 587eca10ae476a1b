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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp, xlogy

from scorio_core import _validation as check
from scorio_core.counts import category_counts
from scorio_core.credit import Credit, state_moments
from scorio_core.posterior import z_value
from scorio_core.tailpass import count_grid, thresholds_for

FloatArray = NDArray[np.float64]
Generator = int | np.random.Generator | None
Summary = (
    tuple[float, float, float, float]
    | tuple[FloatArray, FloatArray, FloatArray, FloatArray]
)
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
    share = _unit_scalar(eta, "eta")
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
    return TailPassProfile(count, grid, _readonly(grouped), _readonly(scores))


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
        return _readonly(self._state_means[self._states[1]])

    @cached_property
    def mean(self) -> FloatArray:
        """Exact posterior mean of the dataset profile."""
        return _readonly(self._states[2] @ self._state_means / self.question_count)

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
        return _readonly(result)

    @cached_property
    def std(self) -> FloatArray:
        """Exact marginal posterior standard deviations."""
        return _readonly(np.sqrt(np.diag(self.covariance)))

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
        chosen = _convex_weights(weights, len(self.thresholds))
        cumulative = np.r_[0.0, np.cumsum(chosen)]
        payoff = cumulative[np.searchsorted(self.thresholds, self._grid[1], "right")]
        return self._payoff_moments(payoff)

    def moment(self, lam: float) -> tuple[float, float]:
        """Exact mean and sd of E[(average score of k fresh trials) ** lam]."""
        power = _positive_scalar(lam, "lam")
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
        chosen = _convex_weights(weights, len(self.thresholds))
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
        power = _positive_scalar(lam, "lam")
        z_value(confidence)
        if method == "normal":
            return _normal(*self.moment(power), confidence)
        if method != "mc":
            raise ValueError("method must be 'mc' or 'normal'")
        draws = self.sample(n_draws, rng=rng)
        return draws.summary(draws.moment(power), confidence=confidence)


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
        return _readonly(values / self._source.question_count)

    def linear(self, weights: ArrayLike) -> FloatArray:
        """A convex combination of the thresholds, per draw."""
        chosen = _convex_weights(weights, len(self._source.thresholds))
        return np.asarray(self.profile @ chosen, dtype=np.float64)

    def moment(self, lam: float) -> FloatArray:
        """E[(average score of k fresh trials) ** lam] per draw."""
        power = _positive_scalar(lam, "lam")
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
        power = _positive_scalar(q, "q")
        size = len(self._source.thresholds)
        chosen = _convex_weights(
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
        chosen = _convex_weights(
            np.full(size, 1.0 / size) if weights is None else weights, size
        )
        return self._apply(
            lambda values: np.asarray(values**rollouts @ chosen, dtype=np.float64)
        )

    def harmonic(self, alpha: float = 0.5) -> FloatArray:
        """Harmonic balance of discovery (weight alpha) and stability, per draw."""
        share = _unit_scalar(alpha, "alpha")
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
        slack = _positive_scalar(epsilon, "epsilon")

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


def _readonly(values: FloatArray) -> FloatArray:
    array = np.array(values, dtype=np.float64, copy=True)
    array.setflags(write=False)
    return array


def _latent_k(k: object) -> int:
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got k={count}")
    return count


def _unit_scalar(value: object, name: str) -> float:
    array = check.real_vector(value, name)
    if array.ndim != 0 or not 0.0 <= float(array) <= 1.0:
        raise ValueError(f"{name} must be a scalar in [0, 1]")
    return float(array)


def _positive_scalar(value: object, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise ValueError(f"{name} must be a finite positive scalar; got {value!r}.")
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a finite positive scalar; got {value!r}.")
    return number


def _convex_weights(weights: ArrayLike, size: int) -> FloatArray:
    values = check.real_vector(weights, "weights")
    if values.shape != (size,):
        raise ValueError(f"weights must be a length-{size} 1D array")
    if np.any(values < 0.0) or not math.isclose(
        float(np.sum(values)), 1.0, rel_tol=0.0, abs_tol=1e-12
    ):
        raise ValueError("weights must be non-negative and sum to one")
    return values


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
