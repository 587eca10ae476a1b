r"""Credits of ``j`` successes among ``k`` trials, and their Beta-posterior moments.

A :class:`Credit` gives a question credit ``A[j]`` when ``j`` of ``k``
chosen trials succeed; the Pass@k family, Maj@k, AUC@k and the threshold
spectra are all credits. Here are the two ways to score one over questions
with per-question ``(successes, trials)`` counts ``(c, n)``, ragged or not:
the unbiased estimate averages the credit over the exact hypergeometric draw
of ``k`` from a question's ``n`` observed trials (:func:`credit_estimate`),
the posterior version over ``k`` fresh trials with success probability
``p ~ Beta(alpha0 + c, beta0 + n - c)`` (:func:`credit_posterior`). The
per-state kernels (``state_*``) trust their inputs and serve the metric
modules built on credits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.posterior import VARIANCE_ROUNDOFF, Posterior


@dataclass(frozen=True, slots=True)
class Credit:
    """Credit ``values[j]`` for ``j`` successes among ``k`` chosen trials."""

    k: int
    values: tuple[float, ...]

    @classmethod
    def pass_at_k(cls, k: int) -> Credit:
        """At least one success."""
        return cls.threshold(k, 1)

    @classmethod
    def pass_hat_k(cls, k: int) -> Credit:
        """All ``k`` succeed (Pass^k, G-Pass@k)."""
        return cls.threshold(k, k)

    @classmethod
    def g_pass_at_k_tau(cls, k: int, tau: float) -> Credit:
        """At least ``max(1, ceil(tau k))`` successes."""
        level = check.unit_interval(tau, "tau")
        count = check.integer(k, "k")
        threshold = math.floor(level * count)
        # Compare with the representable boundary j/k so that tau = j/k asks
        # for exactly j successes even when tau * k rounds above j.
        if level > threshold / count:
            threshold += 1
        return cls.threshold(count, max(1, threshold))

    @classmethod
    def mg_pass_at_k(cls, k: int) -> Credit:
        """mG-Pass@k's discrete ramp over thresholds in [0.5, 1]."""
        count = _positive_k(k)
        majority = (count + 1) // 2
        return cls(
            count, tuple((2.0 / count) * max(j - majority, 0) for j in range(count + 1))
        )

    @classmethod
    def majority(cls, k: int) -> Credit:
        """A strict majority: at least ``floor(k/2) + 1`` successes (Maj@k)."""
        count = _positive_k(k)
        return cls.threshold(count, count // 2 + 1)

    @classmethod
    def auc_at_k(cls, k: int) -> Credit:
        """AUC@k: the trapezoidal average of Pass@1..Pass@k of a size-k bank."""
        count = _positive_k(k)
        if count == 1:
            return cls.pass_at_k(1)
        coefficients = np.full(count, 1.0 / (count - 1))
        coefficients[[0, -1]] = 0.5 / (count - 1)
        budgets = np.arange(1, count + 1)[None, :]
        successes = np.arange(count + 1)[:, None]
        # scipy.stats loads in about half a second: deferred to first use.
        from scipy.stats import hypergeom

        values = hypergeom.sf(0, count, successes, budgets) @ coefficients
        return cls(count, tuple(float(v) for v in values))

    @classmethod
    def spectrum(cls, weights: ArrayLike) -> Credit:
        """Cumulative credit ``A_j = sum_{r<=j} w_r`` of threshold weights w_1..w_k.

        Raises:
            ValueError: unless the weights are finite, real, non-negative and
                sum to at most one (1e-12 slack, as scorio).
        """
        array = check.real_vector(weights, "weights")
        if array.ndim != 1 or array.size == 0:
            raise ValueError("weights must be a non-empty 1D array")
        if np.any(array < 0.0):
            raise ValueError("weights must be non-negative")
        total = float(np.sum(array))
        if total > 1.0 + 1e-12:
            raise ValueError(f"weights must satisfy sum(weights) <= 1; got sum={total}")
        values = np.concatenate(([0.0], np.cumsum(array)))
        return cls(int(array.size), tuple(float(v) for v in values))

    @classmethod
    def threshold(cls, k: int, successes: int) -> Credit:
        """Credit one for at least ``successes`` of ``k``."""
        count = _positive_k(k)
        return cls(
            count, tuple(1.0 if j >= successes else 0.0 for j in range(count + 1))
        )

    @property
    def is_pass(self) -> bool:
        return self.values[0] == 0.0 and all(v == 1.0 for v in self.values[1:])

    @property
    def is_unanimous(self) -> bool:
        return self.values[-1] == 1.0 and all(v == 0.0 for v in self.values[:-1])


def credit_estimate(successes: ArrayLike, trials: ArrayLike, credit: Credit) -> float:
    r"""Unbiased finite-bank estimate: mean over questions of E[credit].

    Formula:
        .. math::

            \frac{1}{M}\sum_a \sum_j A_j
            \frac{\binom{c_a}{j}\binom{n_a - c_a}{k - j}}{\binom{n_a}{k}}

    Raises:
        ValueError: for bad counts or ``k`` above a question's trial count.

    Examples:
        >>> round(credit_estimate([3, 4], [5, 5], Credit.pass_at_k(2)), 6)
        0.95
        >>> round(credit_estimate([3, 2], [5, 3], Credit.pass_hat_k(2)), 6)
        0.316667
    """
    success_array, trial_array = _count_pairs(successes, trials)
    if int(trial_array.min()) < credit.k:
        raise ValueError(
            f"k must be in 1..N for every question; got k={credit.k} with "
            f"N={int(trial_array.min())}"
        )
    return mean_credit(success_array, trial_array, credit)


def credit_posterior(
    successes: ArrayLike,
    trials: ArrayLike,
    credit: Credit,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> Posterior:
    r"""Posterior mean and sd of the credit of ``k`` fresh trials.

    Formula:
        With :math:`p_a \sim \mathrm{Beta}(\alpha_0 + c_a, \beta_0 + n_a - c_a)`
        and :math:`g(p) = \sum_j A_j \binom{k}{j} p^j (1-p)^{k-j}`:
        :math:`\mu = \frac1M \sum_a E[g(p_a)]`,
        :math:`\sigma = \frac1M \sqrt{\sum_a \mathrm{Var}[g(p_a)]}`.

    Examples:
        >>> p = credit_posterior([3, 4], [5, 5], Credit.pass_at_k(1))
        >>> round(p.mu, 6), round(p.sigma, 6)
        (0.642857, 0.118451)
    """
    success_array, trial_array = _count_pairs(successes, trials)
    first = check.positive(alpha0, "alpha0")
    second = check.positive(beta0, "beta0")
    states, frequencies = np.unique(
        np.stack([success_array, trial_array], axis=1), axis=0, return_counts=True
    )
    alpha = first + states[:, 0]
    beta = second + (states[:, 1] - states[:, 0])
    means, variances = _beta_moments(credit, alpha.astype(float), beta.astype(float))
    question_count = success_array.size
    mu = float(frequencies @ means) / question_count
    variance = float(frequencies @ variances) / question_count**2
    return Posterior(mu=mu, sigma=math.sqrt(variance))


def _count_pairs(
    successes: ArrayLike, trials: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    success_array = check.outcome_matrix(
        np.asarray(successes).reshape(1, -1), "successes"
    )[0]
    trial_array = check.outcome_matrix(np.asarray(trials).reshape(1, -1), "trials")[0]
    if success_array.shape != trial_array.shape:
        raise ValueError(
            f"successes and trials must have the same length; got "
            f"{success_array.size} and {trial_array.size}"
        )
    if int(trial_array.min()) < 0 or int(success_array.min()) < 0:
        raise ValueError("successes and trials must be >= 0")
    if np.any(success_array > trial_array):
        row = int(np.argmax(success_array > trial_array))
        raise ValueError(
            f"successes cannot exceed trials; got {int(success_array[row])} > "
            f"{int(trial_array[row])} on question {row}"
        )
    return success_array, trial_array


def _positive_k(k: object) -> int:
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got {count}")
    return count


def mean_credit(
    successes: NDArray[np.int64], trials: NDArray[np.int64], credit: Credit
) -> float:
    """:func:`credit_estimate` of checked counts (a kernel trusting its inputs)."""
    states, frequencies = np.unique(
        np.stack([successes, trials], axis=1), axis=0, return_counts=True
    )
    draws = np.arange(credit.k + 1)[None, :]
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import hypergeom

    pmf = hypergeom.pmf(draws, states[:, 1:2], states[:, 0:1], credit.k)
    scores = pmf @ np.asarray(credit.values)
    return float(frequencies @ scores) / successes.size


def _beta_moments(
    credit: Credit, alpha: NDArray[np.float64], beta: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Mean and variance of g(p) under Beta(alpha, beta), per state."""
    if credit.is_pass:
        # 1 - (1-p)^k: moments of q = 1 - p ~ Beta(beta, alpha).
        log_first = _log_power_moment(beta, alpha, credit.k)
        log_second = _log_power_moment(beta, alpha, 2 * credit.k)
        return -np.expm1(log_first), _variance_from_logs(log_first, log_second)
    if credit.is_unanimous:
        log_first = _log_power_moment(alpha, beta, credit.k)
        log_second = _log_power_moment(alpha, beta, 2 * credit.k)
        return np.exp(log_first), _variance_from_logs(log_first, log_second)
    values = np.asarray(credit.values)
    means = _bernstein_expectation(values, alpha, beta)
    # Integrate the centred square (g - mean)^2 per state: E[g^2] - mean^2
    # would cancel to a few digits when g is nearly constant.
    centered = values[None, :] - means[:, None]
    variances = _centered_product_expectation(centered, centered, alpha, beta)
    if variances.size and float(variances.min()) < -VARIANCE_ROUNDOFF:
        raise FloatingPointError(
            "posterior variance of the credit is materially negative"
        )
    return means, np.maximum(variances, 0.0)


def state_moments(
    credit: Credit, alpha: NDArray[np.float64], beta: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-state posterior mean and variance of a credit under Beta(alpha, beta).

    A kernel that trusts its inputs (positive alpha and beta of one shape).
    """
    return _beta_moments(credit, alpha, beta)


def state_covariances(
    first: Credit,
    second: Credit,
    alpha: NDArray[np.float64],
    beta: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Per-state posterior covariance of two credits under Beta(alpha, beta).

    Integrates the product of the centred credits, so nearly independent or
    nearly constant credits keep their digits. A kernel trusting its inputs.
    """
    left = np.asarray(first.values)
    right = np.asarray(second.values)
    left_centered = left[None, :] - _bernstein_expectation(left, alpha, beta)[:, None]
    right_centered = (
        right[None, :] - _bernstein_expectation(right, alpha, beta)[:, None]
    )
    return _centered_product_expectation(left_centered, right_centered, alpha, beta)


def state_estimates(
    successes: NDArray[np.int64], trials: NDArray[np.int64], credit: Credit
) -> NDArray[np.float64]:
    """Per-question unbiased finite-bank credit (hypergeometric average)."""
    draws = np.arange(credit.k + 1)[None, :]
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import hypergeom

    pmf = hypergeom.pmf(draws, trials[:, None], successes[:, None], credit.k)
    return np.asarray(pmf @ np.asarray(credit.values), dtype=np.float64)


def _centered_product_expectation(
    left: NDArray[np.float64],
    right: NDArray[np.float64],
    alpha: NDArray[np.float64],
    beta: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``E[f(p) g(p)]`` per state for Bernstein coefficient rows ``left``, ``right``."""
    weights, partner = _product_weights(left.shape[1] - 1, right.shape[1] - 1)
    products = np.empty((left.shape[0], weights.shape[0]))
    # Chunks bound the (states, degree, k+1) temporary to a few MB.
    chunk = max(1, 2_000_000 // weights.size)
    for start in range(0, left.shape[0], chunk):
        part = left[start : start + chunk]
        other = right[start : start + chunk]
        products[start : start + chunk] = np.einsum(
            "tj,sj,stj->st", weights, part, other[:, partner]
        )
    degree = products.shape[1] - 1
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import betabinom

    pmf = betabinom.pmf(
        np.arange(degree + 1)[None, :], degree, alpha[:, None], beta[:, None]
    )
    return np.asarray(np.einsum("st,st->s", pmf, products), dtype=np.float64)


def _log_power_moment(
    alpha: NDArray[np.float64], beta: NDArray[np.float64], power: int
) -> NDArray[np.float64]:
    """``log E[p^power]`` for p ~ Beta(alpha, beta), as a sum of log1p terms."""
    steps = np.arange(power, dtype=float)[None, :]
    terms = -np.log1p(beta[:, None] / (alpha[:, None] + steps))
    return np.asarray(terms.sum(axis=1), dtype=np.float64)


def _variance_from_logs(
    log_first: NDArray[np.float64], log_second: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``exp(log_second) - exp(log_first)^2`` without cancellation."""
    gap = np.minimum(2.0 * log_first - log_second, 0.0)
    return np.exp(log_second) * -np.expm1(gap)


def _bernstein_expectation(
    coefficients: NDArray[np.float64],
    alpha: NDArray[np.float64],
    beta: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``E[sum_j b_j Binom(j; d, p)]`` under Beta: a beta-binomial average."""
    degree = coefficients.size - 1
    successes = np.arange(degree + 1)[None, :]
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import betabinom

    pmf = betabinom.pmf(successes, degree, alpha[:, None], beta[:, None])
    return np.asarray(pmf @ coefficients, dtype=np.float64)


def _product_weights(
    left_k: int, right_k: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Weights and partner indices to multiply two Bernstein polynomials.

    The product of degrees k and m has degree k+m with
    h_t = sum_j W[t, j] x_j y_{t-j}, where W[t, j] = C(k, j) C(m, t-j) /
    C(k+m, t) is a hypergeometric pmf in j that scipy evaluates stably; W is
    zero where t - j falls outside 0..m.
    """
    t = np.arange(left_k + right_k + 1)[:, None]
    j = np.arange(left_k + 1)[None, :]
    partner = t - j
    valid = (partner >= 0) & (partner <= right_k)
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import hypergeom

    weights = np.where(valid, hypergeom.pmf(j, left_k + right_k, left_k, t), 0.0)
    return weights, np.clip(partner, 0, right_k)
