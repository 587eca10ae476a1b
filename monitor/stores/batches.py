"""What a store applies: validated trials of one run as columns, and a batch.

A store's ``apply`` is the exactly-once step: it classifies every trial of
a :class:`Batch` against what it holds (new, duplicate, correction),
persists the batch together with the run totals, dead letters and a source
cursor in one atomic, durable step, and returns each trial's previous
category (:data:`Previous`). The engine updates its count tables from that
answer only, so counts can never disagree with the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.inputs.factors import Factors
from monitor.stores.records import DeadLetter

if TYPE_CHECKING:
    from monitor.inputs.columns import TrialColumns


# Previous categories of a batch's trials, as a store's apply returns them:
# a list, or an array when the batch was classified with NumPy.
Previous = list[int] | NDArray[np.int64]


class TrialBatch:
    """Validated trials of one run, as columns (one entry per trial).

    A batch made from one payload's :class:`~monitor.inputs.columns.TrialColumns`
    keeps them and builds its id and category lists only when they are
    read: the vectorised steps read the factorized ids and the category
    array instead (see :meth:`factors`, :meth:`categories`).
    """

    __slots__ = (
        "_categories",
        "_category",
        "_factors",
        "_model",
        "_pending",
        "_question",
        "_trial",
        "prior",
        "run",
        "seconds",
        "tokens",
        "ts",
    )

    def __init__(
        self,
        run: str,
        model: list[str] | None = None,
        question: list[str] | None = None,
        trial: list[str] | None = None,
        category: list[int] | None = None,
        prior: list[bool] | None = None,
        tokens: list[int | None] | None = None,
        seconds: list[float | None] | None = None,
        ts: list[float | None] | None = None,
    ) -> None:
        self.run = run
        self._model = [] if model is None else model
        self._question = [] if question is None else question
        self._trial = [] if trial is None else trial
        self._category = [] if category is None else category
        self.prior = [] if prior is None else prior
        self.tokens = [] if tokens is None else tokens
        self.seconds = [] if seconds is None else seconds
        self.ts = [] if ts is None else ts
        # Factorized id columns and the category array, computed once per
        # batch for the vectorized steps (validation, ledger, count tables).
        self._factors: dict[str, Factors] = {}
        self._categories: NDArray[np.int64] | None = None
        # Columns taken whole whose id and category lists are not built yet.
        self._pending: TrialColumns | None = None

    def __len__(self) -> int:
        return len(self.prior)

    def __repr__(self) -> str:
        return f"TrialBatch(run={self.run!r}, trials={len(self)})"

    @property
    def model(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._model

    @property
    def question(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._question

    @property
    def trial(self) -> list[str]:
        if self._pending is not None:
            self._unfold()
        return self._trial

    @property
    def category(self) -> list[int]:
        if self._pending is not None:
            self._unfold()
        return self._category

    def factors(self, column: Literal["model", "question", "trial"]) -> Factors:
        """The batch's ``model``, ``question`` or ``trial`` column factorized."""
        found = self._factors.get(column)
        if found is None:
            found = self._factors[column] = Factors.of(getattr(self, column))
        return found

    def preset(
        self,
        categories: NDArray[np.int64],
        factors: Mapping[str, Factors],
    ) -> None:
        """Give the arrays a caller already has (they must match the columns)."""
        self._categories = categories
        self._factors.update(factors)

    def categories(self) -> NDArray[np.int64]:
        """The category column as an array."""
        if self._categories is None:
            self._categories = np.asarray(self.category, dtype=np.int64)
        return self._categories

    def without(self, indices: set[int]) -> TrialBatch:
        """A copy without the trials at ``indices``."""
        keep = [i for i in range(len(self)) if i not in indices]
        model, question, trial = self.model, self.question, self.trial
        category = self.category
        return TrialBatch(
            self.run,
            model=[model[i] for i in keep],
            question=[question[i] for i in keep],
            trial=[trial[i] for i in keep],
            category=[category[i] for i in keep],
            prior=[self.prior[i] for i in keep],
            tokens=[self.tokens[i] for i in keep],
            seconds=[self.seconds[i] for i in keep],
            ts=[self.ts[i] for i in keep],
        )

    def extend(self, columns: TrialColumns) -> None:
        """Append a payload's trials, given as columns (the wire's fast path).

        The batch takes the columns' lists: they are not read again.
        """
        if not self.prior:  # the batch is these columns: take their arrays
            self._pending = columns
            self._factors = dict(columns.factors)
            self._categories = columns.categories
            self.prior = columns.prior
            self.tokens = columns.tokens
            self.seconds = columns.seconds
            self.ts = columns.ts
            return
        if self._pending is not None:
            self._unfold()
        self._factors.clear()
        self._categories = None
        self._model.extend(columns.model)
        self._question.extend(columns.question)
        self._trial.extend(columns.trial)
        self._category.extend(columns.category)
        self.prior.extend(columns.prior)
        self.tokens.extend(columns.tokens)
        self.seconds.extend(columns.seconds)
        self.ts.extend(columns.ts)

    def append(
        self,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool = False,
        tokens: int | None = None,
        seconds: float | None = None,
        ts: float | None = None,
    ) -> None:
        if self._pending is not None:
            self._unfold()
        if self._factors or self._categories is not None:
            self._factors.clear()
            self._categories = None
        self._model.append(model)
        self._question.append(question)
        self._trial.append(trial)
        self._category.append(category)
        self.prior.append(prior)
        self.tokens.append(tokens)
        self.seconds.append(seconds)
        self.ts.append(ts)

    def _unfold(self) -> None:
        """Build the id and category lists of the columns taken whole."""
        columns, self._pending = self._pending, None
        assert columns is not None
        self._model = columns.model
        self._question = columns.question
        self._trial = columns.trial
        self._category = columns.category


@dataclass(frozen=True, slots=True)
class Batch:
    """What one ``Store.apply`` commits atomically."""

    trials: Sequence[TrialBatch] = ()
    dead_letters: Sequence[DeadLetter] = ()
    cursor: tuple[str, str] | None = None


class TrialAsBatch:
    """``Store.apply_trial`` as :meth:`apply` of a batch of one.

    For stores whose commit per call costs far more than building the batch.
    """

    def apply(self, batch: Batch) -> list[Previous]:
        raise NotImplementedError

    def apply_trial(
        self,
        run: str,
        model: str,
        question: str,
        trial: str,
        category: int,
        prior: bool = False,
        tokens: int | None = None,
        seconds: float | None = None,
        ts: float | None = None,
    ) -> int:
        batch = TrialBatch(
            run,
            [model],
            [question],
            [trial],
            [category],
            [prior],
            [tokens],
            [seconds],
            [ts],
        )
        return int(self.apply(Batch((batch,)))[0][0])
