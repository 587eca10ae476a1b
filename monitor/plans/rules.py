"""The run's stopping rule at every share of its error, as the engine builds it.

:func:`rule_family` answers what :func:`monitor.decisions.decide.build_rule`
answers for ``L`` boundaries sharing the error; the constants are cached
per level (:mod:`scorio_core.stopping`), so a plan pays for each level's
calibration (a few hundredths of a second) once per process.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.decisions.decide import build_rule
from monitor.schema import RunConfig
from scorio_core.stopping import StoppingRule


def rule_family(config: RunConfig) -> Callable[[int], StoppingRule]:
    """``rule_for(L)``: the run's rule with its error shared ``L`` ways."""
    rules: dict[int, StoppingRule] = {}

    def rule_for(share: int) -> StoppingRule:
        rule = rules.get(share)
        if rule is None:
            rule = rules[share] = build_rule(config, share)
        return rule

    return rule_for
