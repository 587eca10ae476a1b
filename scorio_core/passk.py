r"""The Pass@k family and its Beta-posterior versions, for binary outcomes.

Every metric here gives a question credit ``A[j]`` when ``j`` of ``k`` chosen
trials succeed (a :class:`Credit`): Pass@k credits ``j >= 1``, Pass^k only
``j = k``, G-Pass@k_tau ``j >= max(1, ceil(tau k))``, mG-Pass@k the ramp
``(2/k) max(j - ceil(k/2), 0)``. The point estimate averages the credit over
the exact hypergeometric draw of ``k`` from a question's ``n`` observed trials
with ``c`` successes; the posterior version averages it over ``k`` fresh
trials with success probability ``p ~ Beta(alpha0 + c, beta0 + n - c)``.

These are the matrix functions of ``scorio.eval`` (0.2.3), matching it in
names, arguments, defaults and returns; :mod:`scorio_core.credit` holds the
credits and their kernels on per-question ``(successes, trials)`` counts,
where questions may have different trial counts (ragged).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.credit import (
    Credit,
    credit_estimate,
    credit_posterior,
    mean_credit,
    state_covariances,
    state_estimates,
    state_moments,
)
from scorio_core.posterior import credible_interval

__all__ = [
    "Credit",
    "credit_estimate",
    "credit_posterior",
    "g_pass_at_k",
    "g_pass_at_k_ci",
    "g_pass_at_k_tau",
    "g_pass_at_k_tau_ci",
    "mg_pass_at_k",
    "mg_pass_at_k_ci",
    "pass_at_k",
    "pass_at_k_ci",
    "pass_hat_k",
    "pass_hat_k_ci",
    "state_covariances",
    "state_estimates",
    "state_moments",
    "unanimous_at_k",
    "unanimous_at_k_ci",
]


# -- scorio.eval-compatible matrix API -------------------------------------------


def pass_at_k(R: ArrayLike, k: int) -> float:
    r"""Unbiased Pass@k: chance that at least one of ``k`` trials is right.

    Formula:
        :math:`\frac{1}{M}\sum_a 1 - \binom{N - c_a}{k} / \binom{N}{k}`.

    References:
        Chen et al., "Evaluating Large Language Models Trained on Code", 2021.

    Examples:
        >>> round(pass_at_k([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]], 2), 6)
        0.95
    """
    successes, trials, count = _binary_counts(R, k)
    return mean_credit(successes, trials, Credit.pass_at_k(count))


def pass_hat_k(R: ArrayLike, k: int) -> float:
    r"""Pass^k: chance that all ``k`` chosen trials are right.

    Formula:
        :math:`\frac{1}{M}\sum_a \binom{c_a}{k} / \binom{N}{k}`.

    References:
        Yao et al., "tau-bench", 2024.

    Examples:
        >>> round(pass_hat_k([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]], 2), 6)
        0.45
    """
    successes, trials, count = _binary_counts(R, k)
    return mean_credit(successes, trials, Credit.pass_hat_k(count))


def g_pass_at_k_tau(R: ArrayLike, k: int, tau: float) -> float:
    r"""G-Pass@k_tau: at least ``max(1, ceil(tau k))`` of ``k`` right.

    References:
        Liu et al., "Are Your LLMs Capable of Stable Reasoning?", ACL 2025.

    Examples:
        >>> round(g_pass_at_k_tau([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]], 2, 0.5), 6)
        0.95
    """
    matrix = check.binary_matrix(R)
    level = check.unit_interval(tau, "tau")
    successes, trials, count = _binary_counts(matrix, k)
    return mean_credit(successes, trials, Credit.g_pass_at_k_tau(count, level))


def mg_pass_at_k(R: ArrayLike, k: int) -> float:
    r"""mG-Pass@k: the discrete mean of G-Pass@k_tau over tau in [0.5, 1].

    Formula:
        :math:`\frac{1}{M}\sum_a \frac{2}{k}\sum_{j>m}(j-m)P(X_a = j)`,
        :math:`m = \lceil k/2 \rceil`, :math:`X_a` hypergeometric.

    References:
        Liu et al., "Are Your LLMs Capable of Stable Reasoning?", ACL 2025.

    Examples:
        >>> round(mg_pass_at_k([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]], 3), 6)
        0.166667
    """
    successes, trials, count = _binary_counts(R, k)
    return mean_credit(successes, trials, Credit.mg_pass_at_k(count))


def pass_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of i.i.d. Pass@k, ``1 - (1-p)^k``.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> tuple(round(x, 4) for x in pass_at_k_ci(R, 2))
        (0.8393, 0.0973, 0.6487, 1.0)
    """
    return _posterior_ci(R, k, Credit.pass_at_k, confidence, bounds, alpha0, beta0)


def pass_hat_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of i.i.d. Pass^k, ``p^k``.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> tuple(round(x, 4) for x in pass_hat_k_ci(R, 2))
        (0.4464, 0.1462, 0.1599, 0.7329)
    """
    return _posterior_ci(R, k, Credit.pass_hat_k, confidence, bounds, alpha0, beta0)


def g_pass_at_k_tau_ci(
    R: ArrayLike,
    k: int,
    tau: float,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of i.i.d. G-Pass@k_tau."""
    check.binary_matrix(R)
    level = check.unit_interval(tau, "tau")
    return _posterior_ci(
        R,
        k,
        lambda count: Credit.g_pass_at_k_tau(count, level),
        confidence,
        bounds,
        alpha0,
        beta0,
    )


def mg_pass_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of i.i.d. mG-Pass@k."""
    return _posterior_ci(R, k, Credit.mg_pass_at_k, confidence, bounds, alpha0, beta0)


def g_pass_at_k(R: ArrayLike, k: int) -> float:
    """G-Pass@k: the all-success threshold, the same as :func:`pass_hat_k`.

    Examples:
        >>> round(g_pass_at_k([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]], 2), 6)
        0.45
    """
    return pass_hat_k(R, k)


def g_pass_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior summary of G-Pass@k, the same target as :func:`pass_hat_k_ci`."""
    return pass_hat_k_ci(R, k, confidence, bounds, alpha0, beta0)


# scorio.eval's aliases: Unanimous@k is Pass^k.
unanimous_at_k = pass_hat_k
unanimous_at_k_ci = pass_hat_k_ci


# -- kernels -------------------------------------------------------------------------


def _posterior_ci(
    R: ArrayLike,
    k: int,
    make_credit: Callable[[int], Credit],
    confidence: float,
    bounds: tuple[float, float] | None,
    alpha0: float,
    beta0: float,
) -> tuple[float, float, float, float]:
    successes, trials, count = _binary_counts(R, k)
    level = check.confidence(confidence)
    posterior = credit_posterior(successes, trials, make_credit(count), alpha0, beta0)
    low, high = credible_interval(posterior.mu, posterior.sigma, level, bounds)
    return posterior.mu, posterior.sigma, low, high


def _binary_counts(
    R: ArrayLike, k: object
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    matrix = check.binary_matrix(R)
    count = check.k_in_range(k, matrix.shape[1])
    trials = np.full(matrix.shape[0], matrix.shape[1], dtype=np.int64)
    return matrix.sum(axis=1), trials, count
