r"""A release gate: may the candidate model replace the baseline?

:func:`gate` tests one claim about a run's two models under the run's own
rule (its boundary, confidence and cap, :func:`~monitor.decisions.decide.build_rule`
at a share of one): with ``d = mu_candidate - mu_baseline`` and the bound
``b = -margin`` (no worse than the baseline minus the margin) or
``b = +margin`` (``better``: better than the baseline by the margin),

    z = (d - b) / sqrt(sigma_c^2 + sigma_b^2)

and the verdict is ``pass`` when ``z >= threshold(t)``, ``fail`` when
``-z >= threshold(t)`` (shown below the bound), else ``inconclusive``; ``t``
is the pair's information in trials per question. The boundary is valid
however often the gate is asked (a CI job may poll it while the run goes
on): each wrong verdict has probability at most ``(1 - confidence) / 2``,
so P(wrong verdict) <= 1 - confidence (``benchmarks/gate_errors.py``
measures it). Exit codes: 0 pass, 1 fail, 2 inconclusive.
"""

from __future__ import annotations

import math
from typing import Final, Literal

import numpy as np
from pydantic import BaseModel

from monitor.decisions.decide import build_rule
from monitor.engine.monitor import Monitor
from monitor.plans.posteriors import Posterior, read_posteriors
from scorio_core.stopping import StoppingRule, posterior_information

Verdict = Literal["pass", "fail", "inconclusive"]
EXIT_CODES: Final[dict[str, int]] = {"pass": 0, "fail": 1, "inconclusive": 2}


class GateVerdict(BaseModel):
    """A gate's answer, with the evidence behind it."""

    verdict: Verdict
    run: str
    candidate: str
    baseline: str
    margin: float
    better: bool
    difference: float | None
    z: float | None
    threshold: float | None
    information: float
    trials: dict[str, int]
    confidence: float
    rule: str
    at_cap: bool
    reason: str
    more_trials: int | None = None
    """While inconclusive: about how many more trials per model would decide
    it if the difference holds (None: not within the cap, or no estimate)."""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def gate(
    monitor: Monitor,
    run: str,
    candidate: str,
    baseline: str,
    *,
    margin: float = 0.0,
    better: bool = False,
) -> GateVerdict:
    """The verdict on ``candidate`` against ``baseline`` in ``run`` now.

    Raises:
        UnknownRunError: when the run does not exist.
        ValueError: for a model the run neither declares nor has trials of,
            the same model twice, or a negative or non-finite margin.
    """
    if not (math.isfinite(margin) and margin >= 0.0):
        raise ValueError(f"margin must be a finite number >= 0; got {margin}")
    if candidate == baseline:
        raise ValueError(f"candidate and baseline are the same model: {candidate!r}")
    config, posteriors = read_posteriors(monitor, run)
    by_name = {p.model: p for p in posteriors}
    for name in (candidate, baseline):
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none yet"
            raise ValueError(f"run {run!r} has no model {name!r}; models: {known}")
    new, old = by_name[candidate], by_name[baseline]
    cap = config.max_trials_per_question
    at_cap = cap is not None and min(new.least_sampled, old.least_sampled) >= cap
    rule = build_rule(config, 1)
    empty = GateVerdict(
        verdict="inconclusive",
        run=run,
        candidate=candidate,
        baseline=baseline,
        margin=margin,
        better=better,
        difference=None,
        z=None,
        threshold=None,
        information=0.0,
        trials={candidate: new.trials, baseline: old.trials},
        confidence=config.confidence,
        rule=rule.name,
        at_cap=at_cap,
        reason="",
    )
    if new.trials == 0 or old.trials == 0:
        missing = candidate if new.trials == 0 else baseline
        return empty.model_copy(update={"reason": f"{missing} has no trials yet"})
    information = _information(new, old, float(len(config.weights) + 1))
    threshold = float(rule.thresholds(np.array([information]))[0])
    difference = new.mu - old.mu
    bound = margin if better else -margin
    spread = math.hypot(new.sigma, old.sigma)
    z = (
        (difference - bound) / spread
        if spread > 0
        else math.copysign(math.inf, difference - bound)
    )
    if better:
        bar = f"better than {baseline}" + (f" by {margin:g}" if margin else "")
        claim, opposite = bar, f"not {bar}"
    else:
        bar = baseline + (f" minus {margin:g}" if margin else "")
        claim, opposite = f"no worse than {bar}", f"worse than {bar}"
    more_trials = None
    if math.isfinite(threshold) and z >= threshold:
        verdict: Verdict = "pass"
        reason = f"{candidate} is shown {claim} (z {z:.3f} >= {threshold:.3f})"
    elif math.isfinite(threshold) and -z >= threshold:
        verdict = "fail"
        reason = f"{candidate} is shown {opposite} (z {z:.3f} <= -{threshold:.3f})"
    else:
        verdict = "inconclusive"
        reason = f"|z| {abs(z):.3f} is below the threshold {threshold:.3f}"
        if at_cap:
            reason += "; both models are at the cap: a tie at this budget"
        elif bool(rule.futile(np.array([abs(z)]), np.array([information]))[0]):
            reason += "; the rule finds it cannot settle within the cap"
        else:
            more = _more_information(abs(z), information, rule)
            if more is None:
                reason += "; at this difference not even the cap would decide it"
            else:
                questions = config.declared_question_count or max(
                    len(new.question_trials), len(old.question_trials)
                )
                per_question = max(1, math.ceil(more))
                more_trials = per_question * questions
                reason += (
                    f"; at this difference about {more_trials} more trials per "
                    f"model ({per_question} per question) would decide it"
                )
    return empty.model_copy(
        update={
            "verdict": verdict,
            "difference": difference,
            "z": z if math.isfinite(z) else None,
            "threshold": threshold if math.isfinite(threshold) else None,
            "information": information,
            "reason": reason,
            "more_trials": more_trials,
        }
    )


# Without a cap, the estimate looks this far: a hundredfold the information.
_UNCAPPED_REACH: Final = 100.0


def _more_information(z: float, information: float, rule: StoppingRule) -> float | None:
    """Information to add (trials per question) until ``z``, growing as the
    square root of the information at this difference, meets the boundary;
    None when it would not within the cap (or the reach without one)."""
    if not (z > 0 and math.isfinite(z) and information > 0):
        return None
    horizon = rule.horizon
    reach = horizon if horizon is not None else _UNCAPPED_REACH * information
    if reach <= information:
        return None
    ahead = np.linspace(information, reach, 2001)[1:]
    met = z * np.sqrt(ahead / information) >= rule.thresholds(ahead)
    if not met.any():
        return None
    return float(ahead[int(np.argmax(met))] - information)


def _information(new: Posterior, old: Posterior, prior: float) -> float:
    matrix = posterior_information(
        np.array([new.unit_variance, old.unit_variance]),
        np.array([new.sigma**2, old.sigma**2]),
        prior,
    )
    return float(matrix[0, 1])
