"""How often is `scorio-monitor gate` wrong? Exit codes in three worlds.

Run: `nice -n 10 .venv/bin/python benchmarks/gate_errors.py --runs 200
--json benchmarks/results/gate-errors.json`

Each run is a two-model run through the real engine (`Monitor`, 30
questions, cap 80, confidence 0.95, per-question difficulty Beta of
concentration 5 as in `monitor.engine.simulation`): every model that needs
trials gets one trial per question where `next` plans them, then the
engine looks, until no model needs trials. The gate
(`monitor.plans.gate.gate`, what `scorio-monitor gate` and
`GET /runs/{run}/gate` call) is asked after every step, as a CI job polling
the run would; a run's verdict is the first pass or fail (CI stops there),
else inconclusive at the end. Worlds: the candidate clearly better (+0.10),
clearly worse (-0.10), tied with the baseline (margin 0: a pass or a fail
is wrong), and tied with margin 0.02 (a fail is wrong). Goal: P(wrong
verdict) <= 1 - confidence, with its 95 % Wilson interval.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Final

import numpy as np

from benchmarks.stopping import wilson
from monitor.engine.monitor import Monitor
from monitor.engine.simulation import draw_categories, draw_world
from monitor.plans.gate import gate
from monitor.schema import RunConfig

QUESTIONS: Final = 30
CAP: Final = 80
CONFIDENCE: Final = 0.95
BASELINE: Final = 0.6
# name: (candidate's mean, margin, verdicts that are wrong)
WORLDS: Final = {
    "better": (BASELINE + 0.10, 0.0, ("fail",)),
    "worse": (BASELINE - 0.10, 0.0, ("pass",)),
    "tied": (BASELINE, 0.0, ("pass", "fail")),
    "tied-margin": (BASELINE, 0.02, ("fail",)),
}


def one_run(job: tuple[str, int]) -> tuple[str, int, int]:
    """(first conclusive verdict or the last, the step it came, trials)."""
    name, seed = job
    candidate_mean, margin, _ = WORLDS[name]
    rng = np.random.default_rng((seed, 7))
    world = draw_world([candidate_mean, BASELINE], QUESTIONS, 5.0, rng)
    names = ["candidate", "baseline"]
    monitor = Monitor(look_interval_s=0.0)
    monitor.configure(
        RunConfig(
            run="g",
            questions=[str(q) for q in range(QUESTIONS)],
            models=names,
            confidence=CONFIDENCE,
            max_trials_per_question=CAP,
        )
    )
    next_trial = np.zeros((2, QUESTIONS), dtype=np.int64)
    verdict, step = "inconclusive", 0
    while True:
        needing = monitor.models_needing_trials("g")
        if not needing:
            break
        plan = monitor.next("g", QUESTIONS * len(needing), lease_s=0)
        if not plan:
            break
        step += 1
        models, questions, trials, scores = [], [], [], []
        for item in plan:
            m, q = names.index(item.model), int(item.question)
            for _ in range(item.trials):
                models.append(item.model)
                questions.append(item.question)
                trials.append(int(next_trial[m, q]))
                next_trial[m, q] += 1
                scores.append(world[m, q])
        outcomes = draw_categories(np.array(scores), 2, (len(scores),), rng)
        monitor.ingest_columns("g", models, questions, trials, outcomes)
        verdict = gate(monitor, "g", "candidate", "baseline", margin=margin).verdict
        if verdict != "inconclusive":
            break
    total = monitor.status("g").trials
    monitor.close()
    return verdict, step, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", help="also write the summaries to this file")
    arguments = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(arguments.workers) as pool:
        for name, (mean, margin, wrong) in WORLDS.items():
            started = time.perf_counter()
            results = list(
                pool.map(one_run, [(name, seed) for seed in range(arguments.runs)])
            )
            counts = {
                v: sum(r[0] == v for r in results)
                for v in ("pass", "fail", "inconclusive")
            }
            errors = sum(counts[v] for v in wrong)
            low, high = wilson(errors, arguments.runs)
            rows.append(
                {
                    "world": name,
                    "candidate": mean,
                    "baseline": BASELINE,
                    "margin": margin,
                    "runs": arguments.runs,
                    "verdicts": counts,
                    "wrong": list(wrong),
                    "wrong_share": errors / arguments.runs,
                    "wrong_interval": [low, high],
                    "mean_trials": float(np.mean([r[2] for r in results])),
                    "seconds": time.perf_counter() - started,
                }
            )
            print(f"{name}: {rows[-1]['seconds']:.0f} s", file=sys.stderr, flush=True)
            if arguments.json:
                with open(arguments.json, "w", encoding="utf-8") as handle:
                    json.dump(rows, handle, indent=2)
    print(
        "| world | candidate vs baseline, margin | pass / fail / inconclusive "
        "(exit 0 / 1 / 2) | wrong verdicts | P(wrong) [95 % CI] | goal <= "
        f"{1 - CONFIDENCE:.0%} | mean trials |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        counts = row["verdicts"]
        low, high = row["wrong_interval"]
        share = float(row["wrong_share"])
        print(
            f"| {row['world']} | {row['candidate']:.2f} vs {BASELINE:.2f}, "
            f"{row['margin']} | {counts['pass']} / {counts['fail']} / "
            f"{counts['inconclusive']} | {', '.join(row['wrong'])} | "
            f"{share:.1%} [{low:.1%}, {high:.1%}] | "
            f"{'met' if share <= 1 - CONFIDENCE else 'NOT met'} | "
            f"{float(row['mean_trials']):.0f} |"
        )


if __name__ == "__main__":
    main()
