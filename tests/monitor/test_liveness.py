"""Liveness: while a run is not stable, ``next`` hands out trials or says why not.

Closed loops drive a monitor the way users' schedulers do: one that runs its
own choice of questions (question-major, as lm-eval repeats run), one that
starts an undeclared field from an empty run through ``next`` alone, and
(hypothesis) schedulers that drop, delay, move and give back what ``next``
reserved, checked after every plan for liveness, for agreement between
``needs_trials``, ``predicted_trials`` and ``next``, and for the cap.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from adapters.harness import (
    AsyncMonitorClient,
    EmbeddedTransport,
    HttpTransport,
    MonitorClient,
)
from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.cli.terminal import status_view
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.schema import NextItem, Plan, Status
from monitor.service.service import Service
from tests.helpers import serving
from tests.monitor.scheduling import (
    Clock,
    QuestionMajor,
    World,
    cells_of,
    needing,
    per_model,
    waiting_models,
)

QUESTIONS = [f"q{index}" for index in range(10)]
RATES = {"a": 0.3, "b": 0.45, "c": 0.6}


def check_plan(
    monitor: Monitor,
    plan: Plan,
    budget: int,
    model: str | None = None,
    *,
    forecasts: bool = False,
) -> Status:
    """The invariants every plan keeps; the run's status after it.

    ``forecasts``: also that a model that needs trials is forecast to need
    some (``predicted_trials`` is not 0).
    """
    status = monitor.status("r")
    assert status.waiting_for == [] or not status.stable
    given_trials = per_model(plan)
    if budget and not given_trials and not status.stable:
        # Liveness: nothing handed out, so the status and the plan say why.
        assert plan.waiting_for, status
        assert status.waiting_for or model is not None, status
    if model is None:
        # Agreement: only models that need trials get them ...
        assert set(given_trials) <= needing(status), (given_trials, status)
        # ... and one that needs them gets some, or is told why not.
        if sum(given_trials.values()) < budget:
            told = waiting_models(status.waiting_for)
            for name in needing(status):
                assert name in given_trials or name in told, (name, status)
    for row in status.models if forecasts else []:
        if row.needs_trials:
            assert row.predicted_trials != 0, row
    return status


@pytest.mark.parametrize(("cap", "repeats"), [(40, 20), (40, 40), (10, 7), (30, 5)])
def test_a_question_major_scheduler_runs_to_stable_without_stalling(
    cap: int, repeats: int
) -> None:
    question_major_loop(cap, repeats, forecasts=False)


def test_a_model_that_needs_trials_is_forecast_to_need_some() -> None:
    question_major_loop(40, 20, forecasts=True)


def question_major_loop(cap: int, repeats: int, *, forecasts: bool) -> None:
    clock = Clock()  # leases never expire: nothing may wait on them
    monitor = Monitor(clock=clock, look_interval_s=0)
    monitor.configure(
        RunConfig(
            run="r",
            questions=QUESTIONS,
            models=list(RATES),
            max_trials_per_question=cap,
        )
    )
    world = World(monitor, "r", RATES, seed=cap + repeats)
    scheduler = QuestionMajor(QUESTIONS, repeats)

    for _ in range(500):
        plan = monitor.next("r", 30)
        status = check_plan(monitor, plan, 30, forecasts=forecasts)
        if not plan:
            assert status.stable, status.waiting_for
            break
        world.report(scheduler.cells(plan))
    else:
        pytest.fail("the loop did not end")
    assert monitor.in_flight("r") == {}


def test_an_undeclared_field_reaches_stable_from_an_empty_run_through_next_alone() -> (
    None
):
    clock = Clock()
    monitor = Monitor(clock=clock, look_interval_s=0)
    cap = 30
    monitor.configure(
        RunConfig(run="r", questions=QUESTIONS, max_trials_per_question=cap)
    )
    world = World(monitor, "r", RATES, seed=7)

    empty = monitor.next("r", 30)
    assert empty == []
    assert [w.reason for w in empty.waiting_for] == ["models"]
    assert "report each model once" in empty.why_empty()
    assert monitor.status("r").waiting_for == empty.waiting_for

    rounds = 0
    while not monitor.status("r").stable:
        rounds += 1
        assert rounds < 200, monitor.status("r")
        handed = 0
        for model in RATES:
            # Each model's scheduler runs exactly what next reserved for it.
            plan = monitor.next("r", 10, model=model)
            check_plan(monitor, plan, 10, model=model)
            handed += world.report(cells_of(plan))
        assert handed or monitor.status("r").stable
    assert max(world.ran.values()) <= cap
    assert {row.model for row in monitor.status("r").models} == set(RATES)


def test_a_scheduler_told_to_report_each_model_once_then_follows_next() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=QUESTIONS))
    world = World(monitor, "r", RATES, seed=3)

    for _ in range(400):
        plan = monitor.next("r", 30)
        status = check_plan(monitor, plan, 30)
        if status.stable:
            break
        if not plan:
            # The one instruction a scheduler needs to start a field.
            assert [w.reason for w in status.waiting_for] == ["models"]
            world.report((model, QUESTIONS[0]) for model in RATES)
        world.report(cells_of(plan))
    assert monitor.status("r").stable


def test_a_model_alone_is_told_to_wait_for_a_second() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=QUESTIONS))
    World(monitor, "r", RATES).report([("a", "q0")])

    plan = monitor.next("r", 10)

    assert plan == []
    (waiting,) = plan.waiting_for
    assert waiting.reason == "models" and waiting.models == ["a"]
    assert "trials of 1 model (a)" in waiting.message
    # Asked by name, a model not yet placed gets trials: a scheduler can
    # reserve every trial it runs, from the first one on.
    assert per_model(monitor.next("r", 10, model="a")) == {"a": 10}
    assert per_model(monitor.next("r", 10, model="newcomer")) == {"newcomer": 10}


def test_room_left_only_on_unseen_questions_is_said() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", question_count=3, max_trials_per_question=2))
    World(monitor, "r", RATES).report([("a", "q0"), ("b", "q0")] * 2)

    plan = monitor.next("r", 10)

    assert plan == []
    reasons = {w.reason: w for w in plan.waiting_for}
    assert set(reasons) == {"questions"}
    assert set(reasons["questions"].models) == {"a", "b"}
    assert "1 of 3 seen" in reasons["questions"].message


def test_a_declared_model_that_is_not_in_the_run_is_said() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=QUESTIONS, models=["a", "b"]))

    plan = monitor.next("r", 10, model="z")

    assert plan == []
    assert "'z' is not declared" in plan.why_empty()


def test_concurrent_schedulers_of_undeclared_models_hold_the_cap() -> None:
    # Five sample-epoch slots per model, each reserving one trial before
    # anything is reported (as Inspect starts them), then reporting in a
    # random order while the others keep asking.
    clock = Clock()
    monitor = Monitor(clock=clock, look_interval_s=0)
    cap, questions = 3, QUESTIONS[:4]
    monitor.configure(
        RunConfig(run="r", questions=questions, max_trials_per_question=cap)
    )
    world = World(monitor, "r", RATES, seed=11)
    rng = np.random.default_rng(5)
    pending: list[tuple[str, str]] = []
    for model in RATES:
        for _ in range(5):
            plan = monitor.next("r", 1, model=model)
            assert per_model(plan) == {model: 1}  # from the first one on
            pending.extend(cells_of(plan))
    for _ in range(300):
        if not pending:
            break
        done = pending.pop(int(rng.integers(len(pending))))
        world.report([done])
        plan = monitor.next("r", 1, model=done[0])
        pending.extend(cells_of(plan))
    assert not pending
    assert max(world.ran.values()) <= cap
    assert monitor.in_flight("r") == {}


# -- every path says why -----------------------------------------------------


def test_the_cli_says_why_a_plan_of_a_state_file_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.db"
    with Monitor(state) as monitor:
        monitor.configure(RunConfig(run="r", questions=QUESTIONS))
    command = ["next", "--state", str(state), "--run", "r", "--budget", "5"]

    assert main(command) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["model\tquestion\ttrials"]
    assert "report each model once" in err
    assert main([*command, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert "report each model once" in err


async def test_http_the_client_and_the_cli_say_until_when_all_is_in_flight(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    monitor = Monitor(clock=clock, look_interval_s=0)
    monitor.configure(
        RunConfig(
            run="r",
            questions=["q0", "q1"],
            models=["a", "b"],
            max_trials_per_question=1,
        )
    )
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, AsyncMonitorClient(HttpTransport(base)) as c:
            first = await c.next("r", 10, lease_s=60.0)
            # Asked for 10, given the 4 left: the plan says why no more.
            assert sum(item.trials for item in first) == 4
            assert [w.reason for w in first.waiting_for] == ["in_flight"]
            full = await c.next("r", 0)
            assert full == [] and full.waiting_for == []  # all that was asked
            second = await c.next("r", 10)
            status = await c.status("r")
            command = ["next", "--url", base, "--run", "r", "--budget", "3"]
            # The CLI and the sync client block: run them beside the loop.
            assert await asyncio.to_thread(main, command) == 0

            def sync_plan() -> Plan:
                with MonitorClient(HttpTransport(base)) as client:
                    plan = client.next("r", 3)
                assert isinstance(plan, Plan)
                return plan

            synced = await asyncio.to_thread(sync_plan)
    assert isinstance(second, Plan) and second == []
    for waiting in (second.waiting_for, status.waiting_for, synced.waiting_for):
        (reason,) = waiting
        assert reason.reason == "in_flight"
        assert set(reason.models) == {"a", "b"}
        assert reason.until == clock.now + 60.0
    assert "reserved by earlier plans" in capsys.readouterr().err


def test_the_embedded_client_says_why() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=QUESTIONS))
    with MonitorClient(EmbeddedTransport(monitor)) as client:
        plan = client.next("r", 3)
        status = client.status("r")
    assert isinstance(plan, Plan) and plan == []
    assert [w.reason for w in plan.waiting_for] == ["models"]
    assert status.waiting_for == plan.waiting_for


# -- schedulers that do not follow the plan ---------------------------------

Action = tuple[str, int]
ACTIONS = st.one_of(
    st.tuples(st.just("plan"), st.integers(0, 40)),
    st.tuples(st.just("plan_model"), st.integers(0, 12)),
    st.tuples(st.just("run"), st.integers(1, 30)),
    st.tuples(st.just("run_elsewhere"), st.integers(1, 30)),
    st.tuples(st.just("drop"), st.integers(1, 10)),
    st.tuples(st.just("give_back"), st.integers(1, 10)),
    st.tuples(st.just("wait"), st.integers(1, 900)),
)


@settings(max_examples=150)
@given(
    actions=st.lists(ACTIONS, min_size=1, max_size=40),
    declared=st.booleans(),
    cap=st.sampled_from([None, 4, 12]),
    seed=st.integers(0, 2**16),
)
def test_liveness_agreement_and_caps_hold_whatever_the_scheduler_does(
    actions: list[Action], declared: bool, cap: int | None, seed: int
) -> None:
    clock = Clock()
    monitor = Monitor(clock=clock, look_interval_s=0)
    questions = QUESTIONS[:5]
    monitor.configure(
        RunConfig(
            run="r",
            questions=questions,
            models=list(RATES) if declared else None,
            max_trials_per_question=cap,
        )
    )
    world = World(monitor, "r", RATES, seed=seed)
    rng = np.random.default_rng(seed)
    pending: list[NextItem] = []  # one reserved trial each
    strays = 0  # trials run elsewhere than reserved
    expired = False  # a lease expired while its trial was pending
    if not declared:
        world.report((model, questions[0]) for model in RATES)
    for kind, size in actions:
        if kind in ("plan", "plan_model"):
            model = None if kind == "plan" else str(rng.choice(list(RATES)))
            held = monitor.in_flight("r")
            plan = monitor.next("r", size, model=model)
            check_plan(monitor, plan, size, model=model)
            for item in plan:
                cell = (item.model, item.question)
                if cap is not None:
                    # The plan never hands out room reported or held.
                    assert world.ran[cell] + held.get(cell, 0) + item.trials <= cap
                pending.extend([item.model_copy(update={"trials": 1})] * item.trials)
        elif kind in ("run", "run_elsewhere", "drop", "give_back"):
            chosen = [
                pending.pop(int(rng.integers(len(pending))))
                for _ in range(min(size, len(pending)))
            ]
            if kind == "run":
                world.report((item.model, item.question) for item in chosen)
            elif kind == "run_elsewhere":
                strays += len(chosen)
                world.report(
                    (item.model, str(rng.choice(questions))) for item in chosen
                )
            elif kind == "give_back":
                assert monitor.release("r", chosen) <= len(chosen)
        else:
            clock.now += size
            expired |= any(
                item.expires is not None and item.expires <= clock.now
                for item in pending
            )
    if cap is not None and not strays and not expired:
        # Schedulers that run only what they reserved never pass the cap.
        assert max(world.ran.values(), default=0) <= cap


def test_the_terminal_view_says_what_the_run_waits_for() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=QUESTIONS))
    console = Console(width=200, record=True)

    console.print(status_view(monitor.status("r")))

    shown = console.export_text()
    assert "waiting for:" in shown
    assert "models: run 'r' has trials of 0 models" in shown
