"""A look of :func:`monitor.decisions.decide.decide`: its field and boundary tests.

A :class:`Look` is the ordered field of one look with the cuts and links
made so far (where a boundary's segment starts and ends, which link spans
it) and records new decisions. :class:`BoundaryTests` is the test Holm's
step-down (:func:`scorio_core.multiplicity.holm_step_down`) runs at each
share of the error: a boundary resolves when every pair across it is
settled under the rule for that share.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

import numpy as np

from monitor.decisions.model import DecisionKind, FloatMatrix, SettledPair
from scorio_core.stopping import StoppingRule


class Look:
    """One look's ordered field with the cuts and links made so far.

    Lives for one :func:`decide` call: each new cut splits the segment the
    earlier ones left, and each new link joins the run's links; both are
    recorded as new decisions, in the order they were made.
    """

    def __init__(
        self,
        order: tuple[str, ...],
        cut_at: dict[int, SettledPair],
        links: list[SettledPair],
        z: FloatMatrix,
        look: int,
        run_trials: int,
    ) -> None:
        self.order = order
        self.size = len(order)
        self.position = {name: index for index, name in enumerate(order)}
        self.cut_at = cut_at
        self.edges: list[int] = sorted(cut_at)
        self.links = links
        self.z = z
        self.look = look
        self.run_trials = run_trials
        self.new: list[SettledPair] = []

    def spanning(self, index: int) -> SettledPair | None:
        """The link spanning boundary ``index``, if any."""
        for link in self.links:
            low, high = sorted((self.position[link.a], self.position[link.b]))
            if low <= index < high:
                return link
        return None

    def block(self, index: int) -> tuple[int, int]:
        """``(first, last)`` positions of the segment holding position
        ``index``, also the one a boundary ``index`` that is no cut lies in."""
        at = bisect.bisect_left(self.edges, index)
        first = self.edges[at - 1] + 1 if at else 0
        last = self.edges[at] if at < len(self.edges) else self.size - 1
        return first, last

    def record(self, kind: DecisionKind, i: int, j: int, index: int) -> SettledPair:
        """A decision on the pair at positions ``i``, ``j`` across ``index``."""
        first, last = self.block(index)
        z, order = self.z, self.order
        return SettledPair(
            kind=kind,
            a=order[i],
            b=order[j],
            z=float(z[i, j]) if math.isfinite(z[i, j]) else 1e308,
            trials=self.run_trials,
            look=self.look,
            above=order[first : index + 1] if kind == "resolved" else (),
            below=order[index + 1 : last + 1] if kind == "resolved" else (),
        )

    def cut(self, index: int) -> None:
        """Resolve boundary ``index``: it splits the segment it lies in."""
        cut = self.record("resolved", index, index + 1, index)
        self.cut_at[index] = cut
        bisect.insort(self.edges, index)
        self.new.append(cut)

    def link(self, link: SettledPair) -> None:
        """Link a pair for good: no boundary it spans can resolve."""
        self.links.append(link)
        self.new.append(link)


class BoundaryTests:
    """The block test of open boundaries at a share ``L`` of the run's error.

    Called by :func:`~scorio_core.multiplicity.holm_step_down`: at each
    share it resolves the boundaries whose every pair across is settled.
    Keeps the rule, thresholds and settled pairs of the last share, which
    the rest of the look reads.
    """

    def __init__(
        self,
        look: Look,
        information: FloatMatrix,
        rule_for: Callable[[int], StoppingRule],
        share: int,
    ) -> None:
        self._look = look
        self._information = information
        self._rule_for = rule_for
        self._share = share
        self.rule = rule_for(share)
        self.thresholds = self.rule.thresholds(information)
        self.settled_pairs = (information > 0.0) & (look.z >= self.thresholds)

    def __call__(self, share: int, open_claims: tuple[int, ...]) -> list[int]:
        if share != self._share:
            self._share = share
            self.rule = self._rule_for(share)
            self.thresholds = self.rule.thresholds(self._information)
            self.settled_pairs = (self._information > 0.0) & (
                self._look.z >= self.thresholds
            )
        resolvable = []
        for k in open_claims:
            first, last = self._look.block(k)
            if self.settled_pairs[first : k + 1, k + 1 : last + 1].all():
                resolvable.append(k)
        for k in resolvable:
            # Each cut splits the segment the earlier ones left (record reads it).
            self._look.cut(k)
        return resolvable


def z_matrix(mu: FloatMatrix, sigma: FloatMatrix) -> FloatMatrix:
    """|mu_i - mu_j| / sqrt(sigma_i^2 + sigma_j^2); inf (or 0) when both are exact."""
    gap = np.abs(mu[:, None] - mu[None, :])
    spread = np.hypot(sigma[:, None], sigma[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = gap / spread
    return np.asarray(np.where(spread > 0.0, z, np.where(gap > 0.0, np.inf, 0.0)))
