"""What boundaries that claim only in look windows would gain at the cap.

The default boundary ``c (t/T)^(-0.4)`` is calibrated for looks after
every trial. A boundary that may claim only while a pair's information
lies in one of ``K`` windows ``[t_k, t_k (1 + w)]`` (geometric ``t_k``
from 0.15 T to T) needs a smaller ``c`` for the same error; inside a
window the engine may still look any number of times, so each window is
monitored continuously (``w = 0``: exactly one look per window, which a
monitor without memory of its past looks cannot promise).

Each ``c`` solves ``P(cross) = alpha`` with the exact recursion
(:func:`scorio_core.boundaries.crossing_probability`) on a grid of 25
looks per window; the same grid over the whole range gives the
"continuous, same grid" row, which sits below the exact continuous
constant by the grid's own error (compare within the table).

Then a screen in the planner's rollout (:mod:`monitor.plans.rollout`, which
plays the engine's procedure; paper11's means, 30 questions of
concentration 5, cap 80, 240 looks, 256 runs): the default beside boundaries
that claim only in windows, each pair's window read from its own
information (what keeps the calibration valid), futility unchanged.

Run: ``.venv/bin/python benchmarks/look_windows.py``
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.engine.simulation import PAPER_MEANS
from monitor.plans.outcomes import DEFAULT_SPREAD, Outcomes
from monitor.plans.rollout import Field, roll
from monitor.plans.rules import rule_family
from monitor.schema import RunConfig
from scorio_core.boundaries import crossing_probability, wang_tsiatis_constant
from scorio_core.stopping import SequentialRule, StoppingRule, per_direction_alpha

DELTA = 0.1
FIRST = 0.01  # information (share of T) where the paths start
PER_WINDOW = 25


def crossing(constant: float, starts: NDArray[np.float64], width: float) -> float:
    """P(z reaches the boundary inside some window), T = 1."""
    times: list[float] = []
    claims: list[bool] = []
    before = FIRST
    for start in starts:
        if start > before * 1.0001:  # a look between windows carries the paths
            times.append((before + start) / 2.0)
            claims.append(False)
        looks = 1 if width == 0.0 else PER_WINDOW
        for t in np.linspace(start, start * (1.0 + width), looks, endpoint=False):
            times.append(float(t))
            claims.append(True)
        before = start * (1.0 + width)
    at = np.array(times)
    boundary = constant * at ** (DELTA - 0.5)
    # Outside the windows the boundary is out of reach.
    boundary = np.where(claims, boundary, boundary.max() + 8.0)
    upper = (boundary * np.sqrt(at))[None, :]
    return float(crossing_probability(at, upper)[0])


def constant_for(alpha: float, starts: NDArray[np.float64], width: float) -> float:
    return float(
        brentq(lambda c: crossing(c, starts, width) - alpha, 1.0, 5.0, xtol=1e-4)
    )


@dataclass(frozen=True)
class WindowRule:
    """A boundary with the windowed constant that claims only in windows;
    futility and equivalence as the continuous rule's."""

    windowed: SequentialRule
    continuous: SequentialRule
    starts: NDArray[np.float64]
    width: float

    @property
    def name(self) -> str:
        return "windows"

    @property
    def horizon(self) -> float:
        return self.windowed.budget

    def thresholds(self, information: NDArray[np.float64]) -> NDArray[np.float64]:
        t = np.asarray(information) / self.windowed.budget
        inside = t >= 1.0 / (1.0 + self.width)
        for start in self.starts:
            inside |= (t >= start) & (t < start * (1.0 + self.width))
        return np.where(inside, self.windowed.thresholds(information), np.inf)

    def futile(
        self, z: NDArray[np.float64], information: NDArray[np.float64]
    ) -> NDArray[np.bool_]:
        return self.continuous.futile(z, information)

    def equivalent(self, *args: object, **kwargs: object) -> object:
        return self.continuous.equivalent(*args, **kwargs)  # type: ignore[arg-type]


class OrContinuous(WindowRule):
    """Diagnostic, not a valid calibration: a claim also when the continuous
    boundary is crossed, outside the windows too."""

    def thresholds(self, information: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.minimum(
            super().thresholds(information), self.continuous.thresholds(information)
        )


def screen() -> None:
    questions, cap, runs = 30, 80, 256
    means = np.array(PAPER_MEANS)
    config = RunConfig(
        run="screen", question_count=questions, max_trials_per_question=cap
    )
    default = rule_family(config)
    rng = np.random.default_rng(7)
    worlds = tuple(
        Outcomes.drawn(means, 2, DEFAULT_SPREAD, questions, rng) for _ in range(64)
    )
    order = sorted(range(means.size), key=lambda i: -means[i])
    pairs = [(a, b) for a, b in itertools.pairwise(order) if means[a] > means[b]]

    def windowed(
        windows: int, width: float, kind: type[WindowRule] = WindowRule
    ) -> Callable[[int], StoppingRule]:
        starts = np.geomspace(0.15, 1.0, windows) / (1.0 + width)
        rules: dict[int, StoppingRule] = {}

        def rule_for(share: int) -> StoppingRule:
            share = max(int(share), 1)
            if share not in rules:
                continuous = default(share)
                assert isinstance(continuous, SequentialRule)
                c = constant_for(per_direction_alpha(0.95, share), starts, width)
                rules[share] = kind(  # type: ignore[assignment]
                    replace(continuous, constant=c), continuous, starts, width
                )
            return rules[share]

        return rule_for

    variants = [("default (continuous)", default)] + [
        (f"{k} windows, w = {w:.2f}", windowed(k, w))
        for k, w in ((5, 0.02), (8, 0.02), (12, 0.02), (8, 0.05))
    ]
    variants.append(("8 windows or continuous", windowed(8, 0.02, OrContinuous)))
    print("rollout screen, paper11 (trials % of fixed 80, true pairs, P(any false))")
    for label, rule_for in variants:
        field = Field(
            worlds, questions, cap, tuple(range(means.size - 1)), rule_for, 240
        )
        ends = roll(field, runs, np.random.default_rng(11))
        trials = ends.trials_per_question.sum(axis=1).mean() / (means.size * cap)
        groups = ends.groups
        resolved = np.sum([groups[:, a] < groups[:, b] for a, b in pairs], axis=0)
        false = np.zeros(runs, dtype=bool)
        for i, j in itertools.permutations(range(means.size), 2):
            if means[i] <= means[j]:
                false |= groups[:, i] < groups[:, j]
        print(
            f"  {label:22s} trials {trials:.1%}  pairs {resolved.mean():.2f}  "
            f"P(any false) {false.mean():.1%}"
        )


def main() -> None:
    for boundaries in (1, 5):
        alpha = per_direction_alpha(0.95, boundaries)
        exact = wang_tsiatis_constant(alpha, DELTA)
        every = np.geomspace(FIRST, 1.0, 200)[:-1]
        same_grid = constant_for(alpha, every, float(every[1] / every[0] - 1.0))
        print(f"confidence 0.95, {boundaries} boundary(ies): alpha {alpha:.4f}")
        print(f"  continuous, exact      c = {exact:.3f}")
        print(f"  continuous, same grid  c = {same_grid:.3f}")
        for windows in (5, 8, 12, 20):
            row = []
            for width in (0.0, 0.02, 0.05):
                starts = np.geomspace(0.15, 1.0, windows) / (1.0 + width)
                row.append(f"w={width:.2f}: {constant_for(alpha, starts, width):.3f}")
            print(f"  {windows:2d} windows  " + "  ".join(row))
    screen()


if __name__ == "__main__":
    main()
