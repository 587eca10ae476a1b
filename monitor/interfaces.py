"""Interfaces to everything outside the engine: stores, sources, publishers.

Adapters implement these; the engine and the service depend only on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from monitor.limits import MAX_PAYLOAD_BYTES
from monitor.schema import RunConfig, Status
from monitor.stores.batches import Batch, Previous
from monitor.stores.history import HistoryPoint
from monitor.stores.records import (
    CountChanges,
    DeadLetter,
    IngestReport,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
    StoredState,
)


@dataclass(frozen=True, slots=True)
class Line:
    """One input line: its number and bytes, or its length if too long to read."""

    number: int
    data: bytes
    too_long: int = 0


class LineSource(Protocol):
    """Batches of JSON lines with a resumable cursor (None when not resumable)."""

    @property
    def name(self) -> str:
        """A stable name, used as the cursor's key in the store."""
        ...

    def batches(self) -> Iterator[tuple[list[Line], str | None]]:
        """Yield each batch with the cursor just past it."""
        ...

    def stop(self) -> None:
        """Finish after the current batch."""
        ...


class Store(Protocol):
    """Where counted trials, totals, dead letters and fired events live."""

    @property
    def is_shared(self) -> bool:
        """Whether other processes write to this store (counts must be re-read)."""
        ...

    def load(self) -> StoredState:
        """The state to rebuild the engine from."""
        ...

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        """Persist a run's configuration; ``declared`` unless auto-created."""
        ...

    def apply(self, batch: Batch) -> list[Previous]:
        """Classify and persist a batch atomically; previous category per trial.

        Returns, for each of the batch's trial batches, one entry per trial:
        ``NEW`` (-1) for a trial not seen before, else the category it had
        (equal: a duplicate; different: a correction; a repeat inside the
        batch is compared with the delivery before it). Durable when it
        returns; raises StoreError otherwise, with nothing applied.
        """
        ...

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
        """:meth:`apply` of a batch of one trial, without building the batch.

        The per-trial path (a harness reporting trial by trial); returns
        the trial's previous category or ``NEW``.
        """
        ...

    def totals(self, run: str) -> RunTotals:
        """The run's counters."""
        ...

    def counts(self, run: str) -> dict[str, ModelCounts]:
        """Current counts of every model of a run (for shared stores)."""
        ...

    def counts_if_changed(
        self, run: str
    ) -> dict[str, ModelCounts] | CountChanges | None:
        """Counts if another process changed them since this store last
        returned or applied them, whole or as the changes only; ``None`` when
        nothing changed (always, for a store no one else writes)."""
        ...

    def record_events(self, events: Sequence[PendingEvent]) -> list[StoredEvent]:
        """Keep events never fired before; return those, numbered."""
        ...

    def events_after(
        self, run: str, seq: int = 0, limit: int = 1000
    ) -> list[StoredEvent]:
        """The run's fired events with a sequence number above ``seq``, in order.

        Sequence numbers increase in firing order within a run (they may be
        shared across runs, with gaps); ``seq`` is a client's resume point.
        """
        ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The most recent rejected inputs, newest last."""
        ...

    def record_history(self, run: str, point: HistoryPoint) -> None:
        """Keep a look's summary, unless the run's last one has as many trials.

        Bounded and thinned (:mod:`monitor.stores.history`); a read-only
        store keeps nothing.
        """
        ...

    def history(self, run: str) -> list[HistoryPoint]:
        """The run's kept look summaries, oldest first."""
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...


@dataclass(frozen=True, slots=True)
class Payload:
    """One message from a transport: raw JSON (an event or an array of them).

    ``run`` is the run the channel implies (an MQTT topic, a stream key);
    events that omit ``run`` take it, events that name another are refused.
    """

    data: bytes
    source: str
    position: int | None = None
    run: str | None = None
    oversize: int = 0  # bytes of an input too large to read (data is empty)
    limit: int = MAX_PAYLOAD_BYTES  # the limit an oversize input went over


class IngestSink(Protocol):
    """Where sources deliver payloads; returns once they are durable."""

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        """Count the payloads (and commit ``cursor`` with them); when this
        returns, the trials are committed."""
        ...


class TrialSource(Protocol):
    """A transport that delivers trial payloads until cancelled.

    It acknowledges a message to its transport only after
    :meth:`IngestSink.ingest_payloads` returned for it, and reconnects on
    its own when the transport drops.
    """

    @property
    def name(self) -> str: ...

    async def run(self, sink: IngestSink) -> None:
        """Consume until cancelled, or until a finite input ends (a file read
        once): returning says that no more trials come from it."""
        ...


class Publisher(Protocol):
    """An output for statuses (latest wins) and events (each once)."""

    @property
    def name(self) -> str: ...

    async def run(self) -> None:
        """Keep the connection (reconnecting) until cancelled."""
        ...

    def publish_status(self, status: Status) -> None:
        """Queue the newest status of a run (older unsent ones may be dropped)."""
        ...

    def publish_event(self, event: StoredEvent) -> None:
        """Queue an event for delivery."""
        ...
