"""The run's stopping rule at every share of its error, fast enough to plan with.

:func:`rule_family` answers what :func:`monitor.decisions.decide.build_rule`
answers for ``L`` boundaries sharing the error. Calibrating a sequential
boundary's constant takes about 0.1 s each (the exact recursion of
:mod:`scorio_core.boundaries`), and a plan of 20 models may need 19 of
them; for the engine's boundary shape (``delta`` 0.1) the constants come
from a table of that recursion's answers, interpolated in ``log alpha``
(within 1e-4 of the recursion, checked by ``tests/monitor/test_plan.py``).
Any other rule is built as the engine builds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import numpy as np
from scipy.interpolate import CubicSpline

from monitor.decisions.decide import build_rule
from monitor.schema import RunConfig
from scorio_core.stopping import SequentialRule, StoppingRule, per_direction_alpha

# wang_tsiatis_constant(alpha, 0.1) at alpha = exp(x), x evenly spaced from
# log 0.25 to log 1e-6 (36 points), by scorio_core.boundaries.
_TABLE_DELTA: Final = 0.1
_TABLE_LOG_ALPHA: Final = (math.log(0.25), math.log(1e-6), 36)
_TABLE_CONSTANTS: Final = (
    1.20927, 1.410723, 1.594856, 1.765338, 1.924709, 2.074812, 2.217037,
    2.352461, 2.48194, 2.606167, 2.725709, 2.841043, 2.952569, 3.060629,
    3.165516, 3.267487, 3.366764, 3.463544, 3.558002, 3.650291, 3.740552,
    3.828908, 3.915472, 4.000347, 4.083624, 4.16539, 4.245721, 4.324688,
    4.402358, 4.478791, 4.554043, 4.628165, 4.701207, 4.773212, 4.844224,
    4.914282,
)  # fmt: skip


def rule_family(config: RunConfig) -> Callable[[int], StoppingRule]:
    """``rule_for(L)``: the run's rule with its error shared ``L`` ways."""
    cap = config.max_trials_per_question
    template = (
        SequentialRule(constant=1.0, budget=float(cap)) if cap is not None else None
    )
    if (
        config.rule != "sequential"
        or template is None
        or template.delta != _TABLE_DELTA
    ):
        return lambda share: build_rule(config, share)
    spline = _spline()
    low = math.log(1e-6)

    def rule_for(share: int) -> StoppingRule:
        if config.error_control != "ranking":
            share = 1
        alpha = per_direction_alpha(config.confidence, max(int(share), 1))
        if not low <= math.log(alpha) <= math.log(0.25):
            return build_rule(config, share)
        return replace(template, constant=float(spline(-math.log(alpha))))

    return rule_for


def _spline() -> CubicSpline:
    start, stop, count = _TABLE_LOG_ALPHA
    return CubicSpline(-np.linspace(start, stop, count), np.array(_TABLE_CONSTANTS))
