"""State store value types, the shared local counting core, the memory store.

A store (:class:`monitor.interfaces.Store`) is the source of truth for what
was counted. Its ``apply`` is
the exactly-once step: it classifies every trial of a batch against what it
holds (new, duplicate, correction), persists the batch together with the
run totals, dead letters and a source cursor in one atomic, durable step, and
returns each trial's previous category. The engine updates its count tables
from that answer only, so counts can never disagree with the store.

Events fire once because ``record_events`` keeps each
``(run, kind, subject)`` at most once and hands back only the new ones,
numbered in firing order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from monitor.ledger import NEW, Ledger
from monitor.schema import RunConfig

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True, slots=True)
class Trial:
    """A validated trial, ready to store."""

    run: str
    model: str
    question: str
    trial: str
    category: int
    prior: bool = False
    tokens: int | None = None
    seconds: float | None = None
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected input and why; ``run`` when the input named a valid one."""

    source: str
    reason: str
    raw: str
    run: str | None = None
    position: int | None = None
    received_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Batch:
    """What one :meth:`Store.apply` commits atomically."""

    trials: Sequence[Trial] = ()
    dead_letters: Sequence[DeadLetter] = ()
    cursor: tuple[str, str] | None = None


@dataclass(slots=True)
class ModelCounts:
    """Sufficient statistics of one model in one run, as stored."""

    questions: list[str] = field(default_factory=list)
    observed: list[list[int]] = field(default_factory=list)
    prior: list[list[int]] = field(default_factory=list)
    costed_trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class RunTotals:
    """Run-level counters: unique trials counted and what was not counted."""

    trials: int = 0
    duplicates: int = 0
    corrections: int = 0
    rejected: int = 0


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event the engine wants to fire (if it never fired before)."""

    run: str
    kind: str
    subject: str
    payload: Mapping[str, JsonValue]
    ts: float


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A fired event with its sequence number (the resume point)."""

    seq: int
    run: str
    kind: str
    subject: str
    payload: Mapping[str, JsonValue]
    ts: float


@dataclass(slots=True)
class StoredState:
    """Everything needed to rebuild the engine after a restart."""

    configs: dict[str, RunConfig] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)
    counts: dict[str, dict[str, ModelCounts]] = field(default_factory=dict)
    totals: dict[str, RunTotals] = field(default_factory=dict)
    fired: set[tuple[str, str, str]] = field(default_factory=set)
    cursors: dict[str, str] = field(default_factory=dict)


class LocalCounts:
    """Exactly-once classification and counts kept in this process.

    Shared by the in-memory and SQLite stores: a ledger and count lists per
    run, with an undo log so that a failed commit leaves nothing behind.
    """

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, ModelCounts]] = {}
        self.totals: dict[str, RunTotals] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._widths: dict[str, int] = {}
        self._rows: dict[tuple[str, str], dict[str, int]] = {}

    def configure(self, run: str, category_count: int) -> None:
        """Size the run's count rows for categories ``0..C``."""
        self._widths[run] = category_count

    def classify(self, batch: Batch) -> tuple[list[int], list[tuple[Trial, int]]]:
        """Record every trial; return previous categories and an undo log."""
        previous_categories: list[int] = []
        undo: list[tuple[Trial, int]] = []
        for trial in batch.trials:
            ledger = self._ledgers.get(trial.run)
            if ledger is None:
                ledger = self._ledgers[trial.run] = Ledger()
            previous = ledger.record(
                trial.model, trial.question, trial.trial, trial.prior, trial.category
            )
            previous_categories.append(previous)
            undo.append((trial, previous))
            self._count(trial, previous, +1)
        for letter in batch.dead_letters:
            if letter.run is not None:
                self.totals.setdefault(letter.run, RunTotals()).rejected += 1
        return previous_categories, undo

    def rollback(self, batch: Batch, undo: list[tuple[Trial, int]]) -> None:
        """Reverse :meth:`classify` after a failed commit."""
        for trial, previous in reversed(undo):
            if previous != trial.category:
                self._ledgers[trial.run].forget(
                    trial.model, trial.question, trial.trial, trial.prior, previous
                )
            self._count(trial, previous, -1)
        for letter in batch.dead_letters:
            if letter.run is not None:
                self.totals[letter.run].rejected -= 1

    def _count(self, trial: Trial, previous: int, sign: int) -> None:
        totals = self.totals.setdefault(trial.run, RunTotals())
        if previous == trial.category:
            totals.duplicates += sign
            return
        model = self._model(trial.run, trial.model)
        row = self._row(trial.run, trial.model, trial.question)
        counts = model.prior[row] if trial.prior else model.observed[row]
        counts[trial.category] += sign
        if previous == NEW:
            totals.trials += sign
            if trial.tokens is not None or trial.seconds is not None:
                model.costed_trials += sign
                model.tokens += sign * (trial.tokens or 0)
                model.seconds += sign * (trial.seconds or 0.0)
        else:
            totals.corrections += sign
            counts[previous] -= sign

    def _model(self, run: str, model: str) -> ModelCounts:
        per_run = self.counts.setdefault(run, {})
        counts = per_run.get(model)
        if counts is None:
            counts = per_run[model] = ModelCounts()
        return counts

    def _row(self, run: str, model: str, question: str) -> int:
        rows = self._rows.setdefault((run, model), {})
        index = rows.get(question)
        if index is None:
            counts = self._model(run, model)
            width = self._widths.get(run, 2)
            index = rows[question] = len(counts.questions)
            counts.questions.append(question)
            counts.observed.append([0] * width)
            counts.prior.append([0] * width)
        return index


class MemoryStore:
    """A store that lives and dies with the process (tests, ``state=None``)."""

    def __init__(self) -> None:
        self._local = LocalCounts()
        self._configs: dict[str, RunConfig] = {}
        self._declared: set[str] = set()
        self._events: list[StoredEvent] = []
        self._fired: set[tuple[str, str, str]] = set()
        self._dead_letters: list[DeadLetter] = []
        self._cursors: dict[str, str] = {}

    @property
    def is_shared(self) -> bool:
        return False

    def load(self) -> StoredState:
        return StoredState(
            configs=dict(self._configs),
            declared=set(self._declared),
            counts={run: dict(models) for run, models in self._local.counts.items()},
            totals=dict(self._local.totals),
            fired=set(self._fired),
            cursors=dict(self._cursors),
        )

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        self._configs[config.run] = config
        if declared:
            self._declared.add(config.run)
        self._local.configure(config.run, len(config.weights))

    def apply(self, batch: Batch) -> list[int]:
        previous, _ = self._local.classify(batch)
        self._dead_letters.extend(batch.dead_letters)
        if batch.cursor is not None:
            self._cursors[batch.cursor[0]] = batch.cursor[1]
        return previous

    def totals(self, run: str) -> RunTotals:
        return self._local.totals.get(run, RunTotals())

    def counts(self, run: str) -> dict[str, ModelCounts]:
        return dict(self._local.counts.get(run, {}))

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
        self, seq: int, run: str | None = None, limit: int = 1000
    ) -> list[StoredEvent]:
        selected = [e for e in self._events[seq:] if run is None or e.run == run]
        return selected[:limit]

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return self._dead_letters[-limit:]

    def close(self) -> None:
        return None
