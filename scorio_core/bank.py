"""A binary results matrix as its distinct success counts, and what metrics read of it.

The Pass-family metrics of :mod:`scorio_core.spectrum` and
:mod:`scorio_core.geometric` depend on a question only through its number
of successes: a :class:`SuccessBank` keeps the distinct counts with their
frequencies, so a credit's hypergeometric estimate or Beta-posterior
moments are computed once per count, not per question. The small helpers
the metric functions share (the latent ``k`` check, the posterior summary,
a threshold spectrum's credit) live here too.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.credit import Credit, state_estimates, state_moments
from scorio_core.posterior import credible_interval

SpectrumWeights = NDArray[np.float64] | list[float] | tuple[float, ...]


class SuccessBank:
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


def latent_k(k: object) -> int:
    count = check.integer(k, "k")
    if count < 1:
        raise ValueError(f"k must be >= 1; got k={count}")
    return count


def summary(
    mu: float, sigma: float, confidence: float, bounds: tuple[float, float] | None
) -> tuple[float, float, float, float]:
    low, high = credible_interval(mu, sigma, check.confidence(confidence), bounds)
    return float(mu), float(sigma), low, high


def bank_posterior(
    bank: SuccessBank, credit: Credit, alpha0: float, beta0: float
) -> tuple[float, float]:
    alpha, beta = bank.beta(alpha0, beta0)
    means, variances = state_moments(credit, alpha, beta)
    return bank.mean(means), math.sqrt(bank.variance(variances))


def spectrum_credit(weights: SpectrumWeights, k: int) -> Credit:
    shape = np.shape(weights)
    if len(shape) != 1 or shape[0] != k:
        raise ValueError(f"weights must be a length-{k} 1D array; got shape {shape}")
    return Credit.spectrum(weights)
