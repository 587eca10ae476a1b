"""JSON bytes to trials without a dict per event: the fast path of the wire.

Every wire format (HTTP bodies, MQTT payloads, stream entries, JSON lines)
carries JSON bytes. :func:`parse_wire` decodes them with msgspec into typed
structs, checks them column by column and hands a batch of plain trials to
the engine as one :class:`TrialColumns`, which it counts with its vectorised
steps. It takes a payload only when :func:`monitor.inputs.parsing.parse_payload`
would give plain trials (:class:`~monitor.inputs.parsing.Trial`) for every element,
equal field for field; anything else (a signal, an unknown field, a bad
value, a JSON quirk msgspec reads differently) goes to ``parse_payload``
whole, so acceptance and every rejection reason stay as they were. When the
engine refuses a row of a taken batch, it parses the payload again the slow
way (:meth:`TrialColumns.expand`) to word the refusal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Final, Literal

import msgspec
import numpy as np
from msgspec import UNSET, Struct, UnsetType
from numpy.typing import NDArray

from monitor.inputs.ids import id_column as _id_column
from monitor.inputs.ids import number_column as _number_column
from monitor.inputs.parsing import (
    Parsed,
    Trial,
    finite_float,
    loose_id,
    new_trial,
    parse_payload,
    strict_id,
)
from monitor.limits import MAX_BATCH_ITEMS, MAX_PAYLOAD_BYTES
from monitor.stores.ledger import Factors


class _Cost(Struct, forbid_unknown_fields=True, gc=False):
    tokens: int | None = None
    seconds: int | float | None = None


class _Bare(Struct, forbid_unknown_fields=True, gc=False):
    """A trial event with its ids and outcome only: most arrays hold these."""

    model: str
    question: str | int
    trial: str | int
    run: str | UnsetType = UNSET
    category: int | None = None
    correct: bool | None = None


class _Event(_Bare, forbid_unknown_fields=True, gc=False):
    """A plain trial event as JSON gives it; any other field declines it.

    Types are those :func:`~monitor.inputs.parsing.plain_trial` accepts (``null``
    where it treats null as absent); msgspec refuses a bool for an int and a
    number for a string, as ``plain_trial`` does.
    """

    prior: bool = False
    cost: _Cost | None = None
    ts: int | float | str | None = None
    signals: None = None


_DECODER: Final = msgspec.json.Decoder(_Event | list[_Event])

# The structs arrays are read into, tried in this order: fewer fields to
# decode and no optional columns to read when one fits (a field it lacks
# makes it fail, at that field). ``run`` is added to each (see _decoders).
_NUMBERED: Final = "numbered"  # integer question and trial ids, ``correct``
# Integer question and trial ids, ``category`` only (rubric runs).
_NUMBERED_CATEGORY: Final = "numbered_category"
_CORRECT_ONLY: Final = "correct"  # ``correct`` only (binary outcomes)
_BARE: Final = "bare"  # ids and outcome only
_EVENT: Final = "event"  # any plain trial (:class:`_Event`)
_ARRAY_FIELDS: Final[dict[str, list[tuple[Any, ...]]]] = {
    _NUMBERED: [("model", str), ("question", int), ("trial", int), ("correct", bool)],
    _NUMBERED_CATEGORY: [
        ("model", str),
        ("question", int),
        ("trial", int),
        ("category", int),
    ],
    _CORRECT_ONLY: [
        ("model", str),
        ("question", str | int),
        ("trial", str | int),
        ("correct", bool),
    ],
    _BARE: [
        ("model", str),
        ("question", str | int),
        ("trial", str | int),
        ("category", int | None, None),
        ("correct", bool | None, None),
    ],
}


@functools.lru_cache(maxsize=256)
def _decoders(
    run: str | None, required: bool = False
) -> tuple[tuple[str, msgspec.json.Decoder[list[Any]]], ...]:
    """(kind, decoder) of arrays of each kind of :data:`_ARRAY_FIELDS`.

    ``run`` None: an event's run may be any text or absent. Otherwise it
    must be ``run`` (or absent, unless ``required``): msgspec then checks
    every event's run in C as it decodes, and no column of runs is read.
    """
    named: Any = str if run is None else Literal.__getitem__(run)
    spec: tuple[Any, ...] = (
        ("run", named) if required else ("run", named | UnsetType, UNSET)
    )
    decoders = []
    for kind, fields in _ARRAY_FIELDS.items():
        # Fields with defaults after the others, as a struct needs.
        ordered: list[tuple[Any, ...]] = [field for field in fields if len(field) == 2]
        ordered.append(spec)
        ordered += [field for field in fields if len(field) == 3]
        struct: Any = msgspec.defstruct(
            f"_{kind.capitalize()}Event",
            ordered,
            forbid_unknown_fields=True,
            gc=False,
        )
        decoders.append((kind, msgspec.json.Decoder(list[struct])))
    return tuple(decoders)


# The first run an array names: a guess, which _decoders(guess, True) checks.
_FIRST_RUN: Final = re.compile(rb'"run"\s*:\s*"([^"\\]*)"')


def _named_run(payload: bytes) -> str | None:
    """The first run an array of events names, if it is plain text."""
    named = _FIRST_RUN.search(payload)
    if named is None:
        return None
    try:
        return named.group(1).decode()
    except UnicodeDecodeError:
        return None


_RUN = attrgetter("run")
_MODEL = attrgetter("model")
_QUESTION = attrgetter("question")
_TRIAL = attrgetter("trial")
_CATEGORY = attrgetter("category")
_CORRECT = attrgetter("correct")
_PRIOR = attrgetter("prior")
_COST = attrgetter("cost")
_TS = attrgetter("ts")


@dataclass(slots=True, eq=False)
class TrialColumns:
    """Plain trials of one run from one payload, as columns.

    The payload and how it was read are kept so the engine can parse it
    again the slow way when it refuses a row (see :meth:`expand`).
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
    payload: bytes | str
    source: str
    position: int | None
    channel: str | None
    max_bytes: int
    max_items: int
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
        """The payload parsed the slow way: the same trials, one by one."""
        items = parse_payload(
            self.payload,
            self.source,
            self.position,
            self.max_bytes,
            self.channel,
            self.max_items,
        )
        return items[self.offset : self.offset + len(self)]

    def position_of(self, index: int) -> int | None:
        """Where the trial at ``index`` is located (as parse_payload says)."""
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


Wire = Parsed | TrialColumns


def parse_wire(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    run: str | None = None,
    max_items: int = MAX_BATCH_ITEMS,
) -> list[Wire]:
    """:func:`~monitor.inputs.parsing.parse_payload`, with plain trials as columns.

    A payload of one plain trial gives a :class:`Trial`; an array of two or
    more gives one :class:`TrialColumns`; anything else what
    ``parse_payload`` gives (same arguments, same meaning).
    """
    fast = _fast(payload, source, position, max_bytes, run, max_items)
    if fast is not None:
        return [fast]
    return list(parse_payload(payload, source, position, max_bytes, run, max_items))


def _fast(
    payload: str | bytes,
    source: str,
    position: int | None,
    max_bytes: int,
    channel: str | None,
    max_items: int,
) -> Trial | TrialColumns | None:
    """The payload's plain trials, or None to take the slow path."""
    if type(payload) is not bytes:
        return None
    if len(payload) > max_bytes:
        return None
    if payload[:1] == b"[":
        run = channel if channel is not None else _named_run(payload)
        for kind, decoder in _decoders(run, channel is None and run is not None):
            try:
                bare = decoder.decode(payload)
            except msgspec.DecodeError:
                continue
            if 2 <= len(bare) <= max_items:
                return _columns(
                    kind,
                    bare,
                    run,
                    payload,
                    source,
                    position,
                    channel,
                    max_bytes,
                    max_items,
                )
            break
    try:
        decoded = _DECODER.decode(payload)
    except msgspec.DecodeError:  # includes msgspec.ValidationError
        return None
    if type(decoded) is list:
        if not 1 <= len(decoded) <= max_items:
            return None
        if len(decoded) == 1:
            return _single_trial(decoded[0], channel)
        return _columns(
            _EVENT,
            decoded,
            None,
            payload,
            source,
            position,
            channel,
            max_bytes,
            max_items,
        )
    assert type(decoded) is _Event
    return _single_trial(decoded, channel)


def _single_trial(event: _Event, channel: str | None) -> Trial | None:
    """The :class:`Trial` ``plain_trial`` gives for this event, or None."""
    named = event.run
    if channel is not None:
        if named is UNSET:
            named = channel
        elif named != channel:
            return None
    elif named is UNSET:
        return None
    run = strict_id(named)
    model = strict_id(event.model)
    question = loose_id(event.question)
    trial = loose_id(event.trial)
    if run is None or model is None or question is None or trial is None:
        return None
    category, correct = event.category, event.correct
    if category is None:
        if correct is None:
            return None
        outcome = int(correct)
    else:
        if category < 0 or (correct is not None and correct != category):
            return None
        outcome = category
    tokens = seconds = None
    cost = event.cost
    if cost is not None:
        spent = _cost(cost)
        if spent is None:
            return None
        tokens, seconds = spent
    ts = event.ts
    if ts is not None and type(ts) is not str:
        ts = finite_float(ts)
        if ts is None:
            return None
    else:
        ts = None
    return new_trial(
        (
            run,
            model,
            question,
            trial,
            outcome,
            event.prior,
            tokens,
            seconds,
            ts,
            category is None,
            _Raw(event, run),
        )
    )


class _Raw(Mapping[str, object]):
    """The event as the mapping the engine validates to word a refusal.

    Built only when asked for: most trials are counted, not refused.
    """

    __slots__ = ("_event", "_run", "_values")

    def __init__(self, event: _Event, run: str) -> None:
        self._event = event
        self._run = run
        self._values: dict[str, object] | None = None

    def _mapping(self) -> dict[str, object]:
        if self._values is None:
            event = self._event
            values = {
                field: value
                for field in event.__struct_fields__
                if (value := getattr(event, field)) is not None and value is not UNSET
            }
            values["run"] = self._run
            if event.cost is not None:
                values["cost"] = msgspec.structs.asdict(event.cost)
            self._values = values
        return self._values

    def __getitem__(self, key: str) -> object:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


def _cost(cost: _Cost) -> tuple[int | None, float | None] | None:
    """Tokens and seconds of a cost, or None when ``plain_trial`` refuses it."""
    tokens, seconds = cost.tokens, cost.seconds
    if tokens is not None and tokens < 0:
        return None
    if seconds is not None:
        seconds = finite_float(seconds)
        if seconds is None or seconds < 0.0:
            return None
    return tokens, seconds


def _columns(
    kind: str,
    events: Sequence[Struct],
    named: str | None,
    payload: bytes,
    source: str,
    position: int | None,
    channel: str | None,
    max_bytes: int,
    max_items: int,
) -> TrialColumns | None:
    """Columns of an array of plain trials of one run, or None.

    ``kind``: which struct ``events`` are (a key of :data:`_ARRAY_FIELDS`,
    or ``_EVENT``); ``named``: the run when the decoder checked every
    event's, else None.
    """
    size = len(events)
    if named is None:
        # Counted, not hashed into a set: msgspec's strings are new objects.
        runs = list(map(_RUN, events))
        if channel is not None:
            if runs.count(channel) + runs.count(UNSET) != size:
                return None
            named = channel
        elif runs.count(runs[0]) == size and runs[0] is not UNSET:
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
        if kind in (_NUMBERED, _NUMBERED_CATEGORY):
            # Trial ids only need distinct codes (questions are numbered
            # by the run in first-seen order).
            found = _number_column(map(column, events), size, name == "question")
        if found is None:  # not numbered, or a number past int64
            texts = _id_column(map(column, events), size)
            if texts is None:
                return None
            if texts[0] is not None:
                lists[name] = texts[0]
            found = texts[1]
        factors[name] = found
    outcomes: NDArray[np.int64] | None
    if kind in (_NUMBERED, _CORRECT_ONLY):  # a bool ``correct``, no category
        # bools are the bytes 0 and 1: bytes() reads them faster than fromiter.
        outcomes = np.frombuffer(bytes(map(_CORRECT, events)), np.uint8).astype(
            np.int64
        )
        from_correct = True
    elif kind == _NUMBERED_CATEGORY:
        outcomes = _array(map(_CATEGORY, events), size)
        if outcomes is None or int(outcomes.min()) < 0:
            return None
        from_correct = False
    else:
        outcome = _outcome_column(events)  # type: ignore[arg-type]
        if outcome is None:
            return None
        lists["category"], outcomes, from_correct = outcome
    prior: list[bool] = [False] * size
    tokens: list[int | None] = [None] * size
    seconds: list[float | None] = [None] * size
    ts: list[float | None] = [None] * size
    if kind == _EVENT:
        prior = list(map(_PRIOR, events))
        if not _optional_columns(events, tokens, seconds, ts):  # type: ignore[arg-type]
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
        payload=payload,
        source=source,
        position=position,
        channel=channel,
        max_bytes=max_bytes,
        max_items=max_items,
        factors=factors,
        categories=outcomes,
        lists=lists,
    )


def _outcome_column(
    events: list[_Event] | list[_Bare],
) -> tuple[list[int], NDArray[np.int64] | None, bool] | None:
    """Outcomes from ``category`` and ``correct`` (as a list and an array),
    whether some came as ``correct``; None when ``plain_trial`` refuses one."""
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
    events: list[_Event],
    tokens: list[int | None],
    seconds: list[float | None],
    ts: list[float | None],
) -> bool:
    """Fill the cost and time columns; False when ``plain_trial`` refuses one."""
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
            if stamp is not None and type(stamp) is not str:
                value = finite_float(stamp)
                if value is None:
                    return False
                ts[index] = value
    return True


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
