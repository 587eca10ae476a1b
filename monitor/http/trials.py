"""``GET /runs/{run}/questions/{question}/trials``: from a question to its trials.

Per model, the trials of one question as the store keeps them (see
:mod:`monitor.stores.question_trials`): trial id, prior or observed,
category with its label and weight, cost and time where kept, and the
harness's own reference where the trial id carries one (see
:func:`harness_reference`): "Inspect eval <id>, sample <q>, epoch <n>", or
the lm-eval samples file, doc_id and repeat. At most ``limit`` trials per
model are listed (in time order where times are kept, else by trial id),
with each model's total.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Final

from fastapi import FastAPI, HTTPException, Query, Request
from pydantic import BaseModel

from monitor.engine.monitor import Monitor
from monitor.schema import RunConfig
from monitor.service.service import Service
from monitor.stores.question_trials import (
    NOT_KEPT,
    QuestionTrial,
    read_question_trials,
)

MAX_TRIALS_SHOWN: Final = 1000
# Inspect's eval ids are 22 base-57 characters (shortuuid); the hook's
# attempt ids append ":<epoch - 1>" (adapters.harness.inspect_ai.attempt_id).
_INSPECT_ATTEMPT: Final = re.compile(r"([A-Za-z0-9]{22}):([0-9]{1,9})")
# lm-eval's samples files are named after the run's isoformat() with ":" as
# "-"; ingest --format lm-eval makes trial ids "<that date>:<repeat>".
_LM_EVAL_ATTEMPT: Final = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}(?:\.[0-9]+)?):([0-9]{1,9})"
)
_NUMBER: Final = re.compile(r"[0-9]{1,18}")


class TrialOut(BaseModel):
    """One trial: ``ref`` names it in the harness's own terms, where known."""

    trial: str
    prior: bool
    category: int
    label: str | None
    weight: float | None
    tokens: int | None
    seconds: float | None
    ts: float | None
    ref: str | None


class ModelTrialsOut(BaseModel):
    """A model's trials of the question: ``total`` of them, ``trials`` listed."""

    model: str
    total: int
    mean: float | None
    trials: list[TrialOut]


class QuestionTrialsOut(BaseModel):
    """The question's trials per model; ``kept``: what the store keeps of each."""

    run: str
    question: str
    kept: str
    models: list[ModelTrialsOut]


def harness_reference(run: str, question: str, trial: str) -> str | None:
    """The harness's own name of a trial, where its id has a harness's shape.

    Inspect (the hook, ``ingest --format inspect``): ``<eval id>:<epoch - 1>``
    with the sample id as the question. lm-eval (``ingest --format
    lm-eval``): ``<samples file date>:<repeat>`` with the document id as the
    question (``<task>:<doc_id>`` when the run is not named after the task,
    whose name it then has).

    Examples:
        >>> harness_reference("run", "q7", "Xk3fPqLm9RtW2vBn8cDe4h:1")
        'Inspect eval Xk3fPqLm9RtW2vBn8cDe4h, sample q7, epoch 2'
        >>> harness_reference("mine", "gsm8k:12", "2024-05-01T12-00-00.123456:0")
        'lm-eval samples_gsm8k_2024-05-01T12-00-00.123456.jsonl, doc_id 12, repeat 0'
        >>> harness_reference("run", "q7", "3") is None
        True
    """
    found = _INSPECT_ATTEMPT.fullmatch(trial)
    if found is not None:
        eval_id, epoch = found.group(1), int(found.group(2)) + 1
        return f"Inspect eval {eval_id}, sample {question}, epoch {epoch}"
    found = _LM_EVAL_ATTEMPT.fullmatch(trial)
    if found is not None:
        date, repeat = found.group(1), found.group(2)
        task, _, doc = question.rpartition(":")
        return (
            f"lm-eval samples_{task or run}_{date}.jsonl, doc_id {doc}, repeat {repeat}"
        )
    return None


def question_trials(
    monitor: Monitor, run: str, question: str, limit: int
) -> QuestionTrialsOut:
    """The view the route serves (on the engine thread).

    Raises:
        UnknownRunError: for an unknown run (a 404).
        HTTPException: 404 when the run has no trial of the question.
    """
    config = monitor.config(run)
    found = read_question_trials(monitor.store, run, question)
    if not found.trials:
        why = f": {NOT_KEPT}" if found.kept == NOT_KEPT else ""
        raise HTTPException(
            404, f"run {run!r} has no trials of question {question!r}{why}"
        )
    by_model: dict[str, list[QuestionTrial]] = {}
    for trial in found.trials:
        by_model.setdefault(trial.model, []).append(trial)
    models = []
    for model in sorted(by_model):
        trials = sorted(by_model[model], key=_order)
        observed = [_weight(config, t.category) for t in trials if not t.prior]
        weights = [w for w in observed if w is not None]
        models.append(
            ModelTrialsOut(
                model=model,
                total=len(trials),
                mean=sum(weights) / len(weights) if weights else None,
                trials=[_out(config, question, t) for t in trials[:limit]],
            )
        )
    return QuestionTrialsOut(run=run, question=question, kept=found.kept, models=models)


def _order(trial: QuestionTrial) -> tuple[bool, float, int, str]:
    """Time order where kept, then trial ids (numbers by value)."""
    number = int(trial.trial) if _NUMBER.fullmatch(trial.trial) else -1
    return (trial.ts is None, trial.ts or 0.0, number, trial.trial)


def _weight(config: RunConfig, category: int) -> float | None:
    weights = config.weights
    return weights[category] if 0 <= category < len(weights) else None


def _out(config: RunConfig, question: str, trial: QuestionTrial) -> TrialOut:
    labels = config.labels
    label = labels[trial.category] if labels and trial.category < len(labels) else None
    return TrialOut(
        trial=trial.trial,
        prior=trial.prior,
        category=trial.category,
        label=label,
        weight=_weight(config, trial.category),
        tokens=trial.tokens,
        seconds=trial.seconds,
        ts=trial.ts,
        ref=harness_reference(config.run, question, trial.trial),
    )


async def trials_of_question(
    run: str,
    question: str,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_TRIALS_SHOWN)] = 200,
) -> QuestionTrialsOut:
    """Per model, the trials of one question (at most ``limit`` per model)."""
    service = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    # A heavy call: a state file's or Redis's read passes over the run's
    # trials, so queued light calls (statuses, small ingests) go first.
    return await service.call(
        functools.partial(question_trials, service.monitor, run, question, limit),
        heavy=True,
    )


def add_trials_routes(app: FastAPI) -> None:
    """Register the route on ``app`` itself (every route listing shows it)."""
    app.get("/runs/{run}/questions/{question:path}/trials")(trials_of_question)
