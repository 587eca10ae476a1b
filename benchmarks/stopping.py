"""Stopping rules in a suite of worlds, each beside the paper's fixed N = 80.

Run: `.venv/bin/python benchmarks/stopping.py --replicates 300 --workers 2
--json benchmarks/results/stopping.json` (the report goes to stdout;
`--from-json FILE` re-renders it from saved summaries).

Each replicate is `monitor.engine.simulation.simulate`, the loop `scorio-monitor
simulate` runs, through the real engine: every model that needs trials gets
10 more (on the questions `next` plans, or, for question-major arrival, on
its first question below the cap), then the engine looks; until no model
needs trials. Per world and rule it reports:

- P(any false claim): the share of runs whose final grouping puts a truly
  equal or worse model in a strictly better group, with a 95 % Wilson
  interval; the false discovery proportion (false claims / claims, 0 for a
  run that claims nothing), averaged over runs;
- trials as % of fixed N = 80, and pairs resolved as % of what fixed N = 80
  resolves (adjacent, truly different pairs of the true order, in the right
  groups; for the top-k and leader targets, runs whose groups put the true
  top k above every other model);
- forecast calibration: for each model and run, the forecast of the model's
  total trials (trials so far + `predicted_trials`) at the first look where
  its trials reached 0.5 (and 0.65) of the total it finally used, and
  whether that total fell within +-25 % of the forecast's.

Two fixed designs run on the same world (same seed,
``benchmarks/fixed_anchors.py``): the paper's protocol (80 trials per
question for every model, one look, adjacent grouping at z >= 1.645, no
multiplicity control) and the fair anchor, fixed N + Holm (one look,
Holm's step-down over the boundaries at the default's guarantee), at
N = 80 and at the N where its mean pairs reach the adaptive rule's. The
worlds are in ``benchmarks/stopping_worlds.py``; ``twinlate`` and
``tieslate`` have undeclared models joining late.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fixed_anchors import GRID, anchors, matching_n
from benchmarks.stopping_worlds import WORLDS, World, probabilities
from monitor.engine.simulation import FIXED_N, SimulationResult, grade, simulate

PROGRESS = (0.5, 0.65)
TOLERANCE = 0.25
TRIALS_PER_STEP = 10


@dataclass
class Replicate:
    trials: int
    cost: float
    false_claim: bool
    false_discovery: float
    resolved_pairs: int
    fixed_false_claim: bool
    fixed_resolved_pairs: int
    # fixed N + Holm at each N of the grid: (any false claim, pairs)
    holm: dict[int, tuple[bool, int]] = field(default_factory=dict)
    # per progress fraction: (forecast hits, forecasts scored)
    forecasts: dict[float, tuple[int, int]] = field(default_factory=dict)


def separated(truth: dict[str, float], groups: dict[str, int | None], top: int) -> bool:
    """Whether the groups put the true top ``top`` above every other model."""
    order = sorted(truth, key=lambda name: -truth[name])
    best, rest = order[:top], order[top:]
    return all(_above(groups, a, b) for a in best for b in rest)


def _above(groups: dict[str, int | None], a: str, b: str) -> bool:
    first, second = groups[a], groups[b]
    return first is not None and second is not None and first < second


def resolved_of(
    world: World, truth: dict[str, float], groups: dict[str, int | None]
) -> int:
    """Pairs resolved, or for a top-k or leader target its one boundary."""
    if world.target in ("top_k", "leader"):
        return int(separated(truth, groups, world.top_k or 1))
    return grade(truth, groups)[1]


def _targets(world: World) -> list[int] | None:
    if world.target == "leader":
        return [0]
    if world.target == "top_k":
        return [(world.top_k or 1) - 1]
    return None


def fixed_designs(
    world: World, seed: int
) -> tuple[tuple[bool, int], dict[int, tuple[bool, int]]]:
    """The fixed designs on the replicate's world: the paper's rule at N = 80
    and fixed N + Holm at every N of the grid, each (any false claim, pairs)."""
    scores = probabilities(world, seed)
    paper, holm = anchors(scores, world.categories, seed, 0.95, _targets(world))
    names = [str(index) for index in range(len(world.means))]
    truth = dict(zip(names, world.means, strict=True))

    def graded(groups: np.ndarray) -> tuple[bool, int]:
        grouping: dict[str, int | None] = dict(zip(names, groups.tolist(), strict=True))
        return grade(truth, grouping)[0] > 0, resolved_of(world, truth, grouping)

    return graded(paper), {n: graded(groups) for n, groups in holm.items()}


def score_forecasts(
    forecasts: dict[str, list[tuple[int, int]]], used: dict[str, int]
) -> dict[float, tuple[int, int]]:
    """Forecasts at the first look a model reached each fraction of its total."""
    scores = {}
    for fraction in PROGRESS:
        hits = scored = 0
        for model, history in forecasts.items():
            actual = used[model]
            made = next(
                (total for so_far, total in history if so_far >= fraction * actual),
                None,
            )
            if made is None or actual <= 0:
                continue
            scored += 1
            hits += abs(actual - made) <= TOLERANCE * actual
        scores[fraction] = (hits, scored)
    return scores


def run_world(
    world: World, seed: int, cap: int = 80, **options: object
) -> SimulationResult:
    """One replicate of ``world`` through the engine's loop (``options`` go
    to :func:`simulate`: error control, forecasts, a branch, an observer)."""
    return simulate(
        world.means,
        probabilities=probabilities(world, seed),
        joins=world.joins,
        budget_per_question=cap,
        question_count=world.questions,
        kappa=world.kappa,
        seed=seed,
        categories=world.categories,
        arrival=world.arrival,
        trials_per_step=TRIALS_PER_STEP,
        costs=world.costs,
        target=world.target,
        top_k=world.top_k,
        **options,  # type: ignore[arg-type]
    )


def replicate(job: tuple[str, str, int, int, bool]) -> Replicate:
    name, control, cap, seed, forecasting = job
    world = WORLDS[name]
    result = run_world(
        world, seed, cap, error_control=control, record_forecasts=forecasting
    )
    used = {row.model: row.trials for row in result.status.models}
    groups = {row.model: row.group for row in result.status.models}
    (fixed_false, fixed_pairs), holm = fixed_designs(world, seed)
    return Replicate(
        trials=result.trials,
        cost=result.cost,
        false_claim=result.false_claims > 0,
        false_discovery=result.false_claims / result.claims if result.claims else 0.0,
        resolved_pairs=resolved_of(world, result.true_means, groups),
        fixed_false_claim=fixed_false,
        fixed_resolved_pairs=fixed_pairs,
        holm=holm,
        forecasts=score_forecasts(result.forecasts, used) if forecasting else {},
    )


def wilson(successes: int, count: int) -> tuple[float, float]:
    """The 95 % Wilson interval of a proportion."""
    if count == 0:
        return math.nan, math.nan
    z = 1.959964
    share = successes / count
    centre = (share + z * z / (2 * count)) / (1 + z * z / count)
    half = (
        z
        * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count))
        / (1 + z * z / count)
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def summarise(
    world: World, control: str, cap: int, runs: list[Replicate], seconds: float
) -> dict[str, object]:
    count = len(runs)
    trials = np.array([run.trials for run in runs], dtype=float)
    false = sum(run.false_claim for run in runs)
    fixed_false = sum(run.fixed_false_claim for run in runs)
    pairs = np.array([run.resolved_pairs for run in runs], dtype=float)
    fixed_pairs = np.array([run.fixed_resolved_pairs for run in runs], dtype=float)
    fixed_trials = len(world.means) * world.questions * FIXED_N
    cost = np.array([run.cost for run in runs])
    unit_costs = world.costs or (1.0,) * len(world.means)
    fixed_cost = sum(unit_costs) * world.questions * FIXED_N
    calibration = {}
    for fraction in PROGRESS:
        hits = sum(run.forecasts.get(fraction, (0, 0))[0] for run in runs)
        scored = sum(run.forecasts.get(fraction, (0, 0))[1] for run in runs)
        calibration[str(fraction)] = {
            "within_25pct": hits / scored if scored else math.nan,
            "scored": scored,
        }
    holm_pairs = {n: float(np.mean([run.holm[n][1] for run in runs])) for n in GRID}
    holm_false = {n: sum(run.holm[n][0] for run in runs) for n in GRID}
    # Nothing to resolve (no truly different neighbours): any N matches.
    matched = matching_n(holm_pairs, float(pairs.mean())) if pairs.mean() else 0.0
    per_n = len(world.means) * world.questions
    return {
        "world": world.name,
        "note": world.note,
        "control": control,
        "cap": cap,
        "replicates": count,
        "trials": trials.mean(),
        "fixed_n80_trials": fixed_trials,
        "trials_vs_fixed": trials.mean() / fixed_trials,
        "cost_vs_fixed": float(cost.mean()) / fixed_cost,
        "p_false_claim": false / count,
        "p_false_claim_ci": wilson(false, count),
        "false_discovery": float(np.mean([run.false_discovery for run in runs])),
        "pairs_resolved": pairs.mean(),
        "fixed_pairs_resolved": fixed_pairs.mean(),
        "pairs_vs_fixed": (
            pairs.mean() / fixed_pairs.mean() if fixed_pairs.mean() else math.nan
        ),
        "fixed_p_false_claim": fixed_false / count,
        "fixed_p_false_claim_ci": wilson(fixed_false, count),
        "holm80_pairs": holm_pairs[FIXED_N],
        "holm80_p_false_claim": holm_false[FIXED_N] / count,
        "pairs_vs_holm80": (
            pairs.mean() / holm_pairs[FIXED_N] if holm_pairs[FIXED_N] else math.nan
        ),
        "holm_pairs_by_n": holm_pairs,
        "holm_matching_n": matched,
        "trials_vs_matching": (
            trials.mean() / (per_n * matched) if 0.0 < matched < math.inf else math.nan
        ),
        "forecast": calibration,
        "seconds": seconds,
    }


def _percent(value: object) -> str:
    number = float(value)  # type: ignore[arg-type]
    return "n/a" if math.isnan(number) else f"{number:.1%}"


def _interval(value: object) -> str:
    assert isinstance(value, list | tuple)
    low, high = (float(bound) for bound in value)
    return f"[{low:.1%}, {high:.1%}]"


def table(rows: list[dict[str, object]]) -> str:
    """A Markdown table of the summaries, one row per world and rule."""
    marks = " | ".join(f"forecast ±25 % at {f:g}" for f in PROGRESS)
    lines = [
        "| world | control, cap | P(any false claim) [95 % CI] | FDP "
        "| trials % of fixed | pairs % of fixed | fixed N=80: P(any false), pairs "
        f"| {marks} |",
        "|" + " --- |" * (7 + len(PROGRESS)),
    ]
    for row in rows:
        forecast = row["forecast"]
        assert isinstance(forecast, dict)
        cells = " | ".join(
            f"{_percent(forecast[str(f)]['within_25pct'])} "
            f"(n={forecast[str(f)]['scored']})"
            for f in PROGRESS
        )
        cost = (
            f" (cost {_percent(row['cost_vs_fixed'])})"
            if row["world"] == "costly"
            else ""
        )
        lines.append(
            f"| {row['world']} | {row['control']}, {row['cap']} "
            f"| {_percent(row['p_false_claim'])} {_interval(row['p_false_claim_ci'])} "
            f"| {float(row['false_discovery']):.2%} "  # type: ignore[arg-type]
            f"| {_percent(row['trials_vs_fixed'])}{cost} "
            f"| {_percent(row['pairs_vs_fixed'])} "
            f"| {_percent(row['fixed_p_false_claim'])}, "
            f"{float(row['fixed_pairs_resolved']):.2f} "  # type: ignore[arg-type]
            f"| {cells} |"
        )
    return "\n".join(lines)


def _float(row: dict[str, object], key: str) -> float:
    value = row.get(key, math.nan)
    return float(value)  # type: ignore[arg-type]


def anchor_table(rows: list[dict[str, object]]) -> str:
    """Each world beside the fair anchor (fixed N + Holm) and the paper's N = 80."""
    lines = [
        "| world | control, cap | P(any false claim) [95 % CI] "
        "| trials % of fixed N=80 | pairs (mean) | fixed 80 + Holm: pairs, "
        "P(any false) | pairs % of fixed 80 + Holm | fixed + Holm reaches these "
        "pairs at N (adaptive trials % of it) | paper fixed 80: pairs, "
        "P(any false) | goal: >= Holm-80 pairs at <= 50 % trials |",
        "|" + " --- |" * 10,
    ]
    for row in rows:
        if "holm80_pairs" not in row:
            continue
        matched = _float(row, "holm_matching_n")
        reach = (
            "n/a (no pairs to resolve)"
            if matched == 0.0
            else f"N = {matched:.0f} ({_percent(row['trials_vs_matching'])})"
            if math.isfinite(matched)
            else f"beyond N = {max(GRID)}"
        )
        share = _float(row, "trials_vs_fixed")
        versus = _float(row, "pairs_vs_holm80")
        holm80 = _float(row, "holm80_pairs")
        met = share <= 0.5 and (versus >= 1.0 or holm80 == 0.0)
        lines.append(
            f"| {row['world']} | {row['control']}, {row['cap']} "
            f"| {_percent(row['p_false_claim'])} {_interval(row['p_false_claim_ci'])} "
            f"| {_percent(share)} | {_float(row, 'pairs_resolved'):.2f} "
            f"| {holm80:.2f}, {_percent(row['holm80_p_false_claim'])} "
            f"| {_percent(versus)} | {reach} "
            f"| {_float(row, 'fixed_pairs_resolved'):.2f}, "
            f"{_percent(row['fixed_p_false_claim'])} "
            f"| {'met' if met else 'not met'} |"
        )
    return "\n".join(lines)


def goals(rows: list[dict[str, object]]) -> list[tuple[str, bool]]:
    """The issue's goals, each with whether the default rows meet it."""
    checks = []
    for row in rows:
        if row["control"] != "ranking" or row["cap"] != FIXED_N:
            continue
        name = str(row["world"])
        false = float(row["p_false_claim"])  # type: ignore[arg-type]
        checks.append((f"{name}: P(any false claim) {false:.1%} <= 5 %", false <= 0.05))
        if "pairs_vs_holm80" in row:
            versus = _float(row, "pairs_vs_holm80")
            share = _float(row, "trials_vs_fixed")
            checks.append(
                (
                    f"{name}: {versus:.1%} of fixed 80 + Holm's pairs (>= 100 %) "
                    f"at {share:.1%} of fixed 80's trials (<= 50 %)",
                    share <= 0.5
                    and (versus >= 1.0 or _float(row, "holm80_pairs") == 0.0),
                )
            )
        share = float(row["trials_vs_fixed"])  # type: ignore[arg-type]
        pairs = float(row["pairs_vs_fixed"])  # type: ignore[arg-type]
        if name in ("paper11", "aime20"):
            checks.append(
                (
                    f"{name}: {share:.1%} of fixed N=80's trials <= 50 % with "
                    f"{pairs:.1%} >= 90 % of its pairs",
                    share <= 0.5 and pairs >= 0.9,
                )
            )
        if name == "qmajor":
            checks.append(
                (
                    f"{name}: {pairs:.1%} >= 80 % of fixed N=80's pairs",
                    pairs >= 0.8,
                )
            )
        forecast = row["forecast"]
        assert isinstance(forecast, dict)
        within = float(forecast["0.5"]["within_25pct"])
        if not math.isnan(within):
            checks.append(
                (
                    f"{name}: forecasts made halfway within ±25 % in "
                    f"{within:.1%} >= 80 % of models",
                    within >= 0.8,
                )
            )
    return checks


def report(rows: list[dict[str, object]]) -> str:
    """The table and the goals, as Markdown."""
    lines = [anchor_table(rows), "", table(rows), "", "Goals:", ""]
    lines += [f"- {'met' if met else 'NOT met'}: {text}" for text, met in goals(rows)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worlds", nargs="+", default=list(WORLDS), choices=WORLDS)
    parser.add_argument(
        "--controls",
        nargs="+",
        default=["ranking", "pair"],
        choices=["ranking", "pair"],
    )
    parser.add_argument("--caps", nargs="+", type=int, default=[FIXED_N])
    parser.add_argument(
        "--forecast-replicates",
        type=int,
        default=100,
        help="replicates (the first ones) that also score forecasts",
    )
    parser.add_argument("--json", help="also write the summaries to this file")
    parser.add_argument(
        "--from-json",
        nargs="+",
        help="only print the report of summaries saved with --json (files joined)",
    )
    arguments = parser.parse_args()
    if arguments.from_json:
        saved: list[dict[str, object]] = []
        for path in arguments.from_json:
            with open(path, encoding="utf-8") as handle:
                saved.extend(json.load(handle))
        print(report(saved))
        return

    rows = []
    with ProcessPoolExecutor(arguments.workers) as pool:
        for name in arguments.worlds:
            for control in arguments.controls:
                for cap in arguments.caps:
                    started = time.perf_counter()
                    jobs = [
                        (name, control, cap, seed, seed < arguments.forecast_replicates)
                        for seed in range(arguments.replicates)
                    ]
                    runs = list(pool.map(replicate, jobs, chunksize=2))
                    rows.append(
                        summarise(
                            WORLDS[name],
                            control,
                            cap,
                            runs,
                            time.perf_counter() - started,
                        )
                    )
                    print(
                        f"{name} {control} cap {cap}: {rows[-1]['seconds']:.0f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    if arguments.json:
                        with open(arguments.json, "w", encoding="utf-8") as handle:
                            json.dump(rows, handle, indent=2)
    print(report(rows))


if __name__ == "__main__":
    main()
