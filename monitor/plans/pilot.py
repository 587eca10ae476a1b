"""A plan's assumptions read from a pilot run's counts.

The pilot's means are noisy, and the plan's answer is very sensitive to
the smallest gaps, so they are shrunk as the forecasts shrink a pair's
effect (:func:`scorio_core.stopping.forecast_information`): toward their
mean under a normal prior fitted by the method of moments,
``tau^2 = (var(mu) - mean(sigma^2))^+``, each mean kept by
``tau^2 / (tau^2 + sigma_i^2)``. The difficulty spread is estimated from
the per-question means (their variance less what the trials' noise
explains), unless given. Questions, weights, confidence, cap, target and
error control are the pilot run's config.
"""

from __future__ import annotations

import math

import numpy as np

from monitor.engine.monitor import Monitor
from monitor.plans.outcomes import DEFAULT_SPREAD
from monitor.plans.plan import PLAN_SEED, PlanRequest, Target
from monitor.plans.posteriors import Posterior, read_posteriors

# A spread estimate is kept below this (the outcome model's limit is 0.5).
_MAX_SPREAD = 0.45


def pilot_request(
    monitor: Monitor,
    run: str,
    *,
    cap: int | None = None,
    confidence: float | None = None,
    spread: float | None = None,
    seed: int = PLAN_SEED,
) -> PlanRequest:
    """The plan of a full run like the pilot ``run``, from scratch.

    Raises:
        UnknownRunError: when the run does not exist.
        ValueError: when fewer than two models have trials.
    """
    config, posteriors = read_posteriors(monitor, run)
    sampled = [p for p in posteriors if p.trials > 0]
    if len(sampled) < 2:
        raise ValueError(
            f"run {run!r} has trials of {len(sampled)} model(s); a plan needs two"
        )
    low, high = min(config.weights), max(config.weights)
    mu = np.array([p.mu for p in sampled])
    variance = np.array([p.sigma**2 for p in sampled])
    tau2 = max(float(mu.var(ddof=1)) - float(variance.mean()), 0.0)
    shrunk = mu.mean() + tau2 / (tau2 + variance) * (mu - mu.mean())
    edge = 1e-3 * (high - low)
    shrunk = np.clip(shrunk, low + edge, high - edge)
    questions = config.declared_question_count or max(
        len(p.question_means) for p in sampled
    )
    target: Target = "ranking" if config.target == "width" else config.target
    return PlanRequest(
        means=tuple(shrunk.tolist()),
        question_count=questions,
        cap=cap or config.max_trials_per_question or 80,
        confidence=confidence if confidence is not None else config.confidence,
        spread=spread if spread is not None else estimate_spread(sampled, low, high),
        weights=tuple(config.weights),
        target=target,
        top_k=config.top_k if target == "top_k" else None,
        error_control=config.error_control,
        rule=config.rule,
        seed=seed,
        names=tuple(p.model for p in sampled),
    )


def estimate_spread(posteriors: list[Posterior], low: float, high: float) -> float:
    """The difficulty spread the pilot's per-question means show.

    Per model, the variance of its per-question means less the part the
    trials' noise explains (each question's variance over ``n - 1``), as a
    share of the score's variance; pooled over models, ``spread = 0.5
    sqrt(share)`` (the outcome model's definition). The default when no
    question has two trials.
    """
    shares = []
    for posterior in posteriors:
        n = np.array(posterior.question_trials, dtype=np.float64)
        keep = n >= 2
        if keep.sum() < 2:
            continue
        means = (np.array(posterior.question_means)[keep] - low) / (high - low)
        within = np.array(posterior.question_variances)[keep] / (high - low) ** 2
        noise = float((within / (n[keep] - 1.0)).mean())
        between = max(float(means.var(ddof=1)) - noise, 0.0)
        total = between + float(within.mean() * n[keep].mean() / (n[keep].mean() - 1))
        if total > 0.0:
            shares.append(between / total)
    if not shares:
        return DEFAULT_SPREAD
    return min(0.5 * math.sqrt(float(np.mean(shares))), _MAX_SPREAD)
