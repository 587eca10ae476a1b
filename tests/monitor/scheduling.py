"""Scheduling worlds for the liveness tests: biased coins, a clock, schedulers.

A :class:`World` answers trials of models with fixed true success rates,
deterministically per (model, question, attempt), and reports them to a
monitor with attempt ids of its own; schedulers drive it from ``next``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from monitor import Monitor
from monitor.schema import NextItem, Status


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
