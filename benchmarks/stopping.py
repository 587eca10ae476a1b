"""Stopping rules over many simulated runs: trials, false claims, pairs, forecasts.

Run: `.venv/bin/python benchmarks/stopping.py --replicates 1000 --workers 2`

Each replicate is `monitor.simulation.simulate`, the loop `scorio-monitor
simulate` runs: ask the engine `next`, draw the outcomes, ingest, look after
every step, until no model needs trials. Per model set and rule it reports:

- trials, and the saving against the paper's fixed N = 80 per question;
- P(any false claim): the share of runs whose final grouping puts a truly
  equal or worse model in a better group, with its Monte-Carlo standard error;
- pairs resolved: adjacent, truly different pairs (true order) ending in
  the right groups; "% of fixed" divides by what fixed N = 80 resolves;
- forecast calibration: for each model that ends with every neighbouring
  boundary resolved, the first forecast of its total trials (trials so far
  plus `predicted_trials`) made once it was at least a fraction f of the way
  there, and whether the realised total fell within +-25 % of it.

Fixed N = 80 is the paper's protocol on the same worlds (same seed): every
model gets 80 trials per question, one look, the paper's adjacent grouping.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from monitor.schema import Status
from monitor.simulation import (
    FIXED_N,
    MODEL_SETS,
    draw_results,
    draw_world,
    grade,
    simulate,
)
from scorio_core import bayes, ci_groups, z_threshold

QUESTIONS = 30
# Progress fractions at which forecasts are scored: the forecast made at the
# first look where trials so far >= f * forecast total.
PROGRESS = (0.5, 0.65, 0.8)
TOLERANCE = 0.25


@dataclass
class Replicate:
    trials: int
    false_claim: bool
    resolved_pairs: int
    fixed_false_claim: bool
    fixed_resolved_pairs: int
    # per progress fraction: (forecast hits, forecasts scored)
    forecasts: dict[float, tuple[int, int]] = field(default_factory=dict)


class ForecastLog:
    """The first forecast of each model's total trials past each progress mark."""

    def __init__(self) -> None:
        self.first: dict[tuple[float, str], int] = {}

    def __call__(self, status: Status) -> None:
        for row in status.models:
            if not row.needs_trials or not row.predicted_trials:
                continue
            total = row.trials + row.predicted_trials
            for fraction in PROGRESS:
                if row.trials >= fraction * total:
                    self.first.setdefault((fraction, row.model), total)

    def score(self, final: Status) -> dict[float, tuple[int, int]]:
        resolved = _models_resolved(final)
        trials = {row.model: row.trials for row in final.models}
        scores = {}
        for fraction in PROGRESS:
            scored = [
                (trials[model], forecast)
                for (mark, model), forecast in self.first.items()
                if mark == fraction and model in resolved
            ]
            hits = sum(abs(real - guess) <= TOLERANCE * guess for real, guess in scored)
            scores[fraction] = (hits, len(scored))
        return scores


def _models_resolved(status: Status) -> set[str]:
    """Models whose every neighbouring boundary in the final order resolved."""
    unresolved = {
        name for pair in status.pairs if not pair.resolved for name in (pair.a, pair.b)
    }
    return {row.model for row in status.models} - unresolved


def fixed_n(means: tuple[float, ...], kappa: float, seed: int) -> tuple[bool, int]:
    """The paper's protocol on the replicate's world: (any false claim, pairs)."""
    rng = np.random.default_rng(seed)
    world = draw_world(means, QUESTIONS, kappa, rng)
    results = draw_results(world, FIXED_N, rng)
    scores = np.array([bayes(results[m]) for m in range(len(means))])
    groups = ci_groups(scores[:, 0], scores[:, 1], z_threshold(0.95))
    names = [str(index) for index in range(len(means))]
    false_claims, resolved, _ = grade(
        dict(zip(names, means, strict=True)),
        dict(zip(names, groups.tolist(), strict=True)),
    )
    return false_claims > 0, resolved


def replicate(job: tuple[str, str, int, int]) -> Replicate:
    model_set, rule, cap, seed = job
    means, kappa = MODEL_SETS[model_set]
    log = ForecastLog()
    result = simulate(
        means,
        rule=rule,
        budget_per_question=cap,
        question_count=QUESTIONS,
        kappa=kappa,
        seed=seed,
        observe=log,
    )
    fixed_false, fixed_pairs = fixed_n(means, kappa, seed)
    return Replicate(
        trials=result.trials,
        false_claim=result.false_claims > 0,
        resolved_pairs=result.resolved_pairs,
        fixed_false_claim=fixed_false,
        fixed_resolved_pairs=fixed_pairs,
        forecasts=log.score(result.status),
    )


def summarise(
    model_set: str, rule: str, cap: int, runs: list[Replicate], seconds: float
) -> dict[str, object]:
    means, _ = MODEL_SETS[model_set]
    count = len(runs)
    trials = np.array([run.trials for run in runs], dtype=float)
    false = np.array([run.false_claim for run in runs], dtype=float)
    pairs = np.array([run.resolved_pairs for run in runs], dtype=float)
    fixed_pairs = np.array([run.fixed_resolved_pairs for run in runs], dtype=float)
    fixed_false = np.array([run.fixed_false_claim for run in runs], dtype=float)
    fixed_trials = len(means) * QUESTIONS * FIXED_N
    calibration = {}
    for fraction in PROGRESS:
        hits = sum(run.forecasts[fraction][0] for run in runs)
        scored = sum(run.forecasts[fraction][1] for run in runs)
        calibration[str(fraction)] = {
            "within_25pct": hits / scored if scored else math.nan,
            "scored": scored,
        }
    return {
        "models": model_set,
        "rule": rule,
        "cap": cap,
        "replicates": count,
        "trials": trials.mean(),
        "trials_se": trials.std(ddof=1) / math.sqrt(count),
        "fixed_n80_trials": fixed_trials,
        "savings": 1.0 - trials.mean() / fixed_trials,
        "p_false_claim": false.mean(),
        "p_false_claim_se": _binomial_se(false),
        "pairs_resolved": pairs.mean(),
        "pairs_resolved_se": pairs.std(ddof=1) / math.sqrt(count),
        "fixed_pairs_resolved": fixed_pairs.mean(),
        "pairs_vs_fixed": pairs.mean() / fixed_pairs.mean(),
        "fixed_p_false_claim": fixed_false.mean(),
        "fixed_p_false_claim_se": _binomial_se(fixed_false),
        "forecast": calibration,
        "seconds": seconds,
    }


def _binomial_se(flags: np.ndarray) -> float:
    share = float(flags.mean())
    return math.sqrt(share * (1.0 - share) / flags.size)


def table(rows: list[dict[str, object]]) -> str:
    """A Markdown table of the summaries."""
    marks = " | ".join(f"forecast ±25 % at {f:g}" for f in PROGRESS)
    lines = [
        f"| models | rule | trials | savings vs fixed N=80 | P(any false claim) "
        f"| pairs resolved | % of fixed pairs | {marks} |",
        "|" + " --- |" * (8 + len(PROGRESS) - 1),
    ]
    for row in rows:
        forecast = row["forecast"]
        assert isinstance(forecast, dict)
        cells = " | ".join(
            f"{forecast[str(f)]['within_25pct']:.1%} (n={forecast[str(f)]['scored']})"
            for f in PROGRESS
        )
        lines.append(
            f"| {row['models']} (cap {row['cap']}) | {row['rule']} "
            f"| {row['trials']:,.0f} ± {row['trials_se']:.0f} "
            f"| {row['savings']:.1%} "
            f"| {row['p_false_claim']:.2%} ± {row['p_false_claim_se']:.2%} "
            f"| {row['pairs_resolved']:.2f} "
            f"| {row['pairs_vs_fixed']:.1%} | {cells} |"
        )
    for row in rows:
        if row["rule"] == "sequential":
            lines.append("")
            lines.append(
                f"Fixed N = 80 on the same {row['models']} worlds: "
                f"{row['fixed_n80_trials']:,} trials, P(any false claim) "
                f"{row['fixed_p_false_claim']:.2%} "
                f"± {row['fixed_p_false_claim_se']:.2%}, "
                f"{row['fixed_pairs_resolved']:.2f} pairs resolved."
            )
    return "\n".join(lines)


def goals(rows: list[dict[str, object]]) -> list[tuple[str, bool]]:
    """The issue's acceptance goals, each with whether these rows meet it."""
    checks = []
    for row in rows:
        if row["rule"] != "sequential":
            continue
        name = f"{row['models']} cap {row['cap']}"
        false = float(row["p_false_claim"])  # type: ignore[arg-type]
        checks.append((f"{name}: P(any false claim) {false:.2%} <= 5 %", false <= 0.05))
        share = 1.0 - float(row["savings"])  # type: ignore[arg-type]
        pairs = float(row["pairs_vs_fixed"])  # type: ignore[arg-type]
        stretch = "" if row["models"] == "paper11" else " (stretch goal)"
        checks.append(
            (
                f"{name}: {share:.1%} of fixed N=80's trials <= 50 % with "
                f"{pairs:.1%} >= 90 % of its pairs{stretch}",
                share <= 0.5 and pairs >= 0.9,
            )
        )
        forecast = row["forecast"]
        assert isinstance(forecast, dict)
        for fraction in PROGRESS:
            within = forecast[str(fraction)]["within_25pct"]
            checks.append(
                (
                    f"{name}: forecasts made {fraction:g} of the way within ±25 % "
                    f"in {within:.1%} >= 80 % of resolved models",
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
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cap", type=int, default=FIXED_N)
    parser.add_argument(
        "--models", nargs="+", default=sorted(MODEL_SETS), choices=sorted(MODEL_SETS)
    )
    parser.add_argument("--rules", nargs="+", default=["sequential", "paper"])
    parser.add_argument("--json", help="also write the summaries to this file")
    parser.add_argument(
        "--from-json", help="only print the report of summaries saved with --json"
    )
    arguments = parser.parse_args()
    if arguments.from_json:
        with open(arguments.from_json, encoding="utf-8") as handle:
            print(report(json.load(handle)))
        return

    rows = []
    with ProcessPoolExecutor(arguments.workers) as pool:
        for model_set, rule in itertools.product(arguments.models, arguments.rules):
            started = time.perf_counter()
            jobs = [
                (model_set, rule, arguments.cap, seed)
                for seed in range(arguments.replicates)
            ]
            runs = list(pool.map(replicate, jobs, chunksize=4))
            rows.append(
                summarise(
                    model_set, rule, arguments.cap, runs, time.perf_counter() - started
                )
            )
            print(
                f"{model_set} {rule}: {rows[-1]['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    print(report(rows))
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
