"""How many more trials a run's open decisions need, however each ends.

:func:`forecast_trials` simulates each open boundary's weakest pair forward
from its posterior under the run's rule (with a fixed seed, so the same
counts always give the same forecast) and turns the information where it
ends into trials per model and per boundary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.model import RunDecision
from scorio_core.stopping import forecast_information

# Forecasts simulate the rest of the procedure with this fixed seed, so the
# same counts always give the same forecast.
FORECAST_SEED: Final = 20260


def forecast_trials(
    decision: RunDecision,
    question_trials: Callable[[str], NDArray[np.int64]],
    question_count: int,
    cap: int | None,
    memo: dict[tuple[object, ...], float] | None = None,
) -> tuple[dict[str, int | None], dict[int, int | None]]:
    """Forecast trials per model and per open boundary, however each ends.

    Each open boundary's weakest pair is simulated forward from its
    posterior (:func:`scorio_core.stopping.forecast_information`) to the
    information where it settles, is shown equivalent, turns futile or
    reaches the cap (a low quantile of the simulated ends, see
    :data:`scorio_core.stopping.FORECAST_QUANTILE`). A model sampled evenly
    has information ``t ~ n`` trials per question, so it needs each question
    brought up to ``n * t_end / t`` (at most the cap): questions with no
    trials yet count in full, which keeps question-major arrival from
    looking half done.

    A model that needs trials but waits (not drawing now) is forecast as
    if it drew beside the open boundaries of its segment until they end.
    So a forecast is 0 exactly for the models that need no trials.

    ``memo`` keeps simulated ends between calls: after one more trial only
    the pairs of the model that drew it move, so a refresh simulates those.
    """
    models = dict(decision.predicted_trials)
    boundaries: dict[int, int | None] = {}
    if decision.rule is None:
        return models, boundaries
    cache = memo if memo is not None else {}
    counts: dict[str, _Sampling] = {}
    waiting: dict[str, int | None] = {}
    for boundary in decision.open_boundaries:
        margin = None if boundary.margin_z is None else round(boundary.margin_z, 3)
        key = (
            decision.rule,
            decision.futility,
            round(boundary.z, 3),
            round(boundary.information, 2),
            margin,
        )
        end = cache.get(key)
        if end is None:
            end = cache[key] = forecast_information(
                decision.rule,
                boundary.z,
                boundary.information,
                boundary.margin_z,
                rng=np.random.default_rng(FORECAST_SEED),
                futility=decision.futility,
            )
        total: int | None = 0
        for name in boundary.drawing:
            if name not in counts:
                counts[name] = _Sampling.of(question_trials(name))
            extra = _trials_to(
                counts[name], question_count, end, boundary.information, cap
            )
            previous = models.get(name, 0)
            models[name] = (
                None if extra is None or previous is None else max(previous, extra)
            )
            total = None if extra is None or total is None else total + extra
        boundaries[boundary.index] = total
        for name in boundary.block:
            if name in decision.drawing or name not in decision.needs_trials:
                continue
            # Waits for the drawing models: as if it drew beside them until
            # the boundary ends.
            if name not in counts:
                counts[name] = _Sampling.of(question_trials(name))
            extra = _trials_to(
                counts[name], question_count, end, boundary.information, cap
            )
            previous = waiting.get(name, 0)
            waiting[name] = (
                None if extra is None or previous is None else max(previous, extra)
            )
    models.update(waiting)
    for name in decision.order:
        if name in decision.needs_trials:
            # One that needs trials is never told "0 more": on no open
            # boundary (no trials yet, too few models to compare), or
            # forecast none by a boundary it waits on, it has no forecast.
            models[name] = models.get(name) or None
        else:
            models[name] = 0
    return models, boundaries


@dataclass(frozen=True, slots=True)
class _Sampling:
    """A model's trials per seen question, with the sums forecasts reuse."""

    counts: NDArray[np.int64]
    total: int
    least: int
    most: int

    @classmethod
    def of(cls, counts: NDArray[np.int64]) -> _Sampling:
        if not counts.size:
            return cls(counts, 0, 0, 0)
        return cls(counts, int(counts.sum()), int(counts.min()), int(counts.max()))


def _trials_to(
    sampling: _Sampling,
    question_count: int,
    end: float,
    information: float,
    cap: int | None,
) -> int | None:
    if not math.isfinite(end) or information <= 0.0 or sampling.total == 0:
        return None  # no trials yet: nothing to scale a forecast from
    target = sampling.total / question_count * end / information
    if cap is not None:
        target = min(target, float(cap))
    unseen = max(question_count - sampling.counts.size, 0)
    if sampling.least >= target:
        missing = unseen * target
    elif sampling.most <= target:
        # Every question is below the target: no per-question work.
        missing = target * question_count - sampling.total
    else:
        below = np.maximum(target - sampling.counts, 0.0).sum()
        missing = float(below) + unseen * target
    return max(0, math.ceil(missing - 1e-9))
