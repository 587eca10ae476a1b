"""What forecasts cost a status, timed in simulated runs.

Runs ``simulate`` (10 trials per step) for 11, 30 and 50 models with means
spread evenly over 0.2-0.8 and times each status's forecasts whole (the
single-pair forecast with its memo, and the rollout's when it is played
again, :class:`monitor.plans.ahead.RolloutForecasts`), and the single-pair
forecast alone cold (an empty memo, its worst case).

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
from monitor.plans.ahead import RolloutForecasts

WHOLE: list[float] = []
COLD: list[float] = []
PLAYED: list[RolloutForecasts] = []


def _cold(
    decision: RunDecision,
    question_trials: Callable[[str], NDArray[np.int64]],
    question_count: int,
    cap: int | None,
    memo: dict[tuple[object, ...], float] | None = None,
) -> tuple[dict[str, int | None], dict[int, int | None]]:
    started = time.perf_counter()
    _forecast(decision, question_trials, question_count, cap, {})
    COLD.append(time.perf_counter() - started)
    return _forecast(decision, question_trials, question_count, cap, memo)


_whole = status_module.Statuses._forecast


def _timed(self, run, state, decision):  # type: ignore[no-untyped-def]
    if self._rollouts not in PLAYED:
        PLAYED.append(self._rollouts)
    cold = sum(COLD)
    started = time.perf_counter()
    result = _whole(self, run, state, decision)
    # Less the cold single-pair forecast timed inside it.
    WHOLE.append(time.perf_counter() - started - (sum(COLD) - cold))
    return result


# Statuses call the names they imported: replace them there.
status_module.forecast_trials = _cold  # type: ignore[attr-defined]
status_module.Statuses._forecast = _timed  # type: ignore[method-assign]


def main() -> None:
    for size in (11, 30, 50):
        WHOLE.clear()
        COLD.clear()
        PLAYED.clear()
        means = tuple(np.linspace(0.2, 0.8, size).round(4).tolist())
        simulate(means, seed=0, trials_per_step=10, observe=lambda status: None)
        whole, cold = np.array(WHOLE) * 1e3, np.array(COLD) * 1e3
        rollouts = sum(played.rollouts for played in PLAYED)
        print(
            f"{size} models: {whole.size} statuses, {rollouts} rollouts; forecast "
            f"{whole.mean():.2f} ms mean, median {np.median(whole):.2f}, "
            f"p99 {np.quantile(whole, 0.99):.1f}, max {whole.max():.1f}; "
            f"single-pair cold {cold.mean():.2f} ms (max {cold.max():.2f})"
        )


if __name__ == "__main__":
    main()
