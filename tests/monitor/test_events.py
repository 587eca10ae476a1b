"""Events are final: no status after a fired event says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor import Monitor, RunConfig
from monitor.engine.simulation import draw_results, draw_world
from monitor.schema import Status
from monitor.stores.records import StoredEvent
from monitor.stores.sqlite import SqliteStore
from tests.monitor.streams import stream_of

ROOT = Path(__file__).resolve().parents[2]


def below_in(groups: dict[str, int | None], upper: str, lower: str) -> bool:
    """Whether ``lower`` sits in a group below ``upper``'s (both placed)."""
    a, b = groups[upper], groups[lower]
    return a is not None and b is not None and a < b


def contradictions(event: StoredEvent, status: Status) -> list[str]:
    """What ``status`` says against a fired ``event`` (empty: nothing)."""
    groups = {row.model: row.group for row in status.models}
    needs = {row.model for row in status.models if row.needs_trials}
    payload = event.payload
    problems = []
    if event.kind == "pair_resolved":
        a, b = str(payload["a"]), str(payload["b"])
        if not below_in(groups, a, b):
            problems.append(f"{a} > {b} was resolved; groups now {groups}")
        above = payload["above"]
        below = payload["below"]
        assert isinstance(above, list) and isinstance(below, list)
        for upper in above:
            for lower in below:
                if not below_in(groups, str(upper), str(lower)):
                    problems.append(f"{upper} > {lower} was claimed")
    elif event.kind in ("pair_unresolvable", "pair_equivalent"):
        a, b = str(payload["a"]), str(payload["b"])
        if groups[a] != groups[b]:
            problems.append(f"{a} ~ {b} was a tie; groups now {groups}")
    elif event.kind == "model_done" and event.subject in needs:
        problems.append(f"{event.subject} was done; it needs trials again")
    elif event.kind == "ranking_stable" and not status.stable:
        problems.append("the ranking was stable; it is open again")
    return problems


def follow_in_chunks(
    monitor: Monitor, run: str, events: list[dict[str, object]], chunk: int
) -> tuple[list[StoredEvent], list[str]]:
    """Ingest ``events`` ``chunk`` at a time, checking every status so far."""
    fired: list[StoredEvent] = []
    problems: list[str] = []
    for start in range(0, len(events), chunk):
        monitor.ingest(events[start : start + chunk])
        status = monitor.status(run)
        fired.extend(monitor.events_after(run, fired[-1].seq if fired else 0))
        for event in fired:
            problems.extend(contradictions(event, status))
    return fired, problems


@pytest.mark.parametrize("chunk", [97, 331, 1000])
def test_the_example_stream_never_contradicts_a_fired_event(chunk: int) -> None:
    events = []
    for line in (ROOT / "examples" / "aime25.jsonl").read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the example's deliberately broken line
    with Monitor(look_interval_s=0.0) as monitor:
        monitor.configure(
            RunConfig(run="aime25", question_count=30, max_trials_per_question=80)
        )
        fired, problems = follow_in_chunks(monitor, "aime25", events, chunk)
    assert not problems and fired


@pytest.mark.parametrize("seed", range(6))
def test_tied_worlds_in_any_order_never_contradict_a_fired_event(seed: int) -> None:
    rng = np.random.default_rng(seed)
    means = (0.3, 0.3, 0.45, 0.45, 0.46, 0.7)
    results = draw_results(draw_world(means, 20, 2.0, rng), 40, rng).astype(np.int64)
    events = stream_of(results, run="ties")
    order = rng.permutation(len(events))
    with Monitor(look_interval_s=0.0) as monitor:
        monitor.configure(
            RunConfig(
                run="ties",
                question_count=20,
                models=[f"m{i}" for i in range(len(means))],
                max_trials_per_question=40,
                equivalence_margin=0.08 if seed % 2 else None,
            )
        )
        fired, problems = follow_in_chunks(
            monitor, "ties", [events[i] for i in order], 150
        )
    assert not problems
    assert any(event.kind.startswith("pair_") for event in fired)


def test_settled_decisions_survive_a_restart_and_later_trials(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.db"
    config = RunConfig(run="r", question_count=10, max_trials_per_question=60)

    def events(model: str, rate: float, trials: range) -> list[dict[str, object]]:
        return [
            {
                "run": "r",
                "model": model,
                "question": q,
                "trial": t,
                "correct": (37 * t + 11 * q) % 100 < rate * 100,
            }
            for q in range(10)
            for t in trials
        ]

    with Monitor(SqliteStore(state)) as monitor:
        monitor.configure(config)
        monitor.ingest(events("a", 0.9, range(30)) + events("b", 0.2, range(30)))
        before = monitor.status("r")
    assert before.pairs[0].resolved and before.decisions
    with Monitor(SqliteStore(state)) as monitor:
        after_restart = monitor.status("r")
        # a's later trials are all wrong: b overtakes a, the claim stands
        monitor.ingest(events("a", 0.0, range(30, 200)))
        later = monitor.status("r")
    assert after_restart.decisions == before.decisions
    assert later.decisions == before.decisions
    assert [row.model for row in later.models] == ["a", "b"]
    assert later.pairs[0].resolved and later.pairs[0].decision is not None
    b = next(row for row in later.models if row.model == "b")
    a = next(row for row in later.models if row.model == "a")
    assert b.mu > a.mu and later.pairs[0].z > 0  # the current z, shown


def test_question_major_arrival_is_not_mistaken_for_progress() -> None:
    # Two tied models, every trial of one question before the next: after
    # 80 trials on 10 of 30 questions the pair has little information, so it
    # is not called a tie yet (counting trials per question would say 27).
    with Monitor(look_interval_s=0.0) as monitor:
        monitor.configure(
            RunConfig(run="r", question_count=30, max_trials_per_question=80)
        )
        for q in range(10):
            monitor.ingest(
                [
                    {
                        "run": "r",
                        "model": model,
                        "question": q,
                        "trial": t,
                        "correct": (37 * t + 11 * q) % 100 < 50,
                    }
                    for model in ("a", "b")
                    for t in range(80)
                ]
            )
        status = monitor.status("r")
    assert not status.pairs[0].unresolvable and not status.decisions
    assert {row.model for row in status.models if row.needs_trials} == {"a", "b"}
    assert all((row.predicted_trials or 0) >= 20 * 80 for row in status.models)


def test_a_margin_turns_a_near_tie_into_a_fired_equivalence() -> None:
    with Monitor(look_interval_s=0.0) as monitor:
        monitor.configure(
            RunConfig(
                run="r",
                question_count=10,
                max_trials_per_question=200,
                equivalence_margin=0.15,
            )
        )
        monitor.ingest(
            [
                {
                    "run": "r",
                    "model": model,
                    "question": q,
                    "trial": t,
                    "correct": (37 * t + 11 * q + shift) % 100 < 50,
                }
                for model, shift in (("a", 0), ("b", 3))
                for q in range(10)
                for t in range(60)
            ]
        )
        status = monitor.status("r")
        fired = monitor.events_after("r")
    assert status.pairs[0].equivalent and not status.pairs[0].unresolvable
    assert [d.kind for d in status.decisions] == ["equivalent"]
    assert "pair_equivalent" in {event.kind for event in fired}
    assert not any(row.needs_trials for row in status.models)
