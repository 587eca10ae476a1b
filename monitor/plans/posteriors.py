"""A run's models' posteriors read from its stored counts, for plans and gates.

Read through the store's public counts (the same for every worker) into
:class:`scorio_core.CountTable` s, so a gate or a pilot plan sees exactly
the numbers the run's status shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor.engine.monitor import Monitor
from monitor.schema import RunConfig
from scorio_core import CountTable


@dataclass(frozen=True, slots=True)
class Posterior:
    """One model's posterior and sampling in a run."""

    model: str
    mu: float
    sigma: float
    unit_variance: float
    trials: int
    least_sampled: int
    question_means: tuple[float, ...]
    question_variances: tuple[float, ...]
    question_trials: tuple[int, ...]


def read_posteriors(monitor: Monitor, run: str) -> tuple[RunConfig, list[Posterior]]:
    """Every model of ``run`` with counts (declared models without any too).

    Raises:
        UnknownRunError: when the run does not exist.
    """
    config = monitor.config(run)
    stored = monitor.store.counts(run)
    width = len(config.weights)
    weights = np.asarray(config.weights, dtype=np.float64)
    declared = config.declared_question_count
    names = sorted(set(stored) | set(config.models or []))
    result = []
    for name in names:
        counts = stored.get(name)
        questions = counts.questions if counts is not None else []
        observed = _matrix(counts.observed if counts is not None else [], width)
        prior = _matrix(counts.prior if counts is not None else [], width)
        table = CountTable.from_state(
            config.weights, questions, observed, prior, declared
        )
        per_question = observed.sum(axis=1)
        seen = per_question > 0
        means = (observed[seen] @ weights) / per_question[seen]
        second = (observed[seen] @ weights**2) / per_question[seen]
        result.append(
            Posterior(
                model=name,
                mu=table.mu,
                sigma=table.sigma,
                unit_variance=table.unit_variance,
                trials=table.trial_count,
                least_sampled=table.least_question_trials,
                question_means=tuple(means.tolist()),
                question_variances=tuple((second - means**2).tolist()),
                question_trials=tuple(per_question[seen].tolist()),
            )
        )
    return config, result


def _matrix(
    rows: list[list[int]], width: int
) -> np.ndarray[tuple[int, int], np.dtype[np.int64]]:
    if not rows:
        return np.zeros((0, width), dtype=np.int64)
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), width)
