"""One early-stopping look over a state file that holds a big other run.

Inspect's early stopping reads the state file the hook writes. It opens the
file read-only for its run alone, once per task, and each look (a status and
a plan for one model) re-reads only the rows appended since the last look.
This script builds a state file with ``--other`` trials of another run and
a small run of two models, then alternates: the writer appends one round of
trials of the small run, the reader looks. It reports the open and the look
times, and for reference what a look cost when it reopened the whole file.
The goal: one look <= 50 ms with 500,000 trials of another run in the file.

    .venv/bin/python -m benchmarks.early_stopping_look --other 500000 --looks 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from monitor import Monitor, RunConfig
from monitor.stores.sqlite import SqliteStore

RUN = "small"
QUESTIONS = [f"q{index}" for index in range(30)]
MODELS = ["a", "b"]


def build(path: Path, other: int) -> Monitor:
    """The writer, with ``other`` trials of run ``big`` already in the file."""
    writer = Monitor(path)
    writer.configure(RunConfig(run="big", question_count=other // 50 + 1))
    writer.configure(
        RunConfig(
            run=RUN, questions=QUESTIONS, models=MODELS, max_trials_per_question=100
        )
    )
    rng = np.random.default_rng(0)
    step = 100_000
    for start in range(0, other, step):
        size = min(step, other - start)
        index = np.arange(start, start + size)
        writer.ingest_columns(
            "big",
            model=[f"m{i % 4}" for i in range(size)],
            question=index // 50,
            trial=index,
            category=(rng.random(size) < 0.6).astype(np.int64),
        )
    return writer


def append_round(writer: Monitor, round_index: int) -> None:
    writer.ingest(
        [
            {
                "run": RUN,
                "model": model,
                "question": question,
                "trial": f"e:{round_index}",
                "correct": (hash((model, question, round_index)) % 3) > 0,
            }
            for model in MODELS
            for question in QUESTIONS
        ]
    )


def look(reader: Monitor) -> None:
    reader.status(RUN)
    reader.next(RUN, len(QUESTIONS), model=MODELS[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=int, default=500_000)
    parser.add_argument("--looks", type=int, default=50)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state.db"
        started = time.perf_counter()
        writer = build(path, arguments.other)
        print(
            f"built {arguments.other:,} trials of another run in "
            f"{time.perf_counter() - started:.1f} s"
        )
        append_round(writer, 0)

        started = time.perf_counter()
        reader = Monitor(
            SqliteStore(path, read_only=True, run=RUN), shared_refresh_s=0.0
        )
        opened_ms = 1000 * (time.perf_counter() - started)
        looks = []
        for index in range(1, arguments.looks + 1):
            append_round(writer, index)
            started = time.perf_counter()
            look(reader)
            looks.append(1000 * (time.perf_counter() - started))
        counted = reader.status(RUN).trials
        expected = len(MODELS) * len(QUESTIONS) * (arguments.looks + 1)
        assert counted == expected, (counted, expected)
        reader.close()

        reopen = []
        for _ in range(3):
            started = time.perf_counter()
            with Monitor(SqliteStore(path, read_only=True)) as whole:
                look(whole)
            reopen.append(1000 * (time.perf_counter() - started))
        writer.close()
    print(f"open (the run only, once per task): {opened_ms:.1f} ms")
    print(
        f"one look after each round of {len(MODELS) * len(QUESTIONS)} new trials: "
        f"median {statistics.median(looks):.1f} ms, max {max(looks):.1f} ms "
        f"over {len(looks)} looks (goal <= 50 ms)"
    )
    print(
        f"for reference, reopening the whole file per look: "
        f"median {statistics.median(reopen):.0f} ms"
    )


if __name__ == "__main__":
    main()
