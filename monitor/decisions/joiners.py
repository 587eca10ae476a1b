"""Models that join a run after a boundary settled: placed only once tested.

A resolved boundary's test covered the models of the run when it was made.
A model that reports later (a run without declared ``models``) was not
covered: putting it in any group would claim an order over it that no test
made (a late twin of the best model sits below the best one's settled
boundary by chance half the time). So a joiner stays *not yet placed* (no
``group``, drawing trials) until its own tests place it: it goes into the
settled segment ``s`` only when every model of the segments above ``s`` is
settled above it and it is settled above every model of the segments
below, each pair at the threshold of the look's error share (the one a new
boundary would be tested at). Joiners placed earlier in the same look
count as members of their segments, so every pair in two groups was
tested. Decisions between the models a test covered stay as they were;
inside its segment the joiner is then ordered and tested like every other
model.

A placement is an order claim, so it is recorded as one: a resolved
decision for each side (the models of the segments above over the joiner,
the joiner over those below), named by the pair adjacent across the
boundary and firing ``pair_resolved`` like any boundary; after a restart
they put the joiner back into its segment.

A joiner that can no longer be placed anywhere (every placement has a pair
that is futile, or it is out of budget) stops drawing, is done, and stays
not placed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.look import z_matrix
from monitor.decisions.model import (
    OpenBoundary,
    PairDecision,
    RunDecision,
    SettledPair,
    Standing,
)
from monitor.schema import RunConfig
from scorio_core import ci_groups, order_confidence, z_threshold
from scorio_core.stopping import StoppingRule, posterior_information


@dataclass(frozen=True, slots=True)
class Pending:
    """A joiner not yet placed, and the pair that binds its placement."""

    model: str
    other: str
    z: float
    information: float
    threshold: float
    drawing: bool


@dataclass(frozen=True, slots=True)
class Placement:
    """The settled segments with the joiners their tests placed, the
    decisions that record those placements, and the joiners left."""

    segments: list[list[str]]
    placed: frozenset[str]
    pending: tuple[Pending, ...]
    decisions: tuple[SettledPair, ...] = ()


def place_joiners(
    segments: list[list[str]],
    joiners: Sequence[Standing],
    by_name: dict[str, Standing],
    rule: StoppingRule,
    hopeful: StoppingRule,
    categories: int,
    cap: int | None,
    look: int = 0,
    run_trials: int = 0,
) -> Placement:
    """Place each joiner whose tests put it between settled segments.

    Args:
        segments: The settled segments, best first (not changed).
        joiners: Models no segment holds.
        by_name: Every model's standing.
        rule: The rule at the look's error share (the placement tests).
        hopeful: The rule futility asks (see :class:`~monitor.decisions.links.Links`).
        categories: The run's outcome categories (for the prior's information).
        cap: ``max_trials_per_question``.
        look: The look (recorded with the placements).
        run_trials: The run's trials (recorded with the placements).
    """
    placed_segments = [list(segment) for segment in segments]
    placed: set[str] = set()
    pending: list[Pending] = []
    decisions: list[SettledPair] = []
    for joiner in sorted(joiners, key=lambda s: (-s.mu, s.model)):
        # Joiners placed before this one are tested against like members.
        members = [by_name[name] for segment in placed_segments for name in segment]
        owner = [
            index for index, segment in enumerate(placed_segments) for _ in segment
        ]
        field = [joiner, *members]
        mu = np.array([s.mu for s in field])
        sigma = np.array([s.sigma for s in field])
        gap = mu[0] - mu[1:]  # > 0: the joiner above
        spread = np.hypot(sigma[0], sigma[1:])
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(spread > 0.0, np.abs(gap) / spread, np.inf)
        information = posterior_information(
            np.array([s.unit_variance for s in field]), sigma**2, categories + 1.0
        )[0, 1:]
        own = posterior_information(
            np.array([s.unit_variance for s in field]) / 2.0,
            sigma**2 / 2.0,
            categories + 1.0,
        ).diagonal()
        informed = np.minimum(own[0], own[1:])
        threshold = rule.thresholds(information)
        settled = (information > 0.0) & (z >= threshold)
        futile = ~settled & hopeful.futile(z, informed)
        owners = np.array(owner)
        target, possible, binding = None, False, None
        for s in range(len(placed_segments)):
            above, below = owners < s, owners > s
            need = np.where(above, gap < 0.0, np.where(below, gap > 0.0, True))
            ok = np.where(above | below, settled & need, True)
            if ok.all():
                target = s
                break
            required = above | below
            if not (futile & required).any():
                possible = True
            margin = np.where(required & ~ok, z - threshold, np.inf)
            weakest = int(np.argmin(margin))
            if binding is None or margin[weakest] > binding[1]:
                # The placement closest to passing binds the forecast.
                binding = (weakest, float(margin[weakest]))
        if target is not None:
            decisions.extend(
                _placement_decisions(
                    joiner.model, target, placed_segments, by_name, z, look, run_trials
                )
            )
            placed_segments[target].append(joiner.model)
            placed.add(joiner.model)
            continue
        index = 0 if binding is None else binding[0]
        budget = cap is None or joiner.least_sampled < cap
        pending.append(
            Pending(
                model=joiner.model,
                other=members[index].model,
                z=float(z[index]),
                information=float(information[index]),
                threshold=float(threshold[index]),
                drawing=possible and budget,
            )
        )
    return Placement(
        placed_segments, frozenset(placed), tuple(pending), tuple(decisions)
    )


def _placement_decisions(
    joiner: str,
    target: int,
    segments: list[list[str]],
    by_name: dict[str, Standing],
    z: NDArray[np.float64],
    look: int,
    run_trials: int,
) -> list[SettledPair]:
    """The resolved decisions a placement into ``segments[target]`` makes.

    ``z`` holds the joiner's z against each member, in segment order. Each
    side is named by the member adjacent to the joiner across the boundary
    (the lowest-scored model above, the highest below).
    """
    position = {
        name: index
        for index, name in enumerate(name for segment in segments for name in segment)
    }
    above = tuple(name for segment in segments[:target] for name in segment)
    below = tuple(name for segment in segments[target + 1 :] for name in segment)

    def record(
        a: str, b: str, other: str, high: tuple[str, ...], low: tuple[str, ...]
    ) -> SettledPair:
        value = float(z[position[other]])
        return SettledPair(
            kind="resolved",
            a=a,
            b=b,
            z=value if np.isfinite(value) else 1e308,
            trials=run_trials,
            look=look,
            above=high,
            below=low,
            joiner=joiner,
        )

    decisions = []
    if above:
        nearest = min(segments[target - 1], key=lambda name: by_name[name].mu)
        decisions.append(record(nearest, joiner, nearest, above, (joiner,)))
    if below:
        nearest = max(segments[target + 1], key=lambda name: by_name[name].mu)
        decisions.append(record(joiner, nearest, nearest, (joiner,), below))
    return decisions


def joiner_share(size: int, cuts: int, target: str) -> int:
    """Boundaries sharing the error when a joiner is tested: the ranking's
    unresolved boundaries counting the joiners (one for ``top_k``/``leader``)."""
    if target in ("top_k", "leader"):
        return 1
    return max(1, size - 1 - cuts)


def with_pending(
    core: RunDecision,
    pending: Sequence[Pending],
    by_name: dict[str, Standing],
    config: RunConfig,
) -> RunDecision:
    """The decision with the joiners not yet placed after the placed models.

    They have no group (no order is claimed over them), draw trials while a
    placement is still possible, and each has a forecast through the pair
    that binds its placement. One that stops drawing is done (for good,
    unless its tests still place it later: placing it reopens it).
    """
    order = (*core.order, *(p.model for p in pending))
    mu = np.array([by_name[name].mu for name in order])
    sigma = np.array([by_name[name].sigma for name in order])
    better = (mu[None, :] > mu[:, None]).sum(axis=1)
    z = z_matrix(mu, sigma)
    start = len(core.order)
    pairs = [
        PairDecision(
            a=order[index - 1],
            b=order[index],
            z=float(z[index - 1, index]),
            rho=order_confidence(float(z[index - 1, index])),
            resolved=False,
            unresolvable=False,
        )
        for index in range(start, len(order))
    ]
    boundaries = [
        OpenBoundary(
            index=start - 1 + offset,
            a=p.other,
            b=p.model,
            z=p.z,
            information=p.information,
            margin_z=None,
            drawing=(p.model,),
        )
        for offset, p in enumerate(pending)
        if p.drawing
    ]
    drawing = {p.model for p in pending if p.drawing}
    stopped = {
        p.model for p in pending if not p.drawing and by_name[p.model].trials > 0
    }
    cap = config.max_trials_per_question
    spent = {
        p.model
        for p in pending
        if cap is not None and by_name[p.model].least_sampled >= cap
    }
    groups: dict[str, int | None] = {**core.groups, **{p.model: None for p in pending}}
    paper = ci_groups(mu, sigma, z_threshold(config.confidence)).tolist()
    return replace(
        core,
        order=order,
        ranks=dict(zip(order, (1 + better).tolist(), strict=True)),
        groups=groups,
        adjacent_groups=dict(zip(order, paper, strict=True)),
        pairs=(*core.pairs, *pairs),
        needs_trials=core.needs_trials | drawing,
        drawing=core.drawing | drawing,
        done=core.done | stopped,
        exhausted=core.exhausted | spent,
        stable=core.stable and not drawing,
        settled=replace(core.settled, done=core.settled.done | stopped),
        open_boundaries=(*core.open_boundaries, *boundaries),
    )
