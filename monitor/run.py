"""One run's live state: its config, a count table per model, its questions.

:class:`RunState` checks trials against the run's declaration (models,
questions, categories), applies the store's classification to its count
tables, and produces the standings the decision module reads. Every model's
table shares the run's question set, so an open run's ``M`` (questions seen)
is the same for all models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.decisions import Standing
from monitor.ledger import NEW
from monitor.schema import RunConfig, TrialEvent
from monitor.store import ModelCounts, Trial
from scorio_core import CountTable


@dataclass(slots=True)
class ModelCost:
    """Learned cost per trial: totals over trials that reported a cost."""

    trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


class RunState:
    """Count tables and declarations of one run."""

    def __init__(self, config: RunConfig, declared: bool = True) -> None:
        self.config = config
        self.declared = declared
        self.tables: dict[str, CountTable] = {}
        self.costs: dict[str, ModelCost] = {}
        self.questions: list[str] = list(config.questions or [])
        self._question_set = set(self.questions)
        self._allowed_models = None if config.models is None else set(config.models)
        self._category_count = len(config.weights)
        for model in config.models or []:
            self.table(model)

    @property
    def question_count(self) -> int:
        """``M``: declared, or the questions seen so far (open run)."""
        declared = self.config.declared_question_count
        return declared if declared is not None else max(len(self.questions), 1)

    @property
    def is_open(self) -> bool:
        return self.config.declared_question_count is None

    def table(self, model: str) -> CountTable:
        """The model's count table, created on first sight."""
        table = self.tables.get(model)
        if table is None:
            table = CountTable(self.config.weights, self.config.declared_question_count)
            table.declare(self.questions)
            self.tables[model] = table
        return table

    def rejection(self, event: TrialEvent, new_questions: set[str]) -> str | None:
        """Why this run cannot count the event, or None when it can.

        ``new_questions`` collects distinct questions accepted earlier in the
        same batch, so a batch cannot overrun ``question_count``.
        """
        if self._allowed_models is not None and event.model not in self._allowed_models:
            return f"model {event.model!r} is not declared for run {self.config.run!r}"
        if event.category is None and self._category_count != 2:
            return (
                f"correct is only for binary runs; run {self.config.run!r} has "
                f"{self._category_count} categories, send category"
            )
        if event.outcome >= self._category_count:
            return (
                f"category {event.outcome} is outside 0..{self._category_count - 1} "
                f"of run {self.config.run!r}"
            )
        question = event.question
        if question in self._question_set or question in new_questions:
            return None
        if self.config.questions is not None:
            return f"question {question!r} is not declared for run {self.config.run!r}"
        limit = self.config.question_count
        if limit is not None and len(self.questions) + len(new_questions) >= limit:
            distinct = len(self.questions) + len(new_questions) + 1
            return (
                f"question {question!r} would be distinct question {distinct} of "
                f"question_count={limit}"
            )
        new_questions.add(question)
        return None

    def apply(self, trial: Trial, previous: int) -> None:
        """Move the counts as the store classified the trial."""
        if previous == trial.category:
            return
        self.add_question(trial.question)
        table = self.table(trial.model)
        if previous != NEW:
            table.update(trial.question, previous, -1, prior=trial.prior)
        table.update(trial.question, trial.category, prior=trial.prior)
        if previous == NEW and (trial.tokens is not None or trial.seconds is not None):
            cost = self.costs.setdefault(trial.model, ModelCost())
            cost.trials += 1
            cost.tokens += trial.tokens or 0
            cost.seconds += trial.seconds or 0.0

    def add_question(self, question: str) -> None:
        if question in self._question_set:
            return
        self._question_set.add(question)
        self.questions.append(question)
        for table in self.tables.values():
            table.declare((question,))

    def restore(self, counts: dict[str, ModelCounts]) -> None:
        """Rebuild every table from stored counts (restart, or shared store)."""
        for model_counts in counts.values():
            for question in model_counts.questions:
                if question not in self._question_set:
                    self._question_set.add(question)
                    self.questions.append(question)
        self.tables = {}
        self.costs = {}
        for model, model_counts in sorted(counts.items()):
            width = self._category_count
            observed = _matrix(model_counts.observed, width)
            prior = _matrix(model_counts.prior, width)
            table = CountTable.from_state(
                self.config.weights,
                model_counts.questions,
                observed,
                prior,
                self.config.declared_question_count,
            )
            table.declare(self.questions)
            self.tables[model] = table
            if model_counts.costed_trials:
                self.costs[model] = ModelCost(
                    model_counts.costed_trials,
                    model_counts.tokens,
                    model_counts.seconds,
                )
        for model in self.config.models or []:
            self.table(model)

    def standings(self, confidence: float) -> list[Standing]:
        """Each model's posterior and sampling, for :func:`decide`."""
        result = []
        for model, table in self.tables.items():
            low, high = table.interval(confidence, table.score_range)
            result.append(
                Standing(
                    model=model,
                    mu=table.mu,
                    sigma=table.sigma,
                    lo=low,
                    hi=high,
                    trials=table.trial_count,
                    question_count=table.question_count,
                    least_sampled=self.least_sampled(model),
                )
            )
        return result

    def least_sampled(self, model: str) -> int:
        """Fewest observed trials on any of the run's ``M`` questions."""
        table = self.tables[model]
        if table.question_count > len(table.questions):
            return 0
        trials = table.question_trials
        return int(trials.min()) if trials.size else 0

    def question_trials(self, model: str) -> dict[str, int]:
        """Observed trials per known question (zero for unseen ones)."""
        table = self.table(model)
        counts = dict(zip(table.questions, table.question_trials.tolist(), strict=True))
        return {question: int(counts.get(question, 0)) for question in self.questions}


def _matrix(rows: list[list[int]], width: int) -> NDArray[np.int64]:
    if not rows:
        return np.zeros((0, width), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(-1, width)
