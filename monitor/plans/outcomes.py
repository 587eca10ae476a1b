"""What a plan assumes about outcomes: each model's per-trial variance.

A plan's models are biased coins with question difficulty, as in
:mod:`monitor.engine.simulation`: model ``m`` scores ``s`` on a question,
``s`` drawn per question from a Beta around the model's mean, and each trial
lands in one of the run's ``C + 1`` categories as a Binomial(C, s) draw
(weights assumed evenly spread between the lowest and the highest; with
other weights the plan is an approximation). ``spread`` is the standard
deviation of ``s`` across questions for a model at 0.5, in units of the
score range: the Beta's concentration is ``kappa = 0.25 / spread^2 - 1``,
so the default 0.2 is close to the paper's ``kappa = 5`` and 0 makes every
question alike.

What the rule sees of a model is its mean and, per look, its posterior
variance: per question the posterior predictive variance of one more
outcome (the uniform Dirichlet prior included) over ``T + 1``. Both are
taken here as expectations over the questions' difficulty (fixed quantiles
of the Beta, so the plan is deterministic) and over the outcomes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy.special import betaincinv
from scipy.stats import binom

# The difficulty spread a plan assumes unless told: close to the paper's
# Beta concentration 5 (study notes), a typical benchmark's.
DEFAULT_SPREAD: Final = 0.2
# Quantiles of the difficulty distribution the expectations average over.
_DIFFICULTY_POINTS: Final = 64

FloatArray = NDArray[np.float64]


def concentration(spread: float) -> float | None:
    """The Beta concentration ``kappa`` of a ``spread``; ``None`` for 0 (alike).

    Examples:
        >>> round(concentration(0.2), 2), concentration(0.0)
        (5.25, None)
    """
    if not 0.0 <= spread < 0.5:
        raise ValueError(f"spread must be in [0, 0.5); got {spread}")
    if spread == 0.0:
        return None
    return 0.25 / spread**2 - 1.0


def spread_of(kappa: float) -> float:
    """The ``spread`` of a Beta concentration (the inverse of :func:`concentration`).

    Examples:
        >>> round(spread_of(5.0), 4)
        0.2041
    """
    if not kappa > 0.0:
        raise ValueError(f"kappa must be > 0; got {kappa}")
    return 0.5 / math.sqrt(kappa + 1.0)


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Per model: mean in unit score, trial variance, posterior variance by n.

    Everything is on the unit score scale ``(score - min w) / (max w - min w)``;
    z statistics do not depend on the scale.

    Attributes:
        means: Each model's mean, unit scale.
        trial_variance: Variance of one trial's score about its question's
            mean, averaged over questions (what the sums' noise is).
        categories: ``C + 1``.
    """

    means: FloatArray
    trial_variance: FloatArray
    categories: int
    _points: FloatArray  # models x difficulty points: per-question means

    @classmethod
    def build(cls, means: FloatArray, categories: int, spread: float) -> Outcomes:
        """The outcome model of unit-scale ``means`` with ``categories``."""
        if categories < 2:
            raise ValueError(f"categories must be >= 2; got {categories}")
        if np.any((means <= 0.0) | (means >= 1.0)):
            raise ValueError(
                "means must lie strictly inside the score range; got "
                f"{means.round(4).tolist()} on the unit scale"
            )
        kappa = concentration(spread)
        if kappa is None:
            points = np.repeat(means[:, None], _DIFFICULTY_POINTS, axis=1)
        else:
            levels = (np.arange(_DIFFICULTY_POINTS) + 0.5) / _DIFFICULTY_POINTS
            raw = betaincinv(
                kappa * means[:, None], kappa * (1.0 - means[:, None]), levels[None, :]
            )
            # Moved affinely to average to the mean exactly, as the simulated
            # worlds are (monitor.engine.simulation.draw_world).
            current = raw.mean(axis=1, keepdims=True)
            down = raw * (means[:, None] / current)
            up = 1.0 - (1.0 - raw) * ((1.0 - means[:, None]) / (1.0 - current))
            points = np.where(current > means[:, None], down, up)
        probabilities = _category_probabilities(points, categories)
        weights = np.arange(categories) / (categories - 1)
        first = probabilities @ weights
        second = probabilities @ weights**2
        trial_variance = (second - first**2).mean(axis=1)
        return cls(
            means=np.asarray(means, dtype=np.float64),
            trial_variance=np.asarray(trial_variance, dtype=np.float64),
            categories=categories,
            _points=np.asarray(probabilities, dtype=np.float64),
        )

    @property
    def prior_information(self) -> float:
        """``I_0 = C + 2``: what the posterior information subtracts."""
        return float(self.categories + 1)

    def posterior_variance(self, trials: FloatArray) -> FloatArray:
        """Expected predictive variance of one outcome at ``trials`` per question.

        ``trials``: a 1-D grid; returns ``len(trials) x models``.

        The posterior's outcome distribution on a question is
        ``(n q + 1) / (n + C + 1)``; its variance of the score, averaged
        over the outcomes (its mean varies by ``n Var_q(w) / (n + C + 1)^2``)
        and over the questions.
        """
        weights = np.arange(self.categories) / (self.categories - 1)
        q = self._points  # models x points x categories
        width = float(self.categories)
        n = np.asarray(trials, dtype=np.float64)[:, None, None]
        first_q = q @ weights  # models x points
        second_q = q @ weights**2
        var_q = second_q - first_q**2
        total = n + width
        mean = (n * first_q + weights.sum()) / total
        second = (n * second_q + (weights**2).sum()) / total
        spread = second - mean**2 - n * var_q / total**2
        return np.asarray(spread.mean(axis=-1), dtype=np.float64)


def _category_probabilities(points: FloatArray, categories: int) -> FloatArray:
    """``models x points x categories``: Binomial(C, s) over the categories."""
    k = np.arange(categories)
    return np.asarray(
        binom.pmf(k[None, None, :], categories - 1, points[:, :, None]),
        dtype=np.float64,
    )
