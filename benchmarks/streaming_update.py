"""Cost of one streamed trial update vs recomputing scorio.eval.bayes per trial.

Run: `.venv/bin/python benchmarks/streaming_update.py`

20 models x 30 questions x 80 trials arrive one at a time in random order.
Streaming: `CountTable.update` plus a fresh read of `mu` and `sigma`.
Baseline: on every arriving trial, `scorio.eval.bayes` on that model's
results matrix (30 x 80), which is what a batch tool re-run per refresh does.
Both loops see the same arrival sequence, measured side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scorio.eval

from scorio_core import CountTable

MODELS, QUESTIONS, TRIALS = 20, 30, 80


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()

    rng = np.random.default_rng(arguments.seed)
    results = (
        rng.random((MODELS, QUESTIONS, TRIALS)) < rng.random((MODELS, 1, 1))
    ).astype(np.int64)
    arrivals = np.array(
        [
            (m, q, t)
            for m in range(MODELS)
            for q in range(QUESTIONS)
            for t in range(TRIALS)
        ]
    )
    arrivals = arrivals[rng.permutation(len(arrivals))]
    events = [(int(m), int(q), int(results[m, q, t])) for m, q, t in arrivals]

    tables = [CountTable([0.0, 1.0], question_count=QUESTIONS) for _ in range(MODELS)]
    start = time.perf_counter()
    for model, question, category in events:
        table = tables[model]
        table.update(question, category)
        _ = (table.mu, table.sigma)
    streamed_s = (time.perf_counter() - start) / len(events)

    baseline_events = events[: arguments.baseline_trials]
    start = time.perf_counter()
    for model, _question, _category in baseline_events:
        _ = scorio.eval.bayes(results[model])
    baseline_s = (time.perf_counter() - start) / len(baseline_events)

    final = [tuple(round(x, 12) for x in (t.mu, t.sigma)) for t in tables]
    expected = [tuple(round(x, 12) for x in scorio.eval.bayes(r)) for r in results]
    report = {
        "models_questions_trials": [MODELS, QUESTIONS, TRIALS],
        "streamed_update_us": round(streamed_s * 1e6, 3),
        "scorio_recompute_us": round(baseline_s * 1e6, 3),
        "speedup": round(baseline_s / streamed_s, 1),
        "final_equals_scorio": final == expected,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
