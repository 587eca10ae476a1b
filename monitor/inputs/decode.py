"""The one decoder of trial events: JSON bytes or Python objects, one contract.

Every way in (HTTP bodies, MQTT payloads, stream entries, JSON lines, rows of
results files, dicts from the Python API) comes here, and a bad input gets
the same reason whichever way it came. The contract is the msgspec struct
:class:`~monitor.trial_event.TrialEvent` (a value type every room shares, so
it lives above the rooms, re-exported by ``monitor.schema``): field types
and bounds are msgspec constraints, checked in C as bytes are decoded
(``msgspec.json.Decoder``) or objects converted (``msgspec.convert``,
strict as by default); the rules across fields are
:meth:`~monitor.trial_event.TrialEvent.problem`. What passes becomes the
engine's columns (:mod:`monitor.inputs.columns`); what does not, a
:class:`~monitor.schema.Rejection` worded by :mod:`monitor.inputs.reasons`.
Nothing here raises on bad input.

The contract:

- Fields: ``run``, ``model``, ``question``, ``trial`` (ids: 1 to
  ``MAX_ID_LENGTH`` characters, no control characters; question and trial
  also integers, read as their digits), ``category`` (an integer >= 0),
  ``correct`` (true or false, for ``category`` in binary runs), ``signals``
  (up to ``MAX_SIGNALS`` scalars, for runs with a rubric), ``prior``,
  ``cost`` (``tokens`` >= 0, ``seconds`` >= 0 and finite) and ``ts``. An
  event needs ``category``, ``correct`` or ``signals``. Types are strict: no
  ``"1"`` for 1, no ``true`` for 1, no ``1.5`` for an id.
- Unknown fields are refused (``invalid_event``): ``unknown field "cots"``,
  so a misspelt field never loses its value silently.
- ``ts`` is a finite number (Unix seconds) or an ISO 8601 time string
  (``datetime.fromisoformat``; without an offset it means UTC); anything
  else is refused: ``ts: must be Unix seconds or an ISO 8601 time; got
  "yesterday"``. As before, the engine keeps a number and does not keep
  a string (validated, then dropped).
- Depth: a batch holds events, an event holds ``cost`` and ``signals``,
  which hold scalars, so the types bound the depth and no Python code
  recurses over input. An event nesting more than ``MAX_DEPTH`` (16) levels
  of arrays or objects is refused as ``a trial event nests deeper than 16
  levels``; a shallower value where the contract wants a scalar gets that
  field's reason. Bytes whose brackets open more than ``MAX_PARSE_DEPTH``
  (256) deep anywhere (brackets inside strings count too) are refused
  undecoded as ``invalid JSON: nested too deeply to parse``, whatever the
  caller's stack.
- Invalid UTF-8 (and a lone surrogate escape such as ``"\\ud800"``) is not
  JSON: ``invalid_json``, for the event that holds it (the other events of
  its array still count) or the payload when the array cannot be split. An
  id with a lone surrogate from Python is refused as ``invalid_event``.
- Bounds (``monitor.limits``): a payload over ``MAX_PAYLOAD_BYTES`` and an
  array over ``MAX_BATCH_ITEMS`` events are refused whole (``too_large``);
  an empty array is refused (``empty batch``).
- A channel that implies a run (an MQTT topic, an HTTP route) fills in a
  missing ``run``; an event naming another run is refused as
  ``run_mismatch``. Without a channel, ``run: missing field``.
- One wording per reason, from checks of our own once msgspec refused an
  input (:func:`~monitor.trial_event.field_problem`,
  :func:`~monitor.inputs.reasons.read_json`), never msgspec's message:
  ``field: must be ...; got value``, e.g. ``category: must be an integer
  >= 0; got "1"``, ``correct: must be true or false; got "yes"``,
  ``question: missing field``, ``invalid JSON: unexpected end at line 1
  column 58``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from monitor.inputs.columns import (
    EVENT,
    Parsed,
    Trial,
    TrialColumns,
    new_trial,
    plain_columns,
)
from monitor.inputs.ids import KNOWN_IDS, loose_id, strict_id
from monitor.inputs.reasons import (
    NESTED_TOO_DEEPLY,
    TOO_DEEP_EVENT,
    NotJson,
    json_reason,
    nests_too_deep,
    opens_too_deep,
    read_json,
    reject,
    too_large_reason,
)
from monitor.inputs.shapes import array_decoders, named_run
from monitor.limits import MAX_BATCH_ITEMS, MAX_PAYLOAD_BYTES
from monitor.schema import Rejection
from monitor.trial_event import UNNAMED_PROBLEM, TrialEvent, field_problem, is_time

Decoded = Parsed | TrialColumns

_EVENT: Final = msgspec.json.Decoder(TrialEvent)
_EVENTS: Final = msgspec.json.Decoder(list[TrialEvent])
# An array split into its elements' bytes, each then decoded on its own.
_ELEMENTS: Final = msgspec.json.Decoder(list[msgspec.Raw])
_LIST_OF_EVENTS: Final = list[TrialEvent]
# msgspec words a refused string with a lone surrogate (a field name, or
# text where a number belongs) by encoding it, which raises.
_CONVERT_ERRORS: Final = (msgspec.ValidationError, UnicodeEncodeError)


def decode_payload(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    run: str | None = None,
    max_items: int = MAX_BATCH_ITEMS,
) -> list[Decoded]:
    """Decode one JSON payload: an event object or an array of them (a batch).

    An array of two or more plain trials of one run gives one
    :class:`TrialColumns` (of one: its :class:`Trial`); anything else what
    :func:`decode_events` gives.
    ``run`` is the run the channel implies (e.g. an MQTT topic): events
    without a ``run`` take it; events naming another run are refused. Every
    rejection of such a payload counts against that run, even unreadable
    JSON. ``position`` locates the payload (a line number); without one,
    each element of a batch is located by its index in the array.
    """
    data = _bytes(payload)
    if len(data) <= max_bytes:
        start = data[:1]
        if start == b"{" and run is None:
            # One event object: what decode_events gives, without its steps.
            return [_event(data, source, position, None)]
        if start == b"[":
            columns = _array_columns(data, source, position, run, max_items)
            if columns is not None:
                return [columns]
    return list(decode_events(data, source, position, max_bytes, run, max_items))


def decode_events(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    run: str | None = None,
    max_items: int = MAX_BATCH_ITEMS,
) -> list[Parsed]:
    """:func:`decode_payload` event by event, without columns."""
    data = _bytes(payload)
    parsed = _events(data, source, position, max_bytes, run, max_items)
    if run is None:
        return parsed
    return [
        item.model_copy(update={"run": run})
        if isinstance(item, Rejection) and item.run is None
        else item
        for item in parsed
    ]


def decode_object(
    value: object, source: str = "", position: int | None = None, run: str | None = None
) -> Parsed:
    """Decode one event given as Python objects (a mapping, or an event)."""
    if type(value) is dict:
        mapping: dict[Any, Any] = value
    elif isinstance(value, TrialEvent):
        mapping = msgspec.to_builtins(value)
    elif isinstance(value, Mapping):
        mapping = dict(value)
    else:
        reason = f"a trial event must be a JSON object; got {type(value).__name__}"
        return reject(reason, "invalid_event", value, source, position)
    try:
        event = msgspec.convert(mapping, TrialEvent)  # strict: the default
    except _CONVERT_ERRORS:
        return _refused(mapping, mapping, source, position, run)
    return checked(event, run, mapping, source, position)


def decode_objects(
    values: Sequence[object], source: str = "", run: str | None = None
) -> list[Decoded]:
    """Decode events given as Python objects, each located by its index.

    Two or more plain trials of one run (dicts) give one
    :class:`TrialColumns`, converted in one msgspec call.
    """
    if len(values) >= 2 and all(type(value) is dict for value in values):
        try:
            events = msgspec.convert(values, _LIST_OF_EVENTS)  # strict: the default
        except _CONVERT_ERRORS:
            events = None
        if events is not None:
            reread = functools.partial(_objects, values, source, run)
            columns = plain_columns(EVENT, events, None, run, reread, source, None)
            if columns is not None:
                return [columns]
    return list(_objects(values, source, run))


def _objects(values: Sequence[object], source: str, run: str | None) -> list[Parsed]:
    return [
        decode_object(value, source, index, run) for index, value in enumerate(values)
    ]


def event_of(trial: Trial) -> TrialEvent:
    """The event a decoded trial came as (ids as text), e.g. to word its
    refusal or to send it on."""
    raw = trial.raw
    if isinstance(raw, TrialEvent):
        event = msgspec.structs.replace(raw, run=trial.run)
    else:
        event = msgspec.convert({**raw, "run": trial.run}, TrialEvent, strict=True)
    return event.with_text_ids()


def checked(
    event: TrialEvent,
    channel: str | None,
    raw: object,
    source: str,
    position: int | None,
) -> Parsed:
    """The trial of a decoded event, or why it is refused.

    A plain event (no signals) becomes a :class:`Trial`; an event with
    signals stays an event (ids as text) for the run's rubric to classify.
    """
    named = event.run
    if channel is not None:
        if not named:
            named = channel
        elif named != channel:
            return _mismatch(named, channel, raw, source, position)
    elif not named:
        return reject("run: missing field", "invalid_event", raw, source, position)
    # Known ids first, inline: this is the per-trial hot path.
    known = KNOWN_IDS.get
    run = known(named) or strict_id(named)
    model = known(event.model) or strict_id(event.model)
    question = known(event.question) or loose_id(event.question)
    trial = known(event.trial) or loose_id(event.trial)
    category = event.category
    correct = event.correct
    ts = event.ts
    cost = event.cost
    from_correct = category is None
    if (
        run is None
        or model is None
        or question is None
        or trial is None
        or event.signals is not None
        or (
            correct is None
            if from_correct
            else correct is not None and category != correct
        )
        or (ts is not None and not is_time(ts))
        or (cost is not None and not _finite(cost.seconds))
    ):
        problem = event.problem()
        if problem is not None:
            return reject(problem, "invalid_event", raw, source, position, named)
        if run is None or model is None or question is None or trial is None:
            reason = "an id has invalid text"  # problem() says which, always
            return reject(reason, "invalid_event", raw, source, position, named)
        return msgspec.structs.replace(event, run=run, question=question, trial=trial)
    return new_trial(
        (
            run,
            model,
            question,
            trial,
            (1 if correct else 0) if from_correct else category,
            event.prior,
            None if cost is None else cost.tokens,
            None if cost is None else cost.seconds,
            None if ts is None or type(ts) is str else ts,
            from_correct,
            raw if type(raw) is dict else event,
        )
    )


def _events(
    data: bytes,
    source: str,
    position: int | None,
    max_bytes: int,
    channel: str | None,
    max_items: int,
) -> list[Parsed]:
    if len(data) > max_bytes:
        reason = too_large_reason(len(data), max_bytes)
        return [reject(reason, "too_large", data, source, position)]
    if data[:1] != b"{" and _opens_array(data):
        if opens_too_deep(data):
            return [reject(NESTED_TOO_DEEPLY, "invalid_json", data, source, position)]
        try:
            elements = _ELEMENTS.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            reason = f"invalid JSON: {json_reason(data)}"
            return [reject(reason, "invalid_json", data, source, position)]
        if not elements:
            reason = "empty batch: expected at least one trial event"
            return [reject(reason, "invalid_event", data, source, position)]
        if len(elements) > max_items:
            reason = (
                f"batch of {len(elements)} elements exceeds the limit of "
                f"{max_items}; split it"
            )
            return [reject(reason, "too_large", data, source, position)]
        # Without a position of its own (an HTTP body), an element's is its index.
        return [
            _event(
                bytes(element), source, index if position is None else position, channel
            )
            for index, element in enumerate(elements)
        ]
    return [_event(data, source, position, channel)]


_ARRAY_START: Final = re.compile(rb"\s*\[")


def _opens_array(data: bytes) -> bool:
    """Whether ``data`` is (or starts as) a JSON array, past any whitespace."""
    return data[:1] == b"[" or _ARRAY_START.match(data) is not None


def _event(
    data: bytes, source: str, position: int | None, channel: str | None
) -> Parsed:
    try:
        event = _EVENT.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        # The typed decode stops at the first field it refuses, long before
        # any depth; reading the rest (to word the refusal) may not.
        if opens_too_deep(data):
            return reject(NESTED_TOO_DEEPLY, "invalid_json", data, source, position)
        try:
            value = read_json(data)
        except NotJson as exc:
            return reject(
                f"invalid JSON: {exc}", "invalid_json", data, source, position
            )
        return _refused(value, data, source, position, channel)
    return checked(event, channel, data, source, position)


def _refused(
    value: object,
    raw: object,
    source: str,
    position: int | None,
    channel: str | None,
) -> Rejection:
    """Why ``value`` (the input as Python objects), which the typed decode
    refused, breaks the contract."""
    if not isinstance(value, dict):
        reason = f"a trial event must be a JSON object; got {type(value).__name__}"
        return reject(reason, "invalid_event", raw, source, position)
    named = value.get("run")
    if channel is not None and "run" in value and named != channel:
        return _mismatch(named, channel, raw, source, position)
    if nests_too_deep(value):
        reason = TOO_DEEP_EVENT
    else:
        reason = field_problem(value) or UNNAMED_PROBLEM
    run = named if isinstance(named, str) else None
    return reject(reason, "invalid_event", raw, source, position, run)


def _mismatch(
    named: object, channel: str, raw: object, source: str, position: int | None
) -> Rejection:
    reason = f"event names run {named!r} but arrived on run {channel!r}'s channel"
    return reject(reason, "run_mismatch", raw, source, position)


def _bytes(payload: str | bytes) -> bytes:
    if type(payload) is bytes:
        return payload
    if isinstance(payload, str):
        # A lone surrogate stays one, as bytes that are not UTF-8 (invalid JSON).
        return payload.encode("utf-8", "surrogatepass")
    return bytes(payload)


# -- the fast path of arrays --------------------------------------------------


def _array_columns(
    data: bytes,
    source: str,
    position: int | None,
    channel: str | None,
    max_items: int,
) -> TrialColumns | Trial | None:
    """The array's plain trials as columns (an array of one: its trial), or
    None to read it event by event."""
    run = channel if channel is not None else named_run(data)
    for kind, decoder in array_decoders(run, channel is None and run is not None):
        try:
            narrow = decoder.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if 2 <= len(narrow) <= max_items:
            reread = _rereader(data, source, position, channel, max_items)
            return plain_columns(kind, narrow, run, channel, reread, source, position)
        if len(narrow) == 1 and max_items >= 1:
            return _only_trial(
                data, source, 0 if position is None else position, channel
            )
        return None
    try:
        events = _EVENTS.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if 2 <= len(events) <= max_items:
        reread = _rereader(data, source, position, channel, max_items)
        return plain_columns(EVENT, events, None, channel, reread, source, position)
    return None


def _rereader(
    data: bytes, source: str, position: int | None, channel: str | None, max_items: int
) -> Callable[[], list[Parsed]]:
    """Reads the array again event by event (for columns a run refuses)."""
    return functools.partial(
        decode_events, data, source, position, len(data), channel, max_items
    )


def _only_trial(
    data: bytes, source: str, position: int, channel: str | None
) -> Trial | None:
    """The trial of an array of one plain event, or None to read it as
    :func:`decode_events` does (which words any refusal)."""
    try:
        events = _EVENTS.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    # The raw bytes matter only to word a refusal, which is left to decode_events.
    parsed = checked(events[0], channel, data, source, position)
    return parsed if type(parsed) is Trial else None


def _finite(seconds: float | None) -> bool:
    return seconds is None or math.isfinite(seconds)
