"""Prometheus exposition: a collector that reads the service snapshot at scrape time.

The hot path never touches a metric object: ingestion updates the service's
snapshot, and this collector turns the current snapshot into metric families
when Prometheus scrapes. It lives in its own registry, never the library's
global default. Labels stay bounded: run and model (and the two models of an
adjacent pair), never question ids; rejections by a fixed set of kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from monitor.schema import REJECTION_KINDS
from monitor.service.snapshot import Snapshot

METRIC_NAMES = (
    "scorio_model_score",
    "scorio_model_sigma",
    "scorio_model_lower",
    "scorio_model_upper",
    "scorio_model_trials",
    "scorio_model_metric",
    "scorio_pair_z",
    "scorio_pair_unresolvable",
    "scorio_run_stable",
    "scorio_run_budget_exhausted",
    "scorio_trials_ingested_total",
    "scorio_trials_duplicate_total",
    "scorio_trials_rejected_total",
    "scorio_ingest_latency_seconds",
    "scorio_engine_call_cpu_seconds",
)


class SnapshotCollector(Collector):
    """Metric families from the service snapshot, computed per scrape."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snapshot = self._snapshot()
        model_labels = ["run", "model"]
        score = GaugeMetricFamily(
            "scorio_model_score",
            "Bayes@N posterior mean of the model's score",
            labels=model_labels,
        )
        sigma = GaugeMetricFamily(
            "scorio_model_sigma",
            "Posterior standard deviation of the score",
            labels=model_labels,
        )
        lower = GaugeMetricFamily(
            "scorio_model_lower",
            "Lower end of the credible interval",
            labels=model_labels,
        )
        upper = GaugeMetricFamily(
            "scorio_model_upper",
            "Upper end of the credible interval",
            labels=model_labels,
        )
        trials = GaugeMetricFamily(
            "scorio_model_trials",
            "Unique observed trials counted for the model",
            labels=model_labels,
        )
        metric = GaugeMetricFamily(
            "scorio_model_metric",
            "A live metric's posterior mean (avg, and the run's metrics)",
            labels=["run", "model", "metric"],
        )
        pair_z = GaugeMetricFamily(
            "scorio_pair_z",
            "Separation z of two models adjacent in the current order",
            labels=["run", "a", "b"],
        )
        unresolvable = GaugeMetricFamily(
            "scorio_pair_unresolvable",
            "1 when an adjacent pair is a statistical tie at the run's budget",
            labels=["run", "a", "b"],
        )
        stable = GaugeMetricFamily(
            "scorio_run_stable", "1 once the run's ranking is settled", labels=["run"]
        )
        exhausted = GaugeMetricFamily(
            "scorio_run_budget_exhausted",
            "1 when a model on an unsettled boundary has used its whole budget",
            labels=["run"],
        )
        for run, status in sorted(snapshot.statuses.items()):
            for row in status.models:
                labels = [run, row.model]
                score.add_metric(labels, row.mu)
                sigma.add_metric(labels, row.sigma)
                lower.add_metric(labels, row.lo)
                upper.add_metric(labels, row.hi)
                trials.add_metric(labels, row.trials)
                for name, value in row.metrics.items():
                    metric.add_metric([*labels, name], value.mu)
            for pair in status.pairs:
                pair_z.add_metric([run, pair.a, pair.b], pair.z)
                unresolvable.add_metric(
                    [run, pair.a, pair.b], 1.0 if pair.unresolvable else 0.0
                )
            stable.add_metric([run], 1.0 if status.stable else 0.0)
            exhausted.add_metric([run], 1.0 if status.budget_exhausted else 0.0)
        yield from (score, sigma, lower, upper, trials, metric, pair_z, unresolvable)
        yield from (stable, exhausted)
        yield CounterMetricFamily(
            "scorio_trials_ingested",
            "New trials counted by this process",
            value=snapshot.ingested,
        )
        yield CounterMetricFamily(
            "scorio_trials_duplicate",
            "Repeated deliveries of a trial already counted (no-ops)",
            value=snapshot.duplicates,
        )
        rejected = CounterMetricFamily(
            "scorio_trials_rejected",
            "Inputs rejected and dead-lettered",
            labels=["reason"],
        )
        # Every known reason from the start: alert rules and dashboards that
        # query a reason's rate find a series before its first rejection.
        counts = dict.fromkeys(REJECTION_KINDS, 0) | dict(snapshot.rejected)
        for reason, count in sorted(counts.items()):
            rejected.add_metric([reason], count)
        yield rejected
        latency = snapshot.latency
        yield HistogramMetricFamily(
            "scorio_ingest_latency_seconds",
            "Time from receiving a payload to its durable commit",
            buckets=[(bound, float(count)) for bound, count in latency.cumulative()],
            sum_value=latency.total,
        )
        engine = HistogramMetricFamily(
            "scorio_engine_call_cpu_seconds",
            "CPU time of each call on the engine thread, light or heavy",
            labels=["kind"],
        )
        for kind, histogram in sorted(snapshot.engine_cpu.items()):
            engine.add_metric(
                [kind],
                [(bound, float(count)) for bound, count in histogram.cumulative()],
                histogram.total,
            )
        yield engine


def metrics_renderer(
    snapshot: Callable[[], Snapshot],
) -> Callable[[], tuple[bytes, str]]:
    """A function returning the exposition text and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))

    def render() -> tuple[bytes, str]:
        return generate_latest(registry), CONTENT_TYPE_LATEST

    return render
