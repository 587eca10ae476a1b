"""The exactly-once counting core shared by the in-memory and SQLite stores.

:class:`LocalCounts` keeps, in this process, a ledger per run (which trial
holds which category), the run totals and the costs learned from new
trials; the stores around it persist what it classified.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.stores.batches import Previous, TrialBatch
from monitor.stores.ledger import NEW, Ledger
from monitor.stores.records import CostTotals, DeadLetter, ModelCounts, RunTotals

# Batches up to this size are classified trial by trial: below it, NumPy's
# per-call overhead costs more than the loop.
VECTOR_THRESHOLD = 32


class LocalCounts:
    """Exactly-once classification kept in this process.

    Shared by the in-memory and SQLite stores: a ledger per run, run totals
    and learned costs. Counts per question are read off the ledger when
    needed (restart, reconfiguration), not kept twice.
    """

    def __init__(self) -> None:
        self.totals: dict[str, RunTotals] = {}
        self.costs: dict[tuple[str, str], CostTotals] = {}
        self._ledgers: dict[str, Ledger] = {}
        self._widths: dict[str, int] = {}

    def configure(self, run: str, category_count: int) -> None:
        """Record the run's ``C+1`` (count rows are that wide)."""
        self._widths[run] = category_count

    def classify(self, batch: TrialBatch) -> Previous:
        """Record every trial of the batch; previous category per trial."""
        ledger = self._ledgers.get(batch.run)
        if ledger is None:
            ledger = self._ledgers[batch.run] = Ledger()
        previous: Previous
        if len(batch) < VECTOR_THRESHOLD:
            previous = [
                ledger.record(model, question, trial, prior, category)
                for model, question, trial, prior, category in zip(
                    batch.model,
                    batch.question,
                    batch.trial,
                    batch.prior,
                    batch.category,
                    strict=True,
                )
            ]
        else:
            previous = self._classify_vectorized(ledger, batch)
        self._account(batch, previous)
        return previous

    def record_trial(
        self,
        run: str,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool,
        tokens: int | None,
        seconds: float | None,
    ) -> int:
        """:meth:`classify` of one trial; its previous category or ``NEW``."""
        ledger = self._ledgers.get(run)
        if ledger is None:
            ledger = self._ledgers[run] = Ledger()
        before = ledger.record(model, question, trial, prior, category)
        totals = self.totals.get(run)
        if totals is None:
            totals = self.totals[run] = RunTotals()
        self._account_one(totals, run, model, category, before, tokens, seconds)
        return before

    def rollback(self, batch: TrialBatch, previous: Previous) -> None:
        """Reverse :meth:`classify` after a failed commit."""
        ledger = self._ledgers[batch.run]
        for index in reversed(range(len(batch))):
            ledger.grid(batch.model[index], batch.prior[index]).restore(
                batch.question[index], batch.trial[index], int(previous[index])
            )
        self._account(batch, previous, sign=-1)

    def count_dead_letters(self, letters: Sequence[DeadLetter], sign: int = 1) -> None:
        for letter in letters:
            if letter.run is not None:
                self.totals.setdefault(letter.run, RunTotals()).rejected += sign

    def recorded(self, run: str) -> int:
        """Distinct trials (observed and prior) the run's exactly-once index holds."""
        ledger = self._ledgers.get(run)
        return 0 if ledger is None else len(ledger)

    def memory_bytes(self, run: str) -> int:
        """About what the run's exactly-once index holds."""
        ledger = self._ledgers.get(run)
        return 0 if ledger is None else ledger.memory_bytes

    def counts(self, run: str) -> dict[str, ModelCounts]:
        """Per model: questions and per-category counts, observed and prior."""
        ledger = self._ledgers.get(run)
        if ledger is None:
            return {}
        width = self._widths.get(run, 2)
        result = {}
        for model in ledger.models():
            observed_questions, observed = ledger.grid(model, False).counts(width)
            prior_questions, prior = ledger.grid(model, True).counts(width)
            questions = list(dict.fromkeys(observed_questions + prior_questions))
            rows = {question: index for index, question in enumerate(questions)}
            observed_rows = np.zeros((len(questions), width), dtype=np.int64)
            prior_rows = np.zeros((len(questions), width), dtype=np.int64)
            observed_rows[[rows[q] for q in observed_questions]] = observed
            prior_rows[[rows[q] for q in prior_questions]] = prior
            cost = self.costs.get((run, model), CostTotals())
            result[model] = ModelCounts(
                questions=questions,
                observed=observed_rows.tolist(),
                prior=prior_rows.tolist(),
                costed_trials=cost.trials,
                tokens=cost.tokens,
                seconds=cost.seconds,
            )
        return result

    def runs(self) -> list[str]:
        return sorted(self._ledgers)

    def trials_of(self, run: str, question: str) -> list[tuple[str, bool, str, int]]:
        """(model, prior, trial id, category) of the run's trials of ``question``."""
        ledger = self._ledgers.get(run)
        if ledger is None:
            return []
        return [
            (model, prior, trial, category)
            for model in ledger.models()
            for prior in (False, True)
            for trial, category in ledger.grid(model, prior).trials_of(question)
        ]

    @staticmethod
    def _classify_vectorized(ledger: Ledger, batch: TrialBatch) -> NDArray[np.int64]:
        categories = batch.categories()
        questions, trials = batch.factors("question"), batch.factors("trial")
        rows, columns = ledger.cells(questions, trials)
        models = batch.factors("model")
        groups = models.codes * 2
        if batch.prior.count(False) != len(batch):
            groups = groups + np.fromiter(batch.prior, np.int64, len(batch))

        def ids(index: int) -> tuple[str, str]:
            return batch.question[index], batch.trial[index]

        return ledger.record_groups(
            models.values, groups, rows, columns, categories, ids
        )

    def _account(self, batch: TrialBatch, previous: Previous, sign: int = 1) -> None:
        totals = self.totals.get(batch.run)
        if totals is None:
            totals = self.totals[batch.run] = RunTotals()
        if len(batch) < VECTOR_THRESHOLD:
            for index, earlier in enumerate(previous):
                self._account_one(
                    totals,
                    batch.run,
                    batch.model[index],
                    batch.category[index],
                    earlier,
                    batch.tokens[index],
                    batch.seconds[index],
                    sign,
                )
            return
        before = np.asarray(previous)
        categories = batch.categories()
        new = before == NEW
        duplicate = before == categories
        totals.trials += sign * int(np.count_nonzero(new))
        totals.duplicates += sign * int(np.count_nonzero(duplicate))
        totals.corrections += sign * int(np.count_nonzero(~new & ~duplicate))
        size = len(batch)
        if batch.tokens.count(None) == size and batch.seconds.count(None) == size:
            return
        for index in np.flatnonzero(new).tolist():
            self._add_cost(
                batch.run,
                batch.model[index],
                batch.tokens[index],
                batch.seconds[index],
                sign,
            )

    def _account_one(
        self,
        totals: RunTotals,
        run: str,
        model: str,
        category: int,
        before: int,
        tokens: int | None,
        seconds: float | None,
        sign: int = 1,
    ) -> None:
        """Count one classified trial (``sign`` -1 takes it back)."""
        if before == category:
            totals.duplicates += sign
        elif before == NEW:
            totals.trials += sign
            self._add_cost(run, model, tokens, seconds, sign)
        else:
            totals.corrections += sign

    def _add_cost(
        self,
        run: str,
        model: str,
        tokens: int | None,
        seconds: float | None,
        sign: int,
    ) -> None:
        if tokens is not None or seconds is not None:
            cost = self.costs.setdefault((run, model), CostTotals())
            cost.trials += sign
            cost.tokens += sign * (tokens or 0)
            cost.seconds += sign * (seconds or 0.0)
