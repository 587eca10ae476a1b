r"""Batch Bayes@N and avg@N over a results matrix, drop-in for ``scorio.eval``.

Names, arguments, defaults and return tuples match ``scorio.eval`` (0.2.3), so
``from scorio_core import bayes`` can replace ``from scorio.eval import bayes``.
``R`` is an ``M x N`` matrix of categories ``0..C``; ``w`` maps category ``k``
to a score; ``R0`` holds ``D`` prior outcomes per question (the paper's R0).
Symbols are defined in :mod:`scorio_core.posterior`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.counts import category_counts
from scorio_core.posterior import (
    ScaledWeights,
    credible_interval,
    posterior_from_sums,
    row_terms,
)


def bayes(
    R: ArrayLike,
    w: ArrayLike | None = None,
    R0: ArrayLike | None = None,
) -> tuple[float, float]:
    r"""Bayes@N posterior mean and standard deviation.

    Formula:
        With :math:`\nu_{ak} = n_{ak} + n^0_{ak}` (observed counts plus prior
        counts, :math:`n^0 = 1 +` prior outcomes) and :math:`T = 1 + C + D + N`:

        .. math::

            \mu = \frac{1}{M}\sum_a \sum_k w_k \frac{\nu_{ak}}{T},\quad
            \sigma^2 = \frac{1}{M^2 (T+1)} \sum_a \Big[\sum_k w_k^2
            \frac{\nu_{ak}}{T} - \Big(\sum_k w_k \frac{\nu_{ak}}{T}\Big)^2\Big]

    References:
        Hariri et al., "Don't Pass@k: A Bayesian Framework for Large Language
        Model Evaluation", ICLR 2026, Algorithm 1.

    Args:
        R: ``M x N`` categories in ``0..C``.
        w: Weights of length ``C+1``; optional when ``R`` is binary.
        R0: Optional ``M x D`` prior outcomes.

    Returns:
        ``(mu, sigma)``.

    Raises:
        ValueError: for categories outside ``0..C``, non-integer or NaN
            entries, bad weights, or an ``R0`` with another row count.

    Examples:
        >>> R = [[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]]
        >>> w = [0.0, 0.5, 1.0]
        >>> tuple(round(x, 6) for x in bayes(R, w))
        (0.5625, 0.091998)
        >>> tuple(round(x, 6) for x in bayes(R, w, [[0, 2], [1, 2]]))
        (0.575, 0.084275)
    """
    nu, scaled, _ = _posterior_counts(R, w, R0)
    means, variances = row_terms(nu, scaled)
    posterior = posterior_from_sums(
        math.fsum(means.tolist()), math.fsum(variances.tolist()), nu.shape[0], scaled
    )
    return posterior.mu, posterior.sigma


def bayes_ci(
    R: ArrayLike,
    w: ArrayLike | None = None,
    R0: ArrayLike | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float, float, float]:
    r"""Bayes@N mean, standard deviation and credible interval.

    Formula:
        :math:`(\mu, \sigma, \mu - z\sigma, \mu + z\sigma)` with
        :math:`z = \Phi^{-1}((1+\gamma)/2)`, ends clipped into ``bounds``.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> tuple(round(x, 4) for x in bayes_ci(R, bounds=(0.0, 1.0)))
        (0.6429, 0.1185, 0.4107, 0.875)
    """
    level = check.confidence(confidence)
    mu, sigma = bayes(R, w, R0)
    low, high = credible_interval(mu, sigma, level, bounds)
    return mu, sigma, low, high


def avg(R: ArrayLike, w: ArrayLike | None = None) -> tuple[float, float]:
    r"""avg@N and its Bayesian standard deviation on the avg scale.

    Formula:
        :math:`a = \frac{1}{MN}\sum_{a,i} w_{R_{ai}}` and
        :math:`\sigma_a = \frac{T}{N}\sigma_{\text{Bayes}}` with
        :math:`T = 1 + C + N` (uniform prior, no R0).

    References:
        Hariri et al., ICLR 2026, eq. 19-20.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> tuple(round(x, 6) for x in avg(R))
        (0.7, 0.165831)
    """
    nu, scaled, trial_count = _posterior_counts(R, w, None)
    _, variances = row_terms(nu, scaled)
    question_count = nu.shape[0]
    sigma = posterior_from_sums(
        0.0, math.fsum(variances.tolist()), question_count, scaled
    ).sigma
    observed = nu - 1.0
    unit_total = math.fsum((observed @ np.asarray(scaled.unit)).tolist())
    # Divide before scaling: scale * unit_total overflows for w near 1e308
    # while the average itself is representable (bayes does the same).
    average = scaled.offset + scaled.scale * (
        unit_total / (question_count * trial_count)
    )
    total = scaled.category_count + trial_count
    return average, (total / trial_count) * sigma


def avg_ci(
    R: ArrayLike,
    w: ArrayLike | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float, float, float]:
    r"""avg@N, its Bayesian standard deviation and a credible interval.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> tuple(round(x, 4) for x in avg_ci(R, bounds=(0.0, 1.0)))
        (0.7, 0.1658, 0.375, 1.0)
    """
    level = check.confidence(confidence)
    average, sigma = avg(R, w)
    low, high = credible_interval(average, sigma, level, bounds)
    return average, sigma, low, high


def _posterior_counts(
    R: ArrayLike, w: ArrayLike | None, R0: ArrayLike | None
) -> tuple[NDArray[np.float64], ScaledWeights, int]:
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    prior = check.prior_matrix(R0, results.shape[0])
    check.category_range(results, weights.size, "R")
    check.category_range(prior, weights.size, "R0")
    nu = (
        category_counts(results, weights.size)
        + category_counts(prior, weights.size)
        + 1
    )
    return nu.astype(np.float64), ScaledWeights.from_weights(weights), results.shape[1]
