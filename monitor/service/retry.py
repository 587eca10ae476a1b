"""Retrying with backoff, shared by the sources and publishers.

A source must never acknowledge a trial its sink did not commit, so when the
store is down it waits and offers the same batch again; connections that
drop are reopened the same way. Delays grow step by step to a cap and start
over after a success.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from monitor.errors import StoreError
from monitor.interfaces import IngestSink, Payload
from monitor.stores.records import IngestReport

log = logging.getLogger(__name__)

STEPS_S = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Backoff:
    """Growing delays between attempts: ``STEPS_S``, then the last one."""

    def __init__(self, steps: Sequence[float] = STEPS_S) -> None:
        self._steps = tuple(steps)
        self._failures = 0

    def reset(self) -> None:
        """After a success: the next failure waits the shortest delay."""
        self._failures = 0

    def next_delay(self) -> float:
        delay = self._steps[min(self._failures, len(self._steps) - 1)]
        self._failures += 1
        return delay

    async def wait(self, what: str, error: BaseException) -> None:
        """Log why ``what`` failed and sleep the next delay."""
        delay = self.next_delay()
        log.warning("%s: %s; retrying in %.1f s", what, error, delay)
        await asyncio.sleep(delay)


async def ingest_durably(
    sink: IngestSink,
    payloads: Sequence[Payload],
    cursor: tuple[str, str] | None = None,
) -> IngestReport:
    """Offer the batch until the sink committed it (retry while the store is down).

    Ingestion is idempotent, so offering a batch again is always safe.
    """
    backoff = Backoff()
    while True:
        try:
            return await sink.ingest_payloads(payloads, cursor)
        except StoreError as error:
            await backoff.wait("store unavailable", error)
