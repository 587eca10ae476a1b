"""Models that join after a boundary settled are placed only by their own tests.

No status places a model below (or above) a settled boundary unless a test
covered it: a joiner has no group until its tests place it, draws trials
meanwhile, and the decisions between the models a test covered stand.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from monitor.decisions.decide import Standing, decide, forecast_trials
from monitor.decisions.events import pair_subject
from monitor.engine.simulation import PAPER_MEANS, simulate
from monitor.schema import Status
from tests.monitor.scheduling import Step, follow_next
from tests.monitor.standings import M, standing
from tests.monitor.test_decisions import config, rules


def _settled_pair() -> tuple[list[Standing], object]:
    run = config()
    first = decide(
        [standing("a", 0.9, 0.01), standing("b", 0.5, 0.01)], run, rules(run)
    )
    assert first.groups == {"a": 1, "b": 2} and first.done == {"a", "b"}
    return [standing("a", 0.9, 0.01), standing("b", 0.5, 0.01)], first.settled


def test_a_late_twin_of_the_best_is_not_placed_below_it_untested() -> None:
    run = config()
    field, settled = _settled_pair()
    # The twin has 2 trials per question: its score is still pulled down.
    twin = standing("t", 0.6, 0.08, per_question=2)
    later = decide([*field, twin], run, rules(run), settled)  # type: ignore[arg-type]
    assert later.groups == {"a": 1, "b": 2, "t": None}
    assert later.order[-1] == "t" and "t" in later.needs_trials
    assert not later.new_decisions and later.pairs[0].resolved
    assert not later.stable
    models, _ = forecast_trials(later, lambda name: np.full(M, 2), M, 80)
    assert (models["t"] or 0) > 0


def test_a_tested_joiner_goes_above_the_boundary_it_beat() -> None:
    run = config()
    field, settled = _settled_pair()
    twin = standing("t", 0.9, 0.01)
    later = decide([*field, twin], run, rules(run), settled)  # type: ignore[arg-type]
    # Settled above b, level with a: it shares a's group, never below it.
    assert later.groups == {"a": 1, "t": 1, "b": 2}
    assert later.pairs[0].a in {"a", "t"} and not later.pairs[0].resolved
    # The boundary a | b the first test covered still stands.
    assert later.settled.cuts[0].above == ("a",)


def test_a_joiner_clearly_below_is_placed_below_and_tested_inside_its_group() -> None:
    run = config()
    field, settled = _settled_pair()
    low = standing("c", 0.2, 0.01)
    later = decide([*field, low], run, rules(run), settled)  # type: ignore[arg-type]
    assert later.groups == {"a": 1, "b": 2, "c": 3}
    # Its placement into b's group (tested against a) is a decision, and so
    # is the boundary its own test then settled inside that group.
    placed, cut = later.new_decisions
    assert (placed.kind, placed.joiner, placed.above, placed.below) == (
        "resolved",
        "c",
        ("a",),
        ("c",),
    )
    assert (cut.kind, cut.a, cut.b, cut.joiner) == ("resolved", "b", "c", "")


def test_a_joiner_tied_across_the_boundary_stops_unplaced() -> None:
    run = config()
    near = [standing("a", 0.52, 0.0115, 75), standing("b", 0.48, 0.0115, 75)]
    first = decide(near, run, rules(run))
    assert first.groups == {"a": 1, "b": 2}
    # Level with both sides and out of hope either way: it draws nothing
    # more and no group is claimed over it.
    middle = standing("m", 0.5, 0.0115, 75)
    later = decide([*near, middle], run, rules(run), first.settled)
    assert later.groups["m"] is None
    assert "m" not in later.needs_trials


def _watch(seed: int, statuses: list[Status]) -> Status:
    means = (*PAPER_MEANS, PAPER_MEANS[-1])  # an exact twin of the best
    result = simulate(
        means,
        seed=seed,
        trials_per_step=10,
        joins=(0,) * len(PAPER_MEANS) + (7000,),
        observe=statuses.append,
    )
    return result.status


@pytest.mark.slow
def test_the_late_twin_is_never_claimed_below_the_best_and_decisions_stand() -> None:
    # Seeds where placing the joiner by its score put it under the best
    # model's settled boundary for good (a false claim at the end).
    for seed in (0, 4):
        statuses: list[Status] = []
        final = _watch(seed, statuses)
        statuses.append(final)
        joined = False
        for status in statuses:
            groups = {row.model: row.group for row in status.models}
            best, twin = groups["model11"], groups.get("model12")
            joined |= "model12" in groups
            assert best is None or twin is None or best >= twin
            for decision in status.decisions:
                if decision.kind != "resolved":
                    continue
                # Each settled boundary holds for the models its test covered.
                high, low = groups[decision.a], groups[decision.b]
                assert high is not None and low is not None and high < low
        assert joined
        final_groups = {row.model: row.group for row in final.models}
        assert final_groups["model12"] == final_groups["model11"] == 1


def _check_every_split_is_a_recorded_claim(steps: Iterable[Step]) -> Status:
    """Every status: each pair in two groups is claimed by a resolved
    decision of ``status.decisions`` (its model in ``above``, the other in
    ``below``) and by a ``pair_resolved`` event fired by then; each resolved
    decision is such an event. Returns the last status."""
    claims: list[tuple[set[str], set[str]]] = []
    subjects: set[str] = set()
    for step in steps:
        for event in step.events:
            if event.kind == "pair_resolved":
                above, below = event.payload["above"], event.payload["below"]
                assert isinstance(above, list) and isinstance(below, list)
                claims.append(({str(n) for n in above}, {str(n) for n in below}))
                subjects.add(event.subject)
        status = step.status
        groups = {row.model: row.group for row in status.models}
        for higher, high in groups.items():
            for lower, low in groups.items():
                if high is None or low is None or high >= low:
                    continue
                pair = (higher, lower)
                assert any(higher in a and lower in b for a, b in claims), pair
                assert any(
                    d.kind == "resolved" and higher in d.above and lower in d.below
                    for d in status.decisions
                ), pair
        for decision in status.decisions:
            if decision.kind == "resolved":
                assert pair_subject(decision.a, decision.b) in subjects, decision
    return status


LATE_TWIN = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.4)  # model08 ties model03


@pytest.mark.parametrize("seed", [0, 2, 31])
def test_a_twin_joining_at_half_the_budget_is_split_only_by_recorded_claims(
    seed: int,
) -> None:
    # Seeds where the twin's placement (into model03's group, and in 31
    # into the group above it) claimed an order over it that no decision
    # or event recorded.
    half = 8 * 20 * 30 // 2
    final = _check_every_split_is_a_recorded_claim(
        follow_next(LATE_TWIN, seed, joins=(0,) * 7 + (half,))
    )
    assert final.stable
    # Its placement is recorded as decisions naming it.
    assert any(d.joiner == "model08" for d in final.decisions)


@pytest.mark.parametrize("seed", range(6))
def test_every_split_is_a_recorded_claim_with_joiners_restarts_and_corrections(
    seed: int, tmp_path: Path
) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(4, 8))
    means = tuple(np.round(rng.uniform(0.2, 0.8, size), 2).tolist())
    # A third of the models join late, some at once; tied copies included.
    means = (*means, means[0], means[-1])
    joins = tuple(
        int(rng.choice([0, 0, 1500, 2500])) if index >= 2 else 0
        for index in range(len(means))
    )
    _check_every_split_is_a_recorded_claim(
        follow_next(
            means,
            seed,
            joins=joins,
            reuse=0.15,
            state=tmp_path / "state.db",
            restart_every=7,
        )
    )


def test_a_twin_of_model03_placed_below_it_is_claimed_by_a_recorded_decision() -> None:
    # The simulator's seed where the twin, joining at half the budget, ends
    # in a group of its own under model03: that split is a decision.
    final = simulate(
        LATE_TWIN, seed=24, trials_per_step=10, joins=(0,) * 7 + (8400,)
    ).status
    groups = {row.model: row.group for row in final.models}
    twin, model03 = groups["model08"], groups["model03"]
    assert twin is not None and model03 is not None and twin == model03 + 1
    (claim,) = [
        d
        for d in final.decisions
        if d.kind == "resolved" and "model03" in d.above and "model08" in d.below
    ]
    assert claim.joiner == "model08"
