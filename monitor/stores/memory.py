"""State store value types, the shared local counting core, the memory store.

A store (:class:`monitor.interfaces.Store`) is the source of truth for what
was counted. Its ``apply`` is the exactly-once step: it classifies every
trial of a batch against what it holds (new, duplicate, correction),
persists the batch together with the run totals, dead letters and a source
cursor in one atomic, durable step, and returns each trial's previous
category. The engine updates its count tables from that answer only, so
counts can never disagree with the store.

Events fire once because ``record_events`` keeps each ``(run, kind,
subject)`` at most once and hands back only the new ones, numbered in
firing order.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.limits import DEAD_LETTERS_MAX, DEAD_LETTERS_MAX_AGE_S
from monitor.schema import Rejection, RunConfig
from monitor.stores.ledger import NEW, Factors, Ledger

if TYPE_CHECKING:
    from monitor.inputs.columns import TrialColumns

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]

# Previous categories of a batch's trials, as a store's apply returns them:
# a list, or an array when the batch was classified with NumPy.
Previous = list[int] | NDArray[np.int64]

# Batches up to this size are classified trial by trial: below it, NumPy's
# per-call overhead costs more than the loop.
VECTOR_THRESHOLD = 32


class TrialBatch:
    """Validated trials of one run, as columns (one entry per trial).

    A batch made from one payload's :class:`~monitor.inputs.columns.TrialColumns`
    keeps them and builds its id and category lists only when they are
    read: the vectorised steps read the factorized ids and the category
    array instead (see :meth:`factors`, :meth:`categories`).
    """

    __slots__ = (
        "_categories",
        "_category",
        "_factors",
        "_model",
        "_pending",
        "_question",
        "_trial",
        "prior",
        "run",
        "seconds",
        "tokens",
        "ts",
    )

    def __init__(
        self,
        run: str,
        model: list[str] | None = None,
        question: list[str] | None = None,
        trial: list[str] | None = None,
        category: list[int] | None = None,
        prior: list[bool] | None = None,
        tokens: list[int | None] | None = None,
        seconds: list[float | None] | None = None,
        ts: list[float | None] | None = None,
    ) -> None:
        self.run = run
        self._model = [] if model is None else model
        self._question = [] if question is None else question
        self._trial = [] if trial is None else trial
        self._category = [] if category is None else category
        self.prior = [] if prior is None else prior
        self.tokens = [] if tokens is None else tokens
        self.seconds = [] if seconds is None else seconds
        self.ts = [] if ts is None else ts
        # Factorized id columns and the category array, computed once per
        # batch for the vectorized steps (validation, ledger, count tables).
        self._factors: dict[str, Factors] = {}
        self._categories: NDArray[np.int64] | None = None
        # Columns taken whole whose id and category lists are not built yet.
        self._pending: TrialColumns | None = None

    def __len__(self) -> int:
        return len(self.prior)

    def __repr__(self) -> str:
        return f"TrialBatch(run={self.run!r}, trials={len(self)})"

    @property
    def model(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._model

    @property
    def question(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._question

    @property
    def trial(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._trial

    @property
    def category(self) -> list[int]:
        if self._pending is not None:
            self._unfold()
        return self._category

    def factors(self, column: Literal["model", "question", "trial"]) -> Factors:
        """The batch's ``model``, ``question`` or ``trial`` column factorized."""
        found = self._factors.get(column)
        if found is None:
            found = self._factors[column] = Factors.of(getattr(self, column))
        return found

    def preset(
        self,
        categories: NDArray[np.int64],
        factors: Mapping[str, Factors],
    ) -> None:
        """Give the arrays a caller already has (they must match the columns)."""
        self._categories = categories
        self._factors.update(factors)

    def categories(self) -> NDArray[np.int64]:
        """The category column as an array."""
        if self._categories is None:
            self._categories = np.asarray(self.category, dtype=np.int64)
        return self._categories

    def without(self, indices: set[int]) -> TrialBatch:
        """A copy without the trials at ``indices``."""
        keep = [i for i in range(len(self)) if i not in indices]
        model, question, trial = self.model, self.question, self.trial
        category = self.category
        return TrialBatch(
            self.run,
            model=[model[i] for i in keep],
            question=[question[i] for i in keep],
            trial=[trial[i] for i in keep],
            category=[category[i] for i in keep],
            prior=[self.prior[i] for i in keep],
            tokens=[self.tokens[i] for i in keep],
            seconds=[self.seconds[i] for i in keep],
            ts=[self.ts[i] for i in keep],
        )

    def extend(self, columns: TrialColumns) -> None:
        """Append a payload's trials, given as columns (the wire's fast path).

        The batch takes the columns' lists: they are not read again.
        """
        if not self.prior:  # the batch is these columns: take their arrays
            self._pending = columns
            self._factors = dict(columns.factors)
            self._categories = columns.categories
            self.prior = columns.prior
            self.tokens = columns.tokens
            self.seconds = columns.seconds
            self.ts = columns.ts
            return
        if self._pending is not None:
            self._unfold()
        self._factors.clear()
        self._categories = None
        self._model.extend(columns.model)
        self._question.extend(columns.question)
        self._trial.extend(columns.trial)
        self._category.extend(columns.category)
        self.prior.extend(columns.prior)
        self.tokens.extend(columns.tokens)
        self.seconds.extend(columns.seconds)
        self.ts.extend(columns.ts)

    def append(
        self,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool = False,
        tokens: int | None = None,
        seconds: float | None = None,
        ts: float | None = None,
    ) -> None:
        if self._pending is not None:
            self._unfold()
        if self._factors or self._categories is not None:
            self._factors.clear()
            self._categories = None
        self._model.append(model)
        self._question.append(question)
        self._trial.append(trial)
        self._category.append(category)
        self.prior.append(prior)
        self.tokens.append(tokens)
        self.seconds.append(seconds)
        self.ts.append(ts)

    def _unfold(self) -> None:
        """Build the id and category lists of the columns taken whole."""
        columns, self._pending = self._pending, None
        assert columns is not None
        self._model = columns.model
        self._question = columns.question
        self._trial = columns.trial
        self._category = columns.category


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
    """What one ``Store.apply`` commits atomically."""

    trials: Sequence[TrialBatch] = ()
    dead_letters: Sequence[DeadLetter] = ()
    cursor: tuple[str, str] | None = None


class TrialAsBatch:
    """``Store.apply_trial`` as :meth:`apply` of a batch of one.

    For stores whose commit per call costs far more than building the batch.
    """

    def apply(self, batch: Batch) -> list[Previous]:
        raise NotImplementedError

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
        batch = TrialBatch(
            run,
            [model],
            [question],
            [trial],
            [category],
            [prior],
            [tokens],
            [seconds],
            [ts],
        )
        return int(self.apply(Batch((batch,)))[0][0])


@dataclass(slots=True)
class ModelCounts:
    """Sufficient statistics of one model in one run, as stored."""

    questions: list[str] = field(default_factory=list)
    observed: list[list[int]] = field(default_factory=list)
    prior: list[list[int]] = field(default_factory=list)
    costed_trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class CountChanges:
    """What other writers changed in a run's counts since a store last looked.

    One row per changed cell, as columns, so a large change is applied with
    NumPy rather than cell by cell: row ``i`` adds ``delta[i]`` to the cell
    ``(models[model[i]], questions[question[i]], prior[i], category[i])``.
    ``costs`` maps a model to the (trials, tokens, seconds) added. Cheaper to
    apply than a full re-read of the counts when the run is large.
    """

    models: list[str]
    model: NDArray[np.int64]
    questions: list[str]
    question: NDArray[np.int64]
    prior: NDArray[np.bool_]
    category: NDArray[np.int64]
    delta: NDArray[np.int64]
    costs: dict[str, tuple[int, int, float]]

    @classmethod
    def from_cells(
        cls,
        cells: Mapping[tuple[str, str, bool, int], int],
        costs: Mapping[str, tuple[int, int, float]] | None = None,
    ) -> CountChanges:
        """Changes from a ``(model, question, prior, category) -> delta`` map."""
        models = list(dict.fromkeys(cell[0] for cell in cells))
        questions = list(dict.fromkeys(cell[1] for cell in cells))
        model_number = {model: index for index, model in enumerate(models)}
        question_number = {question: index for index, question in enumerate(questions)}
        size = len(cells)
        return cls(
            models=models,
            model=np.fromiter((model_number[c[0]] for c in cells), np.int64, size),
            questions=questions,
            question=np.fromiter(
                (question_number[c[1]] for c in cells), np.int64, size
            ),
            prior=np.fromiter((c[2] for c in cells), np.bool_, size),
            category=np.fromiter((c[3] for c in cells), np.int64, size),
            delta=np.fromiter(cells.values(), np.int64, size),
            costs=dict(costs or {}),
        )

    @property
    def cells(self) -> dict[tuple[str, str, bool, int], int]:
        """The changes as ``(model, question, prior, category) -> delta``."""
        summed: dict[tuple[str, str, bool, int], int] = {}
        for model, question, prior, category, delta in zip(
            self.model.tolist(),
            self.question.tolist(),
            self.prior.tolist(),
            self.category.tolist(),
            self.delta.tolist(),
            strict=True,
        ):
            cell = (self.models[model], self.questions[question], prior, category)
            summed[cell] = summed.get(cell, 0) + delta
        return summed


@dataclass(slots=True)
class RunTotals:
    """Run-level counters: unique trials counted and what was not counted."""

    trials: int = 0
    duplicates: int = 0
    corrections: int = 0
    rejected: int = 0


@dataclass(slots=True)
class CostTotals:
    """Cost reported by new trials of one model."""

    trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


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

    def document(self) -> dict[str, JsonValue]:
        """The wire form (MQTT, server-sent events, webhooks)."""
        return {
            "seq": self.seq,
            "run": self.run,
            "kind": self.kind,
            "subject": self.subject,
            "payload": dict(self.payload),
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest call did."""

    accepted: int
    duplicates: int
    corrections: int
    rejected: tuple[Rejection, ...]
    events: tuple[StoredEvent, ...]
    runs: tuple[str, ...] = ()


def combined_reports(reports: Sequence[IngestReport]) -> IngestReport:
    """One report for the pieces of one ingest call (runs sorted, as one call's)."""
    if len(reports) == 1:
        return reports[0]
    return IngestReport(
        accepted=sum(report.accepted for report in reports),
        duplicates=sum(report.duplicates for report in reports),
        corrections=sum(report.corrections for report in reports),
        rejected=tuple(r for report in reports for r in report.rejected),
        events=tuple(e for report in reports for e in report.events),
        runs=tuple(sorted({run for report in reports for run in report.runs})),
    )


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
    """Exactly-once classification kept in this process.

    Shared by the in-memory and SQLite stores: a ledger per run, run totals
    and learned costs. Counts per question are read off the ledger when
    needed (restart, reconfiguration), not kept twice.
    """

    def __init__(self) -> None:
        self.totals: dict[str, RunTotals] = {}
        self.costs: dict[tuple[str, str], CostTotals] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._widths: dict[str, int] = {}

    def configure(self, run: str, category_count: int) -> None:
        """Record the run's ``C+1`` (count rows are that wide)."""
        self._widths[run] = category_count

    def classify(self, batch: TrialBatch) -> Previous:
        """Record every trial of the batch; previous category per trial."""
        ledger = self._ledgers.get(batch.run)
        if ledger is None:
            ledger = self._ledgers[batch.run] = Ledger()
        previous: Previous
        if len(batch) < VECTOR_THRESHOLD:
            previous = [
                ledger.record(model, question, trial, prior, category)
                for model, question, trial, prior, category in zip(
                    batch.model,
                    batch.question,
                    batch.trial,
                    batch.prior,
                    batch.category,
                    strict=True,
                )
            ]
        else:
            previous = self._classify_vectorized(ledger, batch)
        self._account(batch, previous)
        return previous

    def record_trial(
        self,
        run: str,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool,
        tokens: int | None,
        seconds: float | None,
    ) -> int:
        """:meth:`classify` of one trial; its previous category or ``NEW``."""
        ledger = self._ledgers.get(run)
        if ledger is None:
            ledger = self._ledgers[run] = Ledger()
        before = ledger.record(model, question, trial, prior, category)
        totals = self.totals.get(run)
        if totals is None:
            totals = self.totals[run] = RunTotals()
        self._account_one(totals, run, model, category, before, tokens, seconds)
        return before

    def rollback(self, batch: TrialBatch, previous: Previous) -> None:
        """Reverse :meth:`classify` after a failed commit."""
        ledger = self._ledgers[batch.run]
        for index in reversed(range(len(batch))):
            ledger.grid(batch.model[index], batch.prior[index]).restore(
                batch.question[index], batch.trial[index], int(previous[index])
            )
        self._account(batch, previous, sign=-1)

    def count_dead_letters(self, letters: Sequence[DeadLetter], sign: int = 1) -> None:
        for letter in letters:
            if letter.run is not None:
                self.totals.setdefault(letter.run, RunTotals()).rejected += sign

    def recorded(self, run: str) -> int:
        """Distinct trials (observed and prior) the run's exactly-once index holds."""
        ledger = self._ledgers.get(run)
        return 0 if ledger is None else len(ledger)

    def memory_bytes(self, run: str) -> int:
        """About what the run's exactly-once index holds."""
        ledger = self._ledgers.get(run)
        return 0 if ledger is None else ledger.memory_bytes

    def counts(self, run: str) -> dict[str, ModelCounts]:
        """Per model: questions and per-category counts, observed and prior."""
        ledger = self._ledgers.get(run)
        if ledger is None:
            return {}
        width = self._widths.get(run, 2)
        result = {}
        for model in ledger.models():
            observed_questions, observed = ledger.grid(model, False).counts(width)
            prior_questions, prior = ledger.grid(model, True).counts(width)
            questions = list(dict.fromkeys(observed_questions + prior_questions))
            rows = {question: index for index, question in enumerate(questions)}
            observed_rows = np.zeros((len(questions), width), dtype=np.int64)
            prior_rows = np.zeros((len(questions), width), dtype=np.int64)
            observed_rows[[rows[q] for q in observed_questions]] = observed
            prior_rows[[rows[q] for q in prior_questions]] = prior
            cost = self.costs.get((run, model), CostTotals())
            result[model] = ModelCounts(
                questions=questions,
                observed=observed_rows.tolist(),
                prior=prior_rows.tolist(),
                costed_trials=cost.trials,
                tokens=cost.tokens,
                seconds=cost.seconds,
            )
        return result

    def runs(self) -> list[str]:
        return sorted(self._ledgers)

    @staticmethod
    def _classify_vectorized(ledger: Ledger, batch: TrialBatch) -> NDArray[np.int64]:
        categories = batch.categories()
        questions, trials = batch.factors("question"), batch.factors("trial")
        rows, columns = ledger.cells(questions, trials)
        models = batch.factors("model")
        groups = models.codes * 2
        if batch.prior.count(False) != len(batch):
            groups = groups + np.fromiter(batch.prior, np.int64, len(batch))

        def ids(index: int) -> tuple[str, str]:
            return batch.question[index], batch.trial[index]

        return ledger.record_groups(
            models.values, groups, rows, columns, categories, ids
        )

    def _account(self, batch: TrialBatch, previous: Previous, sign: int = 1) -> None:
        totals = self.totals.get(batch.run)
        if totals is None:
            totals = self.totals[batch.run] = RunTotals()
        if len(batch) < VECTOR_THRESHOLD:
            for index, earlier in enumerate(previous):
                self._account_one(
                    totals,
                    batch.run,
                    batch.model[index],
                    batch.category[index],
                    earlier,
                    batch.tokens[index],
                    batch.seconds[index],
                    sign,
                )
            return
        before = np.asarray(previous)
        categories = batch.categories()
        new = before == NEW
        duplicate = before == categories
        totals.trials += sign * int(np.count_nonzero(new))
        totals.duplicates += sign * int(np.count_nonzero(duplicate))
        totals.corrections += sign * int(np.count_nonzero(~new & ~duplicate))
        size = len(batch)
        if batch.tokens.count(None) == size and batch.seconds.count(None) == size:
            return
        for index in np.flatnonzero(new).tolist():
            self._add_cost(
                batch.run,
                batch.model[index],
                batch.tokens[index],
                batch.seconds[index],
                sign,
            )

    def _account_one(
        self,
        totals: RunTotals,
        run: str,
        model: str,
        category: int,
        before: int,
        tokens: int | None,
        seconds: float | None,
        sign: int = 1,
    ) -> None:
        """Count one classified trial (``sign`` -1 takes it back)."""
        if before == category:
            totals.duplicates += sign
        elif before == NEW:
            totals.trials += sign
            self._add_cost(run, model, tokens, seconds, sign)
        else:
            totals.corrections += sign

    def _add_cost(
        self,
        run: str,
        model: str,
        tokens: int | None,
        seconds: float | None,
        sign: int,
    ) -> None:
        if tokens is not None or seconds is not None:
            cost = self.costs.setdefault((run, model), CostTotals())
            cost.trials += sign
            cost.tokens += sign * (tokens or 0)
            cost.seconds += sign * (seconds or 0.0)


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

    def close(self) -> None:
        return None
