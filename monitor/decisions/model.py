"""The values a run's decisions are made of: standings in, decisions out.

A :class:`Standing` is one model's numbers as a look reads them; a
:class:`RunDecision` is everything one look concludes (order, groups,
pairs, who needs trials); :class:`Settled` is what a run has decided for
good, made of :class:`SettledPair` decisions and rebuilt from them
(:meth:`Settled.replay`). All are frozen: :func:`monitor.decisions.decide`
makes new ones each look.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from scorio_core.stopping import StoppingRule

DecisionKind = Literal["resolved", "unresolvable", "equivalent"]


FloatMatrix = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Standing:
    """One model's numbers, as the decision needs them."""

    model: str
    mu: float
    sigma: float
    lo: float
    hi: float
    trials: int
    question_count: int
    least_sampled: int
    unit_variance: float = 0.0

    @property
    def per_question(self) -> float:
        """Mean observed trials per question, ``n``."""
        return self.trials / self.question_count


@dataclass(frozen=True, slots=True)
class SettledPair:
    """A final decision on a pair: ``a`` above ``b`` when ``resolved``.

    ``trials`` (the run's) and ``look`` say when it was made, ``z`` at what
    evidence. For a resolved boundary, ``above`` and ``below`` are the two
    parts of the group it split.
    """

    kind: DecisionKind
    a: str
    b: str
    z: float
    trials: int
    look: int
    above: tuple[str, ...] = ()
    below: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Settled:
    """Everything a run has decided for good (empty for a new run).

    ``segments`` is the ordered partition the resolved boundaries made;
    ``cuts[i]`` is the decision between ``segments[i]`` and ``segments[i+1]``.
    """

    segments: tuple[tuple[str, ...], ...] = ()
    cuts: tuple[SettledPair, ...] = ()
    links: tuple[SettledPair, ...] = ()
    done: frozenset[str] = frozenset()
    looks: int = 0
    models: frozenset[str] = frozenset()

    @property
    def decisions(self) -> tuple[SettledPair, ...]:
        """Every settled pair, in the order they were made."""
        return tuple(sorted((*self.cuts, *self.links), key=lambda d: d.look))

    @classmethod
    def replay(
        cls, decisions: Iterable[SettledPair], done: Iterable[str], looks: int = 0
    ) -> Settled:
        """Rebuild the state from its decisions in the order they were made."""
        segments: list[list[str]] = []
        cuts: list[SettledPair] = []
        links: list[SettledPair] = []
        for decision in decisions:
            if decision.kind != "resolved":
                links.append(decision)
                continue
            if not decision.above or not decision.below:
                continue  # written before cuts were recorded: nothing to keep
            members = [*decision.above, *decision.below]
            index = next(
                (
                    i
                    for i, segment in enumerate(segments)
                    if set(segment) & set(members)
                ),
                None,
            )
            if index is None:
                if not segments:  # the first cut splits the whole field
                    segments = [list(decision.above), list(decision.below)]
                    cuts = [decision]
                continue
            rest = [m for m in segments[index] if m not in members]
            segments[index : index + 1] = [
                list(decision.above),
                [*decision.below, *rest],
            ]
            cuts.insert(index, decision)
        return cls(
            segments=tuple(tuple(s) for s in segments),
            cuts=tuple(cuts),
            links=tuple(links),
            done=frozenset(done),
            looks=max(
                [looks, *(d.look for d in cuts), *(d.look for d in links)], default=0
            ),
        )


@dataclass(frozen=True, slots=True)
class PairDecision:
    """Two models adjacent in the order, ``a`` above ``b``."""

    a: str
    b: str
    z: float
    rho: float
    resolved: bool
    unresolvable: bool
    equivalent: bool = False
    threshold: float | None = None
    decision: SettledPair | None = None


@dataclass(frozen=True, slots=True)
class OpenBoundary:
    """A boundary still drawing trials: its weakest pair, for forecasts."""

    index: int
    a: str
    b: str
    z: float
    information: float
    margin_z: float | None
    drawing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunDecision:
    """Everything the status, allocation and events need from one look."""

    order: tuple[str, ...]
    ranks: dict[str, int]
    # None: a model that joined after a boundary settled, not yet placed.
    groups: dict[str, int | None]
    adjacent_groups: dict[str, int]
    pairs: tuple[PairDecision, ...]
    needs_trials: frozenset[str]
    predicted_trials: dict[str, int | None]
    done: frozenset[str]
    exhausted: frozenset[str]
    stable: bool
    settled: Settled = field(default_factory=Settled)
    new_decisions: tuple[SettledPair, ...] = ()
    open_boundaries: tuple[OpenBoundary, ...] = ()
    rule: StoppingRule | None = None
    futility: StoppingRule | None = None
