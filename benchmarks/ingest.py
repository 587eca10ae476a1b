"""Engine throughput: ingest one at a time, batched, durable; status refresh.

Run: `.venv/bin/python benchmarks/ingest.py`

- one at a time: `Monitor().ingest(event)` per trial, in memory.
- batched: `Monitor().ingest(events)` with 10,000 events per call, in memory.
- columns: `Monitor().ingest_columns(...)`, the bulk path (results files,
  npz), 100,000 trials per call, in memory.
- durable: the dict batches into the SQLite store (WAL, synchronous=FULL:
  each batch is on disk, fsync'd, before the call returns).
- status refresh: one `status()` after a trial changed, for 50 models x
  1,000 questions (a look over all pairs plus the status document).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from monitor import Monitor, RunConfig


def events(
    count: int, models: int, questions: int, seed: int
) -> list[dict[str, object]]:
    """Trials in arrival order; each (model, question) numbers its own trials."""
    rng = np.random.default_rng(seed)
    model_ids = rng.integers(0, models, size=count).tolist()
    question_ids = rng.integers(0, questions, size=count).tolist()
    outcomes = (rng.random(count) < 0.5).tolist()
    next_trial: dict[tuple[int, int], int] = {}
    stream = []
    for model, question, outcome in zip(model_ids, question_ids, outcomes, strict=True):
        trial = next_trial.get((model, question), 0)
        next_trial[(model, question)] = trial + 1
        stream.append(
            {
                "run": "bench",
                "model": f"m{model}",
                "question": question,
                "trial": trial,
                "correct": outcome,
            }
        )
    return stream


def rate(count: int, seconds: float) -> float:
    return count / seconds


def one_at_a_time(stream: list[dict[str, object]]) -> float:
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="bench", question_count=1000, max_trials_per_question=10_000)
    )
    start = time.perf_counter()
    for event in stream:
        monitor.ingest(event)
    return rate(len(stream), time.perf_counter() - start)


def batched(stream: list[dict[str, object]], state: Path | None, batch: int) -> float:
    with Monitor(state) as monitor:
        monitor.configure(
            RunConfig(run="bench", question_count=1000, max_trials_per_question=10_000)
        )
        start = time.perf_counter()
        for offset in range(0, len(stream), batch):
            monitor.ingest(stream[offset : offset + batch])
        return rate(len(stream), time.perf_counter() - start)


def columns(stream: list[dict[str, object]], batch: int) -> float:
    """The same trials as columns, ``batch`` per call."""
    model = [str(event["model"]) for event in stream]
    question = [str(event["question"]) for event in stream]
    trial = [str(event["trial"]) for event in stream]
    category = np.array([int(bool(event["correct"])) for event in stream])
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="bench", question_count=1000, max_trials_per_question=10_000)
    )
    start = time.perf_counter()
    for offset in range(0, len(stream), batch):
        window = slice(offset, offset + batch)
        monitor.ingest_columns(
            "bench", model[window], question[window], trial[window], category[window]
        )
    return rate(len(stream), time.perf_counter() - start)


def status_refresh(models: int, questions: int) -> float:
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="bench", question_count=questions, max_trials_per_question=100)
    )
    rng = np.random.default_rng(1)
    monitor.ingest(
        [
            {
                "run": "bench",
                "model": f"m{m}",
                "question": q,
                "trial": t,
                "correct": bool(rng.random() < 0.5),
            }
            for m in range(models)
            for q in range(questions)
            for t in range(2)
        ]
    )
    monitor.status("bench")
    timings = []
    for trial in range(2, 42):
        monitor.ingest(
            {
                "run": "bench",
                "model": "m0",
                "question": 0,
                "trial": trial,
                "correct": True,
            }
        )
        start = time.perf_counter()
        monitor.status("bench")
        timings.append(time.perf_counter() - start)
    return float(np.median(timings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000)
    arguments = parser.parse_args()
    stream = events(arguments.trials, models=20, questions=1000, seed=0)
    with tempfile.TemporaryDirectory() as folder:
        report = {
            "trials": arguments.trials,
            "one_at_a_time_per_s": round(one_at_a_time(stream[:50_000])),
            "batched_memory_per_s": round(batched(stream, None, 10_000)),
            "columns_memory_per_s": round(columns(stream, 100_000)),
            "durable_sqlite_per_s": round(
                batched(stream, Path(folder) / "bench.db", 10_000)
            ),
            "status_refresh_ms_50x1000": round(status_refresh(50, 1000) * 1000, 2),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
