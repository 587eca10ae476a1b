"""How many trials a run will take under its own rule, before it starts.

:func:`plan` plays the run's stopping rule forward on simulated runs
(:func:`monitor.plans.rollout.roll`, seeded, so the same question always
gets the same answer) and reports:

- ``trials``: the expected total trials of the run (the mean over the
  simulated runs), with ``trials_low`` and ``trials_high`` the 10 % and
  90 % quantiles; the same per question per model;
- ``resolved_share``: the expected share of the adjacent pairs of the true
  order (truly different ones) that the run resolves, the right way round,
  by the time it stops (at the latest at the cap); for the ``top_k`` and
  ``leader`` targets, the share of runs that set the true top k apart;
- ``mde``: the smallest gap the run resolves with 80 % power at the cap:
  the field's narrowest adjacent pair is set ``d`` apart (the models above
  it moved up, those below it down, by half the change each) and ``d`` is
  found where the share of runs resolving that pair crosses 0.8 (a probit
  in log gap fitted to simulated runs at seven gaps, then refitted near
  its estimate with more runs at three gaps around it).

Each simulated run plays a world of its own, its questions' difficulty
drawn from the spread (:meth:`monitor.plans.outcomes.Outcomes.drawn`), as
the engine's simulated runs draw theirs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import ndtr, ndtri

from monitor.plans.outcomes import DEFAULT_SPREAD, DRAWN_QUESTIONS, Outcomes
from monitor.plans.rollout import Field, Rollouts, roll, truth_order
from monitor.plans.rules import rule_family
from monitor.schema import RunConfig

PLAN_SEED: Final = 20261
POWER: Final = 0.8
# Simulated runs behind a plan, and looks per run up to the cap.
REPLICATES: Final = 128
LOOKS: Final = 80
# The mde search: candidate gaps (relative to a first guess), runs for each.
_FIRST_ROUND: Final = (0.6, 0.75, 0.9, 1.05, 1.2, 1.4, 1.7)
_RUNS_PER_CANDIDATE: Final = 24
# Then gaps around the first estimate, with more runs each: where worlds
# differ run to run the power curve is flat and the first passes alone
# left the plan's own power at its mde anywhere in 70-87 %.
_REFINE: Final = (0.9, 1.0, 1.1)
_REFINE_RUNS: Final = 160
# The final fit keeps the gaps within this factor of the first estimate.
_NEAR: Final = 1.3

Target = Literal["ranking", "top_k", "leader"]


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What a plan assumes: the models' means (score units) and the run's shape."""

    means: tuple[float, ...]
    question_count: int
    cap: int = 80
    confidence: float = 0.95
    spread: float = DEFAULT_SPREAD
    weights: tuple[float, ...] = (0.0, 1.0)
    target: Target = "ranking"
    top_k: int | None = None
    error_control: Literal["ranking", "pair"] = "ranking"
    rule: Literal["sequential", "paper"] = "sequential"
    seed: int = PLAN_SEED
    replicates: int = REPLICATES
    looks: int = LOOKS
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.means) < 2:
            raise ValueError(f"a plan needs at least 2 models; got {len(self.means)}")
        if self.question_count < 1 or self.cap < 1:
            raise ValueError(
                f"questions and cap must be >= 1; got {self.question_count} "
                f"and {self.cap}"
            )
        low, high = min(self.weights), max(self.weights)
        if not low < high:
            raise ValueError(f"weights must not all be equal; got {self.weights}")
        outside = [m for m in self.means if not low < m < high]
        if outside:
            raise ValueError(
                f"means must lie strictly between the lowest and highest weight "
                f"({low}, {high}); got {outside}"
            )
        if self.target == "top_k" and not (
            self.top_k is not None and 1 <= self.top_k < len(self.means)
        ):
            raise ValueError(
                f"top_k must be in 1..{len(self.means) - 1}; got {self.top_k}"
            )
        if self.names is not None and len(self.names) != len(self.means):
            raise ValueError("names must name every model once")

    @property
    def score_range(self) -> tuple[float, float]:
        return min(self.weights), max(self.weights)

    def config(self) -> RunConfig:
        """The run config the plan plays (the rule's side of it)."""
        return RunConfig(
            run="plan",
            weights=list(self.weights),
            question_count=self.question_count,
            confidence=self.confidence,
            max_trials_per_question=self.cap,
            rule=self.rule,
            error_control=self.error_control,
            target=self.target,
            top_k=self.top_k,
        )


@dataclass(frozen=True, slots=True)
class ModelPlan:
    """One model's expected trials per question (mean of the simulated runs)."""

    model: str
    mean: float
    trials_per_question: float


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run is expected to take; see the module docstring."""

    trials: int
    trials_low: int
    trials_high: int
    per_question: float
    per_question_low: float
    per_question_high: float
    resolved_share: float | None
    mde: float | None
    fixed_trials: int
    models: tuple[ModelPlan, ...]
    request: PlanRequest
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        """The plan as JSON: the keys the CLI's ``--json`` prints."""
        request = self.request
        return {
            "trials": self.trials,
            "trials_low": self.trials_low,
            "trials_high": self.trials_high,
            "resolved_share": self.resolved_share,
            "mde": self.mde,
            "per_question": self.per_question,
            "per_question_low": self.per_question_low,
            "per_question_high": self.per_question_high,
            "fixed_trials": self.fixed_trials,
            "models": [
                {
                    "model": m.model,
                    "mean": m.mean,
                    "trials_per_question": m.trials_per_question,
                }
                for m in self.models
            ],
            "assumptions": {
                "questions": request.question_count,
                "cap": request.cap,
                "confidence": request.confidence,
                "spread": request.spread,
                "weights": list(request.weights),
                "target": request.target,
                "top_k": request.top_k,
                "error_control": request.error_control,
                "rule": request.rule,
                "simulated_runs": request.replicates,
                "looks_to_cap": request.looks,
                "seed": request.seed,
            },
            "notes": list(self.notes),
        }


def plan(request: PlanRequest) -> Plan:
    """Expected trials, resolved share and mde of a run (see the module)."""
    unit = _unit_means(request, request.means)
    rollouts = roll(
        _field(request, _worlds(request, unit, request.replicates)),
        request.replicates,
        np.random.default_rng(request.seed),
    )
    size, questions = len(request.means), request.question_count
    per_model = rollouts.trials_per_question
    totals = per_model.sum(axis=1) * questions
    low, high = np.quantile(totals, [0.1, 0.9])
    names = request.names or tuple(f"model{i + 1:02d}" for i in range(size))
    mde, notes = _mde(request, unit)
    cells = size * questions
    return Plan(
        trials=round(float(totals.mean())),
        trials_low=round(float(low)),
        trials_high=round(float(high)),
        per_question=float(totals.mean()) / cells,
        per_question_low=float(low) / cells,
        per_question_high=float(high) / cells,
        resolved_share=_resolved_share(request, rollouts),
        mde=mde,
        fixed_trials=cells * request.cap,
        models=tuple(
            ModelPlan(model=name, mean=mean, trials_per_question=float(value))
            for name, mean, value in zip(
                names, request.means, per_model.mean(axis=0), strict=True
            )
        ),
        request=request,
        notes=notes,
    )


def simulate_runs(request: PlanRequest, replicates: int, seed: int) -> Rollouts:
    """The plan's simulated runs themselves: trials and groups per model."""
    unit = _unit_means(request, request.means)
    return roll(
        _field(request, _worlds(request, unit, replicates, seed)),
        replicates,
        np.random.default_rng(seed),
    )


def _unit_means(request: PlanRequest, means: tuple[float, ...]) -> NDArray[np.float64]:
    low, high = request.score_range
    return (np.asarray(means, dtype=np.float64) - low) / (high - low)


def _outcomes(request: PlanRequest, unit: NDArray[np.float64]) -> Outcomes:
    return Outcomes.build(unit, len(request.weights), request.spread)


def _worlds(
    request: PlanRequest,
    unit: NDArray[np.float64],
    count: int,
    seed: int | None = None,
) -> tuple[Outcomes, ...]:
    """A world of its own for each of ``count`` simulated runs (seeded),
    or the one average world (see :mod:`monitor.plans.outcomes`)."""
    if request.spread == 0.0 or request.question_count > DRAWN_QUESTIONS:
        return (_outcomes(request, unit),)
    key = request.seed if seed is None else seed
    return tuple(_drawn(request, unit, (key, 3, index)) for index in range(count))


def _drawn(
    request: PlanRequest, unit: NDArray[np.float64], key: tuple[int, ...]
) -> Outcomes:
    return Outcomes.drawn(
        unit,
        len(request.weights),
        request.spread,
        request.question_count,
        np.random.default_rng(key),
    )


def _field(request: PlanRequest, outcomes: tuple[Outcomes, ...]) -> Field:
    size = len(request.means)
    if request.target == "leader":
        targets: tuple[int, ...] = (0,)
    elif request.target == "top_k":
        targets = ((request.top_k or 1) - 1,)
    else:
        targets = tuple(range(size - 1))
    return Field(
        outcomes=outcomes,
        question_count=request.question_count,
        cap=request.cap,
        targets=targets,
        rule_for=rule_family(request.config()),
        looks=min(request.looks, request.cap * request.question_count),
    )


def _resolved_share(request: PlanRequest, rollouts: Rollouts) -> float | None:
    means = list(request.means)
    order = truth_order(means)
    groups = rollouts.groups
    if request.target in ("top_k", "leader"):
        top = request.top_k if request.target == "top_k" else 1
        best, rest = order[: top or 1], order[top or 1 :]
        if means[best[-1]] <= means[rest[0]]:
            return None  # the true top k is not set apart from the rest
        apart = groups[:, best].max(axis=1) < groups[:, rest].min(axis=1)
        return float(apart.mean())
    pairs = [(a, b) for a, b in itertools.pairwise(order) if means[a] > means[b]]
    if not pairs:
        return None
    above = groups[:, [a for a, _ in pairs]]
    below = groups[:, [b for _, b in pairs]]
    return float((above < below).mean())


def narrowest_pair(unit: NDArray[np.float64]) -> tuple[list[int], int]:
    """The true order and the position of its narrowest adjacent gap
    (ties between equal gaps: the one nearest the middle)."""
    order = truth_order(unit.tolist())
    gaps = [unit[a] - unit[b] for a, b in itertools.pairwise(order)]
    middle = (len(order) - 2) / 2.0
    position = min(
        range(len(gaps)), key=lambda i: (round(gaps[i], 12), abs(i - middle))
    )
    return order, position


def widened(unit: NDArray[np.float64], gap: float) -> NDArray[np.float64] | None:
    """The means with the narrowest adjacent pair set ``gap`` apart.

    The models above the pair move up and those below it down by half the
    change each; the field is then moved back inside (0, 1) when it can be
    (``None`` when it cannot).
    """
    order, position = narrowest_pair(unit)
    change = gap - (unit[order[position]] - unit[order[position + 1]])
    moved = unit.copy()
    moved[order[: position + 1]] += change / 2.0
    moved[order[position + 1 :]] -= change / 2.0
    edge = 0.005
    if moved.max() - moved.min() > 1.0 - 2 * edge:
        return None
    moved += max(0.0, edge - moved.min()) - max(0.0, moved.max() - (1.0 - edge))
    return moved


def _mde(
    request: PlanRequest, unit: NDArray[np.float64]
) -> tuple[float | None, tuple[str, ...]]:
    """The gap resolved with 80 % power (score units), and why not, if none."""
    if request.target != "ranking":
        return None, ("mde is computed for the ranking target only",)
    order, position = narrowest_pair(unit)
    pair = (order[position], order[position + 1])
    base = _outcomes(request, unit)
    variance = float(base.trial_variance[list(pair)].sum())
    scale = math.sqrt(variance / (request.question_count * request.cap))
    low, high = request.score_range
    rng = np.random.default_rng((request.seed, 1))
    # A first guess: the boundary at the cap, between one share and all of
    # them, plus the 80 % power quantile, in units of the pair's sd there.
    rule_for = rule_family(request.config())
    shares = max(len(request.means) - 1, 1)
    cap_information = np.array([float(request.cap)])
    needed = math.sqrt(
        float(rule_for(1).thresholds(cap_information)[0])
        * float(rule_for(shares).thresholds(cap_information)[0])
    ) + float(ndtri(POWER))
    gaps = needed * scale * np.array(_FIRST_ROUND)
    observed: list[tuple[float, float, int]] = []  # gap, resolved share, runs
    for _ in range(3):
        observed += _power_at(request, unit, gaps, pair, rng)
        fitted = _fit_probit(observed)
        if fitted is None:
            gaps = gaps * 2.0
            continue
        if gaps.min() <= fitted <= gaps.max():
            break
        gaps = fitted * np.array(_FIRST_ROUND)
    estimate = _fit_probit(observed)
    # Refined until the estimate lies among the gaps refined (at most twice
    # more when a first estimate was far off).
    for _ in range(3):
        if estimate is None:
            break
        refined = estimate * np.array(_REFINE)
        observed += _power_at(request, unit, refined, pair, rng, _REFINE_RUNS)
        near = [o for o in observed if 1 / _NEAR <= o[0] / estimate <= _NEAR]
        estimate = _fit_probit(near) or estimate
        if refined.min() <= estimate <= refined.max():
            break
    if estimate is None:
        return None, (
            "no gap that fits the field inside the score range is resolved with "
            "80 % power at this cap",
        )
    return estimate * (high - low), ()


def _power_at(
    request: PlanRequest,
    unit: NDArray[np.float64],
    gaps: NDArray[np.float64],
    pair: tuple[int, int],
    rng: np.random.Generator,
    per_candidate: int = _RUNS_PER_CANDIDATE,
) -> list[tuple[float, float, int]]:
    moves, kept = [], []
    for gap in gaps.tolist():
        moved = widened(unit, gap)
        if moved is not None:
            moves.append(moved)
            kept.append(gap)
    if not moves:
        return []
    # Run r plays candidate r % K, with drawn worlds in a world of its own:
    # worlds shared across candidates would move all their shares together
    # and leave the fit the noise of one sample of worlds.
    runs = per_candidate * len(moves)
    fields: list[Outcomes] = []
    drawing = request.spread > 0.0 and request.question_count <= DRAWN_QUESTIONS
    if drawing:
        batch = int(rng.integers(2**31))
        for world in range(per_candidate):
            fields += [
                _drawn(request, moved, (request.seed, 4, batch, world, candidate))
                for candidate, moved in enumerate(moves)
            ]
    else:
        fields = [_outcomes(request, moved) for moved in moves]
    rollouts = roll(_field(request, tuple(fields)), runs, rng)
    kind = np.arange(runs) % len(moves)
    apart = rollouts.groups[:, pair[0]] < rollouts.groups[:, pair[1]]
    return [
        (gap, float(apart[kind == index].mean()), int((kind == index).sum()))
        for index, gap in enumerate(kept)
    ]


def _fit_probit(observed: list[tuple[float, float, int]]) -> float | None:
    """The gap where a probit in log gap, fitted by maximum likelihood, is 0.8."""
    if not observed:
        return None
    gaps = np.log([g for g, _, _ in observed])
    share = np.array([s for _, s, _ in observed])
    runs = np.array([n for _, _, n in observed], dtype=np.float64)
    if share.max() < POWER and share.max() < 0.5:
        return None
    hits = share * runs

    def loss(theta: NDArray[np.float64]) -> float:
        p = np.clip(ndtr(theta[0] + theta[1] * gaps), 1e-9, 1 - 1e-9)
        return float(-(hits * np.log(p) + (runs - hits) * np.log1p(-p)).sum())

    start = np.array([-float(gaps.mean()) * 2.0, 2.0])
    result = minimize(loss, start, method="Nelder-Mead")
    intercept, slope = (float(v) for v in result.x)
    if slope <= 0.0:
        return None
    return math.exp((float(ndtri(POWER)) - intercept) / slope)
