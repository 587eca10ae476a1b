"""How well could any forecast of a model's trials do? A ceiling, measured.

``predicted_trials``, made when a model has used half of the trials it
finally uses, is scored within +-25 % of that total. How a run ends is
random: the same world, the same first half and
another draw of the later outcomes end at other totals. This script
measures how far that randomness alone caps any forecaster.

For each run of a world (the same loop and worlds as
``benchmarks/stopping.py``) and each model, at the look the stopping
benchmark scores (the first look where the model had reached half of its
final total), the run is continued ``--futures`` times from that look with
fresh outcome draws (``simulate(branch=...)``): same world, same trials so
far, same settled decisions, another future. The *oracle* forecast is the
value within +-25 % of the most continued totals: it knows the true means
and every question's difficulty, which no monitor does. Reported per world:

- engine: share of (model, run) forecasts within +-25 % of the actual total
  (what ``benchmarks/stopping.py`` reports);
- oracle: the same share for the oracle forecast, scored on the actual total;
- oracle held out: each continued total scored against the oracle forecast
  made from the other continuations (the same ceiling with less sampling
  noise, and no credit for fitting the forecast to the totals it is scored
  on).

Run: ``.venv/bin/python benchmarks/forecast_ceiling.py --runs 20 --futures 40``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stopping import run_world
from benchmarks.stopping_worlds import WORLDS
from monitor.schema import Status

TOLERANCE = 0.25


def band_centre(totals: list[int]) -> float:
    """The value within +-25 % of the most totals."""
    ends = np.sort(np.asarray(totals, dtype=float))
    upper = ends * (1.0 + TOLERANCE) / (1.0 - TOLERANCE)
    inside = np.searchsorted(ends, upper, side="right") - np.arange(ends.size)
    return float(ends[int(np.argmax(inside))] * (1.0 + TOLERANCE))


def held_out(totals: list[int]) -> float:
    """Share of totals within +-25 % of the forecast made from the others."""
    hits = sum(
        within(total, band_centre(totals[:i] + totals[i + 1 :]))
        for i, total in enumerate(totals)
    )
    return hits / len(totals)


def within(actual: int, forecast: float) -> bool:
    return abs(actual - forecast) <= TOLERANCE * actual


def forecasts_of(status: Status) -> dict[str, tuple[int, int | None]]:
    """Each model's trials so far and forecast total (None: no forecast)."""
    return {
        row.model: (
            row.trials,
            row.trials + row.predicted_trials
            if row.needs_trials and row.predicted_trials is not None
            else None,
        )
        for row in status.models
    }


def one_run(job: tuple[str, int, int]) -> dict[str, float]:
    """Engine and oracle hits over one run's models."""
    name, seed, futures = job
    world = WORLDS[name]
    looks: list[dict[str, tuple[int, int | None]]] = []

    def observe(status: Status) -> None:
        looks.append(forecasts_of(status))

    result = run_world(world, seed, observe=observe)
    used = {row.model: row.trials for row in result.status.models}
    # model -> (step the benchmark scores, the engine's forecast then)
    halfway: dict[str, tuple[int, int]] = {}
    for step, look in enumerate(looks, start=1):
        for model, (so_far, made) in look.items():
            if model in halfway or made is None or used[model] <= 0:
                continue
            if so_far >= 0.5 * used[model]:
                halfway[model] = (step, made)
    continued: dict[int, list[dict[str, int]]] = {}
    for step in sorted({step for step, _ in halfway.values()}):
        continued[step] = [
            {row.model: row.trials for row in futures_run.status.models}
            for futures_run in (
                run_world(world, seed, branch=(step, 1 + j)) for j in range(futures)
            )
        ]
    engine = oracle = expected = 0.0
    for model, (step, made) in halfway.items():
        totals = [totals[model] for totals in continued[step]]
        engine += within(used[model], made)
        oracle += within(used[model], band_centre(totals))
        expected += held_out(totals)
    return {
        "scored": len(halfway),
        "engine": engine,
        "oracle": oracle,
        "expected": expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", nargs="*", default=list(WORLDS))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--futures", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    rows = []
    with multiprocessing.Pool(arguments.workers) as pool:
        for name in arguments.worlds:
            jobs = [(name, seed, arguments.futures) for seed in range(arguments.runs)]
            parts = pool.map(one_run, jobs)
            scored = sum(part["scored"] for part in parts)
            row = {"world": name, "runs": arguments.runs, "scored": scored}
            for key in ("engine", "oracle", "expected"):
                row[key] = sum(part[key] for part in parts) / max(scored, 1)
            rows.append(row)
            print(
                f"{name:12s} n={scored:4d}  engine {row['engine']:.1%}  "
                f"oracle {row['oracle']:.1%}  oracle held out {row['expected']:.1%}",
                flush=True,
            )
    if arguments.json:
        command = " ".join([".venv/bin/python", *sys.argv])
        document = {"command": command, "cores": os.cpu_count(), "rows": rows}
        arguments.json.write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
