"""How long one plan of 1,000 trials holds the engine (issue 15, point 4).

A run of 40 models x 1,000 questions with one trial per (model, question),
as in ``benchmarks/hostile_http.py``; then ``--plans`` plans of 1,000 trials,
first without reserving (``lease_s=0``), then leased (each plan's lease
holds its trials, so later plans run with up to every cell in flight).
Reports the fastest and the median plan of each kind.

    .venv/bin/python -m benchmarks.large_plan --plans 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from monitor.engine.monitor import Monitor
from monitor.schema import RunConfig

MODELS = 40
QUESTIONS = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=20)
    arguments = parser.parse_args()
    monitor = Monitor()
    monitor.configure(RunConfig(run="bench", question_count=QUESTIONS))
    monitor.ingest(
        [
            {
                "run": "bench",
                "model": f"m{m}",
                "question": q,
                "trial": 0,
                "correct": (q * (m + 1)) % 3 == 0,
            }
            for m in range(MODELS)
            for q in range(QUESTIONS)
        ]
    )
    monitor.look()
    result: dict[str, object] = {}
    for name, lease_s in (("look_ahead", 0.0), ("leased", 3600.0)):
        times = []
        for _ in range(arguments.plans):
            started = time.perf_counter()
            monitor.next("bench", 1000, lease_s=lease_s)
            times.append((time.perf_counter() - started) * 1000)
        result[name] = {
            "fastest_ms": round(min(times), 1),
            "median_ms": round(statistics.median(times), 1),
        }
    result["cells_in_flight"] = len(monitor.in_flight("bench"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
