r"""Majority, AUC and threshold-spectrum metrics of the Pass family.

Every metric here is built from :class:`~scorio_core.credit.Credit` (the
credit of ``j`` successes among ``k`` chosen trials) on binary outcomes:

- Maj@k: at least ``floor(k/2) + 1`` successes;
- AUC@k: the trapezoidal average of Pass@1..Pass@k (Hu et al. 2026, eq. 7);
- threshold spectrum ``S_{w,k}``: credit ``sum_{r<=j} w_r``.

Point estimates average the exact hypergeometric credit of a question's
observed trials. The ``_ci`` versions use the Beta posterior of each
question's success rate. The geometric blends of these are in
:mod:`scorio_core.geometric`. Names, arguments, defaults, returns and
errors follow ``scorio.eval`` 0.2.3.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from scorio_core import _validation as check
from scorio_core.bank import (
    SpectrumWeights,
    SuccessBank,
    bank_posterior,
    latent_k,
    spectrum_credit,
    summary,
)
from scorio_core.credit import Credit
from scorio_core.passk import pass_at_k_ci

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
    bank = SuccessBank(R)
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
    bank = SuccessBank(R)
    count = bank.finite_k(k)
    mu, sigma = bank_posterior(bank, Credit.majority(count), alpha0, beta0)
    return summary(mu, sigma, confidence, bounds)


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
    bank = SuccessBank(R)
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
    bank = SuccessBank(R)
    count = bank.finite_k(count)
    mu, sigma = bank_posterior(bank, Credit.auc_at_k(count), alpha0, beta0)
    return summary(mu, sigma, confidence, bounds)


# -- threshold spectra -----------------------------------------------------------------


def threshold_spectrum_at_k(R: ArrayLike, k: int, weights: SpectrumWeights) -> float:
    r"""Threshold spectrum :math:`S_{w,k}`: credit ``sum_{r<=j} w_r`` for j successes.

    Weights ``w_1..w_k`` are non-negative and sum to at most one.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> round(threshold_spectrum_at_k(R, 2, [0.5, 0.5]), 6)
        0.7
    """
    bank = SuccessBank(R)
    count = bank.finite_k(k)
    return bank.mean(bank.estimates(spectrum_credit(weights, count)))


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
    count = latent_k(k)
    credit = spectrum_credit(weights, count)
    mu, sigma = bank_posterior(SuccessBank(R), credit, alpha0, beta0)
    return summary(mu, sigma, confidence, bounds)


# -- geometric blends ------------------------------------------------------------------
