"""Ingestion: raw and parsed trials checked, persisted, then counted.

One call path for every input: mappings and raw JSON payloads are decoded by
the one decoder (:mod:`monitor.inputs.decode`) into trials or columns, which
:meth:`Ingestion.ingest_parsed` counts; columns given as arrays
(:meth:`Ingestion.ingest_columns`) are checked by column and join at the
commit. Each trial is checked against its run's declaration, classified and
persisted by the store in one atomic step (with a source's cursor, if any),
and only then counted in the run's tables. Refused inputs are dead-lettered,
never counted. The end of a call marks the runs it touched for a look and
looks when one is due.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.engine.arrays import dead_letter as _dead_letter
from monitor.engine.arrays import ingest_arrays
from monitor.engine.looks import Looks
from monitor.engine.registry import Registry
from monitor.engine.runs import Refusal, RunState
from monitor.errors import UnknownRunError
from monitor.inputs.columns import Parsed, Trial, TrialColumns
from monitor.inputs.decode import (
    Decoded,
    decode_object,
    decode_objects,
    decode_payload,
    event_of,
)
from monitor.interfaces import Store
from monitor.schema import Rejection, TrialEvent
from monitor.stores.batches import Batch, TrialBatch
from monitor.stores.ledger import NEW
from monitor.stores.records import DeadLetter, IngestReport

EventInput = Mapping[str, object] | TrialEvent


class Ingestion:
    """Counts trials into the registry's runs through the store.

    Args:
        store: Persists each batch (and cursor) before it is counted.
        registry: The runs trials are checked against and counted in.
        looks: Told which runs changed; asked to look when one is due.
        clock: Seconds since the epoch.
        cursors: Each source's last committed position, as stored.
    """

    def __init__(
        self,
        store: Store,
        registry: Registry,
        looks: Looks,
        clock: Callable[[], float],
        cursors: Mapping[str, str],
    ) -> None:
        self._store = store
        self._registry = registry
        self._looks = looks
        self._clock = clock
        self._cursors = dict(cursors)
        self._single_reports: dict[tuple[str, tuple[int, int, int]], IngestReport] = {}
        # Bound once: the one trial's path calls them on every trial.
        self._run_of = registry.get
        self._apply_trial = store.apply_trial
        self._counted = looks.counted

    def ingest(
        self, events: EventInput | Iterable[EventInput], *, source: str = "python"
    ) -> IngestReport:
        """Count trial events (one mapping or an iterable of them)."""
        if type(events) is dict:
            # The common case first: one event, straight to the one trial's path.
            return self._ingest_one(decode_object(events, source, 0), source)
        if type(events) is list and len(events) == 1:
            # A list of one is one event, located at index 0 either way.
            first = events[0]
            if type(first) is dict or isinstance(first, Mapping | TrialEvent):
                return self._ingest_one(decode_object(first, source, 0), source)
        if isinstance(events, Mapping | TrialEvent):
            return self._ingest_one(decode_object(events, source, 0), source)
        if isinstance(events, str | bytes | bytearray) or not isinstance(
            events, Iterable
        ):
            # Not events at all (a number, None, a text): one refusal, worded
            # by the decoder as for a JSON payload of the same, never an
            # exception and never a refusal per character.
            return self._ingest_one(decode_object(events, source, 0), source)
        if isinstance(events, list | tuple):
            decoded = decode_objects(events, source)
            whole = len(decoded) == 1 and type(decoded[0]) is TrialColumns
            return self.ingest_parsed(
                decoded,
                source=source,
                positions=(None,) if whole else itertools.count(),
            )
        # Decoded one by one as the loop consumes them: a decoded event is
        # garbage once counted, which spares the collector.
        parsed = (
            decode_object(item, source, position)
            for position, item in enumerate(events)
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
        state = self._run_of(run)
        if (
            state is None
            or state.refusal(model, question, category, from_correct, set()) is not None
        ):
            return self.ingest_parsed([item], source=source, positions=(position,))
        before = self._apply_trial(
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
        fired = self._counted(run)
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
        parsed = decode_payload(payload, source, position)
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
        items: Iterable[Decoded],
        *,
        source: str | Iterable[str] = "",
        positions: Iterable[int | None] | None = None,
        cursor: tuple[str, str] | None = None,
    ) -> IngestReport:
        """:meth:`Monitor.ingest_parsed` (see there for the arguments)."""
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
            state = self._registry.get(name) or self._registry.for_event(name)
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
                    state = self._registry.get(run) or self._registry.for_event(run)
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
                parsed: Parsed = event_of(item)
            else:
                parsed = item
            if isinstance(parsed, Rejection):
                rejections.append(parsed)
                unread.append(parsed)
                continue
            assert isinstance(parsed, TrialEvent)  # a Trial was handled above
            event = parsed
            event_state = self._registry.for_event(event.run)
            problem: Refusal | None = None
            if event_state is None:
                problem = ("unknown_run", self._registry.unknown_run_reason(event.run))
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
            _dead_letter(r, r.run if r.run in self._registry else None, now)
            for r in unread
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
        """Count a batch of one run given as columns (see
        :func:`monitor.engine.arrays.ingest_arrays`)."""
        state = self._registry.for_event(run)
        if state is None:
            raise UnknownRunError(run)
        return ingest_arrays(
            state, self._commit, self._clock, model, question, trial, category, prior
        )

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
            state = self._registry.run(batch.run)
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
            self._looks.mark_dirty(run)
        if cursor is not None:
            self._cursors[cursor[0]] = cursor[1]
        is_due = look and now >= self._looks.next_look
        fired = self._looks.look_dirty(now, force=False) if is_due else []
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


def _units(
    items: Iterable[tuple[Decoded, int | None, str]],
    take: Callable[[TrialColumns], bool],
) -> Iterator[tuple[Parsed, int | None, str]]:
    """The items one trial at a time, but for columns ``take`` counted whole.

    Columns the run does not take whole are decoded again event by event,
    so each refused trial is worded (and located) as it always was.
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
