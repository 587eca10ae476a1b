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

Fixed N = 80 is the paper's protocol on the same world (same seed): every
model gets 80 trials per question, one look, the paper's adjacent grouping
at z >= 1.645.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from monitor.engine.simulation import (
    AIME20_MEANS,
    FIXED_N,
    PAPER_MEANS,
    Arrival,
    SimulationResult,
    draw_categories,
    draw_world,
    grade,
    simulate,
)
from scorio_core import bayes, ci_groups, z_threshold

PROGRESS = (0.5, 0.65)
TOLERANCE = 0.25
TRIALS_PER_STEP = 10


@dataclass(frozen=True)
class World:
    """A benchmark world: true means, difficulty spread, shape of the run."""

    name: str
    means: tuple[float, ...]
    kappa: float = 5.0
    questions: int = 30
    categories: int = 2
    arrival: Arrival = "least_sampled"
    costs: tuple[float, ...] | None = None
    target: str = "ranking"
    top_k: int | None = None
    note: str = ""


def _spread(first: float, step: float, count: int) -> tuple[float, ...]:
    return tuple(round(first + step * index, 6) for index in range(count))


WORLDS: dict[str, World] = {
    world.name: world
    for world in (
        World("paper11", PAPER_MEANS, note="the paper's 11 models, kappa 5"),
        World("aime20", AIME20_MEANS, kappa=1.0, note="20 AIME-like models, kappa 1"),
        World("null8", (0.5,) * 8, note="8 identical models"),
        World(
            "ties5x2",
            tuple(m for m in (0.2, 0.3, 0.4, 0.5, 0.6) for _ in range(2)),
            note="10 models in five exact ties, 0.10 apart",
        ),
        World(
            "near30",
            _spread(0.4, 0.005, 30),
            questions=40,
            note="30 models 0.005 apart, 40 questions",
        ),
        World("questions10", PAPER_MEANS, questions=10, note="paper11, 10 questions"),
        World(
            "beta03",
            PAPER_MEANS,
            kappa=0.6,
            note="paper11, per-question p ~ Beta(0.3, 0.3)-like",
        ),
        World(
            "rubric4",
            (0.3, 0.3, 0.45, 0.5, 0.5, 0.6, 0.7, 0.7),
            categories=4,
            note="4 categories (0, 1/3, 2/3, 1), two ties",
        ),
        World(
            "costly",
            PAPER_MEANS,
            costs=(1.0,) * 10 + (20.0,),
            note="paper11, the best model 20x costlier",
        ),
        World(
            "qmajor",
            PAPER_MEANS,
            arrival="question_major",
            note="paper11, every trial of a question before the next",
        ),
        World("top3", PAPER_MEANS, target="top_k", top_k=3, note="paper11, top 3"),
        World("leader", PAPER_MEANS, target="leader", note="paper11, the leader"),
    )
}


@dataclass
class Replicate:
    trials: int
    cost: float
    false_claim: bool
    false_discovery: float
    resolved_pairs: int
    fixed_false_claim: bool
    fixed_resolved_pairs: int
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


def fixed_n(world: World, seed: int) -> tuple[bool, int]:
    """The paper's protocol on the replicate's world: (any false claim, pairs)."""
    rng = np.random.default_rng(seed)
    scores = draw_world(world.means, world.questions, world.kappa, rng)
    results = draw_categories(
        scores[:, :, None], world.categories, (*scores.shape, FIXED_N), rng
    )
    weights = np.arange(world.categories) / (world.categories - 1)
    posterior = np.array([bayes(results[m], weights) for m in range(len(scores))])
    groups = ci_groups(posterior[:, 0], posterior[:, 1], z_threshold(0.95))
    names = [str(index) for index in range(len(world.means))]
    truth = dict(zip(names, world.means, strict=True))
    grouping: dict[str, int | None] = dict(zip(names, groups.tolist(), strict=True))
    return grade(truth, grouping)[0] > 0, resolved_of(world, truth, grouping)


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
    fixed_false, fixed_pairs = fixed_n(world, seed)
    return Replicate(
        trials=result.trials,
        cost=result.cost,
        false_claim=result.false_claims > 0,
        false_discovery=result.false_claims / result.claims if result.claims else 0.0,
        resolved_pairs=resolved_of(world, result.true_means, groups),
        fixed_false_claim=fixed_false,
        fixed_resolved_pairs=fixed_pairs,
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


def goals(rows: list[dict[str, object]]) -> list[tuple[str, bool]]:
    """The issue's goals, each with whether the default rows meet it."""
    checks = []
    for row in rows:
        if row["control"] != "ranking" or row["cap"] != FIXED_N:
            continue
        name = str(row["world"])
        false = float(row["p_false_claim"])  # type: ignore[arg-type]
        checks.append((f"{name}: P(any false claim) {false:.1%} <= 5 %", false <= 0.05))
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
    lines = [table(rows), "", "Goals:", ""]
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
