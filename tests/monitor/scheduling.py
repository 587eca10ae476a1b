"""Scheduling worlds for the liveness tests: biased coins, a clock, schedulers.

A :class:`World` answers trials of models with fixed true success rates,
deterministically per (model, question, attempt), and reports them to a
monitor with attempt ids of its own; schedulers drive it from ``next``.
:func:`follow_next` runs a whole simulated benchmark through ``next``
(joiners, reused trial ids, restarts) and hands over every round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor import Monitor, RunConfig
from monitor.engine.simulation import draw_world
from monitor.schema import NextItem, Plan, Status
from monitor.stores.records import StoredEvent


class Clock:
    """A clock the test moves by hand (leases expire only when it does)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class World:
    """Models with true success rates; runs and reports trials to a monitor.

    Args:
        monitor: Where trials are reported.
        run: The run.
        rates: Each model's true success rate.
        seed: Seeds every outcome.
        reuse: The share of attempts reported under an id the same (model,
            question) used before, as a harness restarted mid-run does: a
            duplicate when the outcome comes out the same, else a correction.
    """

    def __init__(
        self,
        monitor: Monitor,
        run: str,
        rates: dict[str, float],
        seed: int = 0,
        reuse: float = 0.0,
    ) -> None:
        self.monitor = monitor
        self.run = run
        self.rates = rates
        self._rng = np.random.default_rng(seed)
        self._reuse = reuse
        self._attempts = 0
        # Trials reported per (model, question), as the world ran them.
        self.ran: Counter[tuple[str, str]] = Counter()
        # The trial ids each (model, question) reported: its counted trials.
        self.ids: dict[tuple[str, str], list[str]] = {}

    def report(self, cells: Iterable[tuple[str, str]]) -> int:
        """Run one trial per (model, question) given and report them all."""
        events = []
        for model, question in cells:
            self._attempts += 1
            self.ran[(model, question)] += 1
            used = self.ids.setdefault((model, question), [])
            if self._reuse and used and self._rng.random() < self._reuse:
                trial = used[int(self._rng.integers(len(used)))]
            else:
                trial = f"attempt-{self._attempts}"
                used.append(trial)
            events.append(
                {
                    "run": self.run,
                    "model": model,
                    "question": question,
                    "trial": trial,
                    "correct": bool(self._rng.random() < self.rates[model]),
                }
            )
        if events:
            self.monitor.ingest(events)
        return len(events)


def per_model(items: Iterable[NextItem]) -> Counter[str]:
    """Trials a plan gives each model."""
    given: Counter[str] = Counter()
    for item in items:
        given[item.model] += item.trials
    return given


def cells_of(items: Iterable[NextItem]) -> list[tuple[str, str]]:
    """One (model, question) per trial a plan reserves."""
    return [(item.model, item.question) for item in items for _ in range(item.trials)]


class QuestionMajor:
    """Takes from ``next`` how many trials each model gets, runs them its own way.

    As lm-eval repeats run: each model works through the questions in its
    own order, ``repeats`` trials of a question before the next one,
    whatever questions the plan named.
    """

    def __init__(self, questions: list[str], repeats: int) -> None:
        self._questions = questions
        self._repeats = repeats
        self._done: Counter[str] = Counter()

    def cells(self, items: Iterable[NextItem]) -> list[tuple[str, str]]:
        chosen = []
        for model, count in per_model(items).items():
            for _ in range(count):
                step = self._done[model] // self._repeats
                chosen.append((model, self._questions[step % len(self._questions)]))
                self._done[model] += 1
        return chosen


def needing(status: Status) -> set[str]:
    return {row.model for row in status.models if row.needs_trials}


def waiting_models(status_or_plan_waiting: Iterable[object]) -> set[str]:
    names: set[str] = set()
    for item in status_or_plan_waiting:
        names.update(getattr(item, "models", []))
    return names


@dataclass(frozen=True, slots=True)
class Step:
    """One round of a scheduler following ``next`` in a simulated world.

    ``events`` fired since the previous step, up to and including the look
    behind ``status``; ``plan`` is what ``next`` handed out right after it
    (empty when models joined instead).
    """

    status: Status
    plan: Plan
    events: list[StoredEvent]


def follow_next(
    means: Sequence[float],
    seed: int,
    *,
    joins: Sequence[int] | None = None,
    reuse: float = 0.0,
    question_count: int = 20,
    cap: int = 30,
    trials_per_model: int = 10,
    state: Path | None = None,
    restart_every: int | None = None,
) -> Iterator[Step]:
    """Run the paper's biased coins (:func:`draw_world`) through ``next``.

    Each round asks ``next`` for ``trials_per_model`` trials per model that
    needs trials, runs them and reports them. ``joins`` (per model, the
    run's trials after which it reports; models then undeclared): a model
    joins with one trial on each of its first ``trials_per_model``
    questions, like :func:`~monitor.engine.simulation.simulate`. ``reuse``:
    the share of trials reported under an id the same (model, question)
    used before (duplicates and corrections). With ``state`` (a SQLite
    file), ``restart_every`` rounds the monitor is closed and opened again.
    The last step's status is the final one, with an empty plan.
    """
    rng = np.random.default_rng(seed)
    world = draw_world(list(means), question_count, 5.0, rng)
    names = [f"model{index + 1:02d}" for index in range(len(means))]
    questions = [f"q{index}" for index in range(question_count)]

    def open_monitor() -> Monitor:
        return Monitor(state, clock=Clock(), look_interval_s=0)

    monitor = open_monitor()
    monitor.configure(
        RunConfig(
            run="sim",
            questions=questions,
            models=names if joins is None else None,
            max_trials_per_question=cap,
        )
    )
    join_at = [0] * len(names) if joins is None else list(joins)
    waiting = set() if joins is None else set(range(len(names)))
    used: dict[tuple[int, int], list[str]] = {}
    attempts = total = seq = 0

    def report(cells: list[tuple[int, int]]) -> None:
        nonlocal attempts, total
        events = []
        for m, q in cells:
            ids = used.setdefault((m, q), [])
            if reuse and ids and rng.random() < reuse:
                trial = ids[int(rng.integers(len(ids)))]
            else:
                attempts += 1
                trial = f"t{attempts}"
                ids.append(trial)
                total += 1
            correct = bool(rng.random() < world[m, q])
            events.append(
                {
                    "run": "sim",
                    "model": names[m],
                    "question": questions[q],
                    "trial": trial,
                    "correct": correct,
                }
            )
        monitor.ingest(events)

    try:
        for rounds in range(1, 2000):
            status = monitor.status("sim")
            fired = monitor.events_after("sim", seq)
            seq = fired[-1].seq if fired else seq
            due = sorted(m for m in waiting if join_at[m] <= total)
            plan = Plan()
            if not due:
                needing = sum(row.needs_trials for row in status.models)
                plan = monitor.next("sim", trials_per_model * max(needing, 1))
                if not plan and waiting:
                    # The run would end before they join: the next one joins now.
                    due = [min(waiting, key=lambda m: join_at[m])]
            if due:
                waiting -= set(due)
                yield Step(status, plan, fired)
                report([(m, q) for m in due for q in range(trials_per_model)])
                continue
            yield Step(status, plan, fired)
            if not plan:
                break
            report(
                [
                    (names.index(item.model), questions.index(item.question))
                    for item in plan
                    for _ in range(item.trials)
                ]
            )
            if restart_every is not None and rounds % restart_every == 0:
                monitor.close()
                monitor = open_monitor()
        else:
            raise AssertionError("the run did not end")
        fired = monitor.events_after("sim", seq)
        yield Step(monitor.status("sim"), Plan(), fired)
    finally:
        monitor.close()
