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
(tau^2 + sigma_i^2)``, with the posterior's spread around it. The variances
are the outcome model's (:mod:`monitor.plans.outcomes`), scaled per model
to the run's own posterior variance now.

The simulated ends lie high: drawn means spread the gaps, and a gap the
rule can nearly but not quite resolve runs to the cap. A model's forecast
is therefore the geometric mean of a low quantile of its simulated totals
(:data:`QUANTILE`) and the single-pair forecast's total, which errs the
other way where boundaries interact (``benchmarks/forecast_rollout_hits.py``
scores it).

Statuses do not use it yet: it lands more halfway forecasts within +-25 %
(paper11 80.0 % against 72.7 %, ties5x2 78.0 % against 72.0 %, seeds 0-9;
its settings were chosen on those seeds and seeds 10-19) but costs 29-37 ms
per status at 11 models and 65-83 ms at 30, against 3-4 ms for the
single-pair forecast and the status refresh's 5 ms budget. Played again
only after the run's trials grew by a tenth, it gained 1.8 points of hits
on average over four worlds and two seed sets and still held a status up
to 87, 237 and 485 ms at 11, 30 and 50 models
(``benchmarks/results/forecast-ceiling.md``).
"""

from __future__ import annotations

import math
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
REPLICATES: Final = 64
LOOKS: Final = 40
SEED: Final = 20262
# The quantile of the simulated totals a forecast starts from.
QUANTILE: Final = 0.1
# A model's information must be at least this share of its trials per
# question for a rollout to start from it.
_EVEN: Final = 0.9
# True means are kept this far inside the unit score range.
_EDGE: Final = 1e-3


class Table(Protocol):
    """What a forecast reads of a model's counts."""

    @property
    def mu(self) -> float: ...
    @property
    def sigma(self) -> float: ...
    @property
    def trial_count(self) -> int: ...
    @property
    def unit_variance(self) -> float: ...


def forecast_by_rollout(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
    fallback: dict[str, int | None],
) -> dict[str, int | None]:
    """Trials each model still needs, from the procedure played on.

    ``fallback``: the single-pair forecasts, combined with the rollout's
    and kept as they are where a rollout has nothing to start from (no
    rule, no cap, a width target, a model with no trials yet or not yet
    placed, trials piled on a few questions).
    """
    totals = simulated_totals(decision, tables, config, question_count)
    if totals is None:
        return fallback
    low = np.quantile(totals, QUANTILE, axis=0)
    result: dict[str, int | None] = {}
    for index, name in enumerate(decision.order):
        if name in decision.done:
            result[name] = 0
            continue
        so_far = tables[name].trial_count
        total = float(low[index])
        single = fallback.get(name)
        if single is not None:
            total = math.sqrt(total * (so_far + single))
        result[name] = max(0, round(total - so_far))
    return result


def simulated_totals(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
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
        or not all(_even(tables[name], question_count, config) for name in names)
    ):
        return None
    start, outcomes = _start(decision, tables, config, question_count)
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


def _even(table: Table, question_count: int, config: RunConfig) -> bool:
    """Whether the model's information is its trials per question, as the
    rollout assumes: not so when trials pile on a few questions (question-
    major arrival), which the single-pair forecasts handle."""
    low, high = min(config.weights), max(config.weights)
    variance = (table.sigma / (high - low)) ** 2
    if variance <= 0.0:
        return False
    information = table.unit_variance / (high - low) ** 2 / variance - (
        len(config.weights) + 1
    )
    return information >= _EVEN * table.trial_count / question_count


def _start(
    decision: RunDecision,
    tables: Mapping[str, Table],
    config: RunConfig,
    question_count: int,
) -> tuple[Start, Outcomes]:
    names = decision.order
    size = len(names)
    low, high = min(config.weights), max(config.weights)
    width = float(len(config.weights))
    mu = np.array([(tables[n].mu - low) / (high - low) for n in names])
    sigma = np.array([tables[n].sigma / (high - low) for n in names])
    trials = np.array([tables[n].trial_count / question_count for n in names])
    shrunk, means = _truths(mu, sigma**2)
    outcomes = Outcomes.build(
        np.clip(shrunk, _EDGE, 1.0 - _EDGE), len(config.weights), DEFAULT_SPREAD
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
        needs=np.array([n in decision.drawing for n in names]),
        means=means,
        scale=scale,
    )
    return start, outcomes


def _truths(
    mu: NDArray[np.float64], variance: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Posterior centres and each replicate's true means (unit scale)."""
    tau2 = max(float(mu.var(ddof=1)) - float(variance.mean()), 0.0)
    keep = tau2 / (tau2 + variance)
    centre = float(mu.mean())
    shrunk = centre + keep * (mu - centre)
    rng = np.random.default_rng((SEED, 1))
    draws = shrunk + np.sqrt(keep * variance) * rng.standard_normal(
        (REPLICATES, mu.size)
    )
    return shrunk, np.clip(draws, _EDGE, 1.0 - _EDGE)


def _targets(config: RunConfig, size: int) -> tuple[int, ...]:
    if config.target == "leader":
        return (0,)
    if config.target == "top_k":
        top = config.top_k or 1
        return (top - 1,) if top < size else ()
    return tuple(range(size - 1))
