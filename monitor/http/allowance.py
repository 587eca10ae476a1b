"""Per-client byte allowances (token buckets) for what anyone may make the monitor keep.

A request naming a run the monitor refuses leaves a dead letter; without a
token, anyone may send such requests. Each client (by address) has a bucket
of bytes that such requests spend and time refills; the trial route refuses
(429) a request for an unknown run from a client whose bucket is empty,
before anything is recorded.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class ByteAllowance:
    """``burst`` bytes per client, refilled at ``per_s``; ``clients`` tracked.

    The least recently charged client is forgotten past ``clients``, so the
    table itself stays bounded.
    """

    def __init__(
        self,
        burst: int,
        per_s: float,
        clients: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = float(burst)
        self._per_s = per_s
        self._clients = clients
        self._clock = clock
        # client -> (bytes left, when counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def left(self, client: str) -> float:
        """Bytes ``client`` may still spend now (negative: in debt)."""
        entry = self._buckets.get(client)
        if entry is None:
            return self._burst
        left, when = entry
        return min(self._burst, left + (self._clock() - when) * self._per_s)

    def wait_s(self, client: str) -> float:
        """Seconds until ``client`` has a byte to spend again (0 if it has)."""
        left = self.left(client)
        return 0.0 if left > 0 else (1.0 - left) / self._per_s

    def charge(self, client: str, cost: int) -> None:
        """Spend ``cost`` bytes of ``client``'s allowance (it may go into debt)."""
        left = self.left(client) - cost
        self._buckets[client] = (left, self._clock())
        self._buckets.move_to_end(client)
        while len(self._buckets) > self._clients:
            self._buckets.popitem(last=False)
