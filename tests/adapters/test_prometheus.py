"""The Prometheus collector: every metric name, with the status's numbers."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from adapters.prometheus import METRIC_NAMES, metrics_renderer
from monitor import Monitor, RunConfig
from monitor.schema import REJECTION_KINDS
from monitor.service.snapshot import LatencyHistogram, Snapshot


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_scrape_shows_each_run_as_its_status_says() -> None:
    monitor = Monitor()
    # Two trials per question and equal records: a tie the budget cannot break.
    monitor.configure(RunConfig(run="r", question_count=4, max_trials_per_question=2))
    monitor.ingest(
        [
            {"run": "r", "model": m, "question": q, "trial": t, "correct": q == t}
            for m in "ab"
            for q in range(4)
            for t in range(2)
        ]
    )
    status = monitor.status("r")
    assert status.budget_exhausted and status.pairs[0].unresolvable
    snapshot = Snapshot(
        statuses={"r": status},
        ingested=16,
        duplicates=3,
        rejected={"category": 2},
        latency=LatencyHistogram().observe(0.003, times=16),
    )
    body, content_type = metrics_renderer(lambda: snapshot)()
    assert content_type.startswith("text/plain")
    found = samples(body.decode())
    names = {name for name, _ in found}
    for name in METRIC_NAMES:
        assert any(n.startswith(name) for n in names), name
    for row in status.models:
        labels = (("model", row.model), ("run", "r"))
        assert found[("scorio_model_score", labels)] == row.mu
        assert found[("scorio_model_sigma", labels)] == row.sigma
        assert found[("scorio_model_lower", labels)] == row.lo
        assert found[("scorio_model_upper", labels)] == row.hi
        assert found[("scorio_model_trials", labels)] == row.trials
    pair = (("a", "a"), ("b", "b"), ("run", "r"))
    assert found[("scorio_pair_z", pair)] == status.pairs[0].z
    assert found[("scorio_pair_unresolvable", pair)] == 1.0
    assert found[("scorio_run_stable", (("run", "r"),))] == 1.0
    assert found[("scorio_run_budget_exhausted", (("run", "r"),))] == 1.0
    assert found[("scorio_trials_ingested_total", ())] == 16
    assert found[("scorio_trials_duplicate_total", ())] == 3
    assert found[("scorio_trials_rejected_total", (("reason", "category"),))] == 2
    assert found[("scorio_ingest_latency_seconds_count", ())] == 16
    assert found[("scorio_ingest_latency_seconds_bucket", (("le", "0.002"),))] == 0
    assert found[("scorio_ingest_latency_seconds_bucket", (("le", "0.005"),))] == 16


def test_every_rejection_reason_is_exposed_at_zero_before_the_first() -> None:
    body, _ = metrics_renderer(lambda: Snapshot(rejected={"category": 2}))()
    found = samples(body.decode())
    for kind in REJECTION_KINDS:
        expected = 2.0 if kind == "category" else 0.0
        assert found[("scorio_trials_rejected_total", (("reason", kind),))] == expected
