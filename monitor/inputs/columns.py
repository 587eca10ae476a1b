"""Trials as the engine counts them: one :class:`Trial`, or a payload's as columns.

The decoder (:mod:`monitor.inputs.decode`) checks events against the
contract and hands the engine either one :class:`Trial` (a plain event:
ids as text, an outcome, optional cost and time) or, for an array of plain
trials of one run, one :class:`TrialColumns`, which the engine counts with
its vectorised steps. :func:`plain_columns` builds those columns from the
decoded structs, column by column; it says None whenever a row would need
wording (a refusal), and the decoder then reads the payload event by event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Final, NamedTuple

import numpy as np
from numpy.typing import NDArray

from monitor.inputs.ids import (
    finite_float,
    id_column,
    number_column,
    strict_id,
)
from monitor.schema import Rejection
from monitor.stores.ledger import Factors
from monitor.trial_event import Cost, TrialEvent, is_time


class Trial(NamedTuple):
    """A plain trial event found valid, as the engine counts it.

    ``raw`` is the event as given (a mapping, or the struct JSON was decoded
    into), kept to word a refusal.
    """

    run: str
    model: str
    question: str
    trial: str
    category: int
    prior: bool
    tokens: int | None
    seconds: float | None
    ts: float | None
    # True when the outcome came as ``correct`` only (binary runs only).
    from_correct: bool
    raw: Mapping[str, object] | TrialEvent


# What the decoder gives for one event: a plain trial, an event the run's
# rubric classifies (signals), or a rejection.
Parsed = Trial | TrialEvent | Rejection

# Twice as fast as Trial(...), which goes through a Python-level __new__.
new_trial: Callable[[tuple[object, ...]], Trial] = functools.partial(
    tuple.__new__, Trial
)

# The kinds of struct arrays are decoded into (see monitor.inputs.decode):
# fewer fields to decode when one fits.
NUMBERED: Final = "numbered"  # integer question and trial ids, ``correct``
# Integer question and trial ids, ``category`` only (rubric runs).
NUMBERED_CATEGORY: Final = "numbered_category"
CORRECT_ONLY: Final = "correct"  # ``correct`` only (binary outcomes)
BARE: Final = "bare"  # ids and outcome only
EVENT: Final = "event"  # any event (:class:`TrialEvent`)

_RUN = attrgetter("run")
_MODEL = attrgetter("model")
_QUESTION = attrgetter("question")
_TRIAL = attrgetter("trial")
_CATEGORY = attrgetter("category")
_CORRECT = attrgetter("correct")
_PRIOR = attrgetter("prior")
_COST = attrgetter("cost")
_TS = attrgetter("ts")
_SIGNALS = attrgetter("signals")


@dataclass(slots=True, eq=False)
class TrialColumns:
    """Plain trials of one run from one payload, as columns.

    ``reread`` reads the payload again event by event, for the engine to
    word a refusal when it refuses a row (see :meth:`expand`).
    """

    run: str
    prior: list[bool]
    tokens: list[int | None]
    seconds: list[float | None]
    ts: list[float | None]
    # Whether some outcome came as ``correct`` only (binary runs only).
    from_correct: bool
    # Distinct models and questions, questions in first-seen order.
    models: Sequence[str]
    questions: Sequence[str]
    reread: Callable[[], list[Parsed]]
    source: str
    position: int | None
    # Index of the first trial in the payload (a piece of a large one).
    offset: int = 0
    # The id columns factorized, for the engine's vectorised steps (see
    # TrialBatch.preset); empty when not worked out.
    factors: Mapping[str, Factors] = field(default_factory=dict)
    # The category column as an array, if worked out.
    categories: NDArray[np.int64] | None = None
    # The id and category columns as lists, those built; the others are
    # built from ``factors`` and ``categories`` when first read (the
    # engine's vectorised steps read none of them).
    lists: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prior)

    @property
    def model(self) -> list[str]:
        return self._list("model")

    @property
    def question(self) -> list[str]:
        return self._list("question")

    @property
    def trial(self) -> list[str]:
        return self._list("trial")

    @property
    def category(self) -> list[int]:
        return self._list("category")

    def _list(self, name: str) -> list[Any]:
        found = self.lists.get(name)
        if found is None:
            if name == "category":
                assert self.categories is not None
                found = self.categories.tolist()
            else:
                factors = self.factors[name]
                found = np.array(factors.values, dtype=object)[factors.codes].tolist()
            self.lists[name] = found
        return found

    def expand(self) -> list[Parsed]:
        """The payload read event by event: the same trials, one by one."""
        return self.reread()[self.offset : self.offset + len(self)]

    def position_of(self, index: int) -> int | None:
        """Where the trial at ``index`` is located (as the decoder says)."""
        return self.offset + index if self.position is None else self.position

    def pieces(self, size: int) -> list[TrialColumns]:
        """The trials in pieces of at most ``size``, in order."""
        if len(self) <= size:
            return [self]
        return [
            self._piece(start, min(start + size, len(self)))
            for start in range(0, len(self), size)
        ]

    def _piece(self, start: int, stop: int) -> TrialColumns:
        model, question = self.model[start:stop], self.question[start:stop]
        return replace(
            self,
            lists={
                "model": model,
                "question": question,
                "trial": self.trial[start:stop],
                "category": self.category[start:stop],
            },
            prior=self.prior[start:stop],
            tokens=self.tokens[start:stop],
            seconds=self.seconds[start:stop],
            ts=self.ts[start:stop],
            models=list(dict.fromkeys(model)),
            questions=list(dict.fromkeys(question)),
            offset=self.offset + start,
            factors={},
            categories=None,
        )


def plain_columns(
    kind: str,
    events: Sequence[Any],
    named: str | None,
    channel: str | None,
    reread: Callable[[], list[Parsed]],
    source: str,
    position: int | None,
) -> TrialColumns | None:
    """Columns of an array of plain trials of one run, or None.

    ``kind``: which struct ``events`` are (see :data:`NUMBERED` and the
    others); ``named``: the run when the decoder checked every event's,
    else None. None whenever some row would be refused or is no plain
    trial (signals): the decoder then reads the events one by one.
    """
    size = len(events)
    if named is None:
        # Counted, not hashed into a set: msgspec's strings are new objects.
        runs = list(map(_RUN, events))
        if channel is not None:
            if runs.count(channel) + runs.count("") != size:
                return None
            named = channel
        elif runs.count(runs[0]) == size and runs[0]:
            named = runs[0]
        else:
            return None  # several runs, or some event names none
    run = strict_id(named)
    if run is None:
        return None
    model_factors = Factors.of(map(_MODEL, events), size)
    models = model_factors.values
    for value in models:
        if strict_id(value) is None:
            return None
    lists: dict[str, list[Any]] = {}
    factors = {"model": model_factors}
    for name, column in (("question", _QUESTION), ("trial", _TRIAL)):
        found = None
        if kind in (NUMBERED, NUMBERED_CATEGORY):
            # Trial ids only need distinct codes (questions are numbered
            # by the run in first-seen order).
            found = number_column(map(column, events), size, name == "question")
        if found is None:  # not numbered, or a number past int64
            texts = id_column(map(column, events), size)
            if texts is None:
                return None
            if texts[0] is not None:
                lists[name] = texts[0]
            found = texts[1]
        factors[name] = found
    outcomes: NDArray[np.int64] | None
    if kind in (NUMBERED, CORRECT_ONLY):  # a bool ``correct``, no category
        # bools are the bytes 0 and 1: bytes() reads them faster than fromiter.
        outcomes = np.frombuffer(bytes(map(_CORRECT, events)), np.uint8).astype(
            np.int64
        )
        from_correct = True
    elif kind == NUMBERED_CATEGORY:
        outcomes = _array(map(_CATEGORY, events), size)
        if outcomes is None or int(outcomes.min()) < 0:
            return None
        from_correct = False
    else:
        outcome = _outcome_column(events)
        if outcome is None:
            return None
        lists["category"], outcomes, from_correct = outcome
    prior: list[bool] = [False] * size
    tokens: list[int | None] = [None] * size
    seconds: list[float | None] = [None] * size
    ts: list[float | None] = [None] * size
    if kind == EVENT:
        if list(map(_SIGNALS, events)).count(None) != size:
            return None  # the run's rubric classifies these, one by one
        prior = list(map(_PRIOR, events))
        if not _optional_columns(events, tokens, seconds, ts):
            return None
    return TrialColumns(
        run=run,
        prior=prior,
        tokens=tokens,
        seconds=seconds,
        ts=ts,
        from_correct=from_correct,
        models=models,
        questions=factors["question"].values,
        reread=reread,
        source=source,
        position=position,
        factors=factors,
        categories=outcomes,
        lists=lists,
    )


def _outcome_column(
    events: Sequence[Any],
) -> tuple[list[int], NDArray[np.int64] | None, bool] | None:
    """Outcomes from ``category`` and ``correct`` (as a list and an array),
    whether some came as ``correct``; None when a row is refused."""
    size = len(events)
    corrects = list(map(_CORRECT, events))
    categories = list(map(_CATEGORY, events))
    if categories.count(None) == size:
        if None in corrects:
            return None
        counted = np.fromiter(corrects, np.int64, size)
        return counted.tolist(), counted, True
    if corrects.count(None) == size:
        if None in categories or min(categories) < 0:
            return None
        return categories, _array(categories), False
    mixed = _outcomes(categories, corrects)
    if mixed is None:
        return None
    return mixed[0], _array(mixed[0]), mixed[1]


def _optional_columns(
    events: Sequence[TrialEvent],
    tokens: list[int | None],
    seconds: list[float | None],
    ts: list[float | None],
) -> bool:
    """Fill the cost and time columns; False when a row is refused."""
    size = len(events)
    costs = list(map(_COST, events))
    if costs.count(None) != size:
        for index, cost in enumerate(costs):
            if cost is not None:
                spent = _cost(cost)
                if spent is None:
                    return False
                tokens[index], seconds[index] = spent
    stamps = list(map(_TS, events))
    if stamps.count(None) != size:
        for index, stamp in enumerate(stamps):
            if stamp is None:
                continue
            if not is_time(stamp):
                return False
            if type(stamp) is not str:  # a time as text is checked, not kept
                ts[index] = stamp
    return True


def _cost(cost: Cost) -> tuple[int | None, float | None] | None:
    """Tokens and seconds of a cost, or None when it is refused."""
    tokens, seconds = cost.tokens, cost.seconds
    if tokens is not None and tokens < 0:
        return None
    if seconds is not None:
        seconds = finite_float(seconds)
        if seconds is None or seconds < 0.0:
            return None
    return tokens, seconds


def _array(
    category: Iterable[int], size: int | None = None
) -> NDArray[np.int64] | None:
    """The category column as an array; None past int64 (a batch refused).

    ``size``: the column's length, if an iterator."""
    try:
        if size is None:
            category = list(category)
            size = len(category)
        return np.fromiter(category, np.int64, size)
    except OverflowError:
        return None


def _outcomes(
    categories: Sequence[int | None], corrects: Sequence[bool | None]
) -> tuple[list[int], bool] | None:
    """Outcomes of a column mixing ``category`` and ``correct``, or None."""
    outcomes: list[int] = []
    from_correct = False
    for category, correct in zip(categories, corrects, strict=True):
        if category is None:
            if correct is None:
                return None
            outcomes.append(int(correct))
            from_correct = True
        elif category < 0 or (correct is not None and correct != category):
            return None
        else:
            outcomes.append(category)
    return outcomes, from_correct
