"""The store that lives and dies with the process (tests, ``state=None``)."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from monitor.limits import DEAD_LETTERS_MAX, DEAD_LETTERS_MAX_AGE_S
from monitor.schema import RunConfig
from monitor.stores.batches import Batch, Previous
from monitor.stores.history import HISTORY_MAX, HistoryPoint, thinned
from monitor.stores.local import LocalCounts
from monitor.stores.question_trials import QuestionTrials, from_index
from monitor.stores.records import (
    DeadLetter,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
    StoredState,
)


class MemoryStore:
    """A store that lives and dies with the process (tests, ``state=None``).

    Args:
        dead_letters_max: Dead letters kept (the newest).
        dead_letters_max_age_s: Dead letters older than this, counted from
            the newest one's receipt, are dropped.
    """

    def __init__(
        self,
        dead_letters_max: int = DEAD_LETTERS_MAX,
        dead_letters_max_age_s: float = DEAD_LETTERS_MAX_AGE_S,
    ) -> None:
        self._local = LocalCounts()
        self._configs: dict[str, RunConfig] = {}
        self._declared: set[str] = set()
        self._events: list[StoredEvent] = []
        self._fired: set[tuple[str, str, str]] = set()
        self._dead_letters: collections.deque[DeadLetter] = collections.deque(
            maxlen=dead_letters_max
        )
        self._dead_letters_max_age_s = dead_letters_max_age_s
        self._cursors: dict[str, str] = {}
        self._history: dict[str, list[HistoryPoint]] = {}

    @property
    def is_shared(self) -> bool:
        return False

    def load(self) -> StoredState:
        return StoredState(
            configs=dict(self._configs),
            declared=set(self._declared),
            counts={run: self._local.counts(run) for run in self._local.runs()},
            totals=dict(self._local.totals),
            fired=set(self._fired),
            cursors=dict(self._cursors),
        )

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        self._configs[config.run] = config
        if declared:
            self._declared.add(config.run)
        self._local.configure(config.run, len(config.weights))

    def apply(self, batch: Batch) -> list[Previous]:
        previous = [self._local.classify(trials) for trials in batch.trials]
        if batch.dead_letters:
            self._local.count_dead_letters(batch.dead_letters)
            self._dead_letters.extend(batch.dead_letters)
            oldest = self._dead_letters[-1].received_s - self._dead_letters_max_age_s
            while self._dead_letters[0].received_s < oldest:
                self._dead_letters.popleft()
        if batch.cursor is not None:
            self._cursors[batch.cursor[0]] = batch.cursor[1]
        return previous

    def apply_trial(
        self,
        run: str,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool = False,
        tokens: int | None = None,
        seconds: float | None = None,
        ts: float | None = None,
    ) -> int:
        return self._local.record_trial(
            run, model, question, trial, category, prior, tokens, seconds
        )

    def totals(self, run: str) -> RunTotals:
        return self._local.totals.get(run, RunTotals())

    def counts(self, run: str) -> dict[str, ModelCounts]:
        return self._local.counts(run)

    def counts_if_changed(self, run: str) -> dict[str, ModelCounts] | None:
        return None

    def record_events(self, events: Sequence[PendingEvent]) -> list[StoredEvent]:
        fired = []
        for event in events:
            key = (event.run, event.kind, event.subject)
            if key in self._fired:
                continue
            self._fired.add(key)
            stored = StoredEvent(
                seq=len(self._events) + 1,
                run=event.run,
                kind=event.kind,
                subject=event.subject,
                payload=event.payload,
                ts=event.ts,
            )
            self._events.append(stored)
            fired.append(stored)
        return fired

    def events_after(
        self, run: str, seq: int = 0, limit: int = 1000
    ) -> list[StoredEvent]:
        selected = [e for e in self._events[seq:] if e.run == run]
        return selected[:limit]

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return list(self._dead_letters)[-limit:]

    def record_history(self, run: str, point: HistoryPoint) -> None:
        points = self._history.setdefault(run, [])
        if points and points[-1].trials >= point.trials:
            return
        points.append(point)
        if len(points) > HISTORY_MAX:
            self._history[run] = thinned(points)

    def history(self, run: str) -> list[HistoryPoint]:
        return list(self._history.get(run, ()))

    def question_trials(self, run: str, question: str) -> QuestionTrials:
        return from_index(self._local.trials_of(run, question))

    def close(self) -> None:
        return None
