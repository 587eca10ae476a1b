"""The trial event: the contract's value type, every room's (see the rules
in :mod:`monitor.inputs.decode`, the one decoder that reads it).

:class:`TrialEvent` and :class:`Cost` are msgspec structs whose field types
and ``Meta`` bounds are the contract's per-field rules; :meth:`TrialEvent.problem`
holds its rules across fields. ``monitor.schema`` re-exports both.
"""

from __future__ import annotations

import json
import math
import re
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
            return f"ts: Input should be {TS_EXPECTED}; got {json.dumps(ts)}"
        cost = self.cost
        if (
            cost is not None
            and cost.seconds is not None
            and not math.isfinite(cost.seconds)
        ):
            return "cost.seconds: Input should be a finite number"
        for name in ("run", "model", "question", "trial"):
            value = getattr(self, name)
            if value != "" and not _is_id_text(str(value)):  # "": run implied
                return f"{name}: Input should be {ID_EXPECTED}"
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
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from exc
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


TS_EXPECTED: Final = "Unix seconds or an ISO 8601 time"
ID_EXPECTED: Final = (
    f"1 to {MAX_ID_LENGTH} characters of text without control characters"
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
