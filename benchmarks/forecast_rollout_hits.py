"""``benchmarks/forecast_hits.py`` with the forecasts of the whole procedure
played on (:func:`monitor.plans.ahead.forecast_by_rollout`) in place of the
engine's, timed with them (the engine's per-boundary forecasts included).

Run: ``.venv/bin/python benchmarks/forecast_rollout_hits.py --runs 10 --workers 1``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks.forecast_hits as hits
import monitor.engine.status as status_module
from monitor.plans.ahead import forecast_by_rollout

_engine = status_module.Statuses._forecast


def _forecast(self, run, state, decision):  # type: ignore[no-untyped-def]
    cached = self._forecasts.get(run)
    if cached is not None and cached[0] is decision:
        return cached[1], cached[2]
    models, pairs = _engine(self, run, state, decision)
    started = time.perf_counter()
    models = forecast_by_rollout(
        decision, state.tables, state.config, state.question_count, models
    )
    hits.SPENT[0] += time.perf_counter() - started
    self._forecasts[run] = (decision, models, pairs)
    return models, pairs


status_module.Statuses._forecast = _forecast  # type: ignore[method-assign]

if __name__ == "__main__":
    hits.main()
