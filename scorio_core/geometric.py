r"""Geometric blends of the Pass family: Geom@k, GeoSpectrum@k and GeoSpectrum*@k.

Geom@k is ``Pass@k^a * Pass^k^b`` per question (``geom_at_k``) or of the
dataset scores (``geom_ds_at_k``); GeoSpectrum@k blends Pass@k with a
threshold spectrum as ``Pass@k^lam * S^(1-lam)``, and GeoSpectrum*@k with
the spectrum of the upper half of the thresholds. Point estimates blend the
exact hypergeometric credits of a question's observed trials; the ``_ci``
versions propagate the joint Beta-posterior moments of the two parts by the
first-order delta method, as scorio does. Names, arguments, defaults,
returns and errors follow ``scorio.eval`` 0.2.3.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core.bank import (
    SpectrumWeights,
    SuccessBank,
    bank_posterior,
    latent_k,
    spectrum_credit,
    summary,
)
from scorio_core.credit import Credit, state_covariances, state_moments


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
    bank = SuccessBank(R)
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
    bank = SuccessBank(R)
    count = bank.finite_k(k)
    passes = bank.mean(bank.estimates(Credit.pass_at_k(count)))
    unanimous = bank.mean(bank.estimates(Credit.pass_hat_k(count)))
    return _weighted_geometric_mean(passes, unanimous, pass_power, unanimous_power)


def _joint_moments(
    bank: SuccessBank, first: Credit, second: Credit, alpha0: float, beta0: float
) -> tuple[NDArray[np.float64], ...]:
    """Per-state means, variances and covariance of two credits."""
    alpha, beta = bank.beta(alpha0, beta0)
    first_means, first_variances = state_moments(first, alpha, beta)
    second_means, second_variances = state_moments(second, alpha, beta)
    covariances = state_covariances(first, second, alpha, beta)
    return first_means, first_variances, second_means, second_variances, covariances


def _dataset_blend(
    bank: SuccessBank,
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
    count = latent_k(k)
    bank = SuccessBank(R)
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
    return summary(mu, sigma, confidence, bounds)


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
    count = latent_k(k)
    mu, sigma = _dataset_blend(
        SuccessBank(R),
        Credit.pass_at_k(count),
        Credit.pass_hat_k(count),
        (pass_power, unanimous_power),
        alpha0,
        beta0,
    )
    return summary(mu, sigma, confidence, bounds)


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
    bank = SuccessBank(R)
    count = bank.finite_k(k)
    passes = bank.mean(bank.estimates(Credit.pass_at_k(count)))
    if level == 1.0:
        return passes
    chosen = upper_half_weights(count) if weights is None else weights
    spectrum = bank.mean(bank.estimates(spectrum_credit(chosen, count)))
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
    count = latent_k(k)
    bank = SuccessBank(R)
    pass_credit = Credit.pass_at_k(count)
    if level == 1.0:
        mu, sigma = bank_posterior(bank, pass_credit, alpha0, beta0)
        return summary(mu, sigma, confidence, bounds)
    chosen = upper_half_weights(count) if weights is None else weights
    spectrum = spectrum_credit(chosen, count)
    if level == 0.0:
        mu, sigma = bank_posterior(bank, spectrum, alpha0, beta0)
    else:
        mu, sigma = _dataset_blend(
            bank, pass_credit, spectrum, (level, 1.0 - level), alpha0, beta0
        )
    return summary(mu, sigma, confidence, bounds)


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
