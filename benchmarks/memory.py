"""Memory of counted state: resident and peak RSS of a fresh process.

Run: `.venv/bin/python benchmarks/memory.py` (writes
benchmarks/results/memory.json, or `--output`; `--quick` for a 10x smaller
state, not written)

Every scenario runs in its own fresh Python process, which reads its memory
from /proc/self/status (VmRSS: resident now; VmHWM: the peak so far) and
``resource.getrusage`` (ru_maxrss, the same peak as the kernel counts it).
"empty" is the process after importing the monitor and configuring the run,
before any trial; "inputs" the same once the state's input columns are made
(the caller's memory, 61 MB for the full state). The figures that matter
are the increases over "inputs": what counting the state costs.

- state: the issue's state, 100 models x 10,000 questions x 8 categories
  with 2 trials per (model, question), 2,000,000 trials, counted in memory
  through ``Monitor.ingest_columns`` with integer question and trial ids,
  100,000 trials per call (``--call-trials`` to change), slices of the
  input columns. Then one ``status()`` (its own peak).
- one call: the same state in calls of 1,000,000 trials (results files come
  in such calls): the per-call temporaries are bounded by the engine, not by
  the caller.
- growth: one binary model, 200,000 and 400,000 trials laid out three ways
  (many questions x 2 trial ids; 10 questions x many shared trial ids; each
  question with its own trial ids, so the question x trial id product is
  4e9 to 1.6e10 cells). Memory should follow the trials counted: bytes per
  trial about constant per layout, whatever the id product.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"


def memory_mb() -> dict[str, float]:
    """Resident and peak RSS of this process, in MB (MiB)."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "rss_mb": round(fields["VmRSS"], 1),
        "peak_mb": round(fields["VmHWM"], 1),
        "maxrss_mb": round(maxrss_mb, 1),
    }


def run_state(
    models: int, questions: int, categories: int, trials: int, call_trials: int
) -> dict[str, object]:
    """Count the grid state; memory at each stage (in this process).

    The input columns are made first, for the whole state: "inputs" is the
    baseline the engine's memory is measured from.
    """
    import numpy as np

    from monitor import Monitor, RunConfig

    monitor = Monitor()
    monitor.configure(
        RunConfig(
            run="memory",
            question_count=questions,
            weights=np.linspace(0.0, 1.0, categories).tolist(),
            max_trials_per_question=100,
        )
    )
    stages: dict[str, object] = {"empty": memory_mb()}
    total = models * questions * trials
    index = np.arange(total)
    names = [f"model-{m:03d}" for m in range(models)]
    model = [names[m] for m in (index // (questions * trials)).tolist()]
    question = (index // trials) % questions
    trial = index % trials
    category = np.random.default_rng(0).integers(0, categories, total)
    del index
    stages["inputs"] = memory_mb()
    start = time.perf_counter()
    for first in range(0, total, call_trials):
        part = slice(first, first + call_trials)
        monitor.ingest_columns(
            "memory", model[part], question[part], trial[part], category[part]
        )
    seconds = time.perf_counter() - start
    stages["counted"] = memory_mb()
    status = monitor.status("memory")
    stages["after_status"] = memory_mb()
    assert status.trials == total, status.trials
    return {
        "trials": total,
        "ingest_s": round(seconds, 2),
        "counts_int64_mb": round(models * questions * categories * 8 / 2**20, 1),
        **stages,
    }


def run_growth(layout: str, trials: int) -> dict[str, object]:
    """One binary model, ``trials`` trials in the given id layout."""
    import numpy as np

    from monitor import Monitor, RunConfig

    monitor = Monitor()
    monitor.configure(RunConfig(run="growth", max_trials_per_question=10**9))
    rng = np.random.default_rng(1)
    empty = memory_mb()
    call = 100_000
    for first in range(0, trials, call):
        index = np.arange(first, min(first + call, trials))
        if layout == "questions":  # many questions x trial ids 0, 1
            question, trial = index // 2, index % 2
        elif layout == "trial_ids":  # 10 questions x many shared trial ids
            question, trial = index % 10, index // 10
        else:  # each question its own 10 trial ids
            question, trial = index // 10, index
        monitor.ingest_columns(
            "growth",
            ["model"] * index.size,
            question,
            trial,
            rng.integers(0, 2, index.size),
        )
    counted = memory_mb()
    growth_mb = counted["rss_mb"] - empty["rss_mb"]
    return {
        "layout": layout,
        "trials": trials,
        "empty": empty,
        "counted": counted,
        "growth_mb": round(growth_mb, 1),
        "bytes_per_trial": round(growth_mb * 2**20 / trials),
    }


def in_fresh_process(scenario: dict[str, object]) -> dict[str, object]:
    """Run one scenario in a new interpreter; its JSON result."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(scenario)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def child(scenario: dict[str, Any]) -> None:
    kind = scenario.pop("kind")
    result = run_state(**scenario) if kind == "state" else run_growth(**scenario)
    print(json.dumps(result))


def increases(result: dict[str, object]) -> dict[str, float]:
    """Peak and resident RSS over the process with its inputs made, in MB."""
    inputs = result["inputs"]
    assert isinstance(inputs, dict)
    figures = {}
    for stage in ("counted", "after_status"):
        measured = result[stage]
        assert isinstance(measured, dict)
        figures[f"{stage}_rss_over_inputs_mb"] = round(
            measured["rss_mb"] - inputs["rss_mb"], 1
        )
        figures[f"{stage}_peak_over_inputs_mb"] = round(
            measured["peak_mb"] - inputs["rss_mb"], 1
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a 10x smaller state")
    parser.add_argument("--call-trials", type=int, default=100_000)
    parser.add_argument("--output", type=Path, default=RESULTS)
    arguments = parser.parse_args()
    if arguments.child:
        child(json.loads(arguments.child))
        return
    questions = 1_000 if arguments.quick else 10_000
    shape = {"models": 100, "questions": questions, "categories": 8, "trials": 2}
    report: dict[str, object] = {
        "python": platform.python_version(),
        # The machine, and how busy it was (other jobs too).
        "cpus": os.cpu_count(),
        "load_1min_before": round(os.getloadavg()[0], 2),
    }
    for name, call_trials in (
        ("state", arguments.call_trials),
        ("one_call", 1_000_000),
    ):
        scenario = {"kind": "state", **shape, "call_trials": call_trials}
        result = in_fresh_process(scenario)
        result["call_trials"] = call_trials
        result.update(increases(result))
        report[name] = result
    sizes = (20_000, 40_000) if arguments.quick else (200_000, 400_000)
    report["growth"] = [
        in_fresh_process({"kind": "growth", "layout": layout, "trials": trials})
        for layout in ("questions", "trial_ids", "own_trial_ids")
        for trials in sizes
    ]
    print(json.dumps(report, indent=2))
    if not arguments.quick:
        arguments.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
