"""What a run's counts mean right now: order, groups, pairs, who needs trials.

:func:`decide` turns every model's posterior, and the decisions the run has
already settled, into a :class:`RunDecision` under the run's stopping rule,
error control and target. It is pure (no I/O, no clock): the engine calls it
on each look, fires the new decisions as events and keeps the settled state.

Claims. Order claims are made only at the rank boundaries of the target
(every boundary for ``ranking``; one for ``top_k`` and ``leader``). A
boundary is resolved only when every pair across it is settled ("block"
resolution, see :mod:`scorio_core.stopping`).

Error control. With ``error_control = "ranking"`` (the default) the claimable
boundaries share ``1 - confidence`` by Holm's step-down
(:func:`scorio_core.multiplicity.holm_step_down`): each is tested at
``(1 - confidence) / (2 L)`` per direction, ``L`` the number of claimable
boundaries not yet resolved, and a boundary that resolves frees its share
for the others (within the same look too). Before the first false claim
every class of truly tied models sits inside one group, so ``L`` is at least
the number of ways the ties can be split, and the chance of any false claim
stays at ``1 - confidence`` however many ties there are and wherever they
sit. Boundaries closed as ties keep their share (giving it away would not be
covered by the argument). With ``"pair"`` each boundary is tested at
``(1 - confidence) / 2`` per direction.

Settled decisions are final. A resolved boundary cuts the order into
segments that never merge again (the groups); inside a segment models are
ordered by score. A pair found futile, out of budget or equivalent is linked
for good, and no boundary it spans can resolve. A model that is done stays
done unless a new model joins its group (a :class:`Reopening`).

Who needs trials. A model needs trials while it is not done and has
budget left: its place is not settled, so it gets trials now or later. A
model is done once the rule draws none from it and it is settled against
every model across each open boundary of its segment (or it is out of
budget). At each look the stopping rule draws trials only from some of the
models that need them (``drawing``: the weakest pair of each open boundary
and the two models beside it), which ``next`` shares the budget among; the
others wait. So ``needs_trials`` only shrinks, but for a reopening.

Joiners. A model that reports after a boundary settled was not covered by
that boundary's test: it has no group until its own tests place it between
the settled segments, a placement recorded as decisions
(:mod:`monitor.decisions.joiners`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.forecast import FORECAST_SEED, forecast_trials
from monitor.decisions.joiners import joiner_share, place_joiners, with_pending
from monitor.decisions.links import Links
from monitor.decisions.look import BoundaryTests, Look, z_matrix
from monitor.decisions.model import (
    DecisionKind,
    FloatMatrix,
    OpenBoundary,
    PairDecision,
    Reopening,
    RunDecision,
    Settled,
    SettledPair,
    Standing,
)
from monitor.schema import RunConfig
from scorio_core import ci_groups, order_confidence, z_threshold
from scorio_core.multiplicity import holm_step_down
from scorio_core.stopping import (
    ConfidenceSequenceRule,
    PaperRule,
    SequentialRule,
    StoppingRule,
    posterior_information,
)

__all__ = [
    "FORECAST_SEED",
    "DecisionKind",
    "OpenBoundary",
    "PairDecision",
    "Reopening",
    "RunDecision",
    "Settled",
    "SettledPair",
    "Standing",
    "build_rule",
    "decide",
    "forecast_trials",
]


def build_rule(config: RunConfig, boundaries: int = 1) -> StoppingRule:
    """The stopping rule a run's config asks for, sharing its error ``boundaries`` ways.

    ``sequential`` (the default) is the error-controlled boundary: against
    the budget when ``max_trials_per_question`` is set, else a confidence
    sequence. With ``error_control = "pair"`` the share is always one.
    ``paper`` is the paper's one-look rule, shown for reference.
    """
    budget = config.max_trials_per_question
    if config.rule == "paper":
        return PaperRule.from_confidence(config.confidence, budget)
    share = max(int(boundaries), 1) if config.error_control == "ranking" else 1
    if budget is None:
        return ConfidenceSequenceRule.from_confidence(
            config.confidence, boundaries=share
        )
    return SequentialRule.from_confidence(config.confidence, budget, boundaries=share)


def decide(
    standings: Sequence[Standing],
    config: RunConfig,
    rule_for: Callable[[int], StoppingRule],
    settled: Settled | None = None,
    run_trials: int = 0,
) -> RunDecision:
    """Order, group and classify a run's models, keeping what is settled.

    The phases of a look: place the models in the settled segments,
    resolve boundaries (Holm's step-down), link the pairs that can no
    longer be told apart, then say who needs trials, who is done, and how
    each adjacent pair stands.

    Args:
        standings: Every model's posterior and sampling.
        config: The run's config.
        rule_for: The rule for ``L`` boundaries sharing the error (see
            :func:`build_rule`).
        settled: The run's settled decisions so far.
        run_trials: The run's trials, recorded with new decisions.
    """
    before = settled if settled is not None else Settled()
    by_name = {s.model: s for s in standings}
    segments, joiners = _place(before.segments, standings)
    if not joiners:
        return _decide_placed(standings, segments, before, config, rule_for, run_trials)
    share = joiner_share(len(standings), len(before.cuts), config.target)
    placement = place_joiners(
        segments,
        [by_name[name] for name in joiners],
        by_name,
        rule_for(share),
        rule_for(1),
        len(config.weights),
        config.max_trials_per_question,
        look=before.looks + 1,
        run_trials=run_trials,
    )
    # A joiner that stopped drawing is done: it draws no more unless placed.
    pending = [
        replace(p, drawing=False) if p.model in before.done else p
        for p in placement.pending
    ]
    waiting = {p.model for p in pending}
    core = _decide_placed(
        [s for s in standings if s.model not in waiting],
        placement.segments,
        before,
        config,
        rule_for,
        run_trials,
        placement.decisions,
    )
    return with_pending(core, pending, by_name, config)


def _decide_placed(
    standings: Sequence[Standing],
    segments: list[list[str]],
    before: Settled,
    config: RunConfig,
    rule_for: Callable[[int], StoppingRule],
    run_trials: int,
    placements: tuple[SettledPair, ...] = (),
) -> RunDecision:
    """:func:`decide` for the models placed in the settled segments
    (``placements``: the decisions that placed joiners this look)."""
    by_name = {s.model: s for s in standings}
    joined = set(by_name) - before.models if before.models else set()
    order = tuple(name for segment in segments for name in segment)
    ordered = [by_name[name] for name in order]
    size = len(order)
    # A model joining a group reopens its neighbours' sampling ("beside it").
    reopened = {
        name: tuple(sorted(joined & set(segment)))
        for segment in segments
        if joined & set(segment)
        for name in segment
    }
    done_before = set(before.done) - set(reopened)

    cap = config.max_trials_per_question
    has_budget = {s.model: cap is None or s.least_sampled < cap for s in ordered}
    can_draw = {n: has_budget[n] and n not in done_before for n in order}
    # Nothing is final while the field is incomplete: a ranking needs two
    # models with trials, and every declared model present.
    started = {s.model for s in ordered if s.trials > 0}
    complete = (config.target == "width" or len(started) >= 2) and (
        config.models is None or set(config.models) <= started
    )

    mu = np.array([s.mu for s in ordered])
    sigma = np.array([s.sigma for s in ordered])
    z = z_matrix(mu, sigma)
    information = posterior_information(
        np.array([s.unit_variance for s in ordered]),
        sigma**2,
        float(len(config.weights) + 1),
    )
    targets = _target_boundaries(config, size)
    claims = list(range(size - 1)) if config.target == "width" else targets

    cut_at = _cut_positions(segments, before.cuts)
    look = Look(order, cut_at, list(before.links), z, before.looks + 1, run_trials)

    open_claims = [k for k in claims if k not in cut_at and look.spanning(k) is None]
    # Holm's step-down: resolve what the current share allows, free the
    # shares of what resolved, and test the rest again. Boundaries closed
    # as ties keep their share (they count in ``shares``, untested).
    shares = sum(1 for k in claims if k not in cut_at)
    tests = BoundaryTests(look, information, rule_for, max(1, shares))
    if complete:
        resolved = set(holm_step_down(open_claims, tests, shares).rejected)
        open_claims = [k for k in open_claims if k not in resolved]

    links = Links(
        look,
        config,
        tests,
        ordered,
        sigma,
        information,
        rule_for,
        complete=complete,
        targets=targets,
        can_draw=can_draw,
    )
    links.link(open_claims)
    drawing = links.needs
    open_claims = [k for k in open_claims if look.spanning(k) is None]
    predicted = _predicted_trials(ordered, config, done_before, has_budget, drawing)

    open_targets = {k for k in targets if k in open_claims}
    done = set(done_before)
    if complete:
        done |= _done_models(
            look, ordered, drawing, has_budget, open_targets, tests.settled_pairs
        )
    # Reopened and done again within the look: it never needed trials.
    reopenings = tuple(
        Reopening(
            model=name,
            joiners=joiners,
            generation=before.generation(name) + 1,
            look=look.look,
            trials=run_trials,
        )
        for name, joiners in reopened.items()
        if name in before.done and name not in done
    )
    exhausted = frozenset(
        order[p]
        for k in targets
        if k not in cut_at
        for p in links.weakest[k]
        if not has_budget[order[p]]
    )
    # Competition ranks: 1 + the number of strictly better means.
    better = (mu[None, :] > mu[:, None]).sum(axis=1)
    ranks = dict(zip(order, (1 + better).tolist(), strict=True))
    # The paper's Table 1 grouping (adjacent pairs, one-look threshold), kept
    # for display beside the groups the decisions make.
    paper: list[int] = (
        ci_groups(mu, sigma, z_threshold(config.confidence)).tolist() if size else []
    )
    return RunDecision(
        order=order,
        ranks=ranks,
        groups=_group_numbers(order, cut_at),
        adjacent_groups=dict(zip(order, paper, strict=True)),
        pairs=_adjacent_pairs(look, tests.thresholds, placements, before),
        needs_trials=frozenset(
            name for name in order if name not in done and has_budget[name]
        ),
        predicted_trials=predicted,
        done=frozenset(done),
        exhausted=exhausted,
        stable=complete and not open_targets and not drawing,
        settled=replace(
            _settled_after(before, look, frozenset(done), frozenset(by_name)),
            placements=(*before.placements, *placements),
            reopened=(*before.reopened, *reopenings),
        ),
        new_decisions=(*placements, *look.new),
        open_boundaries=tuple(links.open_boundaries),
        rule=tests.rule,
        futility=links.hopeful,
        drawing=frozenset(drawing),
        reopenings=reopenings,
    )


def _cut_positions(
    segments: list[list[str]], cuts: tuple[SettledPair, ...]
) -> dict[int, SettledPair]:
    """The settled cuts by boundary position: each ends its segment."""
    cut_at: dict[int, SettledPair] = {}
    edge = -1
    for segment, cut in zip(segments, cuts, strict=False):
        edge += len(segment)
        cut_at[edge] = cut
    return cut_at


def _settled_after(
    before: Settled, look: Look, done: frozenset[str], models: frozenset[str]
) -> Settled:
    """What the run has decided for good after the look."""
    order, cut_at = look.order, look.cut_at
    new_segments = tuple(order[a : b + 1] for a, b in _segments(cut_at, look.size))
    cut_order = [cut_at[p] for p in sorted(cut_at)]
    return replace(
        before,
        segments=new_segments if cut_order else (),
        cuts=tuple(cut_order),
        links=tuple(look.links),
        done=done,
        looks=look.look,
        models=models,
    )


def _group_numbers(
    order: tuple[str, ...], cut_at: dict[int, SettledPair]
) -> dict[str, int | None]:
    """Each model's group, numbered from the top: a resolved cut starts one."""
    groups: dict[str, int | None] = {}
    group = 1
    for index, name in enumerate(order):
        if index and index - 1 in cut_at:
            group += 1
        groups[name] = group
    return groups


def _done_models(
    look: Look,
    ordered: Sequence[Standing],
    drawing: set[str],
    has_budget: dict[str, bool],
    open_targets: set[int],
    settled_pairs: NDArray[np.bool_],
) -> set[str]:
    """Models with trials the rule draws none from whose place is settled:
    settled against every model across each open target of their segment
    (so also those whose segment holds none), or out of budget.

    Done is for good (bar a reopening): a done model draws no more, and the
    boundaries beside it are settled by the models that still draw.
    """
    done: set[str] = set()
    for index, standing in enumerate(ordered):
        name = standing.model
        if name in drawing or standing.trials == 0:
            continue
        first, last = look.block(index)
        settled = all(
            settled_pairs[index, k + 1 : last + 1].all()
            if index <= k
            else settled_pairs[first : k + 1, index].all()
            for k in open_targets
            if first <= k < last
        )
        if settled or not has_budget[name]:
            done.add(name)
    return done


def _predicted_trials(
    ordered: Sequence[Standing],
    config: RunConfig,
    done_before: set[str],
    has_budget: dict[str, bool],
    needs: set[str],
) -> dict[str, int | None]:
    """Trials each model needs for the minimum and the width target.

    Adds the models that need them to ``needs``.
    """
    cap = config.max_trials_per_question
    predicted: dict[str, int | None] = {}
    for standing in ordered:
        name = standing.model
        if name in done_before:
            continue
        minimum = config.min_trials_per_question
        if standing.least_sampled < minimum and has_budget[name]:
            needs.add(name)
            predicted[name] = math.ceil(
                (minimum - standing.per_question) * standing.question_count
            )
        width = config.interval_width
        if (
            config.target == "width"
            and width is not None
            and standing.hi - standing.lo > width
            and has_budget[name]
        ):
            needs.add(name)
            extra = _width_trials(standing, width, cap)
            previous = predicted.get(name, 0)
            predicted[name] = (
                None if extra is None or previous is None else max(previous, extra)
            )
    return predicted


def _adjacent_pairs(
    look: Look,
    thresholds: FloatMatrix,
    placements: tuple[SettledPair, ...],
    before: Settled,
) -> tuple[PairDecision, ...]:
    """How each pair adjacent in the order stands after the look.

    A resolved pair's decision is the one that claims it: the cut, or the
    placement of a joiner on either side of it.
    """
    order, z = look.order, look.z
    claims = (*before.placements, *placements)
    pairs = []
    for k in range(look.size - 1):
        tie = look.spanning(k)
        threshold = float(thresholds[k, k + 1])
        cut = look.cut_at.get(k)
        if cut is not None and not cut.covers(order[k], order[k + 1]):
            cut = next((d for d in claims if d.covers(order[k], order[k + 1])), cut)
        pairs.append(
            PairDecision(
                a=order[k],
                b=order[k + 1],
                z=float(z[k, k + 1]),
                rho=order_confidence(float(z[k, k + 1])),
                resolved=k in look.cut_at,
                unresolvable=tie is not None and tie.kind == "unresolvable",
                equivalent=tie is not None and tie.kind == "equivalent",
                threshold=threshold if math.isfinite(threshold) else None,
                decision=tie if cut is None else cut,
            )
        )
    return tuple(pairs)


def _place(
    segments: tuple[tuple[str, ...], ...], standings: Sequence[Standing]
) -> tuple[list[list[str]], list[str]]:
    """Settled segments, each sorted by score, and the models none holds.

    Before the first cut every model is in the one segment; after it, a
    model no settled segment holds is a joiner, placed only by its own
    tests (:mod:`monitor.decisions.joiners`).
    """
    mu = {s.model: s.mu for s in standings}

    def by_score(names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda name: (-mu[name], name))

    if not segments:
        return [by_score(mu)], []
    placed = [[name for name in segment if name in mu] for segment in segments]
    known = {name for segment in placed for name in segment}
    return [by_score(segment) for segment in placed if segment], by_score(
        set(mu) - known
    )


def _segments(cut_at: dict[int, SettledPair], size: int) -> list[tuple[int, int]]:
    """``(first, last)`` positions of each segment the cuts make."""
    bounds, first = [], 0
    for edge in sorted(cut_at):
        bounds.append((first, edge))
        first = edge + 1
    if size:
        bounds.append((first, size - 1))
    return bounds


def _target_boundaries(config: RunConfig, size: int) -> list[int]:
    if size < 2 or config.target == "width":
        return []
    if config.target == "leader":
        return [0]
    if config.target == "top_k":
        top = config.top_k or 1
        return [top - 1] if top < size else []
    return list(range(size - 1))


def _width_trials(standing: Standing, width: float, cap: int | None) -> int | None:
    """Trials until the interval narrows to ``width`` (widths fall like 1/sqrt(n))."""
    current = standing.hi - standing.lo
    if standing.trials == 0 or current <= 0.0:
        return None
    per_question = standing.per_question * (current / width) ** 2
    if cap is not None:
        per_question = min(per_question, cap)
    return max(
        0, math.ceil((per_question - standing.per_question) * standing.question_count)
    )
