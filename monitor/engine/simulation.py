"""Simulated benchmarks: the paper's biased-coin models with question difficulty.

Each model answers question ``a`` right with probability ``p_a``; trials are
independent. Per-question probabilities are drawn from
``Beta(kappa mu, kappa (1 - mu))`` and then moved affinely toward 0 or 1 so
that they average to ``mu`` exactly, keeping tied models exactly tied.
``kappa = 5`` reproduces the paper's LLM9/LLM10 figures (study notes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.engine.monitor import Monitor
from monitor.schema import RunConfig, Status

# The paper's protocol: every model gets this many trials per question.
FIXED_N: Final = 80
# The paper's 11 models (Table 1); models 4 and 5 are exactly tied.
PAPER_MEANS: Final = (
    0.2332,
    0.2545,
    0.3604,
    0.3642,
    0.3642,
    0.4466,
    0.5418,
    0.5276,
    0.608,
    0.6213,
    0.7327,
)
# A 20-model AIME-like set: two exact ties, three gaps of 0.01, two of 0.02.
AIME20_MEANS: Final = (
    0.10,
    0.15,
    0.21,
    0.22,
    0.30,
    0.34,
    0.35,
    0.35,
    0.42,
    0.47,
    0.50,
    0.51,
    0.55,
    0.60,
    0.62,
    0.62,
    0.68,
    0.73,
    0.75,
    0.80,
)


# Named model sets for `simulate`: means and the Beta concentration that
# makes them resemble their benchmark (kappa = 5: the paper; 1: AIME-like).
MODEL_SETS: Final = {"paper11": (PAPER_MEANS, 5.0), "aime20": (AIME20_MEANS, 1.0)}


def draw_world(
    means: tuple[float, ...] | list[float],
    question_count: int,
    kappa: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Per-model, per-question success probabilities averaging to ``means``.

    Returns:
        ``models x questions`` probabilities in [0, 1].
    """
    targets = np.asarray(means, dtype=float)
    raw = rng.beta(
        kappa * targets[:, None],
        kappa * (1.0 - targets[:, None]),
        size=(targets.size, question_count),
    )
    current = raw.mean(axis=1, keepdims=True)
    down = raw * (targets[:, None] / current)
    up = 1.0 - (1.0 - raw) * ((1.0 - targets[:, None]) / (1.0 - current))
    return np.asarray(np.where(current > targets[:, None], down, up), dtype=np.float64)


def draw_results(
    probabilities: NDArray[np.float64], trials: int, rng: np.random.Generator
) -> NDArray[np.int8]:
    """A ``models x questions x trials`` binary results tensor."""
    draws = rng.random((*probabilities.shape, trials))
    return (draws < probabilities[:, :, None]).astype(np.int8)


def draw_categories(
    scores: NDArray[np.float64],
    categories: int,
    shape: tuple[int, ...],
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """Outcomes in ``0..categories-1`` whose expected score is ``scores``.

    With weights ``k / (categories - 1)``, a Binomial(categories - 1, s)
    category has mean score ``s`` exactly, so tied models stay tied.
    ``shape`` is the draw's shape, ``scores`` broadcast over it.
    """
    if categories == 2:
        return (rng.random(shape) < scores).astype(np.int64)
    return np.asarray(rng.binomial(categories - 1, np.broadcast_to(scores, shape)))


Arrival = Literal["least_sampled", "question_major"]


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """One simulated run driven through the engine.

    ``false_claims`` counts ordered pairs the final grouping puts in a better
    group although the model is truly equal or worse; ``claims`` all ordered
    pairs in different groups; ``resolved_pairs`` counts adjacent (in the
    true order), truly different pairs that end in different groups the
    right way round. ``cost`` sums each trial's cost (1 unless given).
    ``forecasts`` holds, per model, ``(trials so far, forecast total)`` at
    every step where a forecast was made (when ``record_forecasts``).
    """

    status: Status
    true_means: dict[str, float]
    fixed_trials: int
    false_claims: int
    resolved_pairs: int
    resolvable_pairs: int
    steps: int
    claims: int = 0
    cost: float = 0.0
    forecasts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return self.status.trials


def simulate(
    means: tuple[float, ...] | list[float],
    *,
    rule: str = "sequential",
    budget_per_question: int = 80,
    question_count: int = 30,
    kappa: float = 5.0,
    confidence: float = 0.95,
    seed: int = 0,
    observe: Callable[[Status], None] | None = None,
    categories: int = 2,
    arrival: Arrival = "least_sampled",
    trials_per_step: int = 1,
    costs: tuple[float, ...] | None = None,
    target: str = "ranking",
    top_k: int | None = None,
    error_control: str = "ranking",
    equivalence_margin: float | None = None,
    record_forecasts: bool = False,
    branch: tuple[int, int] | None = None,
    joins: tuple[int, ...] | None = None,
    probabilities: NDArray[np.float64] | None = None,
) -> SimulationResult:
    """Drive the real engine with simulated models until nothing needs trials.

    Each step gives every model that needs trials ``trials_per_step`` trials
    and looks: with ``least_sampled`` arrival the questions ``next`` plans
    (fewest trials first); with ``question_major`` every trial of one
    question before the next (lm-eval's repeats), whatever ``next`` would
    choose. ``categories > 2`` draws rubric outcomes with weights ``k/C``
    (see :func:`draw_categories`); ``costs`` (seconds per trial, per model)
    are reported with each trial, so allocation learns them. ``observe``
    sees the status after each step. ``branch = (step, seed)`` draws the
    outcomes after ``step`` steps from a fresh generator seeded by ``seed``:
    the same world and the same first steps, another future (forecast
    benchmarks use it to see how the rest of a run could have gone).
    ``joins`` (per model, the run's trials after which it starts reporting)
    leaves ``models`` undeclared: a model joins with one trial on each of
    its first ``trials_per_step`` questions once the run has that many
    trials (or when nothing else needs trials), then ``next`` drives it.
    ``probabilities`` (models x questions) replaces the drawn world, for
    worlds made otherwise (shared difficulty, permuted copies).
    """
    rng = np.random.default_rng(seed)
    world = (
        draw_world(means, question_count, kappa, rng)
        if probabilities is None
        else probabilities
    )
    names = [f"model{index + 1:02d}" for index in range(len(means))]
    weights = [k / (categories - 1) for k in range(categories)]
    monitor = Monitor(look_interval_s=0.0)
    monitor.configure(
        RunConfig(
            run="sim",
            weights=weights,
            questions=[str(q) for q in range(question_count)],
            models=names if joins is None else None,
            rule=rule,  # type: ignore[arg-type]
            error_control=error_control,  # type: ignore[arg-type]
            equivalence_margin=equivalence_margin,
            confidence=confidence,
            max_trials_per_question=budget_per_question,
            target=target,  # type: ignore[arg-type]
            top_k=top_k,
        )
    )
    next_trial = np.zeros((len(means), question_count), dtype=np.int64)
    forecasts: dict[str, list[tuple[int, int]]] = {name: [] for name in names}
    steps, cost, total = 0, 0.0, 0
    join_at = (0,) * len(means) if joins is None else joins
    waiting = set() if joins is None else set(range(len(means)))
    while True:
        drawing = monitor.models_drawing_trials("sim")
        due = sorted(m for m in waiting if join_at[m] <= total)
        if not drawing and not due and waiting:
            # The run would end before they join: the next ones join now.
            due = sorted(
                m for m in waiting if join_at[m] == min(join_at[w] for w in waiting)
            )
        if not drawing and not due:
            break
        if branch is not None and steps == branch[0]:
            rng = np.random.default_rng((seed, branch[1]))
        steps += 1
        if due:
            # Late models report once first (a scheduler runs each new one).
            waiting -= set(due)
            first = min(trials_per_step, question_count)
            cells = [(m, q, 1) for m in due for q in range(first)]
        elif arrival == "question_major":
            cells = _question_major(
                drawing, names, next_trial, budget_per_question, trials_per_step
            )
        else:
            plan = monitor.next("sim", trials_per_step * len(drawing))
            cells = [
                (names.index(item.model), int(item.question), item.trials)
                for item in plan
            ]
        if not cells:
            break
        models, questions, trials, scores = [], [], [], []
        for m, q, count in cells:
            for _ in range(count):
                models.append(names[m])
                questions.append(str(q))
                trials.append(int(next_trial[m, q]))
                next_trial[m, q] += 1
                scores.append(world[m, q])
        total += len(scores)
        outcomes = draw_categories(np.array(scores), categories, (len(scores),), rng)
        if costs is None:
            monitor.ingest_columns("sim", models, questions, trials, outcomes)
            cost += len(models)
        else:
            spent = [costs[names.index(model)] for model in models]
            monitor.ingest(
                [
                    {
                        "run": "sim",
                        "model": model,
                        "question": question,
                        "trial": trial,
                        "category": int(outcome),
                        "cost": {"seconds": seconds},
                    }
                    for model, question, trial, outcome, seconds in zip(
                        models, questions, trials, outcomes, spent, strict=True
                    )
                ]
            )
            cost += sum(spent)
        if observe is not None or record_forecasts:
            current = monitor.status("sim")
            if observe is not None:
                observe(current)
            if record_forecasts:
                for row in current.models:
                    if row.needs_trials and row.predicted_trials is not None:
                        forecasts[row.model].append(
                            (row.trials, row.trials + row.predicted_trials)
                        )
    status = monitor.status("sim")
    monitor.close()
    groups = {row.model: row.group for row in status.models}
    truth = {name: float(mean) for name, mean in zip(names, means, strict=True)}
    false_claims, resolved, resolvable = grade(truth, groups)
    return SimulationResult(
        status=status,
        true_means=truth,
        fixed_trials=len(means) * question_count * FIXED_N,
        false_claims=false_claims,
        resolved_pairs=resolved,
        resolvable_pairs=resolvable,
        steps=steps,
        claims=count_claims(groups),
        cost=cost,
        forecasts=forecasts,
    )


def _question_major(
    drawing: list[str],
    names: list[str],
    next_trial: NDArray[np.int64],
    cap: int,
    trials_per_step: int,
) -> list[tuple[int, int, int]]:
    """Each drawing model's next trials: its first question below the cap."""
    cells = []
    for name in drawing:
        m = names.index(name)
        below = np.flatnonzero(next_trial[m] < cap)
        if below.size:
            q = int(below[0])
            cells.append((m, q, min(trials_per_step, cap - int(next_trial[m, q]))))
    return cells


def count_claims(groups: dict[str, int | None]) -> int:
    """Ordered pairs the grouping claims: one model in a better group (a model
    with no group, not yet placed, is in no claim)."""
    values = [group for group in groups.values() if group is not None]
    return sum(1 for a in values for b in values if a < b)


def _above(groups: dict[str, int | None], a: str, b: str) -> bool:
    first, second = groups[a], groups[b]
    return first is not None and second is not None and first < second


def grade(
    truth: dict[str, float], groups: dict[str, int | None]
) -> tuple[int, int, int]:
    """Grade a final grouping against the true means.

    Returns:
        ``(false_claims, resolved, resolvable)``: ordered pairs put in a
        better group although truly equal or worse; adjacent (in the true
        order), truly different pairs in different groups the right way
        round; and how many such adjacent pairs there are.

    Examples:
        >>> grade({"a": 0.5, "b": 0.5, "c": 0.2}, {"a": 1, "b": 2, "c": 2})
        (1, 0, 1)
    """
    names = list(truth)
    false_claims = sum(
        1
        for a in names
        for b in names
        if a != b and truth[a] <= truth[b] and _above(groups, a, b)
    )
    true_order = sorted(names, key=lambda name: (-truth[name], name))
    resolvable = [
        (a, b) for a, b in itertools.pairwise(true_order) if truth[a] > truth[b]
    ]
    resolved = sum(1 for a, b in resolvable if _above(groups, a, b))
    return false_claims, resolved, len(resolvable)
