"""What forecasts cost a status: ``forecast_trials`` timed in simulated runs.

Runs ``simulate`` (10 trials per step) for 11 and 30 models with means
spread evenly over 0.2-0.8 and times each status's ``forecast_trials``:
with the status's memo of simulated ends (what a status pays) and cold
(an empty memo, the worst case).

Run: ``.venv/bin/python benchmarks/forecast_speed.py``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import monitor.engine.status as status_module
from monitor.decisions.forecast import forecast_trials as _forecast
from monitor.decisions.model import RunDecision
from monitor.engine.simulation import simulate

WARM: list[float] = []
COLD: list[float] = []


def _timed(
    decision: RunDecision,
    question_trials: Callable[[str], NDArray[np.int64]],
    question_count: int,
    cap: int | None,
    memo: dict[tuple[object, ...], float] | None = None,
) -> tuple[dict[str, int | None], dict[int, int | None]]:
    started = time.perf_counter()
    result = _forecast(decision, question_trials, question_count, cap, memo)
    WARM.append(time.perf_counter() - started)
    started = time.perf_counter()
    _forecast(decision, question_trials, question_count, cap, {})
    COLD.append(time.perf_counter() - started)
    return result


# Statuses call the name they imported: replace it there.
status_module.forecast_trials = _timed  # type: ignore[attr-defined]


def main() -> None:
    for size in (11, 30):
        WARM.clear()
        COLD.clear()
        means = tuple(np.linspace(0.2, 0.8, size).round(4).tolist())
        simulate(means, seed=0, trials_per_step=10, observe=lambda status: None)
        warm, cold = np.array(WARM) * 1e3, np.array(COLD) * 1e3
        print(
            f"{size} models: {warm.size} statuses, forecast {warm.mean():.2f} ms "
            f"(p95 {np.quantile(warm, 0.95):.2f}), cold {cold.mean():.2f} ms "
            f"(max {cold.max():.2f})"
        )


if __name__ == "__main__":
    main()
