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
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from monitor.engine import Monitor
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


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """One simulated run driven through the engine.

    ``false_claims`` counts ordered pairs the final grouping puts in a better
    group although the model is truly equal or worse; ``resolved_pairs``
    counts adjacent (in the true order), truly different pairs that end in
    different groups the right way round.
    """

    status: Status
    true_means: dict[str, float]
    fixed_trials: int
    false_claims: int
    resolved_pairs: int
    resolvable_pairs: int
    steps: int

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
) -> SimulationResult:
    """Drive the real engine with biased-coin models until nothing needs trials.

    Each step asks ``next`` for one trial per model that needs trials, draws
    the outcomes from the simulated world and ingests them; the engine looks
    after every step, i.e. after every trial of every model. ``observe``,
    when given, sees the status after each step (forecast calibration).
    """
    rng = np.random.default_rng(seed)
    world = draw_world(means, question_count, kappa, rng)
    names = [f"model{index + 1:02d}" for index in range(len(means))]
    monitor = Monitor(look_interval_s=0.0)
    monitor.configure(
        RunConfig(
            run="sim",
            questions=[str(q) for q in range(question_count)],
            models=names,
            rule=rule,  # type: ignore[arg-type]
            confidence=confidence,
            max_trials_per_question=budget_per_question,
        )
    )
    next_trial = np.zeros((len(means), question_count), dtype=np.int64)
    steps = 0
    while True:
        plan = monitor.next("sim", len(monitor.models_needing_trials("sim")))
        if not plan:
            break
        steps += 1
        models, questions, trials, outcomes = [], [], [], []
        for item in plan:
            m, q = names.index(item.model), int(item.question)
            for _ in range(item.trials):
                models.append(item.model)
                questions.append(item.question)
                trials.append(int(next_trial[m, q]))
                next_trial[m, q] += 1
                outcomes.append(int(rng.random() < world[m, q]))
        monitor.ingest_columns("sim", models, questions, trials, np.array(outcomes))
        if observe is not None:
            observe(monitor.status("sim"))
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
    )


def grade(truth: dict[str, float], groups: dict[str, int]) -> tuple[int, int, int]:
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
        if a != b and truth[a] <= truth[b] and groups[a] < groups[b]
    )
    true_order = sorted(names, key=lambda name: (-truth[name], name))
    resolvable = [
        (a, b) for a, b in itertools.pairwise(true_order) if truth[a] > truth[b]
    ]
    resolved = sum(1 for a, b in resolvable if groups[a] < groups[b])
    return false_claims, resolved, len(resolvable)
