r"""Comparing models: pairwise z, ranking confidence, ranks and rank groups.

Two models with posteriors ``(mu, sigma)`` and ``(mu', sigma')`` differ by
``z = |mu - mu'| / sqrt(sigma^2 + sigma'^2)`` standard deviations; the
ranking confidence ``rho = Phi(z)`` is the posterior probability that their
order is right, so ``z = 1.645`` is 95 % confidence (paper Sec. 2.5, 2.9).
Orders sort by ``mu`` descending; exactly equal means keep input order, so
results are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from scorio_core import _validation as check


def z_score(mu_a: float, sigma_a: float, mu_b: float, sigma_b: float) -> float:
    r"""Separation of two posteriors in standard deviations of their difference.

    Formula:
        :math:`z = |\mu_a - \mu_b| / \sqrt{\sigma_a^2 + \sigma_b^2}`; with both
        sigmas zero, ``inf`` for different means and ``0`` for equal ones.

    References:
        Hariri et al., ICLR 2026, Sec. 2.5.

    Examples:
        >>> round(z_score(0.6, 0.03, 0.5, 0.04), 6)
        2.0
    """
    gap = abs(check.real(mu_a, "mu_a") - check.real(mu_b, "mu_b"))
    spread = math.hypot(_sigma(sigma_a, "sigma_a"), _sigma(sigma_b, "sigma_b"))
    if spread == 0.0:
        return math.inf if gap > 0.0 else 0.0
    return gap / spread


def order_confidence(z: float) -> float:
    r"""Posterior probability that an order separated by ``z`` is right.

    Formula:
        :math:`\rho = \Phi(z)`.

    Examples:
        >>> round(order_confidence(1.6448536269514722), 6)
        0.95
    """
    value = float(z)
    if math.isnan(value) or value < 0.0:
        raise ValueError(f"z must be >= 0; got {z!r}")
    return float(ndtr(value))


def ranking_confidence(
    mu_a: float, sigma_a: float, mu_b: float, sigma_b: float
) -> tuple[float, float]:
    r"""Ranking confidence of two posteriors, as ``scorio.sinf.ranking_confidence``.

    Formula:
        :math:`z = |\mu_a - \mu_b| / \sqrt{\sigma_a^2 + \sigma_b^2}`,
        :math:`\rho = \Phi(z)`. With both sigmas zero the answer is
        ``(0.5, inf)`` for equal means and ``(1.0, inf)`` otherwise, as in
        scorio (unlike :func:`z_score`, which gives ``z = 0`` for the tie).

    References:
        Hariri et al., ICLR 2026, Sec. 2.5 (eq. 9).

    Returns:
        ``(rho, z)``.

    Examples:
        >>> rho, z = ranking_confidence(0.6, 0.03, 0.5, 0.04)
        >>> round(rho, 6), round(z, 6)
        (0.97725, 2.0)
    """
    gap = abs(check.real(mu_a, "mu_a") - check.real(mu_b, "mu_b"))
    spread = math.hypot(_sigma(sigma_a, "sigma_a"), _sigma(sigma_b, "sigma_b"))
    if spread == 0.0:
        return (0.5 if gap == 0.0 else 1.0), math.inf
    z = gap / spread
    return float(ndtr(z)), z


def z_threshold(confidence: float = 0.95) -> float:
    r"""The paper's one-look threshold :math:`z^* = \Phi^{-1}(\text{confidence})`.

    Examples:
        >>> round(z_threshold(0.95), 3)
        1.645
    """
    return float(ndtri(check.confidence(confidence)))


def order_by_mu(mu: ArrayLike) -> NDArray[np.int64]:
    """Indices from best to worst mean; equal means keep input order."""
    means = _vector(mu, "mu")
    return np.argsort(-means, kind="stable").astype(np.int64)


def competition_ranks(scores: ArrayLike) -> NDArray[np.int64]:
    """Competition ranks, higher score first: 1, 2, 2, 4.

    Examples:
        >>> competition_ranks([0.9, 0.5, 0.7, 0.7]).tolist()
        [1, 4, 2, 2]
    """
    # scipy.stats loads in about half a second: deferred to first use, so
    # the command line starts fast (benchmarks/startup.py).
    from scipy.stats import rankdata

    values = _vector(scores, "scores")
    return np.asarray(rankdata(-values, method="min"), dtype=np.int64)


def ci_groups(
    mu: ArrayLike, sigma: ArrayLike, threshold: float = 1.6448536269514722
) -> NDArray[np.int64]:
    r"""CI-aware rank groups: the paper's Table 1 "w/ CI" row.

    Models are sorted by ``mu``; each model joins the group of the model just
    above it when their ``z`` is below ``threshold``; groups are numbered 1, 2,
    3 ... from the top. Chains share a group even when their ends would
    separate, as in the paper.

    Args:
        mu: Posterior means, one per model.
        sigma: Posterior standard deviations, one per model.
        threshold: ``z`` needed to separate neighbours (1.645: 95 %).

    Returns:
        The group of each model, in input order.

    Examples:
        >>> ci_groups([0.7, 0.5, 0.52, 0.2], [0.02, 0.02, 0.02, 0.02]).tolist()
        [1, 2, 2, 3]
    """
    means, spreads = _pair_vectors(mu, sigma)
    limit = check.real(threshold, "threshold")
    order = order_by_mu(means)
    groups = np.empty(means.size, dtype=np.int64)
    group = 1
    for position, model in enumerate(order):
        if position:
            above = order[position - 1]
            z = z_score(means[above], spreads[above], means[model], spreads[model])
            if z >= limit:
                group += 1
        groups[model] = group
    return groups


def kendall_tau(ranking_a: ArrayLike, ranking_b: ArrayLike) -> float:
    """Kendall's tau-b between two rankings (scores or ranks), via scipy.

    Returns NaN when either ranking is constant, as scipy does.

    Examples:
        >>> kendall_tau([1, 2, 3, 4], [1, 3, 2, 4])
        0.6666666666666669
    """
    first, second = _vector(ranking_a, "ranking_a"), _vector(ranking_b, "ranking_b")
    if first.shape != second.shape:
        raise ValueError(
            f"rankings must have the same length; got {first.size} and {second.size}"
        )
    from scipy.stats import kendalltau  # deferred, as in competition_ranks

    return float(kendalltau(first, second).statistic)


def convergence_at_n(
    rankings: Sequence[ArrayLike],
    reference: ArrayLike,
    ns: Sequence[int] | None = None,
) -> int | None:
    """First n after which the ranking equals the reference and never changes.

    Args:
        rankings: The ranking observed at each step (ranks per model).
        reference: The reference ranking (e.g. at the largest N).
        ns: The n of each step; defaults to 1, 2, 3, ...

    Returns:
        The first such n, or ``None`` when the last ranking differs.

    Examples:
        >>> convergence_at_n([[1, 2], [2, 1], [1, 2], [1, 2]], [1, 2])
        3
    """
    target = _vector(reference, "reference")
    steps = list(range(1, len(rankings) + 1)) if ns is None else list(ns)
    if len(steps) != len(rankings):
        raise ValueError(f"ns must have one entry per ranking; got {len(steps)}")
    first: int | None = None
    for n, ranking in zip(steps, rankings, strict=True):
        if np.array_equal(_vector(ranking, "rankings"), target):
            if first is None:
                first = int(n)
        else:
            first = None
    return first


def _sigma(value: float, name: str) -> float:
    number = check.real(value, name)
    if number < 0.0:
        raise ValueError(f"{name} must be >= 0; got {value!r}")
    return number


def _vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite; got {array.tolist()!r}")
    return array


def _pair_vectors(
    mu: ArrayLike, sigma: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    means, spreads = _vector(mu, "mu"), _vector(sigma, "sigma")
    if means.shape != spreads.shape:
        raise ValueError(
            "mu and sigma must have the same length; "
            f"got {means.size} and {spreads.size}"
        )
    if np.any(spreads < 0.0):
        raise ValueError("sigma must be >= 0")
    return means, spreads
