"""How long `scorio-monitor plan` takes: 2, 11 and 20 models, warm process.

Run: `nice -n 10 .venv/bin/python benchmarks/plan_speed.py [--repeats 5]`

Each figure is `monitor.plans.plan.plan` (what the command calls, after its
imports) on the paper's models (11), the AIME-like set (20) and the paper's
LLM9/LLM10 pair (2), 30 questions, cap 80: the fastest of the repeats in
wall-clock seconds and the CPU seconds of that call, with the load average
at the time (on a shared machine other work stretches the wall clock; the
CPU seconds are what the plan itself costs). Goal: well under a second for
20 models.
"""

from __future__ import annotations

import argparse
import os
import time

from monitor.engine.simulation import AIME20_MEANS, PAPER_MEANS
from monitor.plans.outcomes import spread_of
from monitor.plans.plan import PlanRequest, plan

FIELDS = {
    "llm9-llm10": ((0.608, 0.6213), 5.0),
    "paper11": (PAPER_MEANS, 5.0),
    "aime20": (AIME20_MEANS, 1.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()
    print("| field | models | best wall s | its CPU s | load average |")
    print("| --- | --- | --- | --- | --- |")
    for name, (means, kappa) in FIELDS.items():
        request = PlanRequest(
            means=tuple(means), question_count=30, cap=80, spread=spread_of(kappa)
        )
        plan(request)  # warm: the rule's constants, numpy's first calls
        best = (float("inf"), 0.0)
        for _ in range(arguments.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            plan(request)
            best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
        print(
            f"| {name} | {len(means)} | {best[0]:.3f} | {best[1]:.3f} | "
            f"{os.getloadavg()[0]:.1f} |"
        )


if __name__ == "__main__":
    main()
