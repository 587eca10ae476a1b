"""Reservations: `next` hands out leases; their trials are in flight until reported."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adapters.harness import (
    AsyncMonitorClient,
    EmbeddedTransport,
    HttpTransport,
    MonitorClient,
)
from monitor import Monitor, RunConfig, UnknownRunError
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.schema import NextItem
from monitor.service.service import Service
from tests.helpers import serving
from tests.monitor.scheduling import World, cells_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def declared(clock: Clock, cap: int | None = 3) -> Monitor:
    monitor = Monitor(clock=clock)
    monitor.configure(
        RunConfig(
            run="r",
            questions=["q0", "q1"],
            models=["a", "b"],
            max_trials_per_question=cap,
        )
    )
    return monitor


def report(monitor: Monitor, model: str, question: str, trials: range) -> None:
    monitor.ingest(
        [
            {
                "run": "r",
                "model": model,
                "question": question,
                "trial": f"e:{t}",
                "correct": t % 2 == 0,
            }
            for t in trials
        ]
    )


def per_key(items: list[NextItem]) -> dict[tuple[str, str], int]:
    return {(item.model, item.question): item.trials for item in items}


def test_a_plan_is_a_lease_and_a_second_plan_gets_only_what_is_left() -> None:
    clock = Clock()
    monitor = declared(clock)

    first = monitor.next("r", 8)
    second = monitor.next("r", 8)

    assert sum(item.trials for item in first) == 8
    assert {item.lease for item in first} == {first[0].lease}
    assert first[0].expires == clock.now + 600.0
    # Two models x two questions x cap 3 = 12 trials of room; 8 are held.
    assert sum(item.trials for item in second) == 4
    assert second[0].lease != first[0].lease
    held = per_key(first)
    for key, trials in per_key(second).items():
        assert held.get(key, 0) + trials <= 3
    assert monitor.next("r", 8) == []
    assert sum(monitor.in_flight("r").values()) == 12


def test_reports_release_reserved_trials_and_expired_leases_return_them() -> None:
    clock = Clock()
    monitor = declared(clock)
    monitor.next("r", 12, lease_s=60.0)
    assert monitor.next("r", 12) == []

    report(monitor, "a", "q0", range(2))
    flying = monitor.in_flight("r")
    assert flying[("a", "q0")] == 1
    # Reported and in flight together never pass the cap.
    assert monitor.next("r", 12) == []
    report(monitor, "a", "q0", range(2, 3))
    assert ("a", "q0") not in monitor.in_flight("r")

    clock.now += 61.0
    assert monitor.in_flight("r") == {}
    room = per_key(monitor.next("r", 100, lease_s=0))
    assert room == {("a", "q1"): 3, ("b", "q0"): 3, ("b", "q1"): 3}


def test_a_look_ahead_reserves_nothing_and_a_model_can_be_planned_alone() -> None:
    monitor = declared(Clock(), cap=None)
    ahead = monitor.next("r", 4, lease_s=0)
    assert ahead and all(item.lease is None for item in ahead)
    assert monitor.in_flight("r") == {}
    only_b = monitor.next("r", 4, model="b")
    assert {item.model for item in only_b} == {"b"}
    with pytest.raises(ValueError, match="lease_s"):
        monitor.next("r", 4, lease_s=-1)


async def test_reservations_hold_across_http_callers_and_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with Service(declared(Clock())) as service:
        async with serving(create_app(service, HttpSettings())) as base:
            first = await _next_over_http(base, 8)
            second = await _next_over_http(base, 8)
            assert sum(item.trials for item in first + second) == 12
            command = ["next", "--url", base, "--run", "r", "--budget", "5"]
            # The CLI blocks: run it beside the server's event loop.
            assert await asyncio.to_thread(main, [*command, "--json"]) == 0
            answered = json.loads(capsys.readouterr().out)
            assert answered == []  # all room is held
        flying = service.monitor.in_flight("r")
    assert sum(flying.values()) == 12


async def _next_over_http(base: str, budget: int) -> list[NextItem]:
    async with AsyncMonitorClient(HttpTransport(base)) as client:
        return await client.next("r", budget)


def test_the_cli_reads_a_state_file_without_reserving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.db"
    with Monitor(state) as monitor:
        monitor.configure(RunConfig(run="r", questions=["q0"], models=["a", "b"]))
    for _ in range(2):
        assert (
            main(
                ["next", "--state", str(state), "--run", "r", "--budget", "2", "--json"]
            )
            == 0
        )
        items = json.loads(capsys.readouterr().out)
        assert sum(item["trials"] for item in items) == 2
        assert all(item["lease"] is None for item in items)


def test_the_sync_client_passes_the_lease_on() -> None:
    monitor = declared(Clock())
    with MonitorClient(EmbeddedTransport(monitor)) as client:
        items = client.next("r", 2, lease_s=5.0)
    assert items and items[0].expires == 1005.0


def test_reserved_trials_that_will_not_run_can_be_given_back() -> None:
    monitor = declared(Clock())
    first = monitor.next("r", 12)
    lease = first[0].lease
    assert monitor.next("r", 12) == []
    back = [item.model_copy(update={"trials": 1}) for item in first]
    assert monitor.release("r", back) == len(first)
    assert sum(monitor.in_flight("r").values()) == 12 - len(first)
    # Without a lease: from whichever lease holds them; never more than held.
    assert monitor.release("r", [NextItem(model="a", question="q0", trials=99)]) == 2
    assert ("a", "q0") not in monitor.in_flight("r")
    assert {item.lease for item in monitor.next("r", 12)} != {lease}
    with pytest.raises(UnknownRunError):
        monitor.release("nope", back)


async def test_a_client_gives_reservations_back_over_http() -> None:
    async with Service(declared(Clock())) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, AsyncMonitorClient(HttpTransport(base)) as c:
            plan = await c.next("r", 4)
            assert await c.release("r", plan) == 4
        assert service.monitor.in_flight("r") == {}


def test_reports_release_the_oldest_lease_first_among_many_cells() -> None:
    # Leases settle from the cells whose counts changed since the last plan;
    # every other reserved cell must stay in flight, unchanged.
    clock = Clock()
    monitor = Monitor(clock=clock)
    questions = [f"q{i}" for i in range(20)]
    models = ["a", "b", "c"]
    monitor.configure(RunConfig(run="r", questions=questions, models=models))
    first = per_key(monitor.next("r", 30, lease_s=100.0))
    second = per_key(monitor.next("r", 30, lease_s=10.0))
    both = {key: first.get(key, 0) + second.get(key, 0) for key in first | second}
    assert monitor.in_flight("r") == both

    (model, question), held = next(iter(first.items()))
    assert both[(model, question)] == held  # one trial more than reserved
    report(monitor, model, question, range(held + 1))
    monitor.next("r", 0)  # a plan settles, like in_flight does
    after = monitor.in_flight("r")
    # The cell's reservation is released, and the trial beyond it releases
    # one of the same model's elsewhere (the oldest lease's first cell).
    (_, lent_question), _ = next(
        (key, n)
        for key, n in first.items()
        if key[0] == model and key != (model, question)
    )
    expected = dict(both)
    del expected[(model, question)]
    expected[(model, lent_question)] -= 1
    assert after == {k: n for k, n in expected.items() if n > 0}
    # Every other model's and cell's reservations stay as they were.
    assert all(after[k] == n for k, n in both.items() if k[0] != model)

    clock.now += 20.0  # the second lease expires: what the first holds is left
    left = dict(first)
    del left[(model, question)]
    left[(model, lent_question)] -= 1
    assert monitor.in_flight("r") == {k: n for k, n in left.items() if n > 0}


def test_a_report_elsewhere_settles_a_reservation_of_its_model() -> None:
    clock = Clock()
    monitor = declared(clock, cap=2)
    plan = monitor.next("r", 2, model="a")
    assert per_key(plan) == {("a", "q0"): 1, ("a", "q1"): 1}
    monitor.next("r", 1, model="b")

    # Two trials of a, both on q1: q1's own reservation, then q0's.
    report(monitor, "a", "q1", range(2))

    assert monitor.in_flight("r") == {("b", "q0"): 1}
    # a holds nothing now: a scheduler that runs its own questions is not
    # starved by q0's lent trial, its room below the cap is planned again.
    again = monitor.next("r", 5, model="a")
    assert per_key(again) == {("a", "q0"): 2}
    report(monitor, "a", "q0", range(2, 4))
    assert monitor.next("r", 5, model="a") == []
    assert monitor.in_flight("r") == {("b", "q0"): 1}


def test_lent_room_waits_while_its_model_holds_other_trials() -> None:
    clock = Clock()
    monitor = declared(clock, cap=2)
    assert per_key(monitor.next("r", 4, model="a")) == {
        ("a", "q0"): 2,
        ("a", "q1"): 2,
    }
    # Three trials of a on q0: q0's two, then one of q1's (lent: it may run).
    report(monitor, "a", "q0", range(3))
    assert monitor.in_flight("r") == {("a", "q1"): 1}

    plan = monitor.next("r", 5, model="a")

    # a still holds a q1 trial, so q1's lent room is not handed out again.
    assert plan == []
    (waiting,) = plan.waiting_for
    assert waiting.reason == "in_flight" and waiting.models == ["a"]
    assert waiting.until == clock.now + 600.0


@pytest.mark.parametrize(("seed", "reuse"), [(0, 0.3), (1, 0.3), (2, 0.6), (3, 0.1)])
def test_a_scheduler_rerunning_with_used_trial_ids_never_stalls_on_its_leases(
    seed: int, reuse: float
) -> None:
    # A harness restarted mid-run reports some attempts under ids it used
    # before (duplicates and corrections): each still ran a reserved trial.
    # The clock never moves, so no lease expires: a plan that waits on one
    # would wait forever.
    cap = 20
    questions = [f"q{index}" for index in range(10)]
    rates = {"a": 0.3, "b": 0.45, "c": 0.6, "d": 0.6}
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(
        RunConfig(
            run="r",
            questions=questions,
            models=list(rates),
            max_trials_per_question=cap,
        )
    )
    world = World(monitor, "r", rates, seed=seed, reuse=reuse)

    for _ in range(1000):
        plan = monitor.next("r", 20)
        status = monitor.status("r")
        if status.stable:
            break
        if not plan:
            # Only the budget may end a run that is not stable.
            assert {w.reason for w in plan.waiting_for} == {"budget"}, plan
            break
        world.report(cells_of(plan))
        # Every trial handed out was run and reported: none is in flight.
        assert monitor.in_flight("r") == {}
        assert "in_flight" not in {w.reason for w in monitor.status("r").waiting_for}
    else:
        pytest.fail("the loop did not end")
    status = monitor.status("r")
    assert status.duplicates > 0 and status.corrections > 0
    # Counted trials (distinct ids) never pass the cap.
    assert max(len(ids) for ids in world.ids.values()) <= cap


@pytest.mark.parametrize("batch", [1, 40])
def test_a_duplicate_or_a_correction_settles_a_reservation_like_a_new_trial(
    batch: int,
) -> None:
    # One trial at a time (the one trial's path) and 40 at once (counted
    # by column): the same settling.
    monitor = Monitor(clock=Clock())
    questions = [f"q{index}" for index in range(batch)]
    monitor.configure(RunConfig(run="r", questions=questions, models=["a", "b"]))

    def send(trial: str, correct: bool, prior: bool = False) -> None:
        events = [
            {
                "run": "r",
                "model": "a",
                "question": question,
                "trial": trial,
                "correct": correct,
                **({"prior": True} if prior else {}),
            }
            for question in questions
        ]
        monitor.ingest(events[0] if batch == 1 else events)

    send("t0", True)
    send("p0", True, prior=True)
    monitor.next("r", 3 * batch, model="a")
    assert sum(monitor.in_flight("r").values()) == 3 * batch

    send("t0", True)  # a duplicate
    assert sum(monitor.in_flight("r").values()) == 2 * batch
    send("t0", False)  # a correction
    assert sum(monitor.in_flight("r").values()) == batch
    send("p0", False, prior=True)  # prior outcomes are no trials: none settle
    assert sum(monitor.in_flight("r").values()) == batch
    send("t1", True)
    assert monitor.in_flight("r") == {}
    status = monitor.status("r")
    assert (status.duplicates, status.corrections) == (batch, 2 * batch)
