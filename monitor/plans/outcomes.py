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
taken as expectations over the outcomes, and over the questions of one
world: :meth:`Outcomes.drawn` draws a world of ``M`` questions as the
simulated runs do (:func:`monitor.engine.simulation.draw_world`), and a
plan plays each simulated run in a world of its own. A run's questions
are a sample: with few of them, or extreme difficulty, how hard they
happen to be moves the run's variance, and at 80 % power that costs power
(one average world overstated it by 8-11 points where ``spread`` is 0.35
or more). :meth:`Outcomes.build` is that average world (fixed quantiles
of the Beta), for fields with more questions than :data:`DRAWN_QUESTIONS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy.special import betaincinv

# The difficulty spread a plan assumes unless told: close to the paper's
# Beta concentration 5 (study notes), a typical benchmark's.
DEFAULT_SPREAD: Final = 0.2
# Quantiles of the difficulty distribution the average world is made of.
_DIFFICULTY_POINTS: Final = 64
# Fields with more questions than this are played in the average world:
# past it a drawn world's variance differs from the average by under 1/16
# of what it does at a handful of questions, and drawing costs memory.
DRAWN_QUESTIONS: Final = 256

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
    # Per model, over the questions: the mean of the squared per-question
    # mean score, and the mean of a trial's second moment. With the model's
    # mean they are all the posterior variance below needs.
    _mean_square: FloatArray
    _second: FloatArray

    @classmethod
    def build(cls, means: FloatArray, categories: int, spread: float) -> Outcomes:
        """The average world of unit-scale ``means`` with ``categories``."""
        _check(means, categories)
        kappa = concentration(spread)
        if kappa is None:
            points = np.repeat(means[:, None], _DIFFICULTY_POINTS, axis=1)
        else:
            levels = (np.arange(_DIFFICULTY_POINTS) + 0.5) / _DIFFICULTY_POINTS
            raw = betaincinv(
                kappa * means[:, None], kappa * (1.0 - means[:, None]), levels[None, :]
            )
            points = _centred(raw, means)
        return cls._of(means, points, categories)

    @classmethod
    def drawn(
        cls,
        means: FloatArray,
        categories: int,
        spread: float,
        question_count: int,
        rng: np.random.Generator,
    ) -> Outcomes:
        """One world of ``question_count`` questions, drawn from ``rng``.

        Drawn as :func:`monitor.engine.simulation.draw_world` draws a
        simulated run's: a Beta per question around each model's mean, moved
        to average to the mean exactly.
        """
        _check(means, categories)
        kappa = concentration(spread)
        if kappa is None:
            return cls.build(means, categories, spread)
        raw = rng.beta(
            kappa * means[:, None],
            kappa * (1.0 - means[:, None]),
            size=(means.size, question_count),
        )
        return cls._of(means, _centred(raw, means), categories)

    @classmethod
    def _of(cls, means: FloatArray, points: FloatArray, categories: int) -> Outcomes:
        # A Binomial(C, s) category scored k / C has mean s and second
        # moment s (1 - s) / C + s^2.
        second = points * (1.0 - points) / (categories - 1) + points**2
        mean_square = (points**2).mean(axis=1)
        mean_second = second.mean(axis=1)
        return cls(
            means=np.asarray(means, dtype=np.float64),
            trial_variance=np.asarray(mean_second - mean_square, dtype=np.float64),
            categories=categories,
            _mean_square=np.asarray(mean_square, dtype=np.float64),
            _second=np.asarray(mean_second, dtype=np.float64),
        )

    @property
    def prior_information(self) -> float:
        """``I_0 = C + 2``: what the posterior information subtracts."""
        return float(self.categories + 1)

    def posterior_variance(self, trials: FloatArray) -> FloatArray:
        """Expected predictive variance of one outcome at ``trials`` per question.

        ``trials``: a 1-D grid; returns ``len(trials) x models`` (or a grid
        per model, ``points x models``).

        The posterior's outcome distribution on a question is
        ``(n q + 1) / (n + C + 1)``; its variance of the score, averaged
        over the outcomes (its mean varies by ``n Var_q(w) / (n + C + 1)^2``)
        and over the questions.
        """
        weights = np.arange(self.categories) / (self.categories - 1)
        width = float(self.categories)
        n = np.asarray(trials, dtype=np.float64)
        if n.ndim == 1:
            n = n[:, None]
        total = n + width
        first, second_sum = weights.sum(), (weights**2).sum()
        # Per question: second - mean^2 - n Var_q / total^2 with mean and
        # second linear in the question's moments; averaged over questions.
        mean_squared = (
            n**2 * self._mean_square + 2.0 * n * self.means * first + first**2
        ) / total**2
        second = (n * self._second + second_sum) / total
        spread = second - mean_squared - n * self.trial_variance / total**2
        return np.asarray(spread, dtype=np.float64)


def _check(means: FloatArray, categories: int) -> None:
    if categories < 2:
        raise ValueError(f"categories must be >= 2; got {categories}")
    if np.any((means <= 0.0) | (means >= 1.0)):
        raise ValueError(
            "means must lie strictly inside the score range; got "
            f"{means.round(4).tolist()} on the unit scale"
        )


def _centred(raw: FloatArray, means: FloatArray) -> FloatArray:
    """Per-question means moved affinely to average to each model's mean,
    as the simulated worlds are (:func:`monitor.engine.simulation.draw_world`)."""
    current = raw.mean(axis=1, keepdims=True)
    down = raw * (means[:, None] / current)
    up = 1.0 - (1.0 - raw) * ((1.0 - means[:, None]) / (1.0 - current))
    return np.asarray(np.where(current > means[:, None], down, up), dtype=np.float64)
