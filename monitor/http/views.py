"""Views of a run's inputs for the dashboard: questions and rejected inputs.

The per-question view: which questions separate the models, which are saturated.

For each question of a run, each model's mean observed score on it (the
weights of its observed outcomes averaged; prior outcomes left out) and how
far apart the models are. A question every model always gets right (or
always wrong) is *saturated*: it adds trials but cannot tell models apart.
Read from the store's counts, so it is the same for every worker. The
rejected inputs are the store's most recent dead letters of the run.
"""

from __future__ import annotations

from pydantic import BaseModel

from monitor.engine.monitor import Monitor


class QuestionRow(BaseModel):
    """One question across the models that have observed trials on it.

    ``spread`` is the best minus the worst model mean; ``saturated`` is
    ``"top"`` when every observed outcome scored the highest weight,
    ``"bottom"`` for the lowest, else None.
    """

    question: str
    trials: int
    mean: float
    spread: float
    saturated: str | None
    models: dict[str, float]


def question_rows(monitor: Monitor, run: str) -> list[QuestionRow]:
    """Every question with observed trials, the most separating first.

    Raises:
        UnknownRunError: when the run does not exist.
    """
    weights = monitor.config(run).weights
    top, bottom = max(weights), min(weights)
    per_question: dict[str, dict[str, tuple[float, int]]] = {}
    for model, counts in monitor.store.counts(run).items():
        for question, row in zip(counts.questions, counts.observed, strict=False):
            trials = sum(row)
            if trials == 0:
                continue
            score = sum(w * n for w, n in zip(weights, row, strict=False))
            per_question.setdefault(question, {})[model] = (score, trials)
    rows = []
    for question, by_model in per_question.items():
        means = {model: score / trials for model, (score, trials) in by_model.items()}
        trials = sum(trials for _, trials in by_model.values())
        total = sum(score for score, _ in by_model.values())
        saturated = None
        if all(mean == top for mean in means.values()):
            saturated = "top"
        elif all(mean == bottom for mean in means.values()):
            saturated = "bottom"
        rows.append(
            QuestionRow(
                question=question,
                trials=trials,
                mean=total / trials,
                spread=max(means.values()) - min(means.values()),
                saturated=saturated,
                models=means,
            )
        )
    rows.sort(key=lambda row: (-row.spread, row.question))
    return rows


class RejectedRecord(BaseModel):
    """A dead letter of a run as the dashboard lists it."""

    source: str
    position: int | None
    reason: str
    raw: str
    received_s: float


def rejected_inputs(
    monitor: Monitor, run: str, limit: int = 50
) -> list[RejectedRecord]:
    """The run's most recent rejected inputs, newest first (at most ``limit``).

    Raises:
        UnknownRunError: when the run does not exist.
    """
    monitor.config(run)  # an unknown run is an error, not an empty list
    letters = [
        letter
        for letter in monitor.store.dead_letters(_SCANNED_LETTERS)
        if letter.run == run
    ]
    return [
        RejectedRecord(
            source=letter.source.removeprefix("file:"),
            position=letter.position,
            reason=letter.reason,
            raw=letter.raw[:_SHOWN_RAW],
            received_s=letter.received_s,
        )
        for letter in reversed(letters[-limit:])
    ]


# Dead letters of all runs scanned for one run's, and how much of each input.
_SCANNED_LETTERS = 1000
_SHOWN_RAW = 200
