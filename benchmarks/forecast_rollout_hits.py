"""``benchmarks/forecast_hits.py`` with the statuses' forecasts made by
:func:`monitor.plans.ahead.forecast_by_rollout` (the whole procedure played
on, combined with the single-pair forecast), and every forecast timed.
Statuses themselves keep the single-pair forecast: the rollout costs 10-20
times more per status (``--speed``).

Run: ``.venv/bin/python benchmarks/forecast_rollout_hits.py --runs 10 --workers 1``;
``--speed``: the cost per status instead, in ``simulate`` runs of 11 and 30
models (as ``benchmarks/forecast_speed.py``).

Variants tried and not kept: ``--band`` forecasts the value within +-25 %
of the most simulated totals (the oracle's estimator of
``benchmarks/forecast_ceiling.py``, applied to the rollout's own ends)
instead of the quantile mixed with the single-pair forecast; ``--plug-in``
plays every simulated run at the shrunk posterior means (no drawn means);
``--looks N`` sets the rollout's looks to the cap.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks.forecast_hits as hits
import monitor.engine.status as status_module
import monitor.plans.ahead as ahead
from benchmarks.forecast_ceiling import band_centre
from monitor.decisions.decide import forecast_trials
from monitor.decisions.model import RunDecision
from monitor.engine.runs import RunState
from monitor.plans.ahead import forecast_by_rollout, simulated_totals

BAND = False

# forecast_hits.py times forecast_trials alone: time the whole forecast.
status_module.forecast_trials = forecast_trials  # type: ignore[attr-defined]
_forecast = status_module.Statuses._forecast


def _timed(self, run, state, decision):  # type: ignore[no-untyped-def]
    cached = self._forecasts.get(run)
    if cached is not None and cached[0] is decision:
        return cached[1], cached[2]
    started = time.perf_counter()
    try:
        models, pairs = _forecast(self, run, state, decision)
        models = (
            _by_band(decision, state, models)
            if BAND
            else forecast_by_rollout(
                decision, state.tables, state.config, state.question_count, models
            )
        )
        self._forecasts[run] = (decision, models, pairs)
        return models, pairs
    finally:
        hits.SPENT[0] += time.perf_counter() - started
        hits.SPENT[1] += 1


status_module.Statuses._forecast = _timed  # type: ignore[method-assign]


def _by_band(
    decision: RunDecision, state: RunState, single: dict[str, int | None]
) -> dict[str, int | None]:
    totals = simulated_totals(
        decision, state.tables, state.config, state.question_count
    )
    if totals is None:
        return single
    result = dict(single)
    for index, name in enumerate(decision.order):
        if name in decision.needs_trials:
            total = band_centre(totals[:, index].tolist())
            result[name] = max(1, round(total - state.tables[name].trial_count))
    return result


_truths = ahead._truths


def _plug_in(
    mu: np.typing.NDArray[np.float64], variance: np.typing.NDArray[np.float64]
) -> tuple[np.typing.NDArray[np.float64], np.typing.NDArray[np.float64]]:
    shrunk, draws = _truths(mu, variance)
    return shrunk, np.repeat(shrunk[None, :], draws.shape[0], axis=0)


def _options() -> None:
    """Applies this script's own options and leaves the rest to forecast_hits."""
    global BAND
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--band", action="store_true")
    parser.add_argument("--plug-in", action="store_true")
    parser.add_argument("--looks", type=int)
    options, rest = parser.parse_known_args()
    BAND = options.band
    if options.looks is not None:
        ahead.LOOKS = options.looks  # type: ignore[misc]
    if options.plug_in:
        ahead._truths = _plug_in
    sys.argv[1:] = rest


def speed() -> None:
    from monitor.engine.simulation import simulate

    for size in (11, 30):
        hits.SPENT[0], hits.SPENT[1] = 0.0, 0
        means = tuple(np.linspace(0.2, 0.8, size).round(4).tolist())
        simulate(means, seed=0, trials_per_step=10, observe=lambda status: None)
        print(
            f"{size} models: {hits.SPENT[1]} statuses, forecast "
            f"{1000 * hits.SPENT[0] / max(hits.SPENT[1], 1):.1f} ms/status"
        )


if __name__ == "__main__":
    _options()
    if "--speed" in sys.argv:
        speed()
    else:
        hits.main()
