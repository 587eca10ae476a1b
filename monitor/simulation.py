"""Simulated benchmarks: the paper's biased-coin models with question difficulty.

Each model answers question ``a`` right with probability ``p_a``; trials are
independent. Per-question probabilities are drawn from
``Beta(kappa mu, kappa (1 - mu))`` and then moved affinely toward 0 or 1 so
that they average to ``mu`` exactly, keeping tied models exactly tied.
``kappa = 5`` reproduces the paper's LLM9/LLM10 figures (study notes).
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

# The paper's 11 models (Table 1); models 4 and 5 are exactly tied.
PAPER_MEANS: Final = (
    0.2332,
    0.2545,
    0.3604,
    0.3642,
    0.3642,
    0.4466,
    0.5418,
    0.5276,
    0.608,
    0.6213,
    0.7327,
)
# A 20-model AIME-like set: two exact ties, three gaps of 0.01, two of 0.02.
AIME20_MEANS: Final = (
    0.10,
    0.15,
    0.21,
    0.22,
    0.30,
    0.34,
    0.35,
    0.35,
    0.42,
    0.47,
    0.50,
    0.51,
    0.55,
    0.60,
    0.62,
    0.62,
    0.68,
    0.73,
    0.75,
    0.80,
)


def draw_world(
    means: tuple[float, ...] | list[float],
    question_count: int,
    kappa: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Per-model, per-question success probabilities averaging to ``means``.

    Returns:
        ``models x questions`` probabilities in [0, 1].
    """
    targets = np.asarray(means, dtype=float)
    raw = rng.beta(
        kappa * targets[:, None],
        kappa * (1.0 - targets[:, None]),
        size=(targets.size, question_count),
    )
    current = raw.mean(axis=1, keepdims=True)
    down = raw * (targets[:, None] / current)
    up = 1.0 - (1.0 - raw) * ((1.0 - targets[:, None]) / (1.0 - current))
    return np.asarray(np.where(current > targets[:, None], down, up), dtype=np.float64)


def draw_results(
    probabilities: NDArray[np.float64], trials: int, rng: np.random.Generator
) -> NDArray[np.int8]:
    """A ``models x questions x trials`` binary results tensor."""
    draws = rng.random((*probabilities.shape, trials))
    return (draws < probabilities[:, :, None]).astype(np.int8)
