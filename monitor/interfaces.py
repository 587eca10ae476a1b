"""Interfaces to everything outside the engine: stores and input sources.

Adapters implement these; the engine and the service depend only on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from monitor.schema import RunConfig
from monitor.store import (
    Batch,
    DeadLetter,
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

    def apply(self, batch: Batch) -> list[list[int]]:
        """Classify and persist a batch atomically; previous category per trial.

        Returns, for each of the batch's trial batches, one entry per trial:
        ``NEW`` (-1) for a trial not seen before, else the category it had
        (equal: a duplicate; different: a correction; a repeat inside the
        batch is compared with the delivery before it). Durable when it
        returns; raises StoreError otherwise, with nothing applied.
        """
        ...

    def totals(self, run: str) -> RunTotals:
        """The run's counters."""
        ...

    def counts(self, run: str) -> dict[str, ModelCounts]:
        """Current counts of every model of a run (for shared stores)."""
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

    def close(self) -> None:
        """Release the store's resources."""
        ...
