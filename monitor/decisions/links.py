"""The pairs of a look that can no longer be told apart, and those still drawing.

After the boundaries resolved, each open claim's weakest pair (the
smallest margin over its threshold) is linked for good when the models are
equivalent or the pair is futile or cannot draw, so no boundary it spans
can resolve; otherwise a target boundary stays open and the models of its
weakest pair that can draw need trials.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from monitor.decisions.look import BoundaryTests, Look
from monitor.decisions.model import FloatMatrix, OpenBoundary, SettledPair, Standing
from monitor.schema import RunConfig
from scorio_core.stopping import StoppingRule, posterior_information


class Links:
    """The open boundaries' weakest pairs: linked for good, or still drawing.

    A pair is linked as equivalent (closer than the margin), unresolvable
    (futile, or neither model can draw); an unlinked target boundary is
    open, and the models of its weakest pair and the two beside it that can
    draw need trials.
    """

    def __init__(
        self,
        look: Look,
        config: RunConfig,
        tests: BoundaryTests,
        ordered: Sequence[Standing],
        sigma: FloatMatrix,
        information: FloatMatrix,
        rule_for: Callable[[int], StoppingRule],
        *,
        complete: bool,
        targets: Sequence[int],
        can_draw: dict[str, bool],
    ) -> None:
        self._look = look
        self._config = config
        self._rule = tests.rule
        self._information = information
        self._complete = complete
        self._targets = targets
        self._can_draw = can_draw
        z = look.z
        with np.errstate(invalid="ignore"):
            self._margin = np.where(
                np.isfinite(tests.thresholds), z - tests.thresholds, -np.inf
            )
        # Futility asks whether a pair could settle if every other boundary
        # freed its share; stopping for futility claims nothing, so any level
        # is valid here, and the most optimistic one keeps close pairs
        # sampling longest.
        self.hopeful = rule_for(1)
        # A tie is called only between models that both carry information of
        # their own: a model with few trials sits shrunk toward the prior mean
        # and can look level with a clearly different one.
        own = posterior_information(
            np.array([s.unit_variance for s in ordered]) / 2.0,
            sigma**2 / 2.0,
            float(len(config.weights) + 1),
        ).diagonal()
        self._informed = np.minimum(own[:, None], own[None, :])
        self._futile = ~tests.settled_pairs & self.hopeful.futile(z, self._informed)
        self._spread = np.hypot(sigma[:, None], sigma[None, :])
        self.needs: set[str] = set()
        self.open_boundaries: list[OpenBoundary] = []
        self.weakest: dict[int, tuple[int, int]] = {}
        for k in range(look.size - 1):
            if k in look.cut_at:
                continue
            first, last = look.block(k)
            cross = self._margin[first : k + 1, k + 1 : last + 1]
            row, column = divmod(int(np.argmin(cross)), cross.shape[1])
            self.weakest[k] = (first + row, k + 1 + column)

    def link(self, open_claims: Sequence[int]) -> None:
        """Link or open each open claim no link spans yet, in order."""
        look = self._look
        for k in open_claims:
            if look.spanning(k) is not None:
                continue
            i, j = self.weakest[k]
            margin_z = None
            if self._config.equivalence_margin is not None and self._spread[i, j] > 0:
                margin_z = self._config.equivalence_margin / float(self._spread[i, j])
            link = self._decision(k, i, j, margin_z)
            if link is None:
                if k in self._targets:
                    self._open(k, i, j, margin_z)
                continue
            look.link(link)

    def _decision(
        self, k: int, i: int, j: int, margin_z: float | None
    ) -> SettledPair | None:
        """The link boundary ``k``'s weakest pair ``(i, j)`` gets, if any."""
        look, z = self._look, self._look.z
        first, last = look.block(k)
        futile_block = self._futile[first : k + 1, k + 1 : last + 1]
        if not self._complete:
            return None
        if (
            margin_z is not None
            and self._rule.equivalent(
                z[i : i + 1, j], self._informed[i : i + 1, j], np.array([margin_z])
            ).all()
        ):
            return look.record("equivalent", i, j, k)
        if futile_block.any():
            masked = np.where(
                futile_block, self._margin[first : k + 1, k + 1 : last + 1], np.inf
            )
            row, column = divmod(int(np.argmin(masked)), masked.shape[1])
            return look.record("unresolvable", first + row, k + 1 + column, k)
        order = look.order
        if not self._can_draw[order[i]] and not self._can_draw[order[j]]:
            return look.record("unresolvable", i, j, k)
        return None

    def _open(self, k: int, i: int, j: int, margin_z: float | None) -> None:
        # The weakest pair binds the boundary; the two models beside it are
        # not settled either, so they draw too (early on, when information
        # is low and uneven, the weakest pair is often not adjacent, and a
        # model between settled-looking neighbours would otherwise get none).
        order = self._look.order
        drawing = tuple(
            order[p]
            for p in dict.fromkeys((i, j, k, k + 1))
            if self._can_draw[order[p]]
        )
        self.needs.update(drawing)
        first, last = self._look.block(k)
        self.open_boundaries.append(
            OpenBoundary(
                index=k,
                a=order[i],
                b=order[j],
                z=float(self._look.z[i, j]),
                information=float(self._information[i, j]),
                margin_z=margin_z,
                drawing=drawing,
                block=order[first : last + 1],
            )
        )
