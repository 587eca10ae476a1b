"""Cost of the live metrics in a status refresh: 50 models x 1,000 questions.

Run: `.venv/bin/python benchmarks/live_metrics.py`

A binary run with 50 models, 1,000 questions and 8-12 trials per question
(uneven, as in streaming) is ingested into a `Monitor`. Then, one trial
arrives and the status is refreshed (`Monitor.status`), many times over:
once for a run with no `metrics` (avg@N only, always computed) and once for
the same run with three extra metrics, `pass@4`, `maj@5`, `max@2`. Reported:
the median and 90th percentile of one refresh, and of the metrics step alone
(`monitor.engine.live_metrics.model_metrics`), which is what the extra metrics cost.
The goal is <= 10 ms for a refresh with three extra metrics.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from monitor import Monitor, RunConfig
from monitor.engine.live_metrics import model_metrics
from scorio_core import CountTable

MODELS, QUESTIONS = 50, 1000
EXTRA = ["pass@4", "maj@5", "max@2"]


Trials = list[tuple[str, int, int, int]]


def arrivals(seed: int) -> Trials:
    """(model, question, trial, category): 8-12 trials per question, uneven."""
    rng = np.random.default_rng(seed)
    rates = rng.random(MODELS)
    rows: Trials = []
    for model in range(MODELS):
        trials = rng.integers(8, 13, size=QUESTIONS)
        for question, count in enumerate(trials.tolist()):
            outcomes = (rng.random(count) < rates[model]).astype(int).tolist()
            rows += [(f"m{model:02d}", question, t, c) for t, c in enumerate(outcomes)]
    return rows


def build(metrics: list[str], rows: Trials) -> Monitor:
    monitor = Monitor()
    monitor.configure(RunConfig(run="bench", question_count=QUESTIONS, metrics=metrics))
    monitor.ingest(
        [
            {"run": "bench", "model": m, "question": q, "trial": t, "category": c}
            for m, q, t, c in rows
        ]
    )
    return monitor


def tables_of(rows: Trials) -> dict[str, CountTable]:
    tables = {
        f"m{m:02d}": CountTable([0.0, 1.0], question_count=QUESTIONS)
        for m in range(MODELS)
    }
    for model, question, _, category in rows:
        tables[model].update(question, category)
    return tables


def ms(values: list[float], q: float) -> float:
    return 1e3 * float(np.quantile(values, q))


def refresh_times(monitor: Monitor, repeats: int) -> dict[str, float]:
    """One new trial, then a status refresh, ``repeats`` times."""
    times = []
    for index in range(repeats):
        monitor.ingest(
            {
                "run": "bench",
                "model": f"m{index % MODELS:02d}",
                "question": index % QUESTIONS,
                "trial": 1000 + index,
                "category": index % 2,
            }
        )
        start = time.perf_counter()
        monitor.status("bench")
        times.append(time.perf_counter() - start)
    return {"median_ms": ms(times, 0.5), "p90_ms": ms(times, 0.9)}


def metric_times(rows: Trials, metrics: list[str], repeats: int) -> dict[str, float]:
    """The metrics step alone, for every model, ``repeats`` times."""
    tables = tables_of(rows)
    config = RunConfig(run="bench", question_count=QUESTIONS, metrics=metrics)
    names = sorted(tables)
    times = []
    for index in range(repeats):
        tables[names[index % MODELS]].update(index % QUESTIONS, index % 2)
        start = time.perf_counter()
        model_metrics(config, tables, names)
        times.append(time.perf_counter() - start)
    return {
        "median_ms": ms(times, 0.5),
        "p90_ms": ms(times, 0.9),
        "mean_ms": 1e3 * statistics.fmean(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    rows = arrivals(arguments.seed)
    report = {
        "models": MODELS,
        "questions": QUESTIONS,
        "trials": len(rows),
        "extra_metrics": EXTRA,
        "refresh_avg_only": refresh_times(build([], rows), arguments.repeats),
        "refresh_three_extra": refresh_times(build(EXTRA, rows), arguments.repeats),
        "metrics_step_avg_only": metric_times(rows, [], arguments.repeats),
        "metrics_step_three_extra": metric_times(rows, EXTRA, arguments.repeats),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
