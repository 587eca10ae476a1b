"""Runs side by side: each model's standing in every run, aligned by model.

Two rounds of one eval, or the same models on two benchmarks: every model of
any run gets one row, with its mu, interval, rank and group in each run, or
``None`` where the run has no such model. Rows come in the order of the
models' mean rank over the runs they are in, those in every run first, so
the table reads as a joint leaderboard. ``scorio-monitor status --compare``
prints it and ``GET /compare`` serves it; the dashboard draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel

from monitor.schema import Status

MAX_COMPARED_RUNS: Final = 8


class ComparedCell(BaseModel):
    """One model in one run (a subset of its ``ModelStatus``)."""

    mu: float
    sigma: float
    lo: float
    hi: float
    avg: float | None
    rank: int
    group: int | None
    trials: int


class ComparedModel(BaseModel):
    """One model across the runs: ``runs[run]`` is None where it is absent."""

    model: str
    runs: dict[str, ComparedCell | None]


class ComparedRun(BaseModel):
    """What a run's numbers mean: its trials, confidence and rule."""

    run: str
    trials: int
    confidence: float
    rule: str
    models: int
    stable: bool


class Comparison(BaseModel):
    """Models lined up across ``runs`` (in the order asked)."""

    runs: list[ComparedRun]
    models: list[ComparedModel]


def compared_runs(text: str) -> list[str]:
    """Run names from ``"a,b"``: at least two, distinct, at most
    :data:`MAX_COMPARED_RUNS`.

    Raises:
        ValueError: saying what is wrong with ``text``.

    Examples:
        >>> compared_runs(" round1 , round2 ")
        ['round1', 'round2']
    """
    runs = [part.strip() for part in text.split(",") if part.strip()]
    if len(runs) < 2:
        raise ValueError(
            f"compare needs two or more runs, comma-separated; got {text!r}"
        )
    if len(set(runs)) != len(runs):
        raise ValueError(f"compare names a run twice: {text!r}")
    if len(runs) > MAX_COMPARED_RUNS:
        raise ValueError(
            f"compare takes at most {MAX_COMPARED_RUNS} runs; got {len(runs)}"
        )
    return runs


def compare(statuses: Sequence[Status]) -> Comparison:
    """The statuses' models aligned by name (see the module doc)."""
    names = [status.run for status in statuses]
    cells: dict[str, dict[str, ComparedCell | None]] = {}
    for status in statuses:
        for row in status.models:
            by_run = cells.setdefault(row.model, dict.fromkeys(names))
            by_run[status.run] = ComparedCell(
                mu=row.mu,
                sigma=row.sigma,
                lo=row.lo,
                hi=row.hi,
                avg=row.avg,
                rank=row.rank,
                group=row.group,
                trials=row.trials,
            )

    def order(model: str) -> tuple[int, float, str]:
        present = [cell for cell in cells[model].values() if cell is not None]
        mean_rank = sum(cell.rank for cell in present) / len(present)
        return (len(names) - len(present), mean_rank, model)

    return Comparison(
        runs=[
            ComparedRun(
                run=status.run,
                trials=status.trials,
                confidence=status.confidence,
                rule=status.rule,
                models=len(status.models),
                stable=status.stable,
            )
            for status in statuses
        ],
        models=[
            ComparedModel(model=model, runs=cells[model])
            for model in sorted(cells, key=order)
        ],
    )
