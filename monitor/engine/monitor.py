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
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import ValidationError

from monitor.decisions.allocation import plan_counts
from monitor.decisions.decide import (
    RunDecision,
    Settled,
    SettledPair,
    decide,
    forecast_trials,
)
from monitor.decisions.events import pending_events, settled_from_events
from monitor.engine.live_metrics import AVG, model_metrics
from monitor.engine.reservations import Key, Reservations
from monitor.engine.runs import Refusal, RunState
from monitor.errors import ConfigError, UnknownRunError
from monitor.inputs.parsing import (
    Parsed,
    Trial,
    describe_validation_error,
    parse_object,
    plain_trial,
)
from monitor.inputs.wire import TrialColumns, Wire, parse_wire
from monitor.interfaces import Store
from monitor.limits import (
    COLUMN_CHUNK_TRIALS,
    DEFAULT_LEASE_S,
    FORECAST_MEMO_SIZE,
    MAX_UNDECLARED_RUNS,
)
from monitor.schema import (
    Decision,
    ModelStatus,
    NextItem,
    PairStatus,
    Rejection,
    RunConfig,
    Status,
    TrialEvent,
)
from monitor.stores.batches import Batch, TrialBatch
from monitor.stores.factors import Factors
from monitor.stores.ledger import NEW
from monitor.stores.memory import MemoryStore
from monitor.stores.records import (
    CountChanges,
    DeadLetter,
    IngestReport,
    ModelCounts,
    PendingEvent,
    StoredEvent,
    combined_reports,
)
from monitor.stores.sqlite import SqliteStore

EventInput = Mapping[str, object] | TrialEvent
# Events read per store call when catching up with a run's event log.
_EVENTS_PER_READ = 1000


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
        self._look_interval_s = look_interval_s
        self._shared_refresh_s = shared_refresh_s
        self._max_undeclared_runs = max_undeclared_runs
        self._last_refresh: dict[str, float] = {}
        # Each run's fired events as read from the store (see _settled_of).
        self._event_log: dict[str, list[StoredEvent]] = {}
        self._runs: dict[str, RunState] = {}
        self._decisions: dict[str, RunDecision] = {}
        # Each run's settled decisions: final once fired (see monitor.decisions.events).
        self._settled: dict[str, Settled] = {}
        # Simulated forecast ends by pair state, kept between statuses.
        self._forecast_memo: dict[str, dict[tuple[object, ...], float]] = {}
        # Forecasts of the current decision, made when a status asks for them.
        self._forecasts: dict[
            str, tuple[RunDecision, dict[str, int | None], dict[int, int | None]]
        ] = {}
        self._dirty: set[str] = set()
        self._last_look: dict[str, float] = {}
        # When the next look triggered by ingestion is due (the earliest
        # dirty run's last look + interval): before it, no look is tried.
        self._next_look = -math.inf
        self._single_reports: dict[tuple[str, tuple[int, int, int]], IngestReport] = {}
        self._fired: set[tuple[str, str, str]] = set()
        self._listeners: list[Callable[[StoredEvent], None]] = []
        self._cursors: dict[str, str] = {}
        self._reservations = Reservations()
        # Per run with leases, each model's reported trials per question when
        # its reservations last settled: only rows that changed since are
        # handed to them (settling every reserved cell took 30 ms and more
        # once leases covered a run of 40 x 1,000).
        self._settled_counts: dict[str, dict[str, NDArray[np.int64]]] = {}
        self._closed = False
        self._reload()

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
            self._look_dirty(self._clock(), force=True)
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
        if not isinstance(config, RunConfig):
            config = _validated_config(config)
        existing = self._runs.get(config.run)
        counts = self._store.counts(config.run)
        if existing is not None and any(map(_has_trials, counts.values())):
            _check_scoring_unchanged(existing.config, config)
            _check_questions_unchanged(existing, config, counts)
        # Built before anything is saved: a config the counted state cannot
        # live with is refused whole, and the stored one stays.
        state = RunState(config, declared=True)
        try:
            state.restore(counts)
        except ValueError as error:
            raise ConfigError(
                f"run {config.run!r} cannot take this config: {error}"
            ) from error
        self._store.save_config(config, declared=True)
        self._runs[config.run] = state
        self._mark_dirty(config.run)
        return config

    @property
    def runs(self) -> list[str]:
        """Run ids, sorted."""
        return sorted(self._runs)

    def config(self, run: str) -> RunConfig:
        return self._run(run).config

    # -- ingestion ---------------------------------------------------------

    def ingest(
        self, events: EventInput | Iterable[EventInput], *, source: str = "python"
    ) -> IngestReport:
        """Count trial events (one mapping or an iterable of them)."""
        if type(events) is list and len(events) == 1 and type(events[0]) is dict:
            # A list of one is one event, located at index 0 either way.
            events = events[0]
        if type(events) is dict:
            # The common case first, without the wrapper's checks.
            trial = plain_trial(events)
            return self._ingest_one(
                trial if trial is not None else parse_object(events, source, 0), source
            )
        if isinstance(events, Mapping | TrialEvent):
            return self._ingest_one(parse_object(events, source, 0), source)
        items: Iterable[EventInput] = events
        # Parsed one by one as the loop consumes them: a parsed event is
        # garbage once counted, which spares the collector.
        parsed = (
            parse_object(item, source, position) for position, item in enumerate(items)
        )
        return self.ingest_parsed(parsed, source=source, positions=itertools.count())

    def _ingest_one(
        self, item: Parsed, source: str, position: int | None = 0
    ) -> IngestReport:
        """One trial, the common case of a harness reporting as it goes.

        The same steps as :meth:`ingest_parsed` without its batch bookkeeping.
        """
        if type(item) is not Trial:
            return self.ingest_parsed([item], source=source, positions=(position,))
        (
            run,
            model,
            question,
            trial,
            category,
            prior,
            tokens,
            seconds,
            ts,
            from_correct,
            _,
        ) = item
        state = self._runs.get(run)
        if (
            state is None
            or state.refusal(model, question, category, from_correct, set()) is not None
        ):
            return self.ingest_parsed([item], source=source, positions=(position,))
        before = self._store.apply_trial(
            run, model, question, trial, category, prior, tokens, seconds, ts
        )
        state.apply_trial(model, question, category, prior, before, tokens, seconds)
        outcome = (
            (0, 1, 0)
            if before == category
            else (1, 0, 0)
            if before == NEW
            else (0, 0, 1)
        )
        self._dirty.add(run)  # _mark_dirty, inline on this path
        due = self._last_look.get(run, -math.inf) + self._look_interval_s
        if due < self._next_look:
            self._next_look = due
        now = self._clock()
        fired = self._look_dirty(now, force=False) if now >= self._next_look else []
        if fired:
            return IngestReport(*outcome, (), tuple(fired), (run,))
        # Reports are immutable: one per run and outcome serves every call.
        report = self._single_reports.get((run, outcome))
        if report is None:
            report = IngestReport(*outcome, (), (), (run,))
            self._single_reports[(run, outcome)] = report
        return report

    def ingest_payload(
        self,
        payload: str | bytes,
        *,
        source: str = "",
        position: int | None = None,
        cursor: tuple[str, str] | None = None,
    ) -> IngestReport:
        """Count one raw JSON payload: an event object or an array (a batch)."""
        parsed = parse_wire(payload, source, position)
        if len(parsed) == 1 and type(parsed[0]) is Trial and cursor is None:
            where = 0 if position is None else position
            return self._ingest_one(parsed[0], source, where)
        return self.ingest_parsed(
            parsed,
            source=source,
            positions=range(len(parsed))
            if position is None
            else [position] * len(parsed),
            cursor=cursor,
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
        where = positions if positions is not None else itertools.repeat(None)
        origins = itertools.repeat(source) if isinstance(source, str) else source
        now = self._clock()
        batches: dict[str, TrialBatch] = {}
        letters: list[DeadLetter] = []
        rejections: list[Rejection] = []
        unread: list[Rejection] = []
        new_questions: dict[str, set[str]] = {}
        # The run of the previous trial and what goes with it: batches are
        # mostly of one run, so the lookups happen once.
        run: str | None = None
        state: RunState | None = None
        batch: TrialBatch | None = None
        seen: set[str] = set()

        def take(columns: TrialColumns) -> bool:
            """Count a payload's trials whole, if the run takes every one."""
            name = columns.run
            state = self._runs.get(name) or self._run_for_event(name)
            questions = columns.factors.get("question")
            if state is None or not state.takes(
                columns.models,
                columns.questions,
                max(columns.category)
                if columns.categories is None
                else int(columns.categories.max()),
                columns.from_correct,
                new_questions.setdefault(name, set()),
                None if questions is None else questions.numbers,
            ):
                return False
            _batch_of(batches, name).extend(columns)
            return True

        # Not strict: positions and sources may be endless (repeat, count).
        for item, position, origin in _units(
            zip(items, where, origins, strict=False), take
        ):
            if type(item) is Trial:
                if item.run != run:
                    run = item.run
                    state = self._runs.get(run) or self._run_for_event(run)
                    batch = batches.get(run)
                    seen = new_questions.setdefault(run, set())
                if (
                    state is not None
                    and state.refusal(
                        item.model,
                        item.question,
                        item.category,
                        item.from_correct,
                        seen,
                    )
                    is None
                ):
                    if batch is None:
                        batch = _batch_of(batches, run)
                    batch.append(*item[1:9])
                    continue
                # Refused: the full event words the rejection.
                parsed: Parsed = TrialEvent.model_validate(
                    {**item.raw, "run": item.run}
                )
            else:
                parsed = item
            if isinstance(parsed, Rejection):
                rejections.append(parsed)
                unread.append(parsed)
                continue
            assert isinstance(parsed, TrialEvent)  # a Trial was handled above
            event = parsed
            event_state = self._run_for_event(event.run)
            problem: Refusal | None = None
            if event_state is None:
                problem = ("unknown_run", self._unknown_run_reason(event.run))
            elif event.outcome < 0:
                resolved = event_state.classified(event)
                if isinstance(resolved, TrialEvent):
                    event = resolved
                else:
                    problem = resolved
            if event_state is not None and problem is None:
                problem = event_state.rejection(
                    event, new_questions.setdefault(event.run, set())
                )
            if problem is not None:
                rejection = _event_rejection(event, problem, origin, position)
                rejections.append(rejection)
                letters.append(
                    _dead_letter(
                        rejection, None if event_state is None else event.run, now
                    )
                )
                continue
            cost = event.cost
            _batch_of(batches, event.run).append(
                event.model,
                event.question,
                event.trial,
                event.outcome,
                event.prior,
                None if cost is None else cost.tokens,
                None if cost is None else cost.seconds,
                event.ts if isinstance(event.ts, float | int) else None,
            )
        # Count each unread input against the run it named, if that run exists
        # by the end of the batch (a run this batch created counts it too).
        letters.extend(
            _dead_letter(r, r.run if r.run in self._runs else None, now) for r in unread
        )
        return self._commit(list(batches.values()), letters, rejections, cursor, now)

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
        state = self._run_for_event(run)
        if state is None:
            raise UnknownRunError(run)
        size = len(model)
        categories = np.asarray(category)
        if (
            not (len(question) == len(trial) == categories.shape[0] == size)
            or categories.ndim != 1
        ):
            raise ValueError(
                "model, question, trial and category must be columns of one length"
            )
        if size and not np.issubdtype(categories.dtype, np.integer):
            raise ValueError(
                f"category must hold integers; got dtype {categories.dtype}"
            )
        priors = (
            np.zeros(size, dtype=bool)
            if prior is None
            else np.asarray(prior, dtype=bool).reshape(size)
        )
        reports = [
            self._ingest_column_chunk(
                state,
                model[first : first + COLUMN_CHUNK_TRIALS],
                question[first : first + COLUMN_CHUNK_TRIALS],
                trial[first : first + COLUMN_CHUNK_TRIALS],
                categories[first : first + COLUMN_CHUNK_TRIALS],
                priors[first : first + COLUMN_CHUNK_TRIALS],
                first,
                is_last=first + COLUMN_CHUNK_TRIALS >= size,
            )
            for first in range(0, max(size, 1), COLUMN_CHUNK_TRIALS)
        ]
        return combined_reports(reports)

    def _ingest_column_chunk(
        self,
        state: RunState,
        model: Sequence[str],
        question: Sequence[str | int] | NDArray[np.integer],
        trial: Sequence[str | int] | NDArray[np.integer],
        categories: NDArray[np.integer],
        priors: NDArray[np.bool_],
        offset: int,
        is_last: bool,
    ) -> IngestReport:
        """:meth:`ingest_columns` of checked columns; ``offset``: of the call.

        The look at the run (when one is due) waits for the call's last
        chunk, as it would for the call in one piece.
        """
        run = state.config.run
        size = len(model)
        questions, question_factors = _id_column(question)
        trials, trial_factors = _id_column(trial)
        category_array = categories.astype(np.int64)
        batch = TrialBatch(
            run,
            model=list(map(str, model)),
            question=questions,
            trial=trials,
            category=category_array.tolist(),
            prior=priors.tolist(),
            tokens=[None] * size,
            seconds=[None] * size,
            ts=[None] * size,
        )
        batch.preset(
            category_array,
            {
                name: factors
                for name, factors in (
                    ("question", question_factors),
                    ("trial", trial_factors),
                )
                if factors is not None
            },
        )
        now = self._clock()
        bad = state.column_problems(batch)
        rejections = [
            Rejection(
                reason=reason,
                kind=kind,
                source="columns",
                position=offset + index,
                raw=_row_text(batch, index),
                run=run,
            )
            for index, (kind, reason) in bad
        ]
        letters = [_dead_letter(rejection, run, now) for rejection in rejections]
        if bad:
            batch = batch.without({index for index, _ in bad})
        return self._commit([batch], letters, rejections, None, now, look=is_last)

    def _commit(
        self,
        batches: list[TrialBatch],
        letters: list[DeadLetter],
        rejections: list[Rejection],
        cursor: tuple[str, str] | None,
        now: float,
        look: bool = True,
    ) -> IngestReport:
        previous_lists = self._store.apply(Batch(batches, letters, cursor))
        accepted = duplicates = corrections = 0
        touched = set()
        for batch, previous in zip(batches, previous_lists, strict=True):
            state = self._runs[batch.run]
            try:
                state.apply(batch, previous)
            except ValueError:
                if not self._store.is_shared:
                    raise
                # A correction of a trial another worker counted, which these
                # tables have not caught up with: take the stored counts.
                state.restore(self._store.counts(batch.run))
            if not len(batch):
                continue
            touched.add(batch.run)
            before = np.asarray(previous)
            same = int(np.count_nonzero(before == batch.categories()))
            new = int(np.count_nonzero(before == NEW))
            duplicates += same
            accepted += new
            corrections += len(batch) - same - new
        if letters:
            touched.update(letter.run for letter in letters if letter.run is not None)
        for run in touched:
            self._mark_dirty(run)
        if cursor is not None:
            self._cursors[cursor[0]] = cursor[1]
        is_due = look and now >= self._next_look
        fired = self._look_dirty(now, force=False) if is_due else []
        return IngestReport(
            accepted=accepted,
            duplicates=duplicates,
            corrections=corrections,
            rejected=tuple(rejections),
            events=tuple(fired),
            runs=tuple(sorted(touched)),
        )

    def cursor(self, name: str) -> str | None:
        """The last committed position of a source (e.g. a file offset)."""
        return self._cursors.get(name)

    # -- reading -----------------------------------------------------------

    def status(self, run: str) -> Status:
        """The run's status; looks first if trials arrived since the last look."""
        state = self._run(run)
        decision = self._decision(run)
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
        state = self._run(run)
        decision = self._decision(run)
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
        self._run(run)
        return self._reservations.release(run, list(items))

    def in_flight(self, run: str) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question)."""
        state = self._run(run)
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
        decision = self._decision(run)
        return [name for name in decision.order if name in decision.needs_trials]

    def look_pending(self) -> list[StoredEvent]:
        """Look at runs with trials since their last look (none: no work)."""
        return self._look_dirty(self._clock(), force=True)

    def look(self, run: str | None = None) -> list[StoredEvent]:
        """Recompute decisions now and fire new events."""
        runs = [run] if run is not None else self.runs
        for name in runs:
            self._run(name)
            self._dirty.add(name)
        return self._look_dirty(self._clock(), force=True, only=runs)

    def events_after(self, run: str, seq: int = 0) -> list[StoredEvent]:
        """Fired events after sequence number ``seq`` (a resume point).

        Looks at runs with trials since their last look first, so events
        their counts imply are included.
        """
        self._look_dirty(self._clock(), force=True)
        return self._store.events_after(run, seq)

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call ``listener`` with every event as it fires."""
        self._listeners.append(listener)

    # -- internals ---------------------------------------------------------

    def _reload(self) -> None:
        stored = self._store.load()
        self._runs = {}
        for run, config in stored.configs.items():
            state = RunState(config, declared=run in stored.declared)
            state.restore(stored.counts.get(run, {}))
            self._runs[run] = state
        self._fired = set(stored.fired)
        self._event_log = {}
        self._settled = {run: self._settled_of(run) for run in self._runs}
        self._cursors = dict(stored.cursors)
        self._dirty = set(self._runs)
        self._next_look = -math.inf

    def _run(self, run: str) -> RunState:
        state = self._runs.get(run)
        if state is None:
            raise UnknownRunError(run)
        return state

    def _run_for_event(self, run: str) -> RunState | None:
        state = self._runs.get(run)
        if state is not None:
            return state
        if any(existing.declared for existing in self._runs.values()):
            return None
        if len(self._runs) >= self._max_undeclared_runs:
            return None
        config = RunConfig(run=run)
        self._store.save_config(config, declared=False)
        state = self._runs[run] = RunState(config, declared=False)
        return state

    def _unknown_run_reason(self, run: str) -> str:
        if not any(state.declared for state in self._runs.values()):
            return (
                f"unknown run {run!r}: already {len(self._runs)} runs "
                f"(max_undeclared_runs); declare runs up front"
            )
        declared = ", ".join(sorted(r for r, s in self._runs.items() if s.declared))
        return f"unknown run {run!r}; declared runs: {declared}"

    def _settled_of(self, run: str) -> Settled:
        """The run's settled decisions as its fired events record them.

        The events read are kept, so a shared store's refresh reads only
        those fired since (usually none) instead of the whole log.
        """
        known = self._event_log.setdefault(run, [])
        while True:
            after = known[-1].seq if known else 0
            new = self._store.events_after(run, after, _EVENTS_PER_READ)
            known.extend(new)
            if not new or len(new) < _EVENTS_PER_READ:
                break
        settled = settled_from_events(known)
        return replace(settled, models=frozenset(self._runs[run].tables))

    def _decision(self, run: str) -> RunDecision:
        if (
            run in self._dirty
            or run not in self._decisions
            or (
                # Other writers' trials (a shared store, a file another
                # process writes): look again once they may have changed.
                self._store.is_shared
                and self._clock() - self._last_refresh.get(run, -math.inf)
                >= self._shared_refresh_s
            )
        ):
            self._dirty.add(run)
            self._look_dirty(self._clock(), force=True, only=[run])
        return self._decisions[run]

    def _mark_dirty(self, run: str) -> None:
        self._dirty.add(run)
        due = self._last_look.get(run, -math.inf) + self._look_interval_s
        if due < self._next_look:
            self._next_look = due

    def _look_dirty(
        self, now: float, force: bool, only: Sequence[str] | None = None
    ) -> list[StoredEvent]:
        try:
            return self._look_at(now, force, only)
        finally:
            self._next_look = min(
                (
                    self._last_look.get(run, -math.inf) + self._look_interval_s
                    for run in self._dirty
                ),
                default=math.inf,
            )

    def _look_at(
        self, now: float, force: bool, only: Sequence[str] | None
    ) -> list[StoredEvent]:
        candidates = [
            run for run in (only if only is not None else sorted(self._dirty))
        ]
        pending: list[PendingEvent] = []
        for run in candidates:
            if run not in self._dirty and run in self._decisions:
                continue
            if (
                not force
                and now - self._last_look.get(run, -math.inf) < self._look_interval_s
            ):
                continue
            state = self._runs[run]
            if (
                self._store.is_shared
                and now - self._last_refresh.get(run, -math.inf)
                >= self._shared_refresh_s
            ):
                # Other workers' trials: re-read the shared counts when they
                # changed, now and then; local tables hold this worker's own.
                self._last_refresh[run] = now
                shared = self._store.counts_if_changed(run)
                if isinstance(shared, CountChanges):
                    try:
                        state.add_changes(shared)
                    except ValueError:  # a change was missed: read them whole
                        state.restore(self._store.counts(run))
                elif shared is not None:
                    state.restore(shared)
                if shared is not None:
                    # Other workers may have settled decisions too.
                    self._settled[run] = self._settled_of(run)
            decision = decide(
                state.standings(state.config.confidence),
                state.config,
                state.rule_for,
                self._settled.get(run),
                run_trials=sum(table.trial_count for table in state.tables.values()),
            )
            self._decisions[run] = decision
            self._settled[run] = decision.settled
            self._dirty.discard(run)
            self._last_look[run] = now
            trials = {name: table.trial_count for name, table in state.tables.items()}
            pending.extend(
                event
                for event in pending_events(run, decision, trials, now)
                if (event.run, event.kind, event.subject) not in self._fired
            )
        if not pending:
            return []
        fired = self._store.record_events(pending)
        self._fired.update((event.run, event.kind, event.subject) for event in pending)
        for stored in fired:
            for listener in self._listeners:
                listener(stored)
        return fired


def _decision(settled: SettledPair) -> Decision:
    return Decision(
        kind=settled.kind,
        a=settled.a,
        b=settled.b,
        z=settled.z,
        trials=settled.trials,
        look=settled.look,
    )


def _validated_config(values: Mapping[str, object]) -> RunConfig:
    try:
        return RunConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid run config: {describe_validation_error(exc)}"
        ) from exc


def _units(
    items: Iterable[tuple[Wire, int | None, str]],
    take: Callable[[TrialColumns], bool],
) -> Iterator[tuple[Parsed, int | None, str]]:
    """The items one trial at a time, but for columns ``take`` counted whole.

    Columns the run does not take whole are parsed again the slow way, so
    each refused trial is worded (and located) as it always was.
    """
    for item, position, origin in items:
        if type(item) is not TrialColumns:
            yield item, position, origin  # type: ignore[misc]
        elif not take(item):
            for index, parsed in enumerate(item.expand()):
                yield parsed, item.position_of(index), item.source


def _batch_of(batches: dict[str, TrialBatch], run: str) -> TrialBatch:
    """The run's batch in ``batches``, added if it has none yet."""
    batch = batches.get(run)
    if batch is None:
        batch = batches[run] = TrialBatch(run)
    return batch


def _id_column(
    values: Sequence[str | int] | NDArray[np.integer],
) -> tuple[list[str], Factors | None]:
    """Ids as text, and their factors when NumPy can find them cheaply."""
    if isinstance(values, np.ndarray) and np.issubdtype(values.dtype, np.integer):
        distinct, codes = np.unique(values.reshape(-1), return_inverse=True)
        texts = [str(value) for value in distinct.tolist()]
        column: list[str] = np.array(texts, dtype=object)[codes].tolist()
        return column, Factors(texts, codes.astype(np.int64))
    return list(map(str, values)), None


def _row_text(batch: TrialBatch, index: int) -> str:
    return json.dumps(
        {
            "run": batch.run,
            "model": batch.model[index],
            "question": batch.question[index],
            "trial": batch.trial[index],
            "category": batch.category[index],
            "prior": batch.prior[index],
        }
    )


def _event_rejection(
    event: TrialEvent, refusal: Refusal, source: str, position: int | None
) -> Rejection:
    kind, reason = refusal
    return Rejection(
        reason=reason,
        kind=kind,
        source=source,
        position=position,
        raw=event.model_dump_json(exclude_none=True),
        run=event.run,
    )


def _check_scoring_unchanged(old: RunConfig, new: RunConfig) -> None:
    """Counted trials were scored with the old weights and rubric: keep them."""
    for name in ("weights", "rubric", "thresholds"):
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            raise ConfigError(
                f"run {new.run!r} already counted trials with {name} {before}; "
                f"cannot change them to {after}"
            )


def _check_questions_unchanged(
    old: RunState, new: RunConfig, counts: Mapping[str, ModelCounts]
) -> None:
    """Counted trials were averaged over the old ``M``: keep it and them.

    ``M`` divides every model's mu, so changing the declared question set
    (its size, or whether there is one) would move scores with no new trial.
    """
    seen = {question for model in counts.values() for question in model.questions}
    if new.declared_question_count != old.config.declared_question_count or (
        (new.questions is None) != (old.config.questions is None)
    ):
        before = _question_declaration(old.config)
        raise ConfigError(
            f"run {new.run!r} already counted trials with {before}; cannot change "
            f"to {_question_declaration(new)}"
        )
    if new.questions is not None:
        missing = sorted(seen - set(new.questions))
        if missing:
            raise ConfigError(
                f"run {new.run!r} already counted trials on questions the new "
                f"questions list leaves out: {', '.join(map(repr, missing[:5]))}"
            )
    if new.models is not None:
        dropped = sorted(
            model
            for model, model_counts in counts.items()
            if model not in new.models and _has_trials(model_counts)
        )
        if dropped:
            raise ConfigError(
                f"run {new.run!r} already counted trials of models the new models "
                f"list leaves out: {', '.join(map(repr, dropped[:5]))}"
            )


def _has_trials(counts: ModelCounts) -> bool:
    return any(map(any, counts.observed)) or any(map(any, counts.prior))


def _question_declaration(config: RunConfig) -> str:
    if config.questions is not None:
        return f"a questions list of {len(config.questions)}"
    if config.question_count is not None:
        return f"question_count={config.question_count}"
    return "an open question set"


def _dead_letter(rejection: Rejection, run: str | None, now: float) -> DeadLetter:
    return DeadLetter(
        source=rejection.source,
        reason=rejection.reason,
        raw=rejection.raw,
        run=run,
        position=rejection.position,
        received_s=now,
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
