"""Is `scorio-monitor plan` what the run does? Plans beside runs through the engine.

Run: `nice -n 10 .venv/bin/python benchmarks/plan_calibration.py --runs 200
--workers 2 --json benchmarks/results/plan-calibration.json` (the report goes
to stdout; `--from-json FILE...` re-renders it from saved summaries).

For each world (the stopping benchmark's, `benchmarks/stopping.py`, read
from its `WORLDS`; plus `alike11`, the paper's 11 models on questions that
are all alike, planned with `--spread 0`):

- the plan (`monitor.plans.plan.plan`, the same call the command makes,
  with the world's means, questions, cap, categories, target and the
  world's difficulty as `--spread`) beside the mean trials of `--runs`
  runs of `monitor.engine.simulation.simulate` through the real engine
  (every model that needs trials gets one trial per question per step,
  then the engine looks). Goal: planned trials within +-20 % of the mean;
- the mde: the world with its narrowest adjacent pair set `mde` apart (as
  the plan defines it, `monitor.plans.plan.widened`), run `--mde-runs`
  times through the engine; the share of runs that resolve that pair the
  right way round. Goal: 75-85 %;
- the plan's time (warm process, best of 3) and the runs' resolved share
  of adjacent pairs beside the plan's `resolved_share`.

Worlds `costly` (per-model costs) and `qmajor` (question-major arrival) are
left out: a plan assumes equal costs and trials where `next` plans them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from benchmarks.stopping import wilson
from benchmarks.stopping_worlds import WORLDS, World
from monitor.engine.simulation import PAPER_MEANS, simulate
from monitor.plans.outcomes import spread_of
from monitor.plans.plan import (
    Plan,
    PlanRequest,
    Target,
    narrowest_pair,
    plan,
    widened,
)

# The Beta concentration standing for "every question alike" in the engine's
# worlds (draw_world needs one > 0): per-question sd below 1e-4.
ALIKE_KAPPA = 1e8
WORLD_SET: dict[str, World] = {
    name: world for name, world in WORLDS.items() if name not in ("costly", "qmajor")
}
WORLD_SET["alike11"] = World(
    "alike11", PAPER_MEANS, kappa=ALIKE_KAPPA, note="paper11, questions alike"
)
CAP = 80
TARGETS: dict[str, Target] = {
    "ranking": "ranking",
    "top_k": "top_k",
    "leader": "leader",
}
ENGINE_CACHE = os.path.join(
    os.path.dirname(__file__), "results", "plan-calibration-engine.json"
)
MDE_CACHE = os.path.join(
    os.path.dirname(__file__), "results", "plan-calibration-mde.json"
)


def request_for(world: World, means: tuple[float, ...] | None = None) -> PlanRequest:
    categories = world.categories
    return PlanRequest(
        means=tuple(means if means is not None else world.means),
        question_count=world.questions,
        cap=CAP,
        spread=0.0 if world.kappa >= ALIKE_KAPPA else spread_of(world.kappa),
        weights=tuple(k / (categories - 1) for k in range(categories)),
        target=TARGETS[world.target],
        top_k=world.top_k,
    )


def engine_run(job: tuple[str, tuple[float, ...], int]) -> tuple[int, dict[str, int]]:
    """One run through the engine: its trials and each model's group."""
    name, means, seed = job
    world = WORLD_SET[name]
    result = simulate(
        means,
        budget_per_question=CAP,
        question_count=world.questions,
        kappa=world.kappa,
        seed=seed,
        categories=world.categories,
        trials_per_step=world.questions,
        target=world.target,
        top_k=world.top_k,
    )
    # Simulated runs have no late joiners: every model is placed (a group).
    return result.trials, {
        row.model: row.group for row in result.status.models if row.group is not None
    }


def resolved_share(means: tuple[float, ...], groups: list[dict[str, int]]) -> float:
    order = sorted(range(len(means)), key=lambda i: (-means[i], i))
    pairs = [(a, b) for a, b in itertools.pairwise(order) if means[a] > means[b]]
    if not pairs:
        return math.nan
    hits = [
        run[f"model{a + 1:02d}"] < run[f"model{b + 1:02d}"]
        for run in groups
        for a, b in pairs
    ]
    return float(np.mean(hits))


def engine_runs(
    world: World, runs: int, pool: ProcessPoolExecutor
) -> list[tuple[int, dict[str, int]]]:
    """The world's runs through the engine (seeds 0..runs-1), cached in
    ``ENGINE_CACHE``: they do not depend on the plan."""
    cache: dict[str, list[tuple[int, dict[str, int]]]] = {}
    if os.path.exists(ENGINE_CACHE):
        with open(ENGINE_CACHE, encoding="utf-8") as handle:
            cache = {k: [(t, g) for t, g in v] for k, v in json.load(handle).items()}
    done = cache.get(world.name, [])
    if len(done) < runs:
        jobs = [(world.name, world.means, s) for s in range(len(done), runs)]
        done = done + list(pool.map(engine_run, jobs))
        # Re-read: another process may have added worlds meanwhile.
        if os.path.exists(ENGINE_CACHE):
            with open(ENGINE_CACHE, encoding="utf-8") as handle:
                cache = json.load(handle)
        cache[world.name] = done
        with open(ENGINE_CACHE, "w", encoding="utf-8") as handle:
            json.dump(cache, handle)
    return done[:runs]


def timed_plan(request: PlanRequest) -> tuple[Plan, float, float]:
    """The plan, its best wall-clock time of 3 and that call's CPU time."""
    best = (math.inf, math.inf)
    result = plan(request)
    for _ in range(3):
        started, cpu = time.perf_counter(), time.process_time()
        result = plan(request)
        best = min(best, (time.perf_counter() - started, time.process_time() - cpu))
    return result, best[0], best[1]


def calibrate(
    world: World,
    runs: int,
    mde_runs: int,
    pool: ProcessPoolExecutor,
    mde_only: bool = False,
) -> dict[str, Any]:
    started = time.perf_counter()
    request = request_for(world)
    result, seconds, cpu = timed_plan(request)
    row: dict[str, Any] = {
        "world": world.name,
        "note": world.note,
        "models": len(world.means),
        "spread": request.spread,
        "plan_seconds": seconds,
        "plan_cpu_seconds": cpu,
        "planned_trials": result.trials,
        "planned_low": result.trials_low,
        "planned_high": result.trials_high,
        "planned_resolved_share": result.resolved_share,
        "mde": result.mde,
    }
    if not mde_only:
        outcomes = engine_runs(world, runs, pool)
        trials = np.array([t for t, _ in outcomes], dtype=float)
        row.update(
            runs=runs,
            engine_trials=float(trials.mean()),
            engine_low=float(np.quantile(trials, 0.1)),
            engine_high=float(np.quantile(trials, 0.9)),
            ratio=result.trials / float(trials.mean()),
            engine_resolved_share=(
                resolved_share(world.means, [g for _, g in outcomes])
                if world.target == "ranking"
                else None
            ),
        )
    if result.mde is not None and mde_runs:
        hits = mde_hits(world, request, result.mde, mde_runs, pool)
        if hits is not None:
            row.update(
                mde_runs=mde_runs,
                mde_resolved=hits / mde_runs,
                mde_interval=wilson(hits, mde_runs),
            )
    row["seconds"] = time.perf_counter() - started
    return row


def mde_hits(
    world: World,
    request: PlanRequest,
    mde: float,
    runs: int,
    pool: ProcessPoolExecutor,
) -> int | None:
    """Runs (of ``runs``) that resolve the narrowest pair set ``mde`` apart,
    cached in ``MDE_CACHE`` by world and mde."""
    low = min(request.weights)
    span = max(request.weights) - low
    unit = (np.array(world.means) - low) / span
    moved = widened(unit, mde / span)
    if moved is None:
        return None
    key = f"{world.name}@{mde:.10f}"
    cache: dict[str, list[bool]] = {}
    if os.path.exists(MDE_CACHE):
        with open(MDE_CACHE, encoding="utf-8") as handle:
            cache = json.load(handle)
    done = cache.get(key, [])
    if len(done) < runs:
        means = tuple((low + span * moved).tolist())
        order, position = narrowest_pair(unit)
        a, b = order[position], order[position + 1]
        jobs = [(world.name, means, 10_000 + s) for s in range(len(done), runs)]
        done = done + [
            g[f"model{a + 1:02d}"] < g[f"model{b + 1:02d}"]
            for _, g in pool.map(engine_run, jobs)
        ]
        if os.path.exists(MDE_CACHE):
            with open(MDE_CACHE, encoding="utf-8") as handle:
                cache = json.load(handle)
        cache[key] = done
        with open(MDE_CACHE, "w", encoding="utf-8") as handle:
            json.dump(cache, handle)
    return sum(done[:runs])


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| world | models | spread | plan: trials [10-90 %] | engine: mean trials "
        "[10-90 %] (runs) | plan / engine | resolved share plan / engine | mde | "
        "engine resolves the mde pair [95 % CI] (runs) | plan time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        engine_share = row.get("engine_resolved_share")
        planned_share = row.get("planned_resolved_share")
        share = (
            "n/a"
            if planned_share is None
            else f"{float(planned_share):.1%} / "
            + (
                "n/a"
                if engine_share is None or math.isnan(float(engine_share))
                else f"{float(engine_share):.1%}"
            )
        )
        mde = "n/a" if row.get("mde") is None else f"{float(row['mde']):.4f}"
        if "mde_resolved" in row:
            low, high = row["mde_interval"]
            at_mde = (
                f"{float(row['mde_resolved']):.1%} [{low:.1%}, {high:.1%}] "
                f"({row['mde_runs']})"
            )
        else:
            at_mde = "n/a"
        if "engine_trials" in row:
            engine = (
                f"{row['engine_trials']:.0f} [{row['engine_low']:.0f}-"
                f"{row['engine_high']:.0f}] ({row['runs']}) | {row['ratio']:.3f}"
            )
        else:
            engine = "n/a | n/a"
        cpu = row.get("plan_cpu_seconds")
        timing = f"{row['plan_seconds']:.2f} s" + (
            "" if cpu is None else f" ({cpu:.2f} s CPU)"
        )
        lines.append(
            f"| {row['world']} | {row['models']} | {float(row['spread']):.3f} | "
            f"{row['planned_trials']} [{row['planned_low']}-{row['planned_high']}] | "
            f"{engine} | {share} | {mde} | {at_mde} | {timing} |"
        )
    return "\n".join(lines)


def goals(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        line = f"- {row['world']}: "
        if "ratio" in row:
            ratio = float(row["ratio"])
            within = abs(ratio - 1.0) <= 0.2
            line += f"planned trials {ratio:.3f} x the engine's mean: "
            line += "within +-20 %" if within else "OUTSIDE +-20 %"
        if "mde_resolved" in row:
            share = float(row["mde_resolved"])
            line += f"; mde pair resolved in {share:.1%} of runs: " + (
                "within 75-85 %" if 0.75 <= share <= 0.85 else "OUTSIDE 75-85 %"
            )
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--mde-runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--worlds", nargs="+", default=list(WORLD_SET), choices=WORLD_SET
    )
    parser.add_argument(
        "--engine-only",
        action="store_true",
        help="only run (and cache) the worlds' runs through the engine",
    )
    parser.add_argument(
        "--mde-only",
        action="store_true",
        help="only the plans and the runs at the mde (cached)",
    )
    parser.add_argument("--json", help="also write the summaries to this file")
    parser.add_argument("--from-json", nargs="+", help="only re-render saved rows")
    arguments = parser.parse_args()
    if arguments.from_json:
        rows: list[dict[str, Any]] = []
        for path in arguments.from_json:
            with open(path, encoding="utf-8") as handle:
                rows.extend(json.load(handle))
    else:
        rows = []
        with ProcessPoolExecutor(arguments.workers) as pool:
            if arguments.engine_only:
                for name in arguments.worlds:
                    engine_runs(WORLD_SET[name], arguments.runs, pool)
                    print(f"{name}: cached", file=sys.stderr, flush=True)
                return
            for name in arguments.worlds:
                rows.append(
                    calibrate(WORLD_SET[name], arguments.runs, arguments.mde_runs, pool)
                )
                load = os.getloadavg()[0]
                print(
                    f"{name}: {rows[-1]['seconds']:.0f} s (load {load:.1f})",
                    file=sys.stderr,
                    flush=True,
                )
                if arguments.json:
                    with open(arguments.json, "w", encoding="utf-8") as handle:
                        json.dump(rows, handle, indent=2)
    print(table(rows))
    print()
    print(goals(rows))


if __name__ == "__main__":
    main()
