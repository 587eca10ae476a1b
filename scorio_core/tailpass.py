r"""TailPass@k's finite-bank profile: the chance that k trials reach each score.

For a rubric with scores ``w`` in [0, 1], a bank of ``k`` trials drawn without
replacement from a question's ``N`` observed trials has the average score
``sum_c n_c w_c / k`` (``n_c`` trials in category ``c``). The empirical
profile at threshold ``t`` is the chance, averaged over questions, that this
bank score is at least ``t``; thresholds default to ``1/k, 2/k, ..., 1``.
With binary outcomes the profile's ends are Pass@k (``t = 1/k``) and Pass^k
(``t = 1``).

The posterior profile, :func:`~scorio_core.tailprofile.tailpass`, is in
:mod:`scorio_core.tailprofile`.

References:
    Hariri, Hinczewski, Ayday, Chaudhary (2026), "Success Has a Shape:
    TailPass@k for Repeated Sampling Evaluation", Sections 2-3.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.counts import category_counts

# Bank-count states enumerated at most (scorio's limit).
MAX_COUNT_STATES: Final = 20_000


def tailpass_empirical(
    R: ArrayLike,
    k: int,
    w: ArrayLike | None = None,
    *,
    thresholds: ArrayLike | None = None,
) -> NDArray[np.float64]:
    r"""Finite-bank TailPass profile: P(bank score of k trials >= t) per threshold.

    Formula:
        .. math::

            T_t = \frac1M \sum_a P\Big(\frac1k \sum_c X_{ac} w_c \ge t\Big),
            \quad X_a \sim \mathrm{MultivariateHypergeometric}(n_a, k)

    Args:
        R: ``M x N`` categories; 1-D is one question.
        k: Bank size, ``1 <= k <= N``.
        w: Category scores in [0, 1]; default ``[0, 1]`` for binary R.
        thresholds: Strictly increasing scores in [0, 1]; default
            ``1/k, ..., 1``.

    Returns:
        A read-only array, one probability per threshold.

    Raises:
        ValueError: for bad R, w, k or thresholds, as scorio.

    References:
        Hariri et al. (2026), TailPass@k, Sec. 2.

    Examples:
        >>> R = [[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]]
        >>> [round(x, 6) for x in tailpass_empirical(R, 2).tolist()]
        [0.95, 0.45]
    """
    results = check.outcome_matrix(R, "R")
    weights = check.weight_vector(w, results)
    check.category_range(results, weights.size, "R")
    count = check.k_in_range(k, results.shape[1])
    grid = thresholds_for(count, thresholds)
    if np.any((weights < 0) | (weights > 1)):
        raise ValueError("TailPass rubric scores w must lie in [0, 1]")
    scores, inverse = np.unique(weights, return_inverse=True)
    observed = category_counts(results, weights.size)
    grouped = np.zeros((results.shape[0], scores.size), dtype=np.int64)
    for category, level in enumerate(inverse.tolist()):
        grouped[:, level] += observed[:, category]
    banks = count_grid(count, scores.size)
    # Round the bank score once (long double), so thresholds j/k compare exactly.
    bank_scores = np.asarray(
        banks.astype(np.longdouble) @ scores.astype(np.longdouble) / count,
        dtype=np.float64,
    )
    order = np.argsort(bank_scores, kind="stable")
    cutoffs = np.searchsorted(bank_scores[order], grid)
    states, frequencies = np.unique(grouped, axis=0, return_counts=True)
    trials = results.shape[1]
    output = np.zeros(grid.size)
    # scipy.stats loads in about half a second: deferred to first use.
    from scipy.stats import hypergeom, multivariate_hypergeom

    for state, frequency in zip(states, frequencies, strict=True):
        if scores.size == 2:
            # Bank scores rise with the number of upper-level draws.
            output += frequency * hypergeom.sf(cutoffs - 1, trials, state[1], count)
        else:
            pmf = multivariate_hypergeom.pmf(banks, state, count)
            pmf = pmf / pmf.sum()
            tails = np.r_[np.cumsum(pmf[order][::-1])[::-1], 0.0]
            output += frequency * tails[cutoffs]
    profile = np.asarray(output / results.shape[0], dtype=np.float64)
    profile.setflags(write=False)
    return profile


def thresholds_for(k: int, thresholds: ArrayLike | None) -> NDArray[np.float64]:
    """The threshold grid: given (checked), or ``1/k, ..., 1``."""
    if thresholds is None:
        if k > MAX_COUNT_STATES:
            raise ValueError(
                "Default threshold grid is too large; supply explicit thresholds"
            )
        return np.asarray(np.arange(1, k + 1, dtype=np.float64) / k, np.float64)
    values = check.real_vector(thresholds, "thresholds")
    if (
        values.ndim != 1
        or values.size == 0
        or np.any((values < 0) | (values > 1))
        or np.any(np.diff(values) <= 0)
    ):
        raise ValueError(
            "thresholds must be a non-empty, strictly increasing vector in [0, 1]"
        )
    return values


def count_grid(k: int, categories: int) -> NDArray[np.int64]:
    """Every way to split k draws over the categories (weak compositions)."""
    size = math.comb(k + categories - 1, categories - 1)
    if size > MAX_COUNT_STATES:
        raise ValueError(
            f"Exact profile needs {size} count states; the limit is "
            f"{MAX_COUNT_STATES}. Use a smaller k or rubric."
        )
    if categories == 1:
        return np.array([[k]], dtype=np.int64)
    if categories == 2:
        successes = np.arange(k + 1)
        return np.column_stack((k - successes, successes)).astype(np.int64)
    return np.array(
        [
            np.diff((-1, *bars, k + categories - 1)) - 1
            for bars in combinations(range(k + categories - 1), categories - 1)
        ],
        dtype=np.int64,
    )
