"""One run's live state: its config, a count table per model, its questions.

:class:`RunState` applies the store's classification to its count tables and
produces the standings the decision module reads; whether it takes a trial
at all is :mod:`monitor.engine.admission`'s to say (asked through the run).
Every model's table shares the run's question set, so an open run's ``M``
(questions seen) is the same for all models.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

import numpy as np
from numpy.typing import NDArray

from monitor.decisions.decide import Standing, build_rule
from monitor.engine.admission import Admission
from monitor.engine.admission import Refusal as Refusal  # where ingestion finds it
from monitor.inputs.factors import run_starts
from monitor.schema import RunConfig
from monitor.stores.batches import Previous, TrialBatch
from monitor.stores.ledger import NEW
from monitor.stores.local import VECTOR_THRESHOLD
from monitor.stores.records import CountChanges, ModelCounts
from scorio_core import CountStorage, CountTable
from scorio_core.posterior import clipped_interval, z_value
from scorio_core.question_index import QuestionIndex
from scorio_core.stopping import StoppingRule

# How far (either way) a model's cost per trial may be from the models'
# geometric mean when it sets trial shares: a million times costlier still
# gets a thousandth of the trials, and a reported 1e308 s cannot push a
# share to 0.
COST_RATIO_LIMIT: Final = 1e6


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
        self._rules: dict[int, StoppingRule] = {}
        self._z = z_value(config.confidence)
        self.tables: dict[str, CountTable] = {}
        self.costs: dict[str, ModelCost] = {}
        # The run's questions, numbered once for all its models' tables.
        self._index = QuestionIndex(config.questions or [])
        self._question_rows = self._index.rows
        # The models' count arrays, stacked: a batch of many models updates
        # them together (CountStorage.add_counts).
        self._storage = self._new_storage(len(config.models or []))
        self._category_count = len(config.weights)
        # Per model, the duplicates and corrections of observed trials per
        # question row: reports that added no trial, yet ran an attempt a
        # plan handed out (they settle reservations, see reports_array).
        self._repeats: dict[str, NDArray[np.int64]] = {}
        self._admission = Admission(config, self._index)
        # What the run takes (monitor.engine.admission), asked of the run:
        # bound methods rather than wrappers, as refusal runs once per trial.
        self.classified = self._admission.classified
        self.rejection = self._admission.rejection
        self.refusal = self._admission.refusal
        self.takes = self._admission.takes
        self.column_problems = self._admission.column_problems
        for model in config.models or []:
            self.table(model)

    def rule_for(self, boundaries: int) -> StoppingRule:
        """The run's stopping rule with its error shared ``boundaries`` ways."""
        rule = self._rules.get(boundaries)
        if rule is None:
            rule = self._rules[boundaries] = build_rule(self.config, boundaries)
        return rule

    @property
    def questions(self) -> list[str]:
        """Questions declared or seen, in first-seen order (read only)."""
        return cast("list[str]", self._index.questions)

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
            table = CountTable(
                self.config.weights,
                self.config.declared_question_count,
                storage=self._storage,
            )
            self.tables[model] = table
        return table

    def _new_storage(self, models: int) -> CountStorage:
        """Storage for the run's tables, with room for ``models`` of them."""
        return CountStorage(
            self.config.weights,
            self.config.declared_question_count,
            index=self._index,
            layers=models,
        )

    def apply(self, batch: TrialBatch, previous: Previous) -> None:
        """Move the counts as the store classified each trial of the batch."""
        if len(previous) == 1:
            self._apply_one(batch, previous[0])
            return
        if len(batch) >= VECTOR_THRESHOLD:
            self._apply_vectorized(batch, previous)
            return
        changes: dict[tuple[str, bool], tuple[list[str], list[int], list[int]]] = {}
        for index, before in enumerate(previous):
            category = batch.category[index]
            question = batch.question[index]
            if before == category:
                if not batch.prior[index]:
                    self._add_repeat(batch.model[index], question)
                continue
            if question not in self._question_rows:
                self.add_question(question)
            if before != NEW and not batch.prior[index]:
                self._add_repeat(batch.model[index], question)
            key = (batch.model[index], batch.prior[index])
            questions, categories, deltas = changes.setdefault(key, ([], [], []))
            questions.append(question)
            categories.append(category)
            deltas.append(1)
            if before == NEW:
                self._add_cost(
                    batch.model[index], batch.tokens[index], batch.seconds[index]
                )
            else:
                questions.append(question)
                categories.append(before)
                deltas.append(-1)
        for (model, prior), (questions, categories, deltas) in changes.items():
            table = self.table(model)
            if len(questions) <= 2:
                # Deltas in order: a correction never drives a count below 0.
                for question, category, delta in zip(
                    questions, categories, deltas, strict=True
                ):
                    table.update(question, category, delta, prior=prior)
            else:
                table.update_many(questions, categories, deltas, prior=prior)

    def _apply_one(self, batch: TrialBatch, before: int) -> None:
        self.apply_trial(
            batch.model[0],
            batch.question[0],
            batch.category[0],
            batch.prior[0],
            before,
            batch.tokens[0],
            batch.seconds[0],
        )

    def apply_trial(
        self,
        model: str,
        question: str,
        category: int,
        prior: bool,
        before: int,
        tokens: int | None = None,
        seconds: float | None = None,
    ) -> None:
        """:meth:`apply` of one trial the store classified as ``before``."""
        if before == category:
            if not prior:
                self._add_repeat(model, question)
            return
        if question not in self._question_rows:
            self.add_question(question)
        table = self.tables.get(model) or self.table(model)
        table.update(question, category, 1, prior=prior)
        if before != NEW:
            table.update(question, before, -1, prior=prior)
            if not prior:
                self._add_repeat(model, question)
        elif tokens is not None or seconds is not None:
            self._add_cost(model, tokens, seconds)

    def _apply_vectorized(self, batch: TrialBatch, previous: Previous) -> None:
        before = np.asarray(previous)
        categories = batch.categories()
        moved = np.flatnonzero(before != categories)
        if not moved.size:
            self._add_repeats(batch, before)
            return
        questions = batch.factors("question")
        # The tables share the run's question rows: number them once.
        row_of = self._admission.rows_looked_up(questions.values)
        if row_of is None:  # else takes found these (the same list)
            row_of = np.fromiter(
                map(self._question_rows.get, questions.values, itertools.repeat(-1)),
                np.int64,
                len(questions.values),
            )
        for index in np.flatnonzero(row_of < 0).tolist():
            self.add_question(questions.values[index])
            row_of[index] = self._question_rows[questions.values[index]]
        self._add_repeats(batch, before)
        models = batch.factors("model")
        group_of = models.codes * 2
        if batch.prior.count(False) != len(batch):
            group_of = group_of + np.fromiter(batch.prior, np.int64, len(batch))
        corrected = moved[before[moved] != NEW]
        # +1 for each new category, -1 for each corrected one, summed per
        # (model, prior, row, category) for every table in one pass.
        width = self._category_count
        height = len(self._question_rows)
        entries = np.concatenate([moved, corrected]) if corrected.size else moved
        row_keys = group_of[entries] * height + row_of[questions.codes[entries]]
        # One block row per distinct (model, prior, row), in that order: each
        # group's rows are a contiguous slice.
        distinct, inverse = np.unique(row_keys, return_inverse=True)
        cells = inverse * width + (
            np.concatenate([categories[moved], before[corrected]])
            if corrected.size
            else categories[moved]
        )
        if corrected.size:
            signs = np.concatenate([np.ones(moved.size), -np.ones(corrected.size)])
            sums = np.bincount(cells, signs, distinct.size * width).astype(np.int64)
        else:
            sums = np.bincount(cells, minlength=distinct.size * width)
        block = sums.reshape(distinct.size, width)
        groups = distinct // height
        self._add_block(models.values, groups, distinct % height, block)
        size = len(batch)
        if batch.tokens.count(None) < size or batch.seconds.count(None) < size:
            for index in np.flatnonzero(before == NEW).tolist():
                self._add_cost(
                    batch.model[index], batch.tokens[index], batch.seconds[index]
                )

    def _add_block(
        self,
        models: Sequence[str],
        groups: NDArray[np.int64],
        rows: NDArray[np.int64],
        block: NDArray[np.int64],
    ) -> None:
        """Add count changes to the tables together: a block row per
        (group, row), in group order; group = model position * 2 + prior."""
        prior = (groups & 1).astype(bool)
        if not prior.any():  # the common case: observed counts only
            self._add_counts(models, groups, rows, block, prior=False)
            return
        for namespace in (False, True):
            keep = prior == namespace
            self._add_counts(
                models, groups[keep], rows[keep], block[keep], prior=namespace
            )

    def _add_counts(
        self,
        models: Sequence[str],
        groups: NDArray[np.int64],
        rows: NDArray[np.int64],
        block: NDArray[np.int64],
        prior: bool,
    ) -> None:
        """:meth:`_add_block` of one namespace (observed or prior counts)."""
        if not groups.size:
            return
        starts = run_starts(groups)
        tables = [self.table(models[group // 2]) for group in groups[starts].tolist()]
        bounds = [*starts.tolist(), groups.size]
        sizes = [last - first for first, last in itertools.pairwise(bounds)]
        self._storage.add_counts(tables, sizes, rows, block, prior=prior)

    def _add_repeats(self, batch: TrialBatch, before: NDArray[np.int64]) -> None:
        """:meth:`_add_repeat` for each observed trial of the batch seen before."""
        repeated = before != NEW
        if not repeated.any():
            return
        if batch.prior.count(False) != len(batch):
            repeated &= ~np.fromiter(batch.prior, bool, len(batch))
        for index in np.flatnonzero(repeated).tolist():
            self._add_repeat(batch.model[index], batch.question[index])

    def _add_repeat(self, model: str, question: str) -> None:
        row = self._question_rows.get(question)
        if row is None:
            # Another worker's trial on a question these tables never saw:
            # no plan of this monitor named it.
            return
        repeats = self._repeats.get(model)
        if repeats is None or repeats.size <= row:
            grown = np.zeros(max(row + 1, len(self._question_rows)), dtype=np.int64)
            if repeats is not None:
                grown[: repeats.size] = repeats
            self._repeats[model] = repeats = grown
        repeats[row] += 1

    def _add_cost(self, model: str, tokens: int | None, seconds: float | None) -> None:
        if tokens is None and seconds is None:
            return
        cost = self.costs.setdefault(model, ModelCost())
        cost.trials += 1
        cost.tokens += tokens or 0
        cost.seconds += seconds or 0.0

    def add_question(self, question: str) -> None:
        # Declared in every table at once: they share the index.
        self._index.add(question)

    def restore(self, counts: dict[str, ModelCounts]) -> None:
        """Rebuild every table from stored counts (restart, or shared store)."""
        for model_counts in counts.values():
            for question in model_counts.questions:
                self._index.add(question)
        self.tables = {}
        self.costs = {}
        # A new storage: the old tables' layers are no longer the run's.
        self._storage = self._new_storage(
            len(set(counts) | set(self.config.models or []))
        )
        for model, model_counts in sorted(counts.items()):
            width = self._category_count
            observed = _matrix(model_counts.observed, width)
            prior = _matrix(model_counts.prior, width)
            self.tables[model] = CountTable.from_state(
                self.config.weights,
                model_counts.questions,
                observed,
                prior,
                self.config.declared_question_count,
                storage=self._storage,
            )
            if model_counts.costed_trials:
                self.costs[model] = ModelCost(
                    model_counts.costed_trials,
                    model_counts.tokens,
                    model_counts.seconds,
                )
        for model in self.config.models or []:
            self.table(model)

    def add_changes(self, changes: CountChanges) -> None:
        """Add other writers' changes (a shared store) to the tables.

        Summed per (model, prior, question row, category) with NumPy, then
        added to all tables together through the run's count storage, as
        :meth:`apply` does with its own trials.

        Raises:
            ValueError: when a count would go below 0 or a category is out
                of range (the tables then missed a change; the caller
                restores them whole).
        """
        for model, (trials, tokens, seconds) in changes.costs.items():
            cost = self.costs.setdefault(model, ModelCost())
            cost.trials += trials
            cost.tokens += tokens
            cost.seconds += seconds
        if not changes.delta.size:
            return
        width = self._category_count
        if int(changes.category.min()) < 0 or int(changes.category.max()) >= width:
            raise ValueError(f"a changed category is outside 0..{width - 1}")
        # The tables share the run's question rows: number each question once.
        question_rows = np.fromiter(
            map(self._question_rows.get, changes.questions, itertools.repeat(-1)),
            np.int64,
            len(changes.questions),
        )
        for index in np.flatnonzero(question_rows < 0).tolist():
            question = changes.questions[index]
            self.add_question(question)
            question_rows[index] = self._question_rows[question]
        rows = question_rows[changes.question]
        height = len(self._question_rows)
        groups = changes.model * 2 + changes.prior
        cells, inverse = np.unique(
            (groups * height + rows) * width + changes.category, return_inverse=True
        )
        sums = np.zeros(cells.size, dtype=np.int64)
        np.add.at(sums, inverse, changes.delta)
        # Cells are sorted: each (model, prior) group's rows are contiguous.
        row_keys = cells // width
        is_first = np.diff(row_keys, prepend=-1) != 0
        block = np.zeros((int(is_first.sum()), width), dtype=np.int64)
        block[np.cumsum(is_first) - 1, cells % width] = sums
        distinct = row_keys[is_first]
        self._add_block(changes.models, distinct // height, distinct % height, block)

    def standings(self, confidence: float) -> list[Standing]:
        """Each model's posterior and sampling, for :func:`decide`."""
        result = []
        z = self._z if confidence == self.config.confidence else z_value(confidence)
        for model, table in self.tables.items():
            if not table.is_synced:
                # Exact sums make statuses independent of arrival order.
                table.resync()
            mu, sigma = table.mu, table.sigma
            low, high = clipped_interval(mu, z * sigma, table.score_range)
            result.append(
                Standing(
                    model=model,
                    mu=mu,
                    sigma=sigma,
                    lo=low,
                    hi=high,
                    trials=table.trial_count,
                    question_count=table.question_count,
                    least_sampled=self.least_sampled(model),
                    unit_variance=table.unit_variance,
                )
            )
        return result

    def cost_shares(self, models: list[str]) -> dict[str, float] | None:
        """Relative trial shares ``1 / sqrt(cost)`` when costs were reported.

        For two models resolving a pair, ``n_a / n_b = sqrt(c_b / c_a)``
        reaches a given precision at least cost (with equal per-trial
        variances). Seconds and tokens are never mixed (seconds win when
        any model has them). Costs are taken relative to the geometric
        mean of the models' finite costs and clamped to within
        ``COST_RATIO_LIMIT`` of it either way, so every share is a positive
        finite number whatever was reported (a cost that overflowed to
        infinity counts as the costliest allowed); models without a
        reported cost count at the mean.
        """
        seconds = {
            m: c.seconds / c.trials
            for m, c in self.costs.items()
            if c.trials and c.seconds > 0
        }
        tokens = {
            m: c.tokens / c.trials
            for m, c in self.costs.items()
            if c.trials and c.tokens > 0
        }
        known = seconds or tokens
        finite = [cost for cost in known.values() if math.isfinite(cost) and cost > 0]
        if not finite:
            return None
        reference = math.exp(math.fsum(map(math.log, finite)) / len(finite))
        shares = {}
        for model in models:
            cost = known.get(model)
            ratio = 1.0 if cost is None else cost / reference
            if not ratio <= COST_RATIO_LIMIT:  # also inf and nan
                ratio = COST_RATIO_LIMIT
            ratio = max(ratio, 1.0 / COST_RATIO_LIMIT)
            shares[model] = 1.0 / math.sqrt(ratio)
        return shares

    def least_sampled(self, model: str) -> int:
        """Fewest observed trials on any of the run's ``M`` questions."""
        return self.tables[model].least_question_trials

    def question_trials(self, model: str) -> dict[str, int]:
        """Observed trials per known question (zero for unseen ones)."""
        return dict(
            zip(
                self.questions,
                self.table(model).trials_for(self.questions),
                strict=True,
            )
        )

    def trials_array(self, model: str) -> NDArray[np.int64]:
        """:meth:`question_trials` as an array in ``questions`` order."""
        table = self.tables.get(model)
        if table is None:
            return np.zeros(len(self.questions), dtype=np.int64)
        return table.trials_array(self.questions)

    def reports_array(self, model: str) -> NDArray[np.int64]:
        """Observed trials reported per question, duplicates and corrections
        included (:meth:`trials_array` counts each trial once).

        A report that repeats a trial id still ran an attempt a plan handed
        out, so reservations settle by these (:mod:`monitor.engine.planning`).
        """
        counts = self.trials_array(model)
        repeats = self._repeats.get(model)
        if repeats is None:
            return counts
        size = min(repeats.size, counts.size)
        counts[:size] += repeats[:size]
        return counts

    def question_index(self) -> dict[str, int]:
        """Each known question's position in ``questions`` (which only grows)."""
        return cast("dict[str, int]", self._question_rows)


def _matrix(rows: list[list[int]], width: int) -> NDArray[np.int64]:
    if not rows:
        return np.zeros((0, width), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(-1, width)
