"""What one live subscriber (an SSE stream, the terminal view) has yet to read.

A subscriber that reads slowly, or not at all, must not grow the service's
memory. Statuses are coalesced: a subscriber only ever holds the newest
status of each run (a status replaces the one before it, which the reader
no longer needs). Events cannot be coalesced (each fires once), so they are
kept in order up to a size in bytes; a subscriber over that size, or one
that has had unread items for longer than ``max_stall_s``, is dropped, and
may resume from the store's event log (SSE ``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from monitor.schema import Status
from monitor.stores.records import StoredEvent

Update = StoredEvent | Status


class Subscription:
    """A bounded, coalescing feed of events and statuses for one reader.

    Args:
        max_event_bytes: Unread event bytes (their JSON size) allowed.
        max_stall_s: How long unread items may wait before the reader is
            considered gone.
        clock: Monotonic seconds.
    """

    def __init__(
        self, max_event_bytes: int, max_stall_s: float, clock: Callable[[], float]
    ) -> None:
        self._max_event_bytes = max_event_bytes
        self._max_stall_s = max_stall_s
        self._clock = clock
        self._events: collections.deque[tuple[StoredEvent, int]] = collections.deque()
        self._event_bytes = 0
        self._statuses: dict[str, Status] = {}
        self._pending_since: float | None = None
        self._ended = False
        self._ready = asyncio.Event()

    @property
    def pending_event_bytes(self) -> int:
        return self._event_bytes

    @property
    def is_ended(self) -> bool:
        return self._ended

    @property
    def pending_statuses(self) -> int:
        return len(self._statuses)

    def offer(self, item: Update, size: int = 0) -> bool:
        """Queue ``item`` (an event of ``size`` bytes, or a status).

        Returns False when the reader has fallen too far behind: the caller
        then ends the subscription.
        """
        if self._ended:
            return False
        now = self._clock()
        if self._pending_since is not None and now - self._pending_since > (
            self._max_stall_s
        ):
            return False
        if isinstance(item, Status):
            self._statuses.pop(item.run, None)
            self._statuses[item.run] = item
        else:
            if self._event_bytes + size > self._max_event_bytes:
                return False
            self._events.append((item, size))
            self._event_bytes += size
        if self._pending_since is None:
            self._pending_since = now
        self._ready.set()
        return True

    def end(self) -> None:
        """No more items: the next :meth:`get` after the pending ones is None."""
        self._ended = True
        self._events.clear()
        self._event_bytes = 0
        self._statuses.clear()
        self._ready.set()

    async def get(self) -> Update | None:
        """The next event (in order), else the least recent status; None at end."""
        while True:
            if self._events:
                event, size = self._events.popleft()
                self._event_bytes -= size
                self._mark_read()
                return event
            if self._statuses:
                run = next(iter(self._statuses))
                status = self._statuses.pop(run)
                self._mark_read()
                return status
            if self._ended:
                return None
            self._ready.clear()
            await self._ready.wait()

    def _mark_read(self) -> None:
        if not self._events and not self._statuses:
            self._pending_since = None
        else:
            self._pending_since = self._clock()
