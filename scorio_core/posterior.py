r"""Closed-form Bayes@N posterior moments from count tables.

This module holds the Dirichlet kernel every other part of the package uses.

Symbols (the paper's, used throughout scorio_core): ``M`` questions, ``N``
trials per question, categories ``0..C`` with weights ``w`` (length ``C+1``).
For question ``a``, ``nu[a, k]`` is the posterior Dirichlet count of category
``k`` (observed count + prior outcomes + 1) and ``T[a] = sum_k nu[a, k]``.
``mu`` and ``sigma`` are the posterior mean and standard deviation of the
benchmark score, the average over questions of each question's expected weight.

Weights are rescaled before squaring: with ``offset = w[0]`` and
``scale = max |w - w[0]|``, the kernel works on ``u = (w - offset) / scale`` in
``[-1, 1]``, so huge or tiny weights neither overflow nor lose precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from scorio_core import _validation as check

# Per-question variances in unit scale lie in [0, 1]; anything more negative
# than this is a real error, not roundoff.
VARIANCE_ROUNDOFF: Final = 64.0 * float(np.finfo(np.float64).eps)


@dataclass(frozen=True, slots=True)
class ScaledWeights:
    """Weights split into ``offset + scale * unit`` with ``unit`` in [-1, 1]."""

    offset: float
    scale: float
    unit: tuple[float, ...]
    unit_squared: tuple[float, ...]

    @classmethod
    def from_weights(cls, weights: NDArray[np.float64]) -> ScaledWeights:
        offset = float(weights[0])
        # Gaps between weights near +-1e308 overflow: detected just below.
        with np.errstate(over="ignore", invalid="ignore"):
            centered = weights - offset
        if not np.all(np.isfinite(centered)):
            # Gaps that overflow float64: fall back to scaling about zero.
            offset, centered = 0.0, weights
        scale = float(np.max(np.abs(centered)))
        unit = centered / scale if scale > 0.0 else np.zeros_like(weights)
        return cls(
            offset=offset,
            scale=scale,
            unit=tuple(float(x) for x in unit),
            unit_squared=tuple(float(x) * float(x) for x in unit),
        )

    @property
    def category_count(self) -> int:
        return len(self.unit)

    @property
    def low(self) -> float:
        """Smallest score a question can have (min w)."""
        return self.offset + self.scale * min(self.unit)

    @property
    def high(self) -> float:
        """Largest score a question can have (max w)."""
        return self.offset + self.scale * max(self.unit)


@dataclass(frozen=True, slots=True)
class Posterior:
    """Posterior mean and standard deviation of a benchmark score."""

    mu: float
    sigma: float


def z_value(confidence: float) -> float:
    """Two-sided standard-normal quantile ``z_{(1+conf)/2}``.

    Examples:
        >>> round(z_value(0.95), 6)
        1.959964
    """
    level = check.confidence(confidence)
    return float(ndtri(0.5 + 0.5 * level))


def credible_interval(
    mu: float,
    sigma: float,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float]:
    r"""Central normal-approximation credible interval, optionally clipped.

    Formula:
        :math:`\mu \pm z_{(1+\gamma)/2}\,\sigma`, each end clipped into
        ``bounds`` when given.

    Args:
        mu: Posterior mean.
        sigma: Posterior standard deviation (>= 0).
        confidence: Credibility level in (0, 1).
        bounds: Optional ``(lo, hi)`` clipping range, e.g. ``(min w, max w)``.

    Returns:
        ``(lo, hi)``.

    Raises:
        ValueError: for a negative sigma, a confidence outside (0, 1) or
            inverted bounds.

    Examples:
        >>> tuple(round(x, 6) for x in credible_interval(0.5, 0.1, 0.95))
        (0.304004, 0.695996)
        >>> credible_interval(0.95, 0.1, 0.95, bounds=(0.0, 1.0))[1]
        1.0
    """
    spread = check.real(sigma, "sigma")
    if spread < 0.0:
        raise ValueError(f"sigma must be >= 0; got {sigma!r}")
    center = check.real(mu, "mu")
    clip = check.bounds(bounds)
    return clipped_interval(center, z_value(confidence) * spread, clip)


def clipped_interval(
    center: float, half_width: float, bounds: tuple[float, float] | None
) -> tuple[float, float]:
    """``center +- half_width`` clipped into ``bounds``: the trusting kernel.

    :func:`credible_interval` checks its arguments and calls this; hot paths
    that already hold valid numbers call it directly.
    """
    low, high = center - half_width, center + half_width
    if bounds is not None:
        # Clip both ends into the range; clipping one side only could invert
        # the interval when mu itself lies outside it.
        low = min(max(low, bounds[0]), bounds[1])
        high = min(max(high, bounds[0]), bounds[1])
    return float(low), float(high)


def posterior_from_counts(nu: ArrayLike, w: ArrayLike) -> Posterior:
    r"""Bayes@N posterior from per-question Dirichlet counts, ragged or not.

    Each row of ``nu`` may have its own total ``T[a]``, so questions with
    different numbers of trials (or none: a row of ones) are handled exactly.

    Formula:
        .. math::

            p_{ak} = \nu_{ak} / T_a,\quad
            E_a = \sum_k w_k p_{ak},\quad
            \mathrm{Var}_a = \frac{\sum_k w_k^2 p_{ak} - E_a^2}{T_a + 1}

        .. math::

            \mu = \frac{1}{M}\sum_a E_a,\quad
            \sigma = \frac{1}{M}\sqrt{\sum_a \mathrm{Var}_a}

    References:
        Hariri et al., "Don't Pass@k: A Bayesian Framework for Large Language
        Model Evaluation", ICLR 2026, Sec. 2 and Algorithm 1.

    Args:
        nu: ``M x (C+1)`` posterior counts (observed + prior outcomes + 1);
            every entry must be >= 1.
        w: Weights, length ``C+1``.

    Returns:
        The posterior mean and standard deviation.

    Raises:
        ValueError: for a wrong shape, counts below 1, or bad weights.

    Examples:
        >>> p = posterior_from_counts([[2, 3, 3], [2, 3, 3]], [0.0, 0.5, 1.0])
        >>> round(p.mu, 6), round(p.sigma, 6)
        (0.5625, 0.091998)
    """
    weights = check.weights(w)
    counts = np.asarray(nu, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != weights.size or counts.shape[0] == 0:
        raise ValueError(
            f"nu must have shape (M >= 1, len(w) = {weights.size}); got {counts.shape}"
        )
    if not np.all(np.isfinite(counts)) or np.any(counts < 1.0):
        raise ValueError("nu must hold finite counts >= 1 (the uniform prior adds 1)")
    scaled = ScaledWeights.from_weights(weights)
    means, variances = row_terms(counts, scaled)
    return posterior_from_sums(
        math.fsum(means.tolist()),
        math.fsum(variances.tolist()),
        counts.shape[0],
        scaled,
    )


def row_terms(
    nu: NDArray[np.float64], scaled: ScaledWeights
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-question mean and ``Var/(T+1)``, both in unit weight scale.

    The kernel behind every Bayes@N number; it trusts its inputs.
    """
    totals = nu.sum(axis=1)
    probabilities = nu / totals[:, None]
    means = probabilities @ np.asarray(scaled.unit)
    second = probabilities @ np.asarray(scaled.unit_squared)
    variances = (second - means * means) / (totals + 1.0)
    if variances.size and float(variances.min()) < -VARIANCE_ROUNDOFF:
        raise FloatingPointError("Bayes@N per-question variance is materially negative")
    return means, np.maximum(variances, 0.0)


def row_term(nu: list[int], scaled: ScaledWeights) -> tuple[float, float]:
    """Scalar twin of :func:`row_terms` for one question, in pure Python.

    Used on the streaming hot path, where NumPy's per-call overhead on a
    handful of categories costs more than the arithmetic.
    """
    if len(nu) == 2:
        # Binary: in unit scale u = (0, +-1), so E = u1 p and Var = p(1-p)/(T+1).
        total = nu[0] + nu[1]
        share = nu[1] / total
        return scaled.unit[1] * share, share * (1.0 - share) / (total + 1)
    total = 0
    first = 0.0
    second = 0.0
    # Lengths match by construction; zip(strict=True) would cost a third here.
    for count, u, u2 in zip(nu, scaled.unit, scaled.unit_squared, strict=False):
        total += count
        first += count * u
        second += count * u2
    mean = first / total
    variance = (second / total - mean * mean) / (total + 1)
    if variance < 0.0:
        if variance < -VARIANCE_ROUNDOFF:
            raise FloatingPointError(
                "Bayes@N per-question variance is materially negative"
            )
        variance = 0.0
    return mean, variance


def posterior_from_sums(
    mean_sum: float, variance_sum: float, question_count: int, scaled: ScaledWeights
) -> Posterior:
    """Turn unit-scale sums over M questions into ``(mu, sigma)``."""
    mu = scaled.offset + scaled.scale * (mean_sum / question_count)
    sigma = scaled.scale * math.sqrt(max(variance_sum, 0.0)) / question_count
    return Posterior(mu=mu, sigma=sigma)
