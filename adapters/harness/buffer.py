"""The harness client's buffer: reported trials waiting to be sent, per run.

Trials wait in one queue per run and leave it in batches of ``batch_size``
(one request or message each), oldest first. The buffer is bounded: while
the monitor is away and it is full, new trials are dropped and counted, with
one warning per overflow. Sending is the client's; the buffer only says what
to send next and forgets what was sent.
"""

from __future__ import annotations

import logging

from monitor.schema import TrialEvent

log = logging.getLogger(__name__)


class TrialBuffer:
    """Per-run queues of unsent trials, at most ``max_buffered`` in all.

    Args:
        batch_size: Trials per batch.
        max_buffered: The most trials kept.

    Raises:
        ValueError: unless ``1 <= batch_size <= max_buffered``.
    """

    def __init__(self, batch_size: int, max_buffered: int) -> None:
        if batch_size < 1 or max_buffered < batch_size:
            raise ValueError(
                "need 1 <= batch_size <= max_buffered; got "
                f"{batch_size} and {max_buffered}"
            )
        self._batch_size = batch_size
        self._max_buffered = max_buffered
        self._queues: dict[str, list[TrialEvent]] = {}
        self._pending = 0
        self._dropped = 0
        self._overflowing = False

    @property
    def pending(self) -> int:
        """Trials waiting to be sent."""
        return self._pending

    @property
    def dropped(self) -> int:
        """Trials dropped because the buffer was full."""
        return self._dropped

    @property
    def is_full(self) -> bool:
        """Whether the buffer holds ``max_buffered`` trials."""
        return self._pending >= self._max_buffered

    @property
    def has_full_batch(self) -> bool:
        """Whether some run has ``batch_size`` trials waiting."""
        return any(len(queue) >= self._batch_size for queue in self._queues.values())

    @property
    def runs(self) -> list[str]:
        """The runs with trials waiting, in the order they first arrived."""
        return list(self._queues)

    def has_room(self, count: int) -> bool:
        """Whether ``count`` more trials fit."""
        return self._pending + count <= self._max_buffered

    def add(self, events: list[TrialEvent]) -> None:
        """Queue trials (the caller checked :meth:`has_room`)."""
        if self._overflowing:
            self._overflowing = False
            log.warning(
                "sending trials again; %d were dropped while the buffer was full",
                self._dropped,
            )
        for event in events:
            self._queues.setdefault(event.run, []).append(event)
        self._pending += len(events)

    def drop(self, count: int) -> None:
        """Count trials that did not fit; warn at the start of an overflow."""
        self._dropped += count
        if not self._overflowing:
            self._overflowing = True
            log.warning(
                "the monitor is away and %d trials wait to be sent: "
                "dropping new trials until it returns",
                self._pending,
            )

    def batch(self, run: str, *, complete_only: bool) -> list[TrialEvent]:
        """The run's next batch, oldest first; empty when there is none.

        With ``complete_only``, only a batch of ``batch_size`` trials.
        """
        queue = self._queues.get(run, [])
        if complete_only and len(queue) < self._batch_size:
            return []
        return queue[: self._batch_size]

    def forget(self, run: str, count: int) -> None:
        """Remove the run's oldest ``count`` trials (sent, or refused)."""
        queue = self._queues[run]
        del queue[:count]
        self._pending -= count
        if not queue:
            del self._queues[run]
