"""What a run's counts mean right now: order, groups, pairs, who needs trials.

:func:`decide` turns every model's posterior into a :class:`RunDecision`
under the run's stopping rule and target. It is pure (no I/O, no clock): the
engine calls it on each look and compares decisions to fire events.

Groups follow block resolution (see :mod:`scorio_core.stopping`): a boundary
in the order separates groups only when every pair across it is settled.
Within an open boundary, the weakest cross pair is the one that gets trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.schema import RunConfig
from scorio_core import ci_groups, order_confidence, z_threshold
from scorio_core.stopping import (
    BoundaryState,
    ConfidenceSequenceRule,
    PaperRule,
    SequentialRule,
    StoppingRule,
    pair_information_matrix,
    resolve_boundaries,
)


@dataclass(frozen=True, slots=True)
class Standing:
    """One model's numbers, as the decision needs them."""

    model: str
    mu: float
    sigma: float
    lo: float
    hi: float
    trials: int
    question_count: int
    least_sampled: int

    @property
    def per_question(self) -> float:
        """Mean observed trials per question, ``n``."""
        return self.trials / self.question_count

    @property
    def trial_variance(self) -> float:
        """``s^2`` with ``sigma^2 ~ s^2 / (M n)``: one trial's share of variance."""
        return self.sigma**2 * self.question_count * max(self.per_question, 1.0)


@dataclass(frozen=True, slots=True)
class PairDecision:
    """Two models adjacent in the order, ``a`` above ``b``."""

    a: str
    b: str
    z: float
    rho: float
    resolved: bool
    unresolvable: bool
    predicted_trials: int | None = 0


@dataclass(frozen=True, slots=True)
class RunDecision:
    """Everything the status, allocation and events need from one look."""

    order: tuple[str, ...]
    ranks: dict[str, int]
    groups: dict[str, int]
    adjacent_groups: dict[str, int]
    pairs: tuple[PairDecision, ...]
    needs_trials: frozenset[str]
    predicted_trials: dict[str, int | None]
    done: frozenset[str]
    exhausted: frozenset[str]
    stable: bool


def build_rule(config: RunConfig, models: int = 2) -> StoppingRule:
    """The stopping rule a run's config asks for, for a set of ``models``.

    ``sequential`` (the default) is the error-controlled boundary: against
    the budget when ``max_trials_per_question`` is set, else a confidence
    sequence; beyond 11 models its error level per pair shrinks (see
    :func:`scorio_core.stopping.per_direction_alpha`). ``paper`` is the
    paper's one-look rule, shown for reference.
    """
    budget = config.max_trials_per_question
    if config.rule == "paper":
        return PaperRule.from_confidence(config.confidence, budget)
    if budget is None:
        return ConfidenceSequenceRule.from_confidence(config.confidence, models=models)
    return SequentialRule.from_confidence(config.confidence, budget, models=models)


def decide(
    standings: Sequence[Standing], config: RunConfig, rule: StoppingRule
) -> RunDecision:
    """Order, group and classify a run's models under ``rule``."""
    ordered = sorted(standings, key=lambda s: (-s.mu, s.model))
    names = tuple(s.model for s in ordered)
    size = len(ordered)
    cap = config.max_trials_per_question
    has_budget = {s.model: cap is None or s.least_sampled < cap for s in ordered}
    mu = np.array([s.mu for s in ordered])
    sigma = np.array([s.sigma for s in ordered])
    z = _z_matrix(mu, sigma)
    information = pair_information_matrix(
        np.array([s.per_question for s in ordered]),
        np.array([s.trial_variance for s in ordered]),
    )
    thresholds = rule.thresholds(information)
    settled = (information > 0.0) & (z >= thresholds)
    futile = ~settled & rule.futile(z, information)
    with np.errstate(invalid="ignore"):
        margin = np.where(np.isfinite(thresholds), z - thresholds, -np.inf)
    boundaries = resolve_boundaries(settled, margin, futile)
    unresolvable = [
        boundary.futile
        or (
            not boundary.resolved
            and not has_budget[names[boundary.weakest[0]]]
            and not has_budget[names[boundary.weakest[1]]]
        )
        for boundary in boundaries
    ]
    targets = _target_boundaries(config, size)

    groups, group = {}, 1
    for position, name in enumerate(names):
        if position and boundaries[position - 1].resolved:
            group += 1
        groups[name] = group
    # Competition ranks: 1 + the number of strictly better means.
    better = (mu[None, :] > mu[:, None]).sum(axis=1)
    ranks = dict(zip(names, (1 + better).tolist(), strict=True))

    needs: set[str] = set()
    predicted: dict[str, int | None] = {}

    def predict(name: str, extra: int | None) -> None:
        previous = predicted.get(name, 0)
        predicted[name] = (
            None if extra is None or previous is None else max(previous, extra)
        )

    boundary_forecasts: dict[int, int | None] = {}
    for index in targets:
        boundary = boundaries[index]
        if boundary.resolved or unresolvable[index]:
            continue
        i, j = boundary.weakest
        t = float(information[i, j])
        forecast = rule.forecast(float(z[i, j]), t)
        total: int | None = 0
        for position in (i, j):
            standing = ordered[position]
            if has_budget[standing.model]:
                needs.add(standing.model)
                extra = _extra_trials(standing, forecast, t, cap)
                predict(standing.model, extra)
                total = None if extra is None or total is None else total + extra
        boundary_forecasts[index] = total
    for standing in ordered:
        name = standing.model
        minimum = config.min_trials_per_question
        if standing.least_sampled < minimum and has_budget[name]:
            needs.add(name)
            predict(
                name,
                math.ceil((minimum - standing.per_question) * standing.question_count),
            )
        width = config.interval_width
        if (
            config.target == "width"
            and width is not None
            and standing.hi - standing.lo > width
            and has_budget[name]
        ):
            needs.add(name)
            predict(name, _width_trials(standing, width, cap))
        predicted.setdefault(name, 0)

    open_targets = [
        i for i in targets if not boundaries[i].resolved and not unresolvable[i]
    ]
    settled_around = _settled_around(names, groups, boundaries, unresolvable, targets)
    # Nothing is final while the field is incomplete: a ranking needs two
    # models with trials, and every declared model present.
    started = {s.model for s in ordered if s.trials > 0}
    complete = (config.target == "width" or len(started) >= 2) and (
        config.models is None or set(config.models) <= started
    )
    done = frozenset(
        name
        for name in names
        if complete
        and name not in needs
        and (settled_around[name] or not has_budget[name])
    )
    exhausted = frozenset(
        names[position]
        for index in targets
        if not boundaries[index].resolved
        for position in boundaries[index].weakest
        if not has_budget[names[position]]
    )
    pairs = tuple(
        PairDecision(
            a=names[i],
            b=names[i + 1],
            z=float(z[i, i + 1]),
            rho=order_confidence(float(z[i, i + 1])),
            resolved=boundaries[i].resolved,
            unresolvable=unresolvable[i],
            predicted_trials=boundary_forecasts.get(i, 0),
        )
        for i in range(size - 1)
    )
    # The paper's Table 1 grouping (adjacent pairs, one-look threshold), kept
    # for display beside the block groups the decisions use.
    paper: list[int] = (
        ci_groups(mu, sigma, z_threshold(config.confidence)).tolist() if size else []
    )
    return RunDecision(
        order=names,
        ranks=ranks,
        groups=groups,
        adjacent_groups=dict(zip(names, paper, strict=True)),
        pairs=pairs,
        needs_trials=frozenset(needs),
        predicted_trials=predicted,
        done=done,
        exhausted=exhausted,
        stable=complete and not open_targets and not needs,
    )


def _z_matrix(
    mu: NDArray[np.float64], sigma: NDArray[np.float64]
) -> NDArray[np.float64]:
    """|mu_i - mu_j| / sqrt(sigma_i^2 + sigma_j^2); inf (or 0) when both are exact."""
    gap = np.abs(mu[:, None] - mu[None, :])
    spread = np.hypot(sigma[:, None], sigma[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = gap / spread
    return np.asarray(np.where(spread > 0.0, z, np.where(gap > 0.0, np.inf, 0.0)))


def _target_boundaries(config: RunConfig, size: int) -> list[int]:
    if size < 2 or config.target == "width":
        return []
    if config.target == "leader":
        return [0]
    if config.target == "top_k":
        top = config.top_k or 1
        return [top - 1] if top < size else []
    return list(range(size - 1))


def _settled_around(
    names: tuple[str, ...],
    groups: dict[str, int],
    boundaries: list[BoundaryState],
    unresolvable: list[bool],
    targets: list[int],
) -> dict[str, bool]:
    """Whether the boundaries just above and below each model's group are settled."""
    target_set = set(targets)

    def settled(index: int) -> bool:
        return (
            index not in target_set or boundaries[index].resolved or unresolvable[index]
        )

    result = {}
    for position, name in enumerate(names):
        first = position
        while first > 0 and groups[names[first - 1]] == groups[name]:
            first -= 1
        last = position
        while last < len(names) - 1 and groups[names[last + 1]] == groups[name]:
            last += 1
        inside = all(settled(index) for index in range(first, last))
        above = first == 0 or settled(first - 1)
        below = last == len(names) - 1 or settled(last)
        result[name] = inside and above and below
    return result


def _extra_trials(
    standing: Standing, forecast: float, information: float, cap: int | None
) -> int | None:
    """Trials this model needs until its pair is forecast to settle."""
    if not math.isfinite(forecast) or information <= 0.0:
        return None
    target_per_question = standing.per_question * forecast / information
    if cap is not None:
        target_per_question = min(target_per_question, cap)
    return max(
        0,
        math.ceil(
            (target_per_question - standing.per_question) * standing.question_count
        ),
    )


def _width_trials(standing: Standing, width: float, cap: int | None) -> int | None:
    """Trials until the interval narrows to ``width`` (widths fall like 1/sqrt(n))."""
    current = standing.hi - standing.lo
    if standing.trials == 0 or current <= 0.0:
        return None
    per_question = standing.per_question * (current / width) ** 2
    if cap is not None:
        per_question = min(per_question, cap)
    return max(
        0, math.ceil((per_question - standing.per_question) * standing.question_count)
    )
