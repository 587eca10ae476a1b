"""Rejections where the service runs: the recent ones per run, and a calm log.

Every rejected input already reaches its source (the HTTP answer, the
client's log) and the store's dead-letter record. The person running the
service sees them here: :class:`RecentRejections` keeps the newest
``per_run`` rejections of each run (``GET /runs/{run}/rejections``, the
dashboard) and logs them, at most ``burst`` lines per ``window_s`` and then
one line saying how many more of which kinds were not logged, so a sender
stuck in a loop cannot flood the log.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from monitor.schema import Rejection, RejectionKind

log = logging.getLogger(__name__)
# Rejections that name no run (unreadable JSON, a batch with no run) are
# kept under this key.
NO_RUN = ""


class RecentRejection(BaseModel):
    """One rejection as listed at ``GET /runs/{run}/rejections``."""

    ts: float
    kind: RejectionKind
    reason: str
    source: str
    position: int | None = None
    raw: str = ""


class RecentRejections:
    """The newest rejections per run, and a rate-limited log of all of them.

    Args:
        per_run: Rejections kept per run (older ones are forgotten).
        max_runs: Runs kept (a run named only by rejected input counts too);
            the run whose rejection is oldest is forgotten first.
        burst: Lines logged per window.
        window_s: The window of the rate limit.
        clock: Seconds since the epoch.

    Examples:
        >>> now = [0.0]
        >>> recent = RecentRejections(per_run=2, clock=lambda: now[0])
        >>> logging.disable(logging.WARNING)  # keep the doctest's output plain
        >>> recent.record([Rejection(reason=f"bad {i}", run="r") for i in range(3)])
        >>> logging.disable(logging.NOTSET)
        >>> [entry.reason for entry in recent.newest_first("r")]
        ['bad 2', 'bad 1']
    """

    def __init__(
        self,
        *,
        per_run: int = 100,
        max_runs: int = 1000,
        burst: int = 5,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if per_run < 1 or max_runs < 1 or burst < 0 or not window_s > 0:
            raise ValueError(
                "need per_run >= 1, max_runs >= 1, burst >= 0 and window_s > 0"
            )
        self._per_run = per_run
        self._max_runs = max_runs
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._runs: collections.OrderedDict[str, collections.deque[RecentRejection]] = (
            collections.OrderedDict()
        )
        self._window_start = -float("inf")
        self._logged = 0
        self._unlogged: collections.Counter[str] = collections.Counter()

    def record(self, rejections: Sequence[Rejection]) -> None:
        """Keep and log (within the rate limit) rejections just made."""
        if not rejections:
            return
        now = self._clock()
        for rejection in rejections:
            run = rejection.run or NO_RUN
            kept = self._runs.get(run)
            if kept is None:
                kept = self._runs[run] = collections.deque(maxlen=self._per_run)
                while len(self._runs) > self._max_runs:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(run)
            kept.append(
                RecentRejection(
                    ts=now,
                    kind=rejection.kind,
                    reason=rejection.reason,
                    source=rejection.source,
                    position=rejection.position,
                    raw=rejection.raw[:1000],
                )
            )
            self._log(rejection, now)

    def newest_first(self, run: str, limit: int = 100) -> list[RecentRejection]:
        """The run's kept rejections, newest first, at most ``limit``."""
        kept = self._runs.get(run)
        if kept is None:
            return []
        return list(reversed(kept))[:limit]

    def _log(self, rejection: Rejection, now: float) -> None:
        if now - self._window_start >= self._window_s:
            if self._unlogged:
                kinds = ", ".join(
                    f"{count} {kind}" for kind, count in sorted(self._unlogged.items())
                )
                log.warning(
                    "%d more rejections were not logged in %.0f s (%s); "
                    "GET /runs/{run}/rejections lists the newest",
                    sum(self._unlogged.values()),
                    self._window_s,
                    kinds,
                )
            self._window_start = now
            self._logged = 0
            self._unlogged.clear()
        if self._logged < self._burst:
            self._logged += 1
            where = rejection.source
            if rejection.position is not None:
                where = f"{where}:{rejection.position}"
            log.warning(
                "rejected (%s) from %s%s: %s",
                rejection.kind,
                where or "?",
                "" if rejection.run is None else f", run {rejection.run!r}",
                rejection.reason,
            )
        else:
            self._unlogged[rejection.kind] += 1
