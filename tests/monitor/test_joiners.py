"""Models that join after a boundary settled are placed only by their own tests.

No status places a model below (or above) a settled boundary unless a test
covered it: a joiner has no group until its tests place it, draws trials
meanwhile, and the decisions between the models a test covered stand.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.decisions.decide import Standing, decide, forecast_trials
from monitor.engine.simulation import PAPER_MEANS, simulate
from monitor.schema import Status
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
    assert [d.kind for d in later.new_decisions] == ["resolved"]


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
