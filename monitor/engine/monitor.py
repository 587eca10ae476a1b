"""The monitor engine: validate, count exactly once, decide, fire events.

:class:`Monitor` is the synchronous core every front end wraps (the CLI, the
asyncio service, a notebook). One call path: raw input is parsed, checked
against the run's declaration, classified and persisted by the store in one
atomic step, and only then counted. A *look* recomputes the run's decisions
and fires events the run has not fired before; looks happen at the end of an
ingest call (at most every ``look_interval_s``) and on every status or plan.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.decisions.allocation import plan_counts
from monitor.decisions.decide import RunDecision, SettledPair, forecast_trials
from monitor.engine.ingest import EventInput, Ingestion
from monitor.engine.live_metrics import AVG, model_metrics
from monitor.engine.looks import Looks
from monitor.engine.registry import Registry
from monitor.engine.reservations import Key, Reservations
from monitor.engine.runs import RunState
from monitor.inputs.wire import Wire
from monitor.interfaces import Store
from monitor.limits import DEFAULT_LEASE_S, FORECAST_MEMO_SIZE, MAX_UNDECLARED_RUNS
from monitor.schema import (
    Decision,
    ModelStatus,
    NextItem,
    PairStatus,
    RunConfig,
    Status,
)
from monitor.stores.memory import IngestReport, MemoryStore, StoredEvent
from monitor.stores.sqlite import SqliteStore


class Monitor:
    """The engine behind every front end.

    Args:
        state: ``None`` for an in-memory monitor, a path for the embedded
            SQLite store (created if missing), or any :class:`Store`.
        clock: Seconds since the epoch; injectable for tests.
        look_interval_s: Minimum time between looks triggered by ingestion
            (statuses and plans always look); 0 looks after every call.
        shared_refresh_s: With a shared store (several workers), how often a
            look re-reads every worker's counts; between re-reads a status
            adds this worker's own trials to the last shared counts.
        max_undeclared_runs: With no declared run, how many runs events may
            create by naming them; later names are refused.

    Examples:
        >>> monitor = Monitor()
        >>> trial = {"run": "demo", "model": "a", "question": 1, "trial": 0}
        >>> report = monitor.ingest([{**trial, "correct": True}] * 2)
        >>> report.accepted, report.duplicates
        (1, 1)
        >>> monitor.status("demo").trials
        1
    """

    def __init__(
        self,
        state: Store | str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        look_interval_s: float = 0.05,
        shared_refresh_s: float = 0.25,
        max_undeclared_runs: int = MAX_UNDECLARED_RUNS,
    ) -> None:
        if state is None:
            self._store: Store = MemoryStore()
        elif isinstance(state, str | os.PathLike):
            self._store = SqliteStore(state)
        else:
            self._store = state
        self._clock = clock
        self._registry = Registry(self._store, max_undeclared_runs)
        self._looks = Looks(
            self._store, self._registry, clock, look_interval_s, shared_refresh_s
        )
        stored = self._store.load()
        self._registry.reload(stored)
        self._looks.reload(stored.fired)
        self._ingestion = Ingestion(
            self._store, self._registry, self._looks, clock, stored.cursors
        )
        # Simulated forecast ends by pair state, kept between statuses.
        self._forecast_memo: dict[str, dict[tuple[object, ...], float]] = {}
        # Forecasts of the current decision, made when a status asks for them.
        self._forecasts: dict[
            str, tuple[RunDecision, dict[str, int | None], dict[int, int | None]]
        ] = {}
        self._reservations = Reservations()
        # Per run with leases, each model's reported trials per question when
        # its reservations last settled: only rows that changed since are
        # handed to them (settling every reserved cell took 30 ms and more
        # once leases covered a run of 40 x 1,000).
        self._settled_counts: dict[str, dict[str, NDArray[np.int64]]] = {}
        self._closed = False

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Monitor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Fire the events pending since the last look, then close the store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._looks.look_dirty(self._clock(), force=True)
        finally:
            self._store.close()

    @property
    def store(self) -> Store:
        return self._store

    # -- runs --------------------------------------------------------------

    def configure(self, config: RunConfig | Mapping[str, object]) -> RunConfig:
        """Declare a run (or update it while no trial used other weights).

        Raises:
            ConfigError: for an invalid config, or new weights on a run that
                already counted trials with different ones.
        """
        config = self._registry.configure(config)
        self._looks.mark_dirty(config.run)
        return config

    @property
    def runs(self) -> list[str]:
        """Run ids, sorted."""
        return self._registry.names

    def config(self, run: str) -> RunConfig:
        return self._registry.run(run).config

    # -- ingestion ---------------------------------------------------------

    def ingest(
        self, events: EventInput | Iterable[EventInput], *, source: str = "python"
    ) -> IngestReport:
        """Count trial events (one mapping or an iterable of them)."""
        return self._ingestion.ingest(events, source=source)

    def ingest_payload(
        self,
        payload: str | bytes,
        *,
        source: str = "",
        position: int | None = None,
        cursor: tuple[str, str] | None = None,
    ) -> IngestReport:
        """Count one raw JSON payload: an event object or an array (a batch)."""
        return self._ingestion.ingest_payload(
            payload, source=source, position=position, cursor=cursor
        )

    def ingest_parsed(
        self,
        items: Iterable[Wire],
        *,
        source: str | Iterable[str] = "",
        positions: Iterable[int | None] | None = None,
        cursor: tuple[str, str] | None = None,
    ) -> IngestReport:
        """Count parsed items; rejections are dead-lettered, never counted.

        ``source`` (one for all, or one per item) and ``positions`` (e.g. line
        numbers, one per item) locate rejections for the user; ``items`` may
        be consumed lazily. A :class:`TrialColumns` item (a payload's plain
        trials) is counted whole when the run takes all of them, else trial
        by trial, located as its payload says. ``cursor``
        (name, position) is committed atomically with the trials, so a source
        resuming from it neither skips nor repeats.
        """
        return self._ingestion.ingest_parsed(
            items, source=source, positions=positions, cursor=cursor
        )

    def ingest_columns(
        self,
        run: str,
        model: Sequence[str],
        question: Sequence[str | int] | NDArray[np.integer],
        trial: Sequence[str | int] | NDArray[np.integer],
        category: ArrayLike,
        *,
        prior: ArrayLike | None = None,
    ) -> IngestReport:
        """Count a batch of one run given as columns: the fast bulk path.

        Validation is by column (types, category range, declared models and
        questions); a bad column rejects the whole call with ``ValueError``,
        a bad row is dead-lettered like any other rejected input. Integer
        question and trial ids given as NumPy arrays (results files) are
        the fastest: their distinct values are found in C.

        Columns longer than ``COLUMN_CHUNK_TRIALS`` are counted (and
        committed) chunk by chunk, to bound memory: should the store fail
        part way, the chunks before stay counted, and sending the call
        again counts them as duplicates, not twice.
        """
        return self._ingestion.ingest_columns(
            run, model, question, trial, category, prior=prior
        )

    def cursor(self, name: str) -> str | None:
        """The last committed position of a source (e.g. a file offset)."""
        return self._ingestion.cursor(name)

    # -- reading -----------------------------------------------------------

    def status(self, run: str) -> Status:
        """The run's status; looks first if trials arrived since the last look."""
        state = self._registry.run(run)
        decision = self._looks.decision(run)
        model_forecasts, pair_forecasts = self._forecast(run, state, decision)
        totals = self._store.totals(run)
        tables = state.tables
        prior_trials = sum(table.prior_trial_count for table in tables.values())
        models = []
        metrics = model_metrics(state.config, tables, decision.order)
        for name, live in zip(decision.order, metrics, strict=True):
            table = tables[name]
            cost = state.costs.get(name)
            low, high = table.interval(state.config.confidence, table.score_range)
            models.append(
                ModelStatus(
                    model=name,
                    mu=table.mu,
                    avg=live[AVG].mu if AVG in live else None,
                    sigma=table.sigma,
                    lo=low,
                    hi=high,
                    trials=table.trial_count,
                    rank=decision.ranks[name],
                    group=decision.groups[name],
                    adjacent_group=decision.adjacent_groups[name],
                    needs_trials=name in decision.needs_trials,
                    predicted_trials=model_forecasts.get(name),
                    budget_exhausted=name in decision.exhausted,
                    cost_tokens=cost.tokens if cost is not None else 0,
                    cost_seconds=cost.seconds if cost is not None else 0.0,
                    metrics=live,
                )
            )
        pairs = [
            PairStatus(
                a=pair.a,
                b=pair.b,
                z=pair.z if math.isfinite(pair.z) else 1e308,
                rho=pair.rho,
                resolved=pair.resolved,
                unresolvable=pair.unresolvable,
                equivalent=pair.equivalent,
                threshold=pair.threshold,
                decision=None if pair.decision is None else _decision(pair.decision),
                predicted_trials=pair_forecasts.get(index, 0),
            )
            for index, pair in enumerate(decision.pairs)
        ]
        return Status(
            run=run,
            rule=state.config.rule,
            error_control=state.config.error_control,
            confidence=state.config.confidence,
            stable=decision.stable,
            trials=totals.trials - prior_trials,
            prior_trials=prior_trials,
            duplicates=totals.duplicates,
            corrections=totals.corrections,
            rejected=totals.rejected,
            question_count=state.question_count,
            max_trials_per_question=state.config.max_trials_per_question,
            open=state.is_open,
            budget_exhausted=bool(decision.exhausted),
            models=models,
            pairs=pairs,
            decisions=[_decision(d) for d in decision.settled.decisions],
        )

    def _forecast(
        self, run: str, state: RunState, decision: RunDecision
    ) -> tuple[dict[str, int | None], dict[int, int | None]]:
        cached = self._forecasts.get(run)
        if cached is not None and cached[0] is decision:
            return cached[1], cached[2]
        tables = state.tables
        memo = self._forecast_memo.setdefault(run, {})
        if len(memo) > FORECAST_MEMO_SIZE:
            memo.clear()
        models, pairs = forecast_trials(
            decision,
            lambda name: tables[name].question_trials,
            state.question_count,
            state.config.max_trials_per_question,
            memo,
        )
        self._forecasts[run] = (decision, models, pairs)
        return models, pairs

    def statuses(self) -> list[Status]:
        return [self.status(run) for run in self.runs]

    def next(
        self,
        run: str,
        budget: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> list[NextItem]:
        """Reserve ``budget`` trials: which (model, question, trials) to run next.

        The plan is a lease (every item carries its ``lease`` id and
        ``expires``): its trials count as in flight, in this and every later
        plan and against ``max_trials_per_question``, until they are
        reported (release goes by counts, oldest lease first) or the lease
        expires after ``lease_s`` seconds. ``lease_s=0`` plans without
        reserving (a look ahead; in-flight trials still count). ``model``
        plans for that model only (a scheduler that runs one model).

        Raises:
            ValueError: for a negative budget or lease.
        """
        if budget < 0 or not lease_s >= 0:
            raise ValueError(
                f"budget and lease_s must be >= 0; got {budget} and {lease_s}"
            )
        state = self._registry.run(run)
        decision = self._looks.decision(run)
        now = self._clock()
        models = [
            name
            for name in decision.order
            if name in decision.needs_trials and model in (None, name)
        ]
        reported = {name: state.trials_array(name) for name in state.tables}
        flying = self._in_flight(run, state, reported, now)
        index = state.question_index()
        trials = _with_in_flight(reported, flying, index, len(state.questions))
        for name in models:
            if name not in trials:  # no counts yet
                trials[name] = np.zeros(len(state.questions), dtype=np.int64)
        planned = plan_counts(
            models,
            [state.questions] * len(models),
            [trials[name] for name in models],
            budget,
            state.config.max_trials_per_question,
            state.cost_shares(models),
        )
        lease = None
        if lease_s > 0:
            counted = {
                (m, q): int(reported[m][index[q]]) if m in reported else 0
                for m, q, _ in planned
            }
            lease = self._reservations.reserve(run, planned, counted, now, lease_s)
            if lease is not None:
                self._settled_counts[run] = reported
        if lease is None:
            return [NextItem(model=m, question=q, trials=n) for m, q, n in planned]
        lease_id, expires = lease.id, lease.expires
        return [
            NextItem(model=m, question=q, trials=n, lease=lease_id, expires=expires)
            for m, q, n in planned
        ]

    def release(self, run: str, items: Sequence[NextItem]) -> int:
        """Give back reserved trials that will not run; how many were given back.

        Each item names (model, question), the trials to give back and
        optionally its ``lease`` (else the newest leases holding them).
        """
        self._registry.run(run)
        return self._reservations.release(run, list(items))

    def in_flight(self, run: str) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question)."""
        state = self._registry.run(run)
        reported = {name: state.trials_array(name) for name in state.tables}
        return self._in_flight(run, state, reported, self._clock())

    def _in_flight(
        self,
        run: str,
        state: RunState,
        reported: dict[str, NDArray[np.int64]],
        now: float,
    ) -> dict[Key, int]:
        """Settle the run's reservations with the trials reported since last.

        ``reported``: every model's trials per question now. Only cells
        whose count changed since the last settling (or reservation) are
        handed over; the reservations treat the others as unchanged.
        """
        before = self._settled_counts.pop(run, None)
        if before is None and not self._reservations.holds(run):
            return {}
        questions = state.questions
        changed: dict[Key, int] = {}
        for name, counts in reported.items():
            last = (before or {}).get(name)
            if last is None:
                rows = np.arange(len(counts))
            else:
                size = min(len(last), len(counts))
                rows = np.flatnonzero(counts[:size] != last[:size])
                if len(counts) > size:
                    rows = np.concatenate((rows, np.arange(size, len(counts))))
            for row, count in zip(rows.tolist(), counts[rows].tolist(), strict=True):
                changed[(name, questions[row])] = count
        flying = self._reservations.in_flight(run, changed, now)
        if self._reservations.holds(run):
            self._settled_counts[run] = reported
        return flying

    def models_needing_trials(self, run: str) -> list[str]:
        """The run's models that still need trials, best first."""
        decision = self._looks.decision(run)
        return [name for name in decision.order if name in decision.needs_trials]

    def look_pending(self) -> list[StoredEvent]:
        """Look at runs with trials since their last look (none: no work)."""
        return self._looks.look_dirty(self._clock(), force=True)

    def look(self, run: str | None = None) -> list[StoredEvent]:
        """Recompute decisions now and fire new events."""
        return self._looks.look(run)

    def events_after(self, run: str, seq: int = 0) -> list[StoredEvent]:
        """Fired events after sequence number ``seq`` (a resume point).

        Looks at runs with trials since their last look first, so events
        their counts imply are included.
        """
        self._looks.look_dirty(self._clock(), force=True)
        return self._store.events_after(run, seq)

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call ``listener`` with every event as it fires."""
        self._looks.subscribe(listener)


def _decision(settled: SettledPair) -> Decision:
    return Decision(
        kind=settled.kind,
        a=settled.a,
        b=settled.b,
        z=settled.z,
        trials=settled.trials,
        look=settled.look,
    )


def _with_in_flight(
    reported: dict[str, NDArray[np.int64]],
    flying: dict[Key, int],
    index: dict[str, int],
    size: int,
) -> dict[str, NDArray[np.int64]]:
    """Each model's reported trials per question plus its in-flight ones.

    In bulk (numpy), not cell by cell: a run's leases may hold every one of
    its 40 x 1,000 cells.
    """
    names = list(reported)
    grid = (
        np.stack([reported[name] for name in names])
        if names
        else np.zeros((0, size), dtype=np.int64)
    )
    if flying:
        position = {name: i for i, name in enumerate(names)}
        count = len(flying)
        models = map(position.get, [key[0] for key in flying], itertools.repeat(-1))
        questions = map(index.get, [key[1] for key in flying], itertools.repeat(-1))
        rows = np.fromiter(models, np.int64, count)
        columns = np.fromiter(questions, np.int64, count)
        counts = np.fromiter(flying.values(), np.int64, count)
        known = (rows >= 0) & (columns >= 0)
        np.add.at(grid, (rows[known], columns[known]), counts[known])
    return {name: grid[i] for i, name in enumerate(names)}
