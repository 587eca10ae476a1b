"""The run's live metrics for its status: avg@N always, plus what it asks for.

A run's config lists ``metrics`` (``["pass@4", "maj@5", "max@2"]``; the
syntax is :class:`scorio_core.count_metrics.MetricSpec`'s). Every status
computes them for every model from the count tables the run already keeps,
in one vectorised pass per metric (:func:`scorio_core.count_metrics.live_metrics`),
and each model's status entry carries them under ``metrics`` keyed by the
name as the run wrote it, with ``avg`` always there (also as the entry's
``avg`` field).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from monitor.schema import MetricValue, RunConfig
from scorio_core import CountTable
from scorio_core.count_metrics import MetricSpec, ModelCounts, live_metrics

AVG = "avg"


def model_metrics(
    config: RunConfig, tables: Mapping[str, CountTable], names: Sequence[str]
) -> list[dict[str, MetricValue]]:
    """``{metric name: value}`` per model of ``names``, in that order.

    ``avg`` is left out for a model without observed trials (it has no
    average yet); the other metrics are defined from the prior alone.
    """
    if not names:
        return []
    specs = [MetricSpec.parse(AVG)]
    specs += [MetricSpec.parse(text) for text in config.metrics if text != AVG]
    counts = []
    for name in names:
        table = tables[name]
        observed, prior = table.count_views()
        counts.append(
            ModelCounts(
                observed,
                prior if table.prior_trial_count else None,
                table.question_count,
            )
        )
    weights = tables[names[0]].weights
    values = live_metrics(specs, counts, weights, config.confidence)
    return [
        {
            # Plain floats computed here: no validation needed.
            text: MetricValue.model_construct(mu=v.mu, sigma=v.sigma, lo=v.lo, hi=v.hi)
            for text, v in row.items()
        }
        for row in values
    ]
