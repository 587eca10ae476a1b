"""A read-only picture of the service that exporters read at their own pace.

The service replaces its :class:`Snapshot` whole after every status refresh;
readers (the Prometheus collector, the dashboard) take the current object
and never see a half-updated one. Counters are this process's since it
started, as Prometheus counters are.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from monitor.schema import Status

LATENCY_BUCKETS_S: Final = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
)


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """Cumulative-ready bucket counts of ingest latencies (seconds)."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS_S
    counts: tuple[int, ...] = (0,) * (len(LATENCY_BUCKETS_S) + 1)
    total: float = 0.0

    def observe(self, seconds: float, times: int = 1) -> LatencyHistogram:
        """A new histogram with ``times`` more observations of ``seconds``."""
        index = bisect.bisect_left(self.bounds, seconds)
        counts = list(self.counts)
        counts[index] += times
        return LatencyHistogram(
            self.bounds, tuple(counts), self.total + seconds * times
        )

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, cumulative count)`` pairs ending with ``+Inf``."""
        running, pairs = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            pairs.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return pairs


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Statuses of every run plus this process's ingest counters."""

    statuses: Mapping[str, Status] = field(default_factory=dict)
    ingested: int = 0
    duplicates: int = 0
    corrections: int = 0
    rejected: Mapping[str, int] = field(default_factory=dict)
    latency: LatencyHistogram = LatencyHistogram()
    # CPU time of each engine call, per kind ("light", "heavy").
    engine_cpu: Mapping[str, LatencyHistogram] = field(
        default_factory=lambda: {
            "light": LatencyHistogram(),
            "heavy": LatencyHistogram(),
        }
    )
    taken_s: float = 0.0
