"""Admission: whether a run takes a trial, and why not when it does not.

A run takes a trial whose category is within its weights (``correct`` only
for binary runs), whose model is declared (when models are), and whose
question is declared or, for a run without a questions list, fits within
``question_count``. :class:`Admission` answers for one trial, for a batch's
distinct ids at once, and for columns, each refusal a kind and a sentence;
it also classifies an event's signals with the run's rubric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

import numpy as np
from numpy.typing import NDArray

from monitor.limits import MAX_ID_LENGTH
from monitor.rubrics.schemas import RUBRICS
from monitor.schema import RejectionKind, RunConfig, TrialEvent
from monitor.stores.ledger import NumberedRows
from monitor.stores.memory import TrialBatch
from scorio_core.question_index import QuestionIndex

# Why a trial was refused: a kind (for metrics) and a sentence (for people).
Refusal = tuple[RejectionKind, str]


class Admission:
    """The checks of one run's declaration against incoming trials.

    Args:
        config: The run's declaration.
        index: The run's questions (shared with its count tables; it grows
            as they count new questions).
    """

    def __init__(self, config: RunConfig, index: QuestionIndex) -> None:
        self.config = config
        self._index = index
        self._question_rows = index.rows
        self._question_numbers = NumberedRows(
            cast("dict[str, int]", self._question_rows)
        )
        # The rows :meth:`takes` looked up for a batch's distinct questions
        # (that list, its rows: -1 for a new one), for the run to use when
        # the batch it applies has that same list (rows never change).
        self._looked_up: tuple[Sequence[str], NDArray[np.int64]] | None = None
        self._allowed_models = None if config.models is None else set(config.models)
        self._category_count = len(config.weights)

    def rows_looked_up(self, questions: Sequence[str]) -> NDArray[np.int64] | None:
        """The rows :meth:`takes` last found, if for this same list; once."""
        looked_up, self._looked_up = self._looked_up, None
        if looked_up is not None and looked_up[0] is questions:
            return looked_up[1]
        return None

    def classified(self, event: TrialEvent) -> TrialEvent | Refusal:
        """The event with the category the run's rubric gives its signals.

        Thresholds are fixed for the run's life, so a re-delivered event
        classifies the same and stays a duplicate.
        """
        if self.config.rubric is None:
            return (
                "signals",
                f"run {self.config.run!r} has no rubric to classify signals; "
                "send category, or configure the run with a rubric",
            )
        assert event.signals is not None  # an event has category, correct or signals
        try:
            category = RUBRICS[self.config.rubric].classify(
                event.signals, self.config.thresholds
            )
        except ValueError as error:
            return ("signals", str(error))
        return event.model_copy(update={"category": category})

    def rejection(self, event: TrialEvent, new_questions: set[str]) -> Refusal | None:
        """Why this run cannot count the event, or None when it can.

        ``new_questions`` collects distinct questions accepted earlier in the
        same batch, so a batch cannot overrun ``question_count``.
        """
        return self.refusal(
            event.model,
            event.question,
            event.outcome,
            event.category is None,
            new_questions,
        )

    def refusal(
        self,
        model: str,
        question: str,
        category: int,
        from_correct: bool,
        new_questions: set[str],
    ) -> Refusal | None:
        """:meth:`rejection` of a trial given by its fields (the fast path).

        ``from_correct``: the outcome came as ``correct``, which only binary
        runs take.
        """
        if from_correct and self._category_count != 2:
            return (
                "category",
                f"correct is only for binary runs; run {self.config.run!r} has "
                f"{self._category_count} categories, send category",
            )
        if category >= self._category_count:
            return ("category", self._category_reason(category))
        if question in self._question_rows and (
            self._allowed_models is None or model in self._allowed_models
        ):
            return None
        return self._identity_problem(model, question, new_questions)

    def takes(
        self,
        models: Sequence[str],
        questions: Sequence[str],
        top_category: int,
        from_correct: bool,
        new_questions: set[str],
        numbers: NDArray[np.int64] | None = None,
    ) -> bool:
        """Whether :meth:`refusal` would take every trial of a batch.

        Given the batch's distinct models and questions (questions in
        first-seen order; ``numbers``: their integer ids, if the wire found
        them small integers), its largest category and whether some outcome
        came as ``correct``. On True, ``new_questions`` holds the batch's
        new questions as the trial-by-trial checks would have left it; on
        False it is unchanged, and the batch is checked trial by trial.
        """
        if from_correct and self._category_count != 2:
            return False
        if top_category >= self._category_count:
            return False
        allowed = self._allowed_models
        if allowed is not None and not allowed.issuperset(models):
            return False
        known = self._question_rows
        # One lookup per distinct question, in C (none for integer ids seen
        # before), kept for apply.
        rows = self._question_numbers.of_values(questions, numbers)
        self._looked_up = (questions, rows)
        if not rows.size or int(rows.min()) >= 0:  # the common case
            return True
        unseen = [q for q in questions if q not in known and q not in new_questions]
        if not unseen:
            return True
        added = set(new_questions)
        for question in unseen:
            if self._identity_problem(None, question, added) is not None:
                return False
        new_questions.update(added)
        return True

    def column_problems(self, batch: TrialBatch) -> list[tuple[int, Refusal]]:
        """(index, refusal) for every trial of a columnar batch this run refuses.

        Checks each distinct id once, so a clean bulk batch costs little more
        than building the sets.
        """
        categories = batch.categories()
        bad_categories = np.flatnonzero(
            (categories < 0) | (categories >= self._category_count)
        )
        bad_ids: dict[str, dict[str, Refusal]] = {
            "model": {},
            "question": {},
            "trial": {},
        }
        columns: tuple[Literal["model", "question", "trial"], ...] = (
            "model",
            "question",
            "trial",
        )
        for name in columns:
            for value in batch.factors(name).values:
                refusal = _id_problem(name, value)
                if refusal is not None:
                    bad_ids[name][value] = refusal
        for model in batch.factors("model").values:
            if self._allowed_models is not None and model not in self._allowed_models:
                bad_ids["model"].setdefault(
                    model,
                    (
                        "undeclared",
                        f"model {model!r} is not declared for run {self.config.run!r}",
                    ),
                )
        if not bad_categories.size and not any(bad_ids.values()):
            new_questions: set[str] = set()
            for question in batch.factors("question").values:
                refusal = self._identity_problem(None, question, new_questions)
                if refusal is not None:
                    bad_ids["question"][question] = refusal
            if not bad_ids["question"]:
                return []
        return self._row_problems(batch, set(bad_categories.tolist()), bad_ids)

    def _row_problems(
        self,
        batch: TrialBatch,
        bad_categories: set[int],
        bad_ids: dict[str, dict[str, Refusal]],
    ) -> list[tuple[int, Refusal]]:
        """The slow path for a batch with problems: row by row, in order."""
        problems: list[tuple[int, Refusal]] = []
        new_questions: set[str] = set()
        for index, (model, question, trial) in enumerate(
            zip(batch.model, batch.question, batch.trial, strict=True)
        ):
            refusal: Refusal | None = None
            if index in bad_categories:
                refusal = ("category", self._category_reason(batch.category[index]))
            else:
                refusal = (
                    bad_ids["model"].get(model)
                    or bad_ids["trial"].get(trial)
                    or bad_ids["question"].get(question)
                    or self._identity_problem(None, question, new_questions)
                )
            if refusal is not None:
                problems.append((index, refusal))
        return problems

    def _category_reason(self, category: int) -> str:
        return (
            f"category {category} is outside 0..{self._category_count - 1} "
            f"of run {self.config.run!r}"
        )

    def _identity_problem(
        self, model: str | None, question: str, new_questions: set[str]
    ) -> Refusal | None:
        run = self.config.run
        if (
            model is not None
            and self._allowed_models is not None
            and model not in self._allowed_models
        ):
            return ("undeclared", f"model {model!r} is not declared for run {run!r}")
        if question in self._question_rows or question in new_questions:
            return None
        if self.config.questions is not None:
            return (
                "undeclared",
                f"question {question!r} is not declared for run {run!r}",
            )
        limit = self.config.question_count
        if (
            limit is not None
            and len(self._index.questions) + len(new_questions) >= limit
        ):
            distinct = len(self._index.questions) + len(new_questions) + 1
            return (
                "undeclared",
                f"question {question!r} would be distinct question {distinct} of "
                f"question_count={limit}",
            )
        new_questions.add(question)
        return None


def _id_problem(name: str, value: str) -> Refusal | None:
    """What the event schema would say of a bad id given as a column value."""
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable():
        return (
            "invalid_event",
            f"{name}: ids must be 1..{MAX_ID_LENGTH} printable characters; "
            f"got {value!r}",
        )
    return None
