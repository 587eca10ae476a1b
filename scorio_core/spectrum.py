r"""Majority, AUC, threshold-spectrum and geometric blends of the Pass family.

Every metric here is built from :class:`~scorio_core.passk.Credit` (the credit
of ``j`` successes among ``k`` chosen trials) on binary outcomes:

- Maj@k: at least ``floor(k/2) + 1`` successes;
- AUC@k: the trapezoidal average of Pass@1..Pass@k (Hu et al. 2026, eq. 7);
- threshold spectrum ``S_{w,k}``: credit ``sum_{r<=j} w_r``;
- Geom@k: ``Pass@k^a * Pass^k^b`` per question (``geom_at_k``) or of the
  dataset scores (``geom_ds_at_k``); GeoSpectrum@k blends Pass@k with a
  spectrum as ``Pass@k^lam * S^(1-lam)``.

Point estimates average the exact hypergeometric credit of a question's
observed trials. The ``_ci`` versions use the Beta posterior of each
question's success rate; the geometric blends propagate the joint posterior
moments of their two parts by the first-order delta method, as scorio does.
Names, arguments, defaults, returns and errors follow ``scorio.eval`` 0.2.3.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.passk import (
    Credit,
    pass_at_k_ci,
    state_covariances,
    state_estimates,
    state_moments,
)
from scorio_core.posterior import credible_interval

SpectrumWeights = NDArray[np.float64] | list[float] | tuple[float, ...]


class _Bank:
    """Distinct success counts of a binary matrix, with their frequencies."""

    def __init__(self, R: ArrayLike) -> None:
        matrix = check.binary_matrix(R)
        self.question_count: int = matrix.shape[0]
        self.trial_count: int = matrix.shape[1]
        successes, frequencies = np.unique(matrix.sum(axis=1), return_counts=True)
        self.successes = successes.astype(np.int64)
        self.frequencies = frequencies.astype(np.float64)

    def finite_k(self, k: object) -> int:
        return check.k_in_range(k, self.trial_count)

    def estimates(self, credit: Credit) -> NDArray[np.float64]:
        trials = np.full(self.successes.size, self.trial_count, dtype=np.int64)
        return state_estimates(self.successes, trials, credit)

    def mean(self, values: NDArray[np.float64]) -> float:
        return float(self.frequencies @ values) / float(self.question_count)

    def variance(self, values: NDArray[np.float64]) -> float:
        return float(self.frequencies @ values) / float(self.question_count) ** 2

    def beta(
        self, alpha0: float, beta0: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        first = check.positive(alpha0, "alpha0")
        second = check.positive(beta0, "beta0")
        alpha = first + self.successes.astype(np.float64)
        beta = second + (self.trial_count - self.successes).astype(np.float64)
        return alpha, beta


def _latent_k(k: object) -> int:
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got k={count}")
    return count


def _summary(
    mu: float, sigma: float, confidence: float, bounds: tuple[float, float] | None
) -> tuple[float, float, float, float]:
    low, high = credible_interval(mu, sigma, check.confidence(confidence), bounds)
    return float(mu), float(sigma), low, high


def _posterior(
    bank: _Bank, credit: Credit, alpha0: float, beta0: float
) -> tuple[float, float]:
    alpha, beta = bank.beta(alpha0, beta0)
    means, variances = state_moments(credit, alpha, beta)
    return bank.mean(means), math.sqrt(bank.variance(variances))


# -- Maj@k and AUC@k -----------------------------------------------------------------


def maj_at_k(R: ArrayLike, k: int) -> float:
    r"""Maj@k: chance that a strict majority of ``k`` chosen trials is right.

    Formula:
        :math:`\frac1M \sum_a \sum_{j \ge \lfloor k/2 \rfloor + 1}
        \binom{c_a}{j}\binom{N-c_a}{k-j} / \binom{N}{k}`.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> [round(maj_at_k(R, k), 6) for k in (1, 2, 3)]
        [0.7, 0.45, 0.85]
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    return bank.mean(bank.estimates(Credit.majority(count)))


def maj_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of Maj@k under a Beta(alpha0, beta0) prior.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> mu, sigma, lo, hi = maj_at_k_ci(R, 2)
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.446429, 0.146167, 0.1599, 0.7329)
        >>> mu, sigma, lo, hi = maj_at_k_ci(R, 3)
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.684524, 0.151958, 0.3867, 0.9824)
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    mu, sigma = _posterior(bank, Credit.majority(count), alpha0, beta0)
    return _summary(mu, sigma, confidence, bounds)


def auc_at_k(R: ArrayLike, k: int) -> float:
    r"""AUC@k: normalised area under the Pass@j curve for j = 1..k.

    Formula:
        :math:`\sum_{j=1}^k c_j \mathrm{Pass@}j` with
        :math:`c_1 = c_k = \frac{1}{2(k-1)}`, :math:`c_j = \frac{1}{k-1}`
        otherwise; AUC@1 = Pass@1.

    References:
        Hu et al., "Rewarding the Rare", arXiv:2601.08763 (2026), eq. 7.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> [round(auc_at_k(R, k), 6) for k in (1, 2, 3)]
        [0.7, 0.825, 0.9]
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    return bank.mean(bank.estimates(Credit.auc_at_k(count)))


def auc_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of the latent AUC@k (k = 1: Pass@1)."""
    count = check.integer(k, "k")
    if count == 1:
        return pass_at_k_ci(R, 1, confidence, bounds, alpha0, beta0)
    bank = _Bank(R)
    count = bank.finite_k(count)
    mu, sigma = _posterior(bank, Credit.auc_at_k(count), alpha0, beta0)
    return _summary(mu, sigma, confidence, bounds)


# -- threshold spectra -----------------------------------------------------------------


def _spectrum(weights: SpectrumWeights, k: int) -> Credit:
    shape = np.shape(weights)
    if len(shape) != 1 or shape[0] != k:
        raise ValueError(f"weights must be a length-{k} 1D array; got shape {shape}")
    return Credit.spectrum(weights)


def threshold_spectrum_at_k(R: ArrayLike, k: int, weights: SpectrumWeights) -> float:
    r"""Threshold spectrum :math:`S_{w,k}`: credit ``sum_{r<=j} w_r`` for j successes.

    Weights ``w_1..w_k`` are non-negative and sum to at most one.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(threshold_spectrum_at_k(R, 2, [0.5, 0.5]), 6)
        0.7
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    return bank.mean(bank.estimates(_spectrum(weights, count)))


def threshold_spectrum_at_k_ci(
    R: ArrayLike,
    k: int,
    weights: SpectrumWeights,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior ``(mu, sigma, lo, hi)`` of the latent threshold spectrum."""
    count = _latent_k(k)
    credit = _spectrum(weights, count)
    mu, sigma = _posterior(_Bank(R), credit, alpha0, beta0)
    return _summary(mu, sigma, confidence, bounds)


# -- geometric blends ------------------------------------------------------------------


def _weighted_geometric_mean(
    x: float, y: float, x_power: float, y_power: float
) -> float:
    if x_power == 0.0 and y_power == 0.0:
        raise ValueError("at least one power must be non-zero")
    if x == 0.0 and x_power < 0.0:
        if y == 0.0 and y_power > 0.0:
            return 0.0
        raise ValueError(
            f"x_power must be non-negative when x is zero; got x_power={x_power}"
        )
    if y == 0.0 and y_power < 0.0:
        if x == 0.0 and x_power > 0.0:
            return 0.0
        raise ValueError(
            f"y_power must be non-negative when y is zero; got y_power={y_power}"
        )
    return float((x**x_power) * (y**y_power))


def delta_method(
    means: tuple[float, float],
    variances: tuple[float, float],
    covariance: float,
    powers: tuple[float, float],
) -> tuple[float, float]:
    """First-order mean and variance of ``x^a y^b`` from moments of (x, y)."""
    (x, y), (a, b) = means, powers
    mean = _weighted_geometric_mean(x, y, a, b)
    if mean == 0.0:
        return 0.0, 0.0
    gradient_x = a * x ** (a - 1.0) * y**b if a != 0.0 else 0.0
    gradient_y = b * x**a * y ** (b - 1.0) if b != 0.0 else 0.0
    variance = (
        gradient_x**2 * variances[0]
        + gradient_y**2 * variances[1]
        + 2.0 * gradient_x * gradient_y * covariance
    )
    return mean, max(0.0, variance)


def geom_at_k(
    R: ArrayLike, k: int, pass_power: float = 0.5, unanimous_power: float = 0.5
) -> float:
    r"""Questionwise Geom@k: mean over questions of ``Pass@k^a * Pass^k^b``.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(geom_at_k(R, 2), 6)
        0.647106
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    passes = bank.estimates(Credit.pass_at_k(count))
    unanimous = bank.estimates(Credit.pass_hat_k(count))
    values = np.array(
        [
            _weighted_geometric_mean(float(x), float(y), pass_power, unanimous_power)
            for x, y in zip(passes, unanimous, strict=True)
        ]
    )
    return bank.mean(values)


def geom_ds_at_k(
    R: ArrayLike, k: int, pass_power: float = 0.5, unanimous_power: float = 0.5
) -> float:
    r"""Dataset-level Geom@k: ``Pass@k^a * Pass^k^b`` of the dataset scores.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(geom_ds_at_k(R, 2), 6)
        0.653835
    """
    bank = _Bank(R)
    count = bank.finite_k(k)
    passes = bank.mean(bank.estimates(Credit.pass_at_k(count)))
    unanimous = bank.mean(bank.estimates(Credit.pass_hat_k(count)))
    return _weighted_geometric_mean(passes, unanimous, pass_power, unanimous_power)


def _joint_moments(
    bank: _Bank, first: Credit, second: Credit, alpha0: float, beta0: float
) -> tuple[NDArray[np.float64], ...]:
    """Per-state means, variances and covariance of two credits."""
    alpha, beta = bank.beta(alpha0, beta0)
    first_means, first_variances = state_moments(first, alpha, beta)
    second_means, second_variances = state_moments(second, alpha, beta)
    covariances = state_covariances(first, second, alpha, beta)
    return first_means, first_variances, second_means, second_variances, covariances


def _dataset_blend(
    bank: _Bank,
    first: Credit,
    second: Credit,
    powers: tuple[float, float],
    alpha0: float,
    beta0: float,
) -> tuple[float, float]:
    moments = _joint_moments(bank, first, second, alpha0, beta0)
    mean, variance = delta_method(
        (bank.mean(moments[0]), bank.mean(moments[2])),
        (bank.variance(moments[1]), bank.variance(moments[3])),
        bank.variance(moments[4]),
        powers,
    )
    return mean, math.sqrt(variance)


def geom_at_k_ci(
    R: ArrayLike,
    k: int,
    pass_power: float = 0.5,
    unanimous_power: float = 0.5,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior summary of questionwise Geom@k (delta method per question).

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> mu, sigma, lo, hi = geom_at_k_ci(R, 2)
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.610666, 0.133107, 0.3498, 0.8716)
    """
    count = _latent_k(k)
    bank = _Bank(R)
    moments = _joint_moments(
        bank, Credit.pass_at_k(count), Credit.pass_hat_k(count), alpha0, beta0
    )
    means = np.empty(bank.successes.size)
    variances = np.empty(bank.successes.size)
    for state in range(bank.successes.size):
        means[state], variances[state] = delta_method(
            (float(moments[0][state]), float(moments[2][state])),
            (float(moments[1][state]), float(moments[3][state])),
            float(moments[4][state]),
            (pass_power, unanimous_power),
        )
    mu, sigma = bank.mean(means), math.sqrt(bank.variance(variances))
    return _summary(mu, sigma, confidence, bounds)


def geom_ds_at_k_ci(
    R: ArrayLike,
    k: int,
    pass_power: float = 0.5,
    unanimous_power: float = 0.5,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior summary of dataset-level Geom@k (delta method on the dataset).

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> mu, sigma, lo, hi = geom_ds_at_k_ci(R, 2)
        >>> round(mu, 6), round(sigma, 6), round(lo, 4), round(hi, 4)
        (0.612112, 0.132755, 0.3519, 0.8723)
    """
    count = _latent_k(k)
    mu, sigma = _dataset_blend(
        _Bank(R),
        Credit.pass_at_k(count),
        Credit.pass_hat_k(count),
        (pass_power, unanimous_power),
        alpha0,
        beta0,
    )
    return _summary(mu, sigma, confidence, bounds)


def _resolve_lambda(lam: float, lambda_: float | None) -> float:
    if lambda_ is not None:
        if lam != 0.5:
            raise TypeError("Specify at most one of 'lam' and 'lambda_'.")
        lam = lambda_
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1]; got {lam}")
    return float(lam)


def upper_half_weights(k: int) -> NDArray[np.float64]:
    """GeoSpectrum*'s spectrum: weight 2/k on thresholds ceil(k/2)+1..k."""
    weights = np.zeros(k)
    weights[(k + 1) // 2 :] = 2.0 / k
    return weights


def geo_spectrum_at_k(
    R: ArrayLike,
    k: int,
    lam: float = 0.5,
    weights: SpectrumWeights | None = None,
    lambda_: float | None = None,
) -> float:
    r"""GeoSpectrum@k: :math:`\mathrm{Pass@}k^{\lambda} S_{w,k}^{1-\lambda}`.

    ``weights`` default to the upper half (mG-Pass) spectrum; ``lambda_`` is
    an alias of ``lam``.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(geo_spectrum_at_k(R, 3), 6)
        0.408248
        >>> round(geo_spectrum_at_k(R, 3, lam=1.0), 6)
        1.0
    """
    level = _resolve_lambda(lam, lambda_)
    bank = _Bank(R)
    count = bank.finite_k(k)
    passes = bank.mean(bank.estimates(Credit.pass_at_k(count)))
    if level == 1.0:
        return passes
    chosen = upper_half_weights(count) if weights is None else weights
    spectrum = bank.mean(bank.estimates(_spectrum(chosen, count)))
    if level == 0.0:
        return spectrum
    return _weighted_geometric_mean(passes, spectrum, level, 1.0 - level)


def geo_spectrum_at_k_ci(
    R: ArrayLike,
    k: int,
    lam: float = 0.5,
    weights: SpectrumWeights | None = None,
    lambda_: float | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior summary of GeoSpectrum@k (delta method on the dataset scores)."""
    level = _resolve_lambda(lam, lambda_)
    count = _latent_k(k)
    bank = _Bank(R)
    pass_credit = Credit.pass_at_k(count)
    if level == 1.0:
        mu, sigma = _posterior(bank, pass_credit, alpha0, beta0)
        return _summary(mu, sigma, confidence, bounds)
    chosen = upper_half_weights(count) if weights is None else weights
    spectrum = _spectrum(chosen, count)
    if level == 0.0:
        mu, sigma = _posterior(bank, spectrum, alpha0, beta0)
    else:
        mu, sigma = _dataset_blend(
            bank, pass_credit, spectrum, (level, 1.0 - level), alpha0, beta0
        )
    return _summary(mu, sigma, confidence, bounds)


def geo_spectrum_star_at_k(R: ArrayLike, k: int) -> float:
    """GeoSpectrum*@k: GeoSpectrum@k with lam = 1/2 and the upper-half spectrum.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(geo_spectrum_star_at_k(R, 3), 6)
        0.408248
    """
    return geo_spectrum_at_k(R, k)


def geo_spectrum_star_at_k_ci(
    R: ArrayLike,
    k: int,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> tuple[float, float, float, float]:
    """Posterior summary of GeoSpectrum*@k."""
    return geo_spectrum_at_k_ci(
        R, k, confidence=confidence, bounds=bounds, alpha0=alpha0, beta0=beta0
    )
