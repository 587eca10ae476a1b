"""Looks: recomputing a run's decisions and firing the events they imply.

A run becomes *dirty* when trials (or a new declaration) arrive; a look at
a dirty run recomputes its decision, keeps its settled decisions (final once
fired, see :mod:`monitor.decisions.events`), records the events not fired
before and calls the listeners. Ingestion triggers looks at most every
``look_interval_s``; statuses, plans and explicit looks always look. With a
shared store, a look re-reads every worker's counts now and then.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from monitor.decisions.decide import RunDecision, Settled, decide
from monitor.decisions.events import pending_events, settled_from_events
from monitor.decisions.model import Standing
from monitor.engine.registry import Registry
from monitor.errors import StoreError
from monitor.interfaces import Store
from monitor.stores.history import HistoryPoint, ModelPoint
from monitor.stores.records import CountChanges, PendingEvent, StoredEvent

log = logging.getLogger(__name__)

# A run keeps a look summary at most this often (default).
HISTORY_INTERVAL_S = 0.1

# Events read per store call when catching up with a run's event log.
_EVENTS_PER_READ = 1000


class Looks:
    """Each run's current decision and the events fired from it.

    Args:
        store: Where fired events are recorded (and shared counts read).
        registry: The runs looked at.
        clock: Seconds since the epoch.
        look_interval_s: Minimum time between looks triggered by ingestion.
        shared_refresh_s: With a shared store, how often a look re-reads
            every worker's counts.
        history_interval_s: Least time between two kept look summaries.
    """

    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Callable[[], float],
        look_interval_s: float,
        shared_refresh_s: float,
        history_interval_s: float = HISTORY_INTERVAL_S,
    ) -> None:
        self._store = store
        self._registry = registry
        self._clock = clock
        self._look_interval_s = look_interval_s
        self._shared_refresh_s = shared_refresh_s
        self._history_interval_s = history_interval_s
        self._last_refresh: dict[str, float] = {}
        # Each run's fired events as read from the store (see _settled_of).
        self._event_log: dict[str, list[StoredEvent]] = {}
        self._decisions: dict[str, RunDecision] = {}
        # Each run's settled decisions: final once fired (see monitor.decisions.events).
        self._settled: dict[str, Settled] = {}
        self._dirty: set[str] = set()
        self._last_look: dict[str, float] = {}
        # When the next look triggered by ingestion is due (the earliest
        # dirty run's last look + interval): before it, no look is tried.
        self._next_look = -math.inf
        self._fired: set[tuple[str, str, str]] = set()
        # Per run, the trials and time of the last look summary kept.
        self._history_kept: dict[str, tuple[int, float]] = {}
        self._listeners: list[Callable[[StoredEvent], None]] = []

    @property
    def next_look(self) -> float:
        """When the next look triggered by ingestion is due."""
        return self._next_look

    def reload(self, fired: set[tuple[str, str, str]]) -> None:
        """Start again from the store: every run dirty, ``fired`` as recorded."""
        self._fired = set(fired)
        self._event_log = {}
        self._settled = {run: self._settled_of(run) for run in self._registry}
        self._dirty = set(self._registry)
        self._next_look = -math.inf

    def subscribe(self, listener: Callable[[StoredEvent], None]) -> None:
        """Call ``listener`` with every event as it fires."""
        self._listeners.append(listener)

    def look(self, run: str | None = None) -> list[StoredEvent]:
        """Recompute decisions now and fire new events."""
        runs = [run] if run is not None else self._registry.names
        for name in runs:
            self._registry.run(name)
            self._dirty.add(name)
        return self.look_dirty(self._clock(), force=True, only=runs)

    def keep_latest(self, run: str) -> None:
        """Look at ``run`` now and keep its summary in the history, if new."""
        trials, _ = self._history_kept.get(run, (-1, 0.0))
        state = self._registry.run(run)
        counted = sum(table.trial_count for table in state.tables.values())
        if counted == trials and not self._store.is_shared:
            return
        self._history_kept[run] = (trials, -math.inf)
        self.look(run)

    def decision(self, run: str) -> RunDecision:
        """The run's current decision; looks first if it may be stale."""
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
            self.look_dirty(self._clock(), force=True, only=[run])
        return self._decisions[run]

    def mark_dirty(self, run: str) -> None:
        """The run has news: look at it when its next look is due."""
        self._dirty.add(run)
        due = self._last_look.get(run, -math.inf) + self._look_interval_s
        if due < self._next_look:
            self._next_look = due

    def counted(self, run: str) -> Sequence[StoredEvent]:
        """:meth:`mark_dirty`, then the look if one is due: the end of
        ingesting one trial, in one call as it happens once per trial."""
        self._dirty.add(run)
        due = self._last_look.get(run, -math.inf) + self._look_interval_s
        if due < self._next_look:
            self._next_look = due
        now = self._clock()
        if now < self._next_look:
            return ()
        return self.look_dirty(now, force=False)

    def look_dirty(
        self, now: float, force: bool, only: Sequence[str] | None = None
    ) -> list[StoredEvent]:
        """Look at the dirty runs (or ``only`` these) whose look is due.

        ``force`` looks whatever the interval; returns the events fired.
        """
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

    def _keep_history(
        self,
        run: str,
        now: float,
        standings: Sequence[Standing],
        decision: RunDecision,
    ) -> None:
        """Keep the look's summary when the trials moved on (see stores.history).

        A run keeps one at most every ``history_interval_s`` (each is a
        durable write, and a service looks at every status pass);
        :meth:`keep_latest` keeps the latest whatever the interval.
        """
        trials = sum(standing.trials for standing in standings)
        kept_trials, kept_at = self._history_kept.get(run, (-1, -math.inf))
        if trials == kept_trials or not standings:
            return
        if now - kept_at < self._history_interval_s:
            return
        by_model = {standing.model: standing for standing in standings}
        point = HistoryPoint(
            ts=now,
            trials=trials,
            models=tuple(
                ModelPoint(
                    model=name,
                    mu=by_model[name].mu,
                    sigma=by_model[name].sigma,
                    group=decision.groups[name],
                )
                for name in decision.order
            ),
        )
        try:
            self._store.record_history(run, point)
        except StoreError as exc:
            # The trace loses a point; counting goes on.
            log.warning("could not keep the look of run %r: %s", run, exc)
        self._history_kept[run] = (trials, now)

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
        # The models the last look covered: once a boundary settled, those
        # its segments hold (the others are joiners, placed by their tests).
        covered = {name for segment in settled.segments for name in segment}
        return replace(
            settled,
            models=frozenset(covered or self._registry.run(run).tables),
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
            state = self._registry.run(run)
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
            standings = state.standings(state.config.confidence)
            decision = decide(
                standings,
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
            self._keep_history(run, now, standings, decision)
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
