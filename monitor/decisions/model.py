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
    evidence. A resolved decision claims every model of ``above`` better
    than every model of ``below``: for a resolved boundary, the two parts
    of the group it split. For a ``joiner``'s placement (see
    :mod:`monitor.decisions.joiners`), the joiner and the models of the
    settled groups on one side of it, each pair tested: it splits no group.
    """

    kind: DecisionKind
    a: str
    b: str
    z: float
    trials: int
    look: int
    above: tuple[str, ...] = ()
    below: tuple[str, ...] = ()
    joiner: str = ""

    def covers(self, higher: str, lower: str) -> bool:
        """Whether this decision claims ``higher`` better than ``lower``."""
        return self.kind == "resolved" and higher in self.above and lower in self.below


@dataclass(frozen=True, slots=True)
class Reopening:
    """A model that was done needs trials again: ``joiners`` joined its group.

    ``generation`` counts the model's reopenings (1 for the first); ``look``
    and ``trials`` (the run's) say when.
    """

    model: str
    joiners: tuple[str, ...]
    generation: int
    look: int
    trials: int


@dataclass(frozen=True, slots=True)
class Settled:
    """Everything a run has decided for good (empty for a new run).

    ``segments`` is the ordered partition the resolved boundaries made;
    ``cuts[i]`` is the decision between ``segments[i]`` and ``segments[i+1]``;
    ``placements`` the joiners' placements into segments; ``reopened``
    every reopening of a done model, in order.
    """

    segments: tuple[tuple[str, ...], ...] = ()
    cuts: tuple[SettledPair, ...] = ()
    links: tuple[SettledPair, ...] = ()
    done: frozenset[str] = frozenset()
    looks: int = 0
    models: frozenset[str] = frozenset()
    placements: tuple[SettledPair, ...] = ()
    reopened: tuple[Reopening, ...] = ()

    @property
    def decisions(self) -> tuple[SettledPair, ...]:
        """Every settled pair, in the order they were made."""
        return tuple(
            sorted((*self.cuts, *self.placements, *self.links), key=lambda d: d.look)
        )

    def generation(self, model: str) -> int:
        """How many times ``model`` was reopened after it was done."""
        return sum(1 for reopening in self.reopened if reopening.model == model)

    @classmethod
    def replay(
        cls,
        decisions: Iterable[SettledPair],
        done: Iterable[str],
        looks: int = 0,
        reopened: Iterable[Reopening] = (),
    ) -> Settled:
        """Rebuild the state from its decisions in the order they were made."""
        segments: list[list[str]] = []
        cuts: list[SettledPair] = []
        links: list[SettledPair] = []
        placements: list[SettledPair] = []
        for decision in decisions:
            if decision.kind != "resolved":
                links.append(decision)
                continue
            if decision.joiner:
                if _place_joiner(segments, decision):
                    placements.append(decision)
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
        made = (*cuts, *links, *placements)
        return cls(
            segments=tuple(tuple(s) for s in segments),
            cuts=tuple(cuts),
            links=tuple(links),
            done=frozenset(done),
            looks=max([looks, *(d.look for d in made)], default=0),
            placements=tuple(placements),
            reopened=tuple(reopened),
        )


def _place_joiner(segments: list[list[str]], decision: SettledPair) -> bool:
    """Put a placed joiner into its segment: the one after the segment of
    the model above it, or before the one of the model below it."""
    joiner = decision.joiner
    if any(joiner in segment for segment in segments):
        return True  # the placement's other side put it there already
    other, step = (decision.a, 1) if decision.b == joiner else (decision.b, -1)
    index = next((i for i, s in enumerate(segments) if other in s), None)
    if index is None or not 0 <= index + step < len(segments):
        return False
    segments[index + step].append(joiner)
    return True


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
    # The models of the segment the boundary lies in (forecasts of those
    # that need trials but wait for the drawing ones).
    block: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunDecision:
    """Everything the status, allocation and events need from one look."""

    order: tuple[str, ...]
    ranks: dict[str, int]
    # None: a model that joined after a boundary settled, not yet placed.
    groups: dict[str, int | None]
    adjacent_groups: dict[str, int]
    pairs: tuple[PairDecision, ...]
    # Models whose place is not settled: they get trials, now or later. A
    # model leaves it only as it is done, and comes back only reopened.
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
    # The models the stopping rule asks for trials at this look (those
    # ``next`` shares a budget among): some of ``needs_trials``.
    drawing: frozenset[str] = frozenset()
    # Done models this look reopened (each fires ``model_reopened``).
    reopenings: tuple[Reopening, ...] = ()
