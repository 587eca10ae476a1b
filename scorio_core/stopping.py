r"""Stopping rules on the pairwise z, and block resolution of rank boundaries.

A rule answers, for a pair of models separated by ``z`` after information
``t`` (trials per question, see :func:`pair_information`): is the order
settled (``z >= threshold(t)``), can it still settle within the budget cap
``T`` (futility), and at what information is it forecast to settle.

A rank boundary splits the current order into the models above and below it.
It is resolved only when *every* pair across it is settled ("block"
resolution): once models stop at different times their sigmas differ, and
resolving adjacent pairs alone would imply orders nobody tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from scorio_core import _validation as check


class StoppingRule(Protocol):
    """The contract every rule meets; ``t`` is a pair's information."""

    @property
    def name(self) -> str:
        """Short rule name, shown in statuses."""
        ...

    def threshold(self, information: float) -> float:
        """The ``z`` a pair needs at information ``t`` to count as settled."""
        ...

    def is_futile(self, z: float, information: float) -> bool:
        """Whether the pair cannot settle within the budget."""
        ...

    def forecast(self, z: float, information: float) -> float:
        """Information at which the pair is expected to settle (``inf``: never)."""
        ...


@dataclass(frozen=True, slots=True)
class PaperRule:
    r"""The paper's rule: settled when :math:`z \ge z^* = \Phi^{-1}(\text{conf})`.

    Valid for one look at a fixed N. Checked after every trial it declares
    orders far more often than ``1 - confidence`` (a tie: 58-67 % of runs in
    our simulations), so the monitor shows it but does not stop on it.

    Futility is the naive forecast: settling would need
    :math:`t (z^*/z)^2` trials per question, more than the cap ``T``.

    Examples:
        >>> rule = PaperRule.from_confidence(0.95, budget=80)
        >>> round(rule.threshold(10.0), 3), rule.is_futile(0.5, 20.0)
        (1.645, True)
    """

    z_star: float
    budget: float | None = None

    @classmethod
    def from_confidence(
        cls, confidence: float, budget: float | None = None
    ) -> PaperRule:
        level = check.confidence(confidence)
        cap = None if budget is None else check.positive(budget, "budget")
        return cls(z_star=float(ndtri(level)), budget=cap)

    @property
    def name(self) -> str:
        return "paper"

    def threshold(self, information: float) -> float:
        return self.z_star

    def is_futile(self, z: float, information: float) -> bool:
        if self.budget is None or z >= self.z_star:
            return False
        return self.forecast(z, information) > self.budget

    def forecast(self, z: float, information: float) -> float:
        if z >= self.z_star:
            return information
        if z <= 0.0:
            return math.inf
        return information * (self.z_star / z) ** 2


def pair_information(
    trials_a: float, variance_a: float, trials_b: float, variance_b: float
) -> float:
    r"""Information of a pair in trials per question, when trial counts differ.

    Each model's posterior variance falls like ``s^2 / n`` with ``n`` trials
    per question, so the pair's variance is ``s_a^2/n_a + s_b^2/n_b``. The
    pair carries as much information as ``t`` trials per question on both:

    Formula:
        :math:`t = (s_a^2 + s_b^2) / (s_a^2/n_a + s_b^2/n_b)`, the
        variance-weighted harmonic mean of ``n_a`` and ``n_b``; with equal
        counts it is ``n``.

    Examples:
        >>> round(pair_information(40.0, 1.0, 40.0, 2.0), 9)
        40.0
        >>> round(pair_information(80.0, 1.0, 20.0, 1.0), 6)
        32.0
    """
    if trials_a <= 0.0 or trials_b <= 0.0:
        return 0.0
    total = variance_a + variance_b
    if total <= 0.0:
        return 2.0 / (1.0 / trials_a + 1.0 / trials_b)
    return total / (variance_a / trials_a + variance_b / trials_b)


@dataclass(frozen=True, slots=True)
class BoundaryState:
    """A rank boundary after position ``index`` of the order (0-based)."""

    index: int
    resolved: bool
    weakest: tuple[int, int]
    margin: float


def resolve_boundaries(settled: ArrayLike, margin: ArrayLike) -> list[BoundaryState]:
    """Block resolution of the boundaries of an order of ``L`` models.

    Args:
        settled: ``L x L`` booleans, ``settled[i, j]`` for positions ``i < j``
            of the order: the rule counts that pair as settled.
        margin: ``L x L`` how far each pair is from settling (e.g. ``z -
            threshold``); the pair with the smallest margin across a boundary
            is its weakest, the one that gets trials.

    Returns:
        One state per boundary ``0 .. L-2``: boundary ``i`` separates
        positions ``<= i`` from positions ``> i`` and is resolved only when
        every pair across it is settled.

    Examples:
        >>> settled = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]], dtype=bool)
        >>> margin = np.array([[0, 1.0, 2.0], [0, 0, -0.5], [0, 0, 0]])
        >>> [b.resolved for b in resolve_boundaries(settled, margin)]
        [True, False]
    """
    settled_matrix = np.asarray(settled, dtype=bool)
    margin_matrix = np.asarray(margin, dtype=np.float64)
    size = settled_matrix.shape[0]
    if settled_matrix.shape != (size, size) or margin_matrix.shape != (size, size):
        raise ValueError(
            f"settled and margin must be square and alike; got {settled_matrix.shape} "
            f"and {margin_matrix.shape}"
        )
    states = []
    for index in range(size - 1):
        above, below = slice(0, index + 1), slice(index + 1, size)
        cross = margin_matrix[above, below]
        weakest_flat = int(np.argmin(cross))
        row, column = divmod(weakest_flat, cross.shape[1])
        states.append(
            BoundaryState(
                index=index,
                resolved=bool(settled_matrix[above, below].all()),
                weakest=(row, index + 1 + column),
                margin=float(cross[row, column]),
            )
        )
    return states
