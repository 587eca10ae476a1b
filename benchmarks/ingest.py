"""Engine throughput: ingest one at a time, batched, durable; status refresh.

Run: `.venv/bin/python benchmarks/ingest.py`

The stream: 1,000,000 trials of 20 models on 1,000 questions (a fifth of it
for one at a time), each mode on a fresh monitor. Rates are measured after
the first tenth of the stream, which creates the models' count tables and
the stopping rule for 20 models; that one-off is reported as ``*_setup_s``.

- one at a time: `Monitor().ingest(event)` per trial, in memory.
- batched: `Monitor().ingest(events)` with 10,000 events per call, in memory.
- columns: `Monitor().ingest_columns(...)`, the bulk path (results files,
  npz), 100,000 trials per call, in memory; question and trial ids as
  integer arrays (as results files give them), and as text ("text ids").
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from monitor import Monitor, RunConfig


class Rates(NamedTuple):
    per_second: float
    setup_s: float


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


def configured(state: Path | None = None) -> Monitor:
    monitor = Monitor(state)
    monitor.configure(
        RunConfig(run="bench", question_count=1000, max_trials_per_question=10_000)
    )
    return monitor


def timed(ingest_all: Callable[[slice], None], size: int, warm: int) -> Rates:
    """Rates of ``ingest_all`` over the stream after its first ``warm`` trials.

    The warm-up creates every model's table and the stopping rule for the
    run's model count: a one-off, reported as ``setup_s``.
    """
    start = time.perf_counter()
    ingest_all(slice(0, warm))
    middle = time.perf_counter()
    ingest_all(slice(warm, size))
    end = time.perf_counter()
    return Rates(rate(size - warm, end - middle), middle - start)


def one_at_a_time(stream: list[dict[str, object]], warm: int) -> Rates:
    monitor = configured()

    def ingest_all(part: slice) -> None:
        for event in stream[part]:
            monitor.ingest(event)

    return timed(ingest_all, len(stream), warm)


def batched(
    stream: list[dict[str, object]], state: Path | None, batch: int, warm: int
) -> Rates:
    with configured(state) as monitor:

        def ingest_all(part: slice) -> None:
            for offset in range(part.start, part.stop, batch):
                monitor.ingest(stream[offset : min(offset + batch, part.stop)])

        return timed(ingest_all, len(stream), warm)


def columns(
    stream: list[dict[str, object]], batch: int, warm: int, text_ids: bool
) -> Rates:
    """The same trials as columns, ``batch`` per call.

    Question and trial ids as integer arrays (as a results file gives them)
    or, with ``text_ids``, as lists of strings.
    """
    model = [str(event["model"]) for event in stream]
    question = np.array([int(str(event["question"])) for event in stream])
    trial = np.array([int(str(event["trial"])) for event in stream])
    category = np.array([int(bool(event["correct"])) for event in stream])
    ids: tuple[Sequence[str] | NDArray[np.int64], ...] = (question, trial)
    if text_ids:
        ids = (question.astype(str).tolist(), trial.astype(str).tolist())
    monitor = configured()

    def ingest_all(part: slice) -> None:
        for offset in range(part.start, part.stop, batch):
            window = slice(offset, min(offset + batch, part.stop))
            monitor.ingest_columns(
                "bench",
                model[window],
                ids[0][window],
                ids[1][window],
                category[window],
            )

    return timed(ingest_all, len(stream), warm)


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
    parser.add_argument("--trials", type=int, default=1_000_000)
    arguments = parser.parse_args()
    stream = events(arguments.trials, models=20, questions=1000, seed=0)
    warm = arguments.trials // 10
    single = stream[: arguments.trials // 5]
    report: dict[str, object] = {"trials": arguments.trials, "warm_up_trials": warm}
    with tempfile.TemporaryDirectory() as folder:
        measured = {
            "one_at_a_time": one_at_a_time(single, len(single) // 10),
            "batched_memory": batched(stream, None, 10_000, warm),
            "columns_memory": columns(stream, 100_000, warm, text_ids=False),
            "columns_text_ids_memory": columns(stream, 100_000, warm, text_ids=True),
            "durable_sqlite": batched(stream, Path(folder) / "bench.db", 10_000, warm),
        }
    for name, rates in measured.items():
        report[f"{name}_per_s"] = round(rates.per_second)
        report[f"{name}_setup_s"] = round(rates.setup_s, 3)
    report["status_refresh_ms_50x1000"] = round(status_refresh(50, 1000) * 1000, 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
