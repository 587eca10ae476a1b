"""Fixed designs beside the adaptive rule: the paper's, and the fair one.

On a replicate's world, every model gets ``N`` trials per question and the
ranking is read once:

- ``paper``: the paper's adjacent grouping at ``z >= Phi^-1(confidence)``,
  with no multiplicity control (shown at N = 80);
- ``holm``: the fixed design with the default's guarantee: one look, the
  boundaries of the target (every adjacent boundary for a ranking) tested
  by Holm's step-down at ``(1 - confidence) / 2`` per direction; a
  boundary's statistic is the smallest ``z`` across it (block, as the
  engine), and rejected boundaries cut the order into groups.

Trials are drawn once per replicate up to the largest ``N`` and read at
every ``N`` of a grid (nested designs), so the pairs-vs-N curve is smooth
and the N that matches the adaptive rule's pairs can be interpolated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from monitor.engine.simulation import draw_categories
from scorio_core import ci_groups, z_threshold

GRID = tuple(range(5, 305, 5))


def posterior(
    counts: NDArray[np.int64], trials: int, weights: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bayes@N ``(mu, sigma)`` per model from ``models x questions x C`` counts
    of ``trials`` trials each (uniform Dirichlet prior, as ``scorio_core.bayes``)."""
    categories = weights.size
    total = trials + categories
    share = (counts + 1.0) / total
    mean = share @ weights
    second = share @ (weights**2)
    questions = counts.shape[1]
    mu = mean.mean(axis=1)
    sigma = np.sqrt((second - mean**2).sum(axis=1) / (questions**2 * (total + 1)))
    return mu, sigma


def holm_groups(
    mu: NDArray[np.float64],
    sigma: NDArray[np.float64],
    confidence: float,
    targets: Sequence[int] | None,
) -> NDArray[np.int64]:
    """Groups (1 = best, in input order) from Holm's step-down over boundaries."""
    order = np.lexsort((np.arange(mu.size), -mu))
    m, s = mu[order], sigma[order]
    spread = np.hypot(s[:, None], s[None, :])
    z = np.where(spread > 0, (m[:, None] - m[None, :]) / np.maximum(spread, 1e-300), 0)
    size = mu.size
    boundaries = list(range(size - 1)) if targets is None else list(targets)
    stats = np.array([z[: k + 1, k + 1 :].min() for k in boundaries])
    pvalues = norm.sf(stats)
    alpha = (1.0 - confidence) / 2.0
    cuts = set()
    for rank, index in enumerate(np.argsort(pvalues, kind="stable")):
        if pvalues[index] > alpha / (len(boundaries) - rank):
            break
        cuts.add(boundaries[index])
    groups = np.empty(size, dtype=np.int64)
    group = 1
    for position in range(size):
        if position and position - 1 in cuts:
            group += 1
        groups[order[position]] = group
    return groups


def anchors(
    scores: NDArray[np.float64],
    categories: int,
    seed: int,
    confidence: float,
    targets: Sequence[int] | None,
    fixed: int = 80,
) -> tuple[NDArray[np.int64], dict[int, NDArray[np.int64]]]:
    """The paper's groups at ``fixed`` and Holm's groups at every N of the grid."""
    rng = np.random.default_rng((seed, 23))
    largest = max(GRID)
    outcomes = draw_categories(
        scores[:, :, None], categories, (*scores.shape, largest), rng
    )
    weights = np.arange(categories) / (categories - 1)
    one_hot = outcomes[..., None] == np.arange(categories)
    cumulative = np.cumsum(one_hot, axis=2, dtype=np.int64)
    paper = np.empty(0, dtype=np.int64)
    holm: dict[int, NDArray[np.int64]] = {}
    for trials in sorted({*GRID, fixed}):
        mu, sigma = posterior(cumulative[:, :, trials - 1, :], trials, weights)
        if trials == fixed:
            paper = ci_groups(mu, sigma, z_threshold(confidence))
        if trials in GRID:
            holm[trials] = holm_groups(mu, sigma, confidence, targets)
    return paper, holm


def matching_n(curve: dict[int, float], pairs: float) -> float:
    """The smallest N (interpolated on the grid) where the mean pairs of the
    fixed design reach ``pairs``; inf when the grid never does."""
    grid = sorted(curve)
    previous_n, previous = 0, 0.0
    for n in grid:
        if curve[n] >= pairs:
            if curve[n] == previous:
                return float(n)
            return previous_n + (n - previous_n) * (pairs - previous) / (
                curve[n] - previous
            )
        previous_n, previous = n, curve[n]
    return float("inf")
