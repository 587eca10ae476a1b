r"""Max@k: the expected best reward among ``k`` trials, and its posterior.

For question ``a`` with rewards sorted into the distinct levels
``r_1 < ... < r_L`` of ``w``, the best of ``k`` trials exceeds ``r_l`` unless
all ``k`` fall at or below it. The finite-bank estimator draws ``k`` of the
question's ``n_a`` observed trials without replacement (Bagirov et al. 2025,
App. C.1):

    Max@k_a = r_1 + sum_l (r_{l+1} - r_l) P(some draw above r_l)

The posterior version uses the Bayes@N Dirichlet posterior of the question's
category probabilities (counts + prior outcomes + 1); with ``A_l`` the
probability of a reward at most ``r_l``, the latent target is
``r_L - sum_l (r_{l+1} - r_l) A_l^k``, whose moments are closed-form Beta
moments (a scorio extension, matched here). Both work from per-question
category counts, so questions may have different trial counts.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.counts import category_counts
from scorio_core.metrics import bayes_ci
from scorio_core.posterior import VARIANCE_ROUNDOFF, credible_interval


def max_at_k(R: ArrayLike, k: int, w: ArrayLike | None = None) -> float:
    r"""Max@k: expected best reward among ``k`` of a question's trials.

    Formula:
        With sorted rewards :math:`g_{a1} \le \dots \le g_{aN}`,
        :math:`\mathrm{Max@}k_a = \binom{N}{k}^{-1}\sum_{i=k}^N
        \binom{i-1}{k-1} g_{ai}`, averaged over questions.

    References:
        Bagirov et al., "The Best of N Worlds", arXiv:2510.23393 (2025), App. C.1.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(max_at_k(R, 2), 6)
        0.95
        >>> R = [[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]]
        >>> round(max_at_k(R, 2, w=[0.0, 0.5, 1.0]), 6)
        0.85
    """
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    check.category_range(results, weights.size, "R")
    count = check.k_in_range(k, results.shape[1])
    counts = category_counts(results, weights.size)
    return float(np.mean(max_estimates(counts, weights, count)))


def max_at_k_ci(
    R: ArrayLike,
    k: int,
    w: ArrayLike | None = None,
    R0: ArrayLike | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of the latent Max@k.

    ``k`` may exceed the observed trial count (the target is latent); k = 1
    is Bayes@N (:func:`bayes_ci`, with its ``bounds``). For k > 1 and no
    ``bounds`` the interval is clipped to ``[min w, max w]``, as in scorio.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> mu, sigma, lo, hi = max_at_k_ci(R, 2)
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.839286, 0.097263, 0.6487, 1.0)
        >>> R = [[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]]
        >>> mu, sigma, lo, hi = max_at_k_ci(R, 2, w=[0.0, 0.5, 1.0])
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.75, 0.08812, 0.5773, 0.9227)
    """
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got k={count}")
    if count == 1:
        return bayes_ci(R, w, R0, confidence, bounds)
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    prior = check.prior_matrix(R0, results.shape[0])
    check.category_range(results, weights.size, "R")
    check.category_range(prior, weights.size, "R0")
    nu = (
        category_counts(results, weights.size)
        + category_counts(prior, weights.size)
        + 1
    ).astype(np.float64)
    means, sigmas = max_posterior_terms(nu, weights, count)
    mu, sigma = _combine(means, sigmas)
    clip = (float(weights.min()), float(weights.max())) if bounds is None else bounds
    low, high = credible_interval(mu, sigma, check.confidence(confidence), clip)
    return mu, sigma, low, high


def _levels(
    weights: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64], float, float]:
    """Distinct rewards (ascending), each category's level, offset and scale."""
    levels, inverse = np.unique(weights, return_inverse=True)
    offset = float(levels[0])
    with np.errstate(over="ignore", invalid="ignore"):
        centered = levels - offset
    if not np.all(np.isfinite(centered)):
        # Gaps that overflow float64: scale about zero instead.
        offset, centered = 0.0, levels
    scale = float(np.max(np.abs(centered)))
    unit = centered / scale if scale > 0.0 else np.zeros_like(levels)
    return unit, inverse.astype(np.int64), offset, scale


def _grouped(
    counts: NDArray[np.float64] | NDArray[np.int64],
    inverse: NDArray[np.int64],
    size: int,
) -> NDArray[np.float64]:
    grouped = np.zeros((counts.shape[0], size))
    for category, level in enumerate(inverse.tolist()):
        grouped[:, level] += counts[:, category]
    return grouped


def max_estimates(
    counts: NDArray[np.int64], weights: NDArray[np.float64], k: int
) -> NDArray[np.float64]:
    """Per-question finite-bank Max@k from category counts (each row's own n).

    A kernel trusting its inputs: ``1 <= k <= n_a`` for every row.
    """
    unit, inverse, offset, scale = _levels(weights)
    trials = counts.sum(axis=1)
    if k == 1 or unit.size == 1:
        unit_weights = unit[inverse]
        means = (counts @ unit_weights) / trials
        return np.asarray(offset + scale * means, dtype=np.float64)
    grouped = _grouped(counts, inverse, unit.size)
    at_or_below = np.cumsum(grouped, axis=1)[:, :-1]
    above = trials[:, None] - at_or_below
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import hypergeom

    any_above = hypergeom.sf(0, trials[:, None], above, k)
    unit_scores = unit[0] + any_above @ np.diff(unit)
    return np.asarray(offset + scale * unit_scores, dtype=np.float64)


def max_posterior_terms(
    nu: NDArray[np.float64], weights: NDArray[np.float64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-question posterior mean and standard deviation of the latent Max@k.

    ``nu`` holds Dirichlet counts (observed + prior outcomes + 1) per row;
    each row's total is its own, so uneven trial counts are exact.
    """
    unit, inverse, offset, scale = _levels(weights)
    if unit.size == 1:
        return np.full(nu.shape[0], offset), np.zeros(nu.shape[0])
    gaps = np.diff(unit)
    gamma = _grouped(nu, inverse, unit.size)
    total = gamma.sum(axis=1)
    cumulative = np.cumsum(gamma, axis=1)[:, :-1]
    rest = total[:, None] - cumulative
    log_first = _log_power_moment(cumulative, rest, k)
    log_second = _log_power_moment(cumulative, rest, 2 * k)
    exceed = -np.expm1(log_first)
    levels = cumulative.shape[1]
    covariance = np.empty((nu.shape[0], levels, levels))
    for i in range(levels):
        covariance[:, i, i] = _difference_from_logs(
            log_second[:, i], 2.0 * log_first[:, i]
        )
        for j in range(i + 1, levels):
            # E[A_i^k A_j^k] = E[U^2k] E[V^k] with U = A_j ~ Beta and
            # V = A_i / A_j ~ Beta(cum_i, cum_j - cum_i) independent of U
            # (Dirichlet neutrality).
            log_cross = _log_power_moment(
                cumulative[:, j], rest[:, j], 2 * k
            ) + _log_power_moment(
                cumulative[:, i], cumulative[:, j] - cumulative[:, i], k
            )
            value = _difference_from_logs(log_cross, log_first[:, i] + log_first[:, j])
            covariance[:, i, j] = value
            covariance[:, j, i] = value
    unit_variance = np.einsum("l,slm,m->s", gaps, covariance, gaps)
    if unit_variance.size and float(unit_variance.min()) < -VARIANCE_ROUNDOFF:
        raise FloatingPointError("Max@k posterior variance is materially negative")
    unit_mean = np.clip(unit[0] + exceed @ gaps, unit[0], unit[-1])
    means = offset + scale * unit_mean
    sigmas = scale * np.sqrt(np.maximum(unit_variance, 0.0))
    return np.asarray(means, dtype=np.float64), np.asarray(sigmas, dtype=np.float64)


def _combine(
    means: NDArray[np.float64], sigmas: NDArray[np.float64]
) -> tuple[float, float]:
    """Dataset ``(mu, sigma)`` from per-question means and standard deviations."""
    question_count = means.size
    mu = float(np.mean(means))
    largest = float(np.max(sigmas))
    if largest == 0.0:
        return mu, 0.0
    # Rescale before squaring so sigmas near 1e308 do not overflow.
    spread = math.sqrt(float(np.sum((sigmas / largest) ** 2)))
    return mu, largest * spread / question_count


def _log_power_moment(
    alpha: NDArray[np.float64], beta: NDArray[np.float64], power: int
) -> NDArray[np.float64]:
    """``log E[X^power]`` for X ~ Beta(alpha, beta), elementwise, stably."""
    steps = np.arange(power, dtype=np.float64)
    shape = (*alpha.shape, 1)
    a = alpha.reshape(shape)
    denominators = a + beta.reshape(shape) + steps
    complement = beta.reshape(shape) / denominators
    near_one = complement <= 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(
            near_one,
            np.log1p(-np.where(near_one, complement, 0.0)),
            np.log(a + steps) - np.log(denominators),
        )
    return np.asarray(terms.sum(axis=-1), dtype=np.float64)


def _difference_from_logs(
    log_larger: NDArray[np.float64], log_smaller: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``exp(log_larger) - exp(log_smaller)`` without cancellation, >= 0."""
    gap = log_smaller - log_larger
    tolerance = (
        64.0
        * np.finfo(np.float64).eps
        * np.maximum(1.0, np.maximum(np.abs(log_larger), np.abs(log_smaller)))
    )
    if np.any(gap > tolerance):
        raise FloatingPointError("Max@k covariance is materially negative")
    return np.asarray(
        np.exp(log_larger) * -np.expm1(np.minimum(gap, 0.0)), dtype=np.float64
    )
