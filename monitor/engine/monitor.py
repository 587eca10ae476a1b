"""The monitor engine: validate, count exactly once, decide, fire events.

:class:`Monitor` is the synchronous core every front end wraps (the CLI, the
asyncio service, a notebook), a facade over parts with one concern each: the
run registry (:mod:`~monitor.engine.registry`), ingestion
(:mod:`~monitor.engine.ingest`), looks and events (:mod:`~monitor.engine.looks`),
statuses (:mod:`~monitor.engine.status`) and plans
(:mod:`~monitor.engine.planning`). One call path: raw input is parsed, checked
against the run's declaration, classified and persisted by the store in one
atomic step, and only then counted. A *look* recomputes the run's decisions
and fires events the run has not fired before; looks happen at the end of an
ingest call (at most every ``look_interval_s``) and on every status or plan.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.engine.ingest import EventInput, Ingestion
from monitor.engine.looks import HISTORY_INTERVAL_S, Looks
from monitor.engine.planning import Planner
from monitor.engine.registry import Registry
from monitor.engine.reservations import Key
from monitor.engine.status import Statuses
from monitor.inputs.decode import Decoded as Wire
from monitor.interfaces import Store
from monitor.limits import DEFAULT_LEASE_S, MAX_UNDECLARED_RUNS
from monitor.schema import NextItem, Plan, RunConfig, Status
from monitor.stores.factory import open_store
from monitor.stores.history import HistoryPoint
from monitor.stores.records import IngestReport, StoredEvent


class Monitor:
    """The engine behind every front end.

    Args:
        state: ``None`` (or ``"memory:"``) for an in-memory monitor, a path
            (or ``"sqlite:///path"``) for the embedded SQLite store (created
            if missing), a store URL such as ``redis://host:6379/0``, or any
            :class:`Store` (see :func:`~monitor.stores.factory.open_store`).
        clock: Seconds since the epoch; injectable for tests.
        look_interval_s: Minimum time between looks triggered by ingestion
            (statuses and plans always look); 0 looks after every call.
        shared_refresh_s: With a shared store (several workers), how often a
            look re-reads every worker's counts; between re-reads a status
            adds this worker's own trials to the last shared counts.
        history_interval_s: Least time between two look summaries kept in
            the run's history (each a store write); 0 keeps every look's.
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
        history_interval_s: float = HISTORY_INTERVAL_S,
        max_undeclared_runs: int = MAX_UNDECLARED_RUNS,
    ) -> None:
        self._store: Store = open_store(state)
        self._clock = clock
        self._registry = Registry(self._store, max_undeclared_runs)
        self._looks = Looks(
            self._store,
            self._registry,
            clock,
            look_interval_s,
            shared_refresh_s,
            history_interval_s,
        )
        stored = self._store.load()
        self._registry.reload(stored)
        self._looks.reload(stored.fired)
        self._ingestion = Ingestion(
            self._store, self._registry, self._looks, clock, stored.cursors
        )
        self._planner = Planner(self._registry, self._looks, clock)
        self._statuses = Statuses(
            self._store, self._registry, self._looks, self._planner.waiting_for
        )
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
        """Fire the events pending since the last look, keep each run's last
        look in its history, then close the store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._looks.look_dirty(self._clock(), force=True)
            for run in self._registry.names:
                self._looks.keep_latest(run)
        finally:
            self._store.close()

    @property
    def store(self) -> Store:
        return self._store

    # -- runs --------------------------------------------------------------

    def configure(self, config: RunConfig | Mapping[str, object]) -> RunConfig:
        """Declare a run (or update it while counted trials keep their meaning).

        Raises:
            ConfigError: for an invalid config, or a change that counted
                trials cannot take: other weights, another stopping rule
                setting (confidence, cap, target, ...) or question set.
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

    # -- reading -----------------------------------------------------------

    def status(self, run: str) -> Status:
        """The run's status; looks first if trials arrived since the last look."""
        return self._statuses.status(run)

    def statuses(self) -> list[Status]:
        return self._statuses.statuses()

    def models_needing_trials(self, run: str) -> list[str]:
        """The run's models that still need trials, best first (each
        status's ``needs_trials``: their places are not settled)."""
        return self._statuses.models_needing_trials(run)

    def models_drawing_trials(self, run: str) -> list[str]:
        """The models the stopping rule draws trials from now, best first:
        those ``next`` shares a budget among (the others that need trials
        wait for them)."""
        return self._statuses.models_drawing_trials(run)

    # -- planning ----------------------------------------------------------

    def next(
        self,
        run: str,
        budget: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        model: str | None = None,
    ) -> Plan:
        """Reserve ``budget`` trials: which (model, question, trials) to run next.

        The plan is a lease (every item carries its ``lease`` id and
        ``expires``): its trials count as in flight, in this and every later
        plan and against ``max_trials_per_question``, until they are
        reported (release goes by counts, oldest lease first) or the lease
        expires after ``lease_s`` seconds. ``lease_s=0`` plans without
        reserving (a look ahead; in-flight trials still count). ``model``
        plans for that model only (a scheduler that runs one model); a
        model asked for by name gets trials also before it is placed
        (before its first trial, or while too few models have reported to
        compare any), so every trial can run on a reservation.

        A reported trial settles a reservation of its own model: of its
        (model, question) first, else of the model's other questions, so a
        scheduler that runs its own choice of questions never starves.

        The answer is a list of reservations with ``waiting_for`` (why some
        model that needs trials gets none: the status's field of that
        name) and ``stable`` attributes; ``why_empty()`` says it in words.

        Raises:
            ValueError: for a negative budget or lease.
        """
        return self._planner.next(run, budget, lease_s=lease_s, model=model)

    def release(self, run: str, items: Sequence[NextItem]) -> int:
        """Give back reserved trials that will not run; how many were given back.

        Each item names (model, question), the trials to give back and
        optionally its ``lease`` (else the newest leases holding them).
        """
        return self._planner.release(run, items)

    def in_flight(self, run: str) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question)."""
        return self._planner.in_flight(run)

    # -- looks and events --------------------------------------------------

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

    def history(self, run: str) -> list[HistoryPoint]:
        """The run's look summaries, oldest first (bounded and thinned).

        Raises:
            UnknownRunError: for a run the monitor does not know.
        """
        self._looks.keep_latest(run)
        return self._store.history(run)

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call ``listener`` with every event as it fires."""
        self._looks.subscribe(listener)
