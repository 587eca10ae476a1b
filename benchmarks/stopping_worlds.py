"""The worlds of ``benchmarks/stopping.py``: true means and how questions differ.

A world's per-question probabilities come from one of three makers:

- ``own``: each model's difficulty drawn on its own (``draw_world``: a Beta
  of concentration ``kappa`` around the model's mean, moved so it averages
  to the mean exactly);
- ``shared``: one difficulty per question shared by every model,
  ``d_a ~ Beta(shape, shape)``, and ``p_ma = sigmoid(logit(d_a) + s_m)``
  with ``s_m`` set so the model averages to its mean (tied models get the
  same ``s``, so they stay exactly tied and equal on every question);
- ``permuted``: ``own``, except that each model named in ``copies`` gets
  another model's probabilities on permuted questions (an exact tie with
  the same spread of difficulty, on other questions).

``joins`` makes models report only after the run has that many trials
(models undeclared, see ``simulate(joins=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import expit, logit

from monitor.engine.simulation import AIME20_MEANS, PAPER_MEANS, Arrival, draw_world

Maker = Literal["own", "shared", "permuted"]


@dataclass(frozen=True)
class World:
    """A benchmark world: true means, difficulty spread, shape of the run."""

    name: str
    means: tuple[float, ...]
    kappa: float = 5.0
    questions: int = 30
    categories: int = 2
    arrival: Arrival = "least_sampled"
    costs: tuple[float, ...] | None = None
    target: str = "ranking"
    top_k: int | None = None
    note: str = ""
    maker: Maker = "own"
    shape: float = 0.5
    copies: tuple[tuple[int, int], ...] = ()
    joins: tuple[int, ...] | None = None


def probabilities(world: World, seed: int) -> NDArray[np.float64]:
    """The replicate's ``models x questions`` probabilities (seeded by ``seed``)."""
    rng = np.random.default_rng((seed, 11))
    if world.maker == "shared":
        difficulty = np.clip(
            rng.beta(world.shape, world.shape, world.questions), 1e-4, 1 - 1e-4
        )
        base = logit(difficulty)
        shifts = {
            mean: brentq(lambda s, m=mean: float(expit(base + s).mean()) - m, -30, 30)
            for mean in set(world.means)
        }
        return np.array([expit(base + shifts[mean]) for mean in world.means])
    scores = draw_world(world.means, world.questions, world.kappa, rng)
    for copy, original in world.copies:
        scores[copy] = scores[original][rng.permutation(world.questions)]
    return scores


def _spread(first: float, step: float, count: int) -> tuple[float, ...]:
    return tuple(round(first + step * index, 6) for index in range(count))


LATE = 7000
GAPS12 = (0.20, 0.28, 0.29, 0.37, 0.45, 0.46, 0.54, 0.54, 0.62, 0.70, 0.71, 0.79)
RUBRIC = (0.3, 0.3, 0.45, 0.5, 0.5, 0.6, 0.7, 0.7)
TIES5 = tuple(m for m in (0.2, 0.3, 0.4, 0.5, 0.6) for _ in range(2))

WORLDS: dict[str, World] = {
    world.name: world
    for world in (
        World("paper11", PAPER_MEANS, note="the paper's 11 models, kappa 5"),
        World("aime20", AIME20_MEANS, kappa=1.0, note="20 AIME-like models, kappa 1"),
        World("null8", (0.5,) * 8, note="8 identical models"),
        World("ties5x2", TIES5, note="10 models in five exact ties, 0.10 apart"),
        World(
            "near30",
            _spread(0.4, 0.005, 30),
            questions=40,
            note="30 models 0.005 apart, 40 questions",
        ),
        World("questions10", PAPER_MEANS, questions=10, note="paper11, 10 questions"),
        World(
            "beta03",
            PAPER_MEANS,
            kappa=0.6,
            note="paper11, per-question p ~ Beta(0.3, 0.3)-like",
        ),
        World(
            "rubric4",
            RUBRIC,
            categories=4,
            note="4 categories (0, 1/3, 2/3, 1), two ties",
        ),
        World(
            "costly",
            PAPER_MEANS,
            costs=(1.0,) * 10 + (20.0,),
            note="paper11, the best model 20x costlier",
        ),
        World(
            "qmajor",
            PAPER_MEANS,
            arrival="question_major",
            note="paper11, every trial of a question before the next",
        ),
        World("top3", PAPER_MEANS, target="top_k", top_k=3, note="paper11, top 3"),
        World("leader", PAPER_MEANS, target="leader", note="paper11, the leader"),
        World("gaps12", GAPS12, note="12 models, three gaps of 0.01 and a tie"),
        World(
            "clusters6x2",
            (0.4,) * 6 + (0.6,) * 6,
            note="two clusters of six exact ties, 0.2 apart",
        ),
        World(
            "shared60x15",
            _spread(0.29, 0.03, 15),
            questions=60,
            maker="shared",
            note="15 models 0.03 apart, 60 questions, shared Beta(0.5, 0.5) difficulty",
        ),
        World(
            "rubricperm",
            RUBRIC,
            categories=4,
            maker="permuted",
            copies=((1, 0), (4, 3), (7, 6)),
            note="rubric4 whose ties are question-permuted copies",
        ),
        World(
            "twinlate",
            (*PAPER_MEANS, PAPER_MEANS[-1]),
            joins=(0,) * len(PAPER_MEANS) + (LATE,),
            note=f"paper11 + an undeclared twin of the best after {LATE:,} trials",
        ),
        World(
            "tieslate",
            TIES5,
            joins=(0, 3000) * 5,
            note="ties5x2, one of each tie undeclared, joining after 3,000 trials",
        ),
    )
}
