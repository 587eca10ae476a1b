"""Trials given as arrays (``Monitor.ingest_columns``): the bulk path.

Results files and simulations hand the engine whole columns (models,
question and trial ids, categories). They are checked by column (types,
lengths, category range, declared models and questions), not decoded event
by event, and join the other inputs at the engine's one commit step
(:meth:`monitor.engine.ingest.Ingestion`'s), which persists, counts and
looks. Also here: the dead letter a rejection becomes, which both paths use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.engine.runs import RunState
from monitor.inputs.factors import Factors
from monitor.limits import COLUMN_CHUNK_TRIALS
from monitor.schema import Rejection
from monitor.stores.batches import TrialBatch
from monitor.stores.records import DeadLetter, IngestReport, combined_reports


class Commit(Protocol):
    """The engine's one commit step: persist, count, mark and look."""

    def __call__(
        self,
        batches: list[TrialBatch],
        letters: list[DeadLetter],
        rejections: list[Rejection],
        cursor: tuple[str, str] | None,
        now: float,
        look: bool = True,
    ) -> IngestReport: ...


def ingest_arrays(
    state: RunState,
    commit: Commit,
    clock: Callable[[], float],
    model: Sequence[str],
    question: Sequence[str | int] | NDArray[np.integer],
    trial: Sequence[str | int] | NDArray[np.integer],
    category: ArrayLike,
    prior: ArrayLike | None = None,
) -> IngestReport:
    """:meth:`Monitor.ingest_columns` of one run's ``state`` (see there)."""
    size = len(model)
    categories = np.asarray(category)
    if (
        not (len(question) == len(trial) == categories.shape[0] == size)
        or categories.ndim != 1
    ):
        raise ValueError(
            "model, question, trial and category must be columns of one length"
        )
    if size and not np.issubdtype(categories.dtype, np.integer):
        raise ValueError(f"category must hold integers; got dtype {categories.dtype}")
    priors = (
        np.zeros(size, dtype=bool)
        if prior is None
        else np.asarray(prior, dtype=bool).reshape(size)
    )
    reports = [
        _ingest_chunk(
            state,
            commit,
            clock(),
            model[first : first + COLUMN_CHUNK_TRIALS],
            question[first : first + COLUMN_CHUNK_TRIALS],
            trial[first : first + COLUMN_CHUNK_TRIALS],
            categories[first : first + COLUMN_CHUNK_TRIALS],
            priors[first : first + COLUMN_CHUNK_TRIALS],
            first,
            is_last=first + COLUMN_CHUNK_TRIALS >= size,
        )
        for first in range(0, max(size, 1), COLUMN_CHUNK_TRIALS)
    ]
    return combined_reports(reports)


def _ingest_chunk(
    state: RunState,
    commit: Commit,
    now: float,
    model: Sequence[str],
    question: Sequence[str | int] | NDArray[np.integer],
    trial: Sequence[str | int] | NDArray[np.integer],
    categories: NDArray[np.integer],
    priors: NDArray[np.bool_],
    offset: int,
    is_last: bool,
) -> IngestReport:
    """:func:`ingest_arrays` of checked columns; ``offset``: of the call.

    The look at the run (when one is due) waits for the call's last
    chunk, as it would for the call in one piece.
    """
    run = state.config.run
    size = len(model)
    questions, question_factors = _id_column(question)
    trials, trial_factors = _id_column(trial)
    category_array = categories.astype(np.int64)
    batch = TrialBatch(
        run,
        model=list(map(str, model)),
        question=questions,
        trial=trials,
        category=category_array.tolist(),
        prior=priors.tolist(),
        tokens=[None] * size,
        seconds=[None] * size,
        ts=[None] * size,
    )
    batch.preset(
        category_array,
        {
            name: factors
            for name, factors in (
                ("question", question_factors),
                ("trial", trial_factors),
            )
            if factors is not None
        },
    )
    bad = state.column_problems(batch)
    rejections = [
        Rejection(
            reason=reason,
            kind=kind,
            source="columns",
            position=offset + index,
            raw=_row_text(batch, index),
            run=run,
        )
        for index, (kind, reason) in bad
    ]
    letters = [dead_letter(rejection, run, now) for rejection in rejections]
    if bad:
        batch = batch.without({index for index, _ in bad})
    return commit([batch], letters, rejections, None, now, look=is_last)


def _id_column(
    values: Sequence[str | int] | NDArray[np.integer],
) -> tuple[list[str], Factors | None]:
    """Ids as text, and their factors when NumPy can find them cheaply."""
    if isinstance(values, np.ndarray) and np.issubdtype(values.dtype, np.integer):
        distinct, codes = np.unique(values.reshape(-1), return_inverse=True)
        texts = [str(value) for value in distinct.tolist()]
        column: list[str] = np.array(texts, dtype=object)[codes].tolist()
        return column, Factors(texts, codes.astype(np.int64))
    return list(map(str, values)), None


def _row_text(batch: TrialBatch, index: int) -> str:
    return json.dumps(
        {
            "run": batch.run,
            "model": batch.model[index],
            "question": batch.question[index],
            "trial": batch.trial[index],
            "category": batch.category[index],
            "prior": batch.prior[index],
        }
    )


def dead_letter(rejection: Rejection, run: str | None, now: float) -> DeadLetter:
    return DeadLetter(
        source=rejection.source,
        reason=rejection.reason,
        raw=rejection.raw,
        run=run,
        position=rejection.position,
        received_s=now,
    )
