"""Batch scoring: a leaderboard of Bayes@N posteriors with CI-aware groups.

What ``scorio-monitor score`` prints for a finished results file: per model
the posterior mean and sd, a credible interval, competition rank and the
paper's CI-aware rank group. The streaming status reuses these rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scorio_core import (
    CountTable,
    ci_groups,
    competition_ranks,
    order_by_mu,
    z_threshold,
)
from scorio_core.count_metrics import MetricSpec, MetricValue, ModelCounts, live_metrics


@dataclass(frozen=True, slots=True)
class ModelScore:
    """One leaderboard row."""

    model: str
    mu: float
    sigma: float
    lo: float
    hi: float
    trials: int
    rank: int
    group: int
    # avg@N and the requested metrics (count_metrics syntax), by name.
    metrics: Mapping[str, MetricValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Scoreboard:
    """A run's models, best first."""

    run: str
    confidence: float
    question_count: int
    is_open: bool
    models: tuple[ModelScore, ...]


@dataclass(frozen=True, slots=True)
class ResultsMatrix:
    """A finished run as a tensor: models x questions x trials of categories."""

    run: str
    models: tuple[str, ...]
    results: NDArray[np.int64]
    weights: NDArray[np.float64] | None = None


def score_tables(
    run: str,
    tables: Mapping[str, CountTable],
    confidence: float = 0.95,
    metrics: Sequence[str] = (),
) -> Scoreboard:
    """Rank count tables by posterior mean and group them as the paper does.

    Intervals are central ``confidence`` credible intervals clipped to the
    score range ``[min w, max w]``; groups separate neighbours whose ``z``
    reaches ``Phi^-1(confidence)`` (1.645 at 0.95). Each row also carries
    ``avg`` and the ``metrics`` asked for (e.g. ``["pass@4", "maj@5"]``).
    """
    if not tables:
        raise ValueError(f"run {run!r} has no models to score")
    names = sorted(tables)
    means = np.array([tables[name].mu for name in names])
    sigmas = np.array([tables[name].sigma for name in names])
    ranks = competition_ranks(means)
    groups = ci_groups(means, sigmas, z_threshold(confidence))
    specs = [MetricSpec.parse("avg")]
    specs += [MetricSpec.parse(text) for text in metrics if text != "avg"]
    counts = [
        ModelCounts(t.observed_counts, t.prior_counts, t.question_count)
        for t in (tables[name] for name in names)
    ]
    extra = live_metrics(specs, counts, tables[names[0]].weights, confidence)
    rows = []
    for index in order_by_mu(means):
        table = tables[names[index]]
        low, high = table.interval(confidence, table.score_range)
        rows.append(
            ModelScore(
                model=names[index],
                mu=float(means[index]),
                sigma=float(sigmas[index]),
                lo=low,
                hi=high,
                trials=table.trial_count,
                rank=int(ranks[index]),
                group=int(groups[index]),
                metrics=extra[index],
            )
        )
    first = tables[names[0]]
    return Scoreboard(
        run=run,
        confidence=confidence,
        question_count=first.question_count,
        is_open=first.is_open,
        models=tuple(rows),
    )


def score_matrix(
    matrix: ResultsMatrix, confidence: float = 0.95, metrics: Sequence[str] = ()
) -> Scoreboard:
    """Score a ``models x questions x trials`` results tensor."""
    if matrix.results.ndim != 3:
        raise ValueError(
            f"results of run {matrix.run!r} must be 3-D (models, questions, trials); "
            f"got shape {matrix.results.shape}"
        )
    if len(matrix.models) != matrix.results.shape[0]:
        raise ValueError(
            f"run {matrix.run!r} names {len(matrix.models)} models for "
            f"{matrix.results.shape[0]} result matrices"
        )
    tables = {
        name: CountTable.from_matrix(results, matrix.weights)
        for name, results in zip(matrix.models, matrix.results, strict=True)
    }
    return score_tables(matrix.run, tables, confidence, metrics)


def tables_from_trials(
    trials: Sequence[tuple[str, str, str, str, int]],
    weights: Sequence[float],
    question_count: int | None = None,
) -> dict[str, dict[str, CountTable]]:
    """Count tables per run and model from (run, model, question, trial, category).

    A repeated (run, model, question, trial) keeps its last category, so the
    tables count each trial exactly once.
    """
    latest: dict[tuple[str, str, str, str], int] = {}
    for run, model, question, trial, category in trials:
        latest[(run, model, question, trial)] = category
    tables: dict[str, dict[str, CountTable]] = {}
    for (run, model, question, _), category in latest.items():
        per_run = tables.setdefault(run, {})
        if model not in per_run:
            per_run[model] = CountTable(weights, question_count)
        per_run[model].update(question, category)
    if question_count is None:
        # An open run's M is every question seen in the run, by any model.
        for per_run in tables.values():
            seen = {
                question for table in per_run.values() for question in table.questions
            }
            for table in per_run.values():
                table.declare(sorted(str(q) for q in seen - set(table.questions)))
    return tables
