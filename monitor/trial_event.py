"""The trial event: the contract's value type, every room's (see the rules
in :mod:`monitor.inputs.decode`, the one decoder that reads it).

:class:`TrialEvent` and :class:`Cost` are msgspec structs whose field types
and ``Meta`` bounds are the contract's per-field rules; :meth:`TrialEvent.problem`
holds its rules across fields. ``monitor.schema`` re-exports both. Every
refusal is worded here, by checks of our own: :func:`field_problem` says
which per-field rule an event msgspec refused breaks (``category: must be
an integer >= 0; got "1"``), whatever msgspec's version says.
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Final

import msgspec
from msgspec import Meta

from monitor.limits import MAX_ID_LENGTH, MAX_SIGNALS


class Cost(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    """What one trial cost, for cost-aware allocation."""

    tokens: Annotated[int, Meta(ge=0)] | None = None
    # Finite: checked by :meth:`TrialEvent.problem` (Meta has no bound for inf).
    seconds: Annotated[float, Meta(ge=0.0)] | None = None


# A run or model id; questions and trials may also be integers (their digits).
# No control characters either: checked once per distinct id by the decoder
# (a pattern here costs a regex match per string, most of a decode's time).
TrialId = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
if TYPE_CHECKING:
    # Events handed out (by the decoder, model_validate) carry question and
    # trial ids as text; only a struct inside the decoder, just decoded,
    # may hold an integer there (see TrialEvent.with_text_ids).
    LooseId = str
else:
    LooseId = TrialId | int
SignalKey = Annotated[str, Meta(max_length=64, pattern="^[a-z][a-z0-9_]*$")]
Signals = Annotated[
    dict[SignalKey, bool | int | float | str | None], Meta(max_length=MAX_SIGNALS)
]


class TrialEvent(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False
):
    """One finished trial: ``(run, model, question, trial)`` and its outcome.

    The trial event contract (the rules in full: :mod:`monitor.inputs.decode`).
    The field types and bounds are checked by msgspec when the decoder reads
    JSON bytes or Python objects into this struct (never by ``__init__``);
    the rules across fields by :meth:`problem`.

    ``correct`` may stand for ``category`` in binary runs (true is 1);
    ``signals`` (is_correct, has_box, output_tokens, ...) may stand for it in
    runs with a ``rubric``, which classifies them at ingestion. A ``prior``
    outcome counts toward the prior (the paper's R0), not the data. ``run``
    may be left out (``""``) only where the channel implies it (an MQTT
    topic, an HTTP route). Unknown fields are refused.
    """

    run: TrialId = ""
    model: TrialId
    question: LooseId
    trial: LooseId
    category: Annotated[int, Meta(ge=0)] | None = None
    correct: bool | None = None
    prior: bool = False
    cost: Cost | None = None
    # Unix seconds or an ISO 8601 time (checked by problem()).
    ts: float | str | None = None
    signals: Signals | None = None

    @property
    def outcome(self) -> int:
        """The category, with ``correct`` mapped to 1 (true) or 0 (false).

        Only signals: -1 until the run's rubric classified the event.
        """
        if self.category is not None:
            return self.category
        if self.correct is None:
            return -1
        return int(self.correct)

    def problem(self) -> str | None:
        """What breaks the rules across fields, or None: one sentence.

        An event needs an outcome; ``category`` and ``correct`` agree when
        both are given; ``ts`` is finite Unix seconds or an ISO 8601 time;
        ``cost.seconds`` is finite; ids are valid text (no lone surrogate,
        an integer id at most ``MAX_ID_LENGTH`` digits).
        """
        category, correct = self.category, self.correct
        if category is None and correct is None and self.signals is None:
            return NEEDS_AN_OUTCOME
        if category is not None and correct is not None and category != correct:
            return "category and correct disagree"
        ts = self.ts
        if ts is not None and not is_time(ts):
            return f"ts: must be {TS_EXPECTED}; got {shown(ts)}"
        cost = self.cost
        if (
            cost is not None
            and cost.seconds is not None
            and not math.isfinite(cost.seconds)
        ):
            return (
                f"cost.seconds: must be {SECONDS_EXPECTED}; got {shown(cost.seconds)}"
            )
        for name in ("run", "model", "question", "trial"):
            value = getattr(self, name)
            if isinstance(value, int):
                is_id = is_id_integer(value)
            else:
                is_id = value == "" or _is_id_text(value)  # "": run implied
            if not is_id:
                expected = (
                    ID_EXPECTED if name in ("run", "model") else LOOSE_ID_EXPECTED
                )
                return f"{name}: must be {expected}; got {shown(value)}"
        return None

    @classmethod
    def model_validate(cls, value: object) -> TrialEvent:
        """The event ``value`` describes (a mapping or an event), checked
        against the contract, its ids as text.

        Kept from when this was a pydantic model; the decoder
        (:mod:`monitor.inputs.decode`) is the way in for inputs.

        Raises:
            ValueError: naming what breaks the contract.
        """
        if isinstance(value, TrialEvent):
            value = msgspec.to_builtins(value)
        elif isinstance(value, Mapping) and type(value) is not dict:
            value = dict(value)
        try:
            event = msgspec.convert(value, cls, strict=True)
        except (msgspec.ValidationError, UnicodeEncodeError) as exc:  # see decode
            if not isinstance(value, Mapping):
                kind = type(value).__name__
                raise ValueError(
                    f"a trial event must be an object; got {kind}"
                ) from exc
            raise ValueError(field_problem(value) or UNNAMED_PROBLEM) from exc
        problem = event.problem()
        if problem is None and not event.run:
            problem = "run: missing field"
        if problem is not None:
            raise ValueError(problem)
        return event.with_text_ids()

    def with_text_ids(self) -> TrialEvent:
        """This event with integer question and trial ids as their digits."""
        if type(self.question) is str and type(self.trial) is str:
            return self
        return msgspec.structs.replace(
            self, question=str(self.question), trial=str(self.trial)
        )

    def model_copy(self, *, update: Mapping[str, object]) -> TrialEvent:
        """This event with some fields replaced (not checked again)."""
        return msgspec.structs.replace(self, **update)

    def model_dump_json(self, *, exclude_none: bool = False) -> str:
        """The event as JSON, without null fields if ``exclude_none``."""
        values = msgspec.to_builtins(self)
        if exclude_none:
            values = {key: value for key, value in values.items() if value is not None}
        return msgspec.json.encode(values).decode()


# What a field must be, in the words of every refusal.
TS_EXPECTED: Final = "Unix seconds or an ISO 8601 time"
COUNT_EXPECTED: Final = "an integer >= 0"
SECONDS_EXPECTED: Final = "a finite number >= 0"
BOOLEAN_EXPECTED: Final = "true or false"
ID_EXPECTED: Final = (
    f"1 to {MAX_ID_LENGTH} characters of text without control characters"
)
LOOSE_ID_EXPECTED: Final = f"an integer or {ID_EXPECTED}"
SIGNALS_EXPECTED: Final = f"an object of at most {MAX_SIGNALS} signals"
SIGNAL_EXPECTED: Final = "true, false, a number, a string or null"
_SIGNAL_KEY: Final = typing.get_args(SignalKey)[1]
SIGNAL_NAME_EXPECTED: Final = (
    "lowercase letters, digits and _, starting with a letter, at most "
    f"{_SIGNAL_KEY.max_length} characters"
)
NEEDS_AN_OUTCOME: Final = (
    "needs an outcome: category (an integer), correct (true/false) "
    "or signals (for a run with a rubric)"
)


def is_time(ts: float | str) -> bool:
    """Whether ``ts`` is finite Unix seconds or an ISO 8601 time string."""
    if isinstance(ts, str):
        try:
            datetime.fromisoformat(ts)
        except ValueError:
            return False
        return True
    return math.isfinite(ts)


_CONTROL: Final = re.compile(r"[\x00-\x1f]")


def _is_id_text(text: str) -> bool:
    if not 1 <= len(text) <= MAX_ID_LENGTH or _CONTROL.search(text):
        return False
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: not a valid string
        return False
    return True


def is_id_integer(value: int) -> bool:
    """Whether an integer id's digits fit in ``MAX_ID_LENGTH`` characters,
    found without formatting it (Python formats at most 4300 digits)."""
    return _SMALLEST_ID_INTEGER < value < _LARGEST_ID_INTEGER


_LARGEST_ID_INTEGER: Final[int] = 10**MAX_ID_LENGTH
_SMALLEST_ID_INTEGER: Final[int] = -(
    10 ** (MAX_ID_LENGTH - 1)
)  # the sign is a character


# For an event msgspec refused that field_problem finds no fault with (a
# rule of the struct it does not know): never so for the inputs the tests
# try (tests/monitor/test_field_problem.py).
UNNAMED_PROBLEM: Final = "does not match the trial event contract"
# msgspec matches a pattern with re.search, as here.
_SIGNAL_NAME: Final = re.compile(_SIGNAL_KEY.pattern)
_REQUIRED: Final = ("model", "question", "trial")


def field_problem(value: Mapping[str, object]) -> str | None:
    """The first field of ``value`` (a trial event as Python objects) that
    breaks the types or bounds of :class:`TrialEvent`, then a missing
    field, as one line: ``field: must be ...; got value``. None if none.

    The struct's per-field rules again, in Python and in our words: for an
    event msgspec refused, to say why (msgspec's own message is worded by
    its version).
    """
    for name, item in value.items():
        if not isinstance(name, str):
            return f"a field name must be a string; got {shown(name)}"
        problem = _problem(name, item)
        if problem is not None:
            return problem
    for name in _REQUIRED:
        if name not in value:
            return f"{name}: missing field"
    return None


def _problem(name: str, item: object) -> str | None:
    match name:
        case "run" | "model":
            if _is_id(item):
                return None
            return _must(name, ID_EXPECTED, item)
        case "question" | "trial":
            if _is_integer(item) or _is_id(item):
                return None
            return _must(name, LOOSE_ID_EXPECTED, item)
        case "category":
            if item is None or _is_count(item):
                return None
            return _must(name, COUNT_EXPECTED, item)
        case "correct" | "prior":
            # prior has a default (false), so null is no value for it.
            if isinstance(item, bool) or (item is None and name == "correct"):
                return None
            return _must(name, BOOLEAN_EXPECTED, item)
        case "ts":
            if item is None or isinstance(item, str) or _is_number(item):
                return None
            return _must(name, TS_EXPECTED, item)
        case "cost":
            return None if item is None else _cost_problem(item)
        case "signals":
            return None if item is None else _signals_problem(item)
    return f"unknown field {shown(name)}"


def _cost_problem(cost: object) -> str | None:
    if not isinstance(cost, Mapping):
        return _must("cost", "an object with tokens and seconds", cost)
    for name, item in cost.items():
        if not isinstance(name, str):
            return f"cost: a field name must be a string; got {shown(name)}"
        if name == "tokens":
            if item is not None and not _is_count(item):
                return _must("cost.tokens", COUNT_EXPECTED, item)
        elif name == "seconds":
            # NaN is refused (not >= 0); infinity by TrialEvent.problem.
            if item is not None and not (_is_number(item) and item >= 0):
                return _must("cost.seconds", SECONDS_EXPECTED, item)
        else:
            return f"cost: unknown field {shown(name)}"
    return None


def _signals_problem(signals: object) -> str | None:
    if not isinstance(signals, Mapping):
        return _must("signals", SIGNALS_EXPECTED, signals)
    if len(signals) > MAX_SIGNALS:
        return f"signals: must be {SIGNALS_EXPECTED}; got {len(signals)}"
    for name, item in signals.items():
        if not (
            isinstance(name, str)
            and len(name) <= _SIGNAL_KEY.max_length
            and _SIGNAL_NAME.search(name)
        ):
            return f"signals: a name must be {SIGNAL_NAME_EXPECTED}; got {shown(name)}"
        if item is not None and not isinstance(item, bool | int | float | str):
            return _must(f"signals.{name}", SIGNAL_EXPECTED, item)
    return None


def _is_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return _is_integer(value) and value >= 0  # type: ignore[operator]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _must(where: str, expected: str, value: object) -> str:
    return f"{where}: must be {expected}; got {shown(value)}"


def shown(value: object) -> str:
    """A short JSON form of a value, for a reason."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        # Not JSON, or an integer of more digits than Python formats.
        too_long = isinstance(value, int)
        text = "an integer too long to show" if too_long else type(value).__name__
    if not text.isascii():  # a lone surrogate stays an escape: \ud800
        text = text.encode("utf-8", "backslashreplace").decode()
    return text if len(text) <= 40 else text[:37] + "..."
