"""Forecasts of each model's trials from the whole procedure played on.

:func:`forecast_by_rollout` continues the run from where it stands with
:func:`monitor.plans.rollout.roll`: every boundary, its Holm share, the
weakest pairs and the links, as the engine would play them, rather than one
boundary's weakest pair alone (:func:`monitor.decisions.forecast.forecast_trials`).
A model's end depends on the whole procedure: it stops drawing once another
pair of its boundary is weaker, and shares grow as other boundaries resolve.

Each simulated run plays true means drawn from the models' posteriors
shrunk toward the field (empirical Bayes, as :mod:`monitor.plans.pilot`
shrinks a pilot's means): a normal prior fitted by the method of moments,
``tau^2 = (var(mu) - mean(sigma^2))^+``, each mean kept by ``tau^2 /
(tau^2 + sigma_i^2)`` with the posterior's spread around it. The variances
are the outcome model's (:mod:`monitor.plans.outcomes`), scaled per model
to the run's own posterior variance now. A model's forecast is the value
within +-25 % of the most simulated totals, less its trials so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.model import RunDecision
from monitor.plans.outcomes import DEFAULT_SPREAD, Outcomes
from monitor.plans.rollout import Field, Start, roll
from monitor.plans.rules import rule_family
from monitor.schema import RunConfig

# Simulated runs per forecast, looks to the cap, and their fixed seed (the
# same counts always give the same forecast).
REPLICATES: Final = 96
LOOKS: Final = 80
SEED: Final = 20262
# A forecast is scored within +-25 % of the total; the centre of the band
# holding the most simulated totals is the best such guess.
TOLERANCE: Final = 0.25
MODE = "np"
GRID = 48
EM_STEPS = 200


class Table(Protocol):
    """What a forecast reads of a model's counts."""

    @property
    def mu(self) -> float: ...
    @property
    def sigma(self) -> float: ...
    @property
    def trial_count(self) -> int: ...


def forecast_by_rollout(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
    fallback: dict[str, int | None],
) -> dict[str, int | None]:
    """Trials each model still needs, from the procedure played on.

    ``fallback``: the forecasts kept where a rollout has nothing to start
    from (no rule, no cap, a width target, a model with no trials yet or
    not yet placed).
    """
    totals = simulated_totals(decision, tables, config, question_count)
    if totals is None:
        return fallback
    result: dict[str, int | None] = {}
    for index, name in enumerate(decision.order):
        if name in decision.done:
            result[name] = 0
            continue
        centre = band_centre(totals[:, index])
        result[name] = max(0, round(centre - tables[name].trial_count))
    return result


def simulated_totals(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
    mode: str | None = None,
) -> NDArray[np.float64] | None:
    """Each simulated run's final trials, replicates x models in the
    decision's order; ``None`` when a rollout has nothing to start from."""
    cap = config.max_trials_per_question
    names = decision.order
    if (
        decision.rule is None
        or cap is None
        or config.target == "width"
        or len(names) < 2
        or not decision.needs_trials
        or any(tables[name].trial_count == 0 for name in names)
        or any(decision.groups.get(name) is None for name in names)
    ):
        return None
    start, outcomes = _start(decision, tables, config, question_count, mode or MODE)
    field = Field(
        outcomes=(outcomes,),
        question_count=question_count,
        cap=cap,
        targets=_targets(config, len(names)),
        rule_for=rule_family(config),
        looks=min(LOOKS, cap * question_count),
    )
    rollouts = roll(field, REPLICATES, np.random.default_rng(SEED), start)
    return np.asarray(rollouts.trials_per_question * question_count)


def band_centre(totals: NDArray[np.float64]) -> float:
    """The value within +-25 % of the most of ``totals``."""
    ends = np.sort(totals)
    upper = ends * (1.0 + TOLERANCE) / (1.0 - TOLERANCE)
    inside = np.searchsorted(ends, upper + 1e-9, side="right") - np.arange(ends.size)
    return float(ends[int(np.argmax(inside))] * (1.0 + TOLERANCE))


def _start(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
    mode: str,
) -> tuple[Start, Outcomes]:
    names = decision.order
    size = len(names)
    low, high = min(config.weights), max(config.weights)
    width = float(len(config.weights))
    mu = np.array([(tables[n].mu - low) / (high - low) for n in names])
    sigma = np.array([tables[n].sigma / (high - low) for n in names])
    trials = np.array([tables[n].trial_count / question_count for n in names])
    shrunk, means = _truths(mu, sigma**2, mode)
    outcomes = Outcomes.build(
        np.clip(shrunk, 1e-3, 1.0 - 1e-3), len(config.weights), DEFAULT_SPREAD
    )
    # Scaled so the rolled posterior variance starts at the run's.
    table_now = outcomes.posterior_variance(trials[None, :])[0]
    rolled_now = table_now / (question_count * (trials + outcomes.prior_information))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(rolled_now > 0.0, sigma**2 / rolled_now, 1.0)
    scale = np.clip(np.nan_to_num(scale, nan=1.0), 0.05, 20.0)
    position = {name: i for i, name in enumerate(names)}
    segments = np.zeros(size, dtype=np.int64)
    for number, members in enumerate(decision.settled.segments):
        for name in members:
            if name in position:
                segments[position[name]] = number
    linked = np.zeros((size, size), dtype=bool)
    for link in decision.settled.links:
        if link.a in position and link.b in position:
            a, b = position[link.a], position[link.b]
            linked[a, b] = linked[b, a] = True
    start = Start(
        trials=trials,
        sums=mu * (trials + width) - width / 2.0,
        segments=segments,
        linked=linked,
        done=np.array([n in decision.done for n in names]),
        needs=np.array([n in decision.needs_trials for n in names]),
        means=means,
        scale=scale,
    )
    return start, outcomes


def _truths(
    mu: NDArray[np.float64], variance: NDArray[np.float64], mode: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Posterior centres and each replicate's true means (unit scale)."""
    rng = np.random.default_rng((SEED, 1))
    size = mu.size
    edge = 1e-3
    mode, _, factor_text = mode.partition(":")
    factor = float(factor_text) if factor_text else 1.0
    if mode == "field":
        # Empirical Bayes toward the field (method of moments).
        tau2 = max(float(mu.var(ddof=1)) - float(variance.mean()), 0.0)
        keep = tau2 / (tau2 + variance)
        centre = float(mu.mean())
        shrunk = centre + keep * (mu - centre)
        draws = shrunk + factor * np.sqrt(keep * variance) * rng.standard_normal(
            (REPLICATES, size)
        )
        return shrunk, np.clip(draws, edge, 1.0 - edge)
    gaps = mu[:-1] - mu[1:]
    spread = variance[:-1] + variance[1:]
    if mode == "np":
        drawn = _gap_draws(gaps, spread, rng, factor)
        offsets = np.concatenate(
            [np.zeros((REPLICATES, 1)), -np.cumsum(drawn, axis=1)], axis=1
        )
        level = mu.mean() - offsets.mean(axis=1, keepdims=True)
        draws = level + offsets
        shrunk = draws.mean(axis=0)
        return shrunk, np.clip(draws, edge, 1.0 - edge)
    # Each adjacent gap (in the order) shrunk toward zero by a prior fitted
    # to that pair, as forecast_information shrinks a pair's effect.
    tau2 = np.maximum(gaps**2 - spread, 0.0)
    keep = tau2 / (tau2 + spread)
    drawn = keep * gaps + factor * np.sqrt(keep * spread) * rng.standard_normal(
        (REPLICATES, size - 1)
    )
    offsets = np.concatenate(
        [np.zeros((REPLICATES, 1)), -np.cumsum(drawn, axis=1)], axis=1
    )
    level = mu.mean() - offsets.mean(axis=1, keepdims=True)
    level = level + np.sqrt(variance.mean() / size) * rng.standard_normal(
        (REPLICATES, 1)
    )
    draws = level + offsets
    centre_offsets = np.concatenate([[0.0], -np.cumsum(keep * gaps)])
    shrunk = mu.mean() - centre_offsets.mean() + centre_offsets
    return shrunk, np.clip(draws, edge, 1.0 - edge)


def _gap_draws(
    gaps: NDArray[np.float64],
    spread: NDArray[np.float64],
    rng: np.random.Generator,
    temper: float = 1.0,
) -> NDArray[np.float64]:
    """Each replicate's true adjacent gaps, drawn from their posteriors under
    the field's own gap distribution (a grid fitted by maximum likelihood,
    Kiefer-Wolfowitz): a field of exact ties and clear steps is told so by
    its gaps together, which no gap alone shows. An observed gap is the
    size of the true one plus noise, either way round."""
    sd = np.sqrt(spread)
    grid = np.linspace(0.0, float(np.abs(gaps).max() + 2.0 * sd.max()), GRID)
    # likelihood[k, g]: gap k observed given the true size grid[g], either sign.
    up = np.exp(-0.5 * ((gaps[:, None] - grid[None, :]) / sd[:, None]) ** 2)
    down = np.exp(-0.5 * ((gaps[:, None] + grid[None, :]) / sd[:, None]) ** 2)
    likelihood = (up + down) ** temper + 1e-300
    weights = np.full(GRID, 1.0 / GRID)
    for _ in range(EM_STEPS):
        joint = likelihood * weights
        weights = (joint / joint.sum(axis=1, keepdims=True)).mean(axis=0)
    joint = likelihood * weights
    posterior = joint / joint.sum(axis=1, keepdims=True)
    cumulative = np.cumsum(posterior, axis=1)
    pick = (rng.random((REPLICATES, gaps.size))[:, :, None] > cumulative[None]).sum(axis=2)
    size = grid[np.minimum(pick, GRID - 1)]
    # The sign: the observed order or the other way round.
    keep_sign = up[np.arange(gaps.size)[None, :], pick.clip(0, GRID - 1)] / (
        up + down
    )[np.arange(gaps.size)[None, :], pick.clip(0, GRID - 1)]
    flip = rng.random((REPLICATES, gaps.size)) > keep_sign
    return np.where(flip, -size, size)


def _targets(config: RunConfig, size: int) -> tuple[int, ...]:
    if config.target == "leader":
        return (0,)
    if config.target == "top_k":
        top = config.top_k or 1
        return (top - 1,) if top < size else ()
    return tuple(range(size - 1))
