"""The engine's forecasts made halfway: the share within +-25 %, fast.

The engine column of ``benchmarks/forecast_ceiling.py`` without the oracle's
continued runs: for each run of a world (seeds ``first .. first + runs - 1``, the same
loop as ``benchmarks/stopping.py``) and each model, the forecast of its
total (trials so far + ``predicted_trials``) at the first look where it had
used half of its final total, scored within +-25 % of that total. Also
times the forecasts: the seconds the statuses spent in ``forecast_trials``.

Run: ``.venv/bin/python benchmarks/forecast_hits.py --runs 10 --worlds paper11
null8 ties5x2 aime20``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypedDict, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import monitor.engine.status as status_module
from benchmarks.forecast_ceiling import forecasts_of, within
from benchmarks.stopping import run_world
from benchmarks.stopping_worlds import WORLDS
from monitor.decisions.forecast import forecast_trials
from monitor.schema import Status

SPENT: list[float] = [0.0, 0]
P = ParamSpec("P")
R = TypeVar("R")


def _timed(function: Callable[P, R]) -> Callable[P, R]:
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[0] += time.perf_counter() - started
            SPENT[1] += 1

    return wrapper


# Statuses call the name they imported: replace it there.
status_module.forecast_trials = _timed(forecast_trials)  # type: ignore[attr-defined]


class Scored(TypedDict):
    model: str
    step: int
    so_far: int
    made: int
    used: int
    hit: bool


class RunHits(TypedDict):
    world: str
    seed: int
    rows: list[Scored]
    forecast_seconds: float
    forecast_calls: int


def one_run(job: tuple[str, int]) -> RunHits:
    """The halfway forecast of each model of one run, with its final total."""
    name, seed = job
    SPENT[0], SPENT[1] = 0.0, 0
    looks: list[dict[str, tuple[int, int | None]]] = []

    def observe(status: Status) -> None:
        looks.append(forecasts_of(status))

    result = run_world(WORLDS[name], seed, observe=observe)
    used = {row.model: row.trials for row in result.status.models}
    halfway: dict[str, tuple[int, int, int]] = {}
    for step, look in enumerate(looks, start=1):
        for model, (so_far, made) in look.items():
            if model in halfway or made is None or used[model] <= 0:
                continue
            if so_far >= 0.5 * used[model]:
                halfway[model] = (step, so_far, made)
    rows: list[Scored] = [
        {
            "model": model,
            "step": step,
            "so_far": so_far,
            "made": made,
            "used": used[model],
            "hit": within(used[model], made),
        }
        for model, (step, so_far, made) in sorted(halfway.items())
    ]
    return {
        "world": name,
        "seed": seed,
        "rows": rows,
        "forecast_seconds": SPENT[0],
        "forecast_calls": int(SPENT[1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--worlds", nargs="*", default=["paper11", "null8", "ties5x2", "aime20"]
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first", type=int, default=0, help="the first run's seed")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write every scored forecast")
    arguments = parser.parse_args()
    everything: list[RunHits] = []
    with multiprocessing.Pool(arguments.workers) as pool:
        for name in arguments.worlds:
            parts = pool.map(
                one_run,
                [
                    (name, seed)
                    for seed in range(arguments.first, arguments.first + arguments.runs)
                ],
            )
            everything.extend(parts)
            rows = [row for part in parts for row in part["rows"]]
            hits = sum(row["hit"] for row in rows)
            calls = sum(part["forecast_calls"] for part in parts)
            seconds = sum(part["forecast_seconds"] for part in parts)
            over = sum(not row["hit"] and row["made"] > row["used"] for row in rows)
            print(
                f"{name:12s} n={len(rows):4d}  engine {hits / max(len(rows), 1):.1%}  "
                f"misses over/under {over}/{len(rows) - hits - over}  "
                f"forecast {1000 * seconds / max(calls, 1):.1f} ms/status "
                f"({calls} statuses)",
                flush=True,
            )
    if arguments.json:
        arguments.json.write_text(json.dumps(everything, indent=1) + "\n")


if __name__ == "__main__":
    main()
