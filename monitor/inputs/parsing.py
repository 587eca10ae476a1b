"""Turning raw input into trial events, or into rejections with a clear reason.

Every source (JSONL line, HTTP body, MQTT payload, stream entry) goes through
here, so a bad input gets the same reason wherever it came from. Nothing here
raises on bad input: it returns a :class:`Rejection` instead.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple

import numpy as np
from pydantic import ValidationError

from monitor.inputs.ids import (
    _KNOWN_IDS,
    _LOOSE,
    finite_float,
    loose_id,
    strict_id,
)
from monitor.limits import (
    MAX_BATCH_ITEMS,
    MAX_DEPTH,
    MAX_PARSE_DEPTH,
    MAX_PAYLOAD_BYTES,
    MAX_RAW_KEPT,
)
from monitor.schema import Rejection, RejectionKind, TrialEvent


class Trial(NamedTuple):
    """A plain trial event the fast check found valid, as the engine counts it.

    Equal to what :class:`TrialEvent` would give for the same input; the
    engine validates ``raw`` in full only to word a rejection.
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
    raw: Mapping[str, object]


Parsed = Trial | TrialEvent | Rejection

# Twice as fast as Trial(...), which goes through a Python-level __new__.
new_trial: Callable[[tuple[object, ...]], Trial] = functools.partial(
    tuple.__new__, Trial
)


def parse_payload(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    run: str | None = None,
    max_items: int = MAX_BATCH_ITEMS,
) -> list[Parsed]:
    """Parse one JSON payload: an event object or an array of them (a batch).

    ``run`` is the run the channel implies (e.g. an MQTT topic): events
    without a ``run`` take it; events naming another run are refused. Every
    rejection of such a payload counts against that run, even unreadable JSON.
    ``position`` locates the payload (a line number); without one, each
    element of a batch is located by its index in the array.
    """
    parsed = _parse_payload(payload, source, position, max_bytes, run, max_items)
    if run is None:
        return parsed
    return [
        item.model_copy(update={"run": run})
        if isinstance(item, Rejection) and item.run is None
        else item
        for item in parsed
    ]


def _parse_payload(
    payload: str | bytes,
    source: str,
    position: int | None,
    max_bytes: int,
    run: str | None,
    max_items: int,
) -> list[Parsed]:
    size = len(payload.encode() if isinstance(payload, str) else payload)
    if size > max_bytes:
        reason = f"payload of {size} bytes exceeds the limit of {max_bytes}"
        return [_reject(reason, "too_large", payload, source, position)]
    if _opens_too_deep(payload):
        reason = "invalid JSON: nested too deeply to parse"
        return [_reject(reason, "invalid_json", payload, source, position)]
    try:
        value = json.loads(payload.strip())
    except (ValueError, UnicodeDecodeError) as exc:
        reason = f"invalid JSON: {_json_reason(exc)}"
        return [_reject(reason, "invalid_json", payload, source, position)]
    except RecursionError:
        # The decoder recurses per level: ~1,000 brackets exhaust the stack.
        reason = "invalid JSON: nested too deeply to parse"
        return [_reject(reason, "invalid_json", payload, source, position)]
    if isinstance(value, list):
        if not value:
            reason = "empty batch: expected at least one trial event"
            return [_reject(reason, "invalid_event", payload, source, position)]
        if len(value) > max_items:
            reason = (
                f"batch of {len(value)} elements exceeds the limit of {max_items}; "
                "split it"
            )
            return [_reject(reason, "too_large", payload, source, position)]
        # Without a position of its own (an HTTP body), an element's is its index.
        return [
            parse_object(item, source, index if position is None else position, run)
            for index, item in enumerate(value)
        ]
    return [parse_object(value, source, position, run)]


def _opens_too_deep(payload: str | bytes) -> bool:
    """Whether brackets nest past ``MAX_PARSE_DEPTH`` anywhere in ``payload``.

    Brackets inside strings count too: a bound, not a parser, and only
    payloads with that many opening brackets are scanned at all (0.4 ms for
    a batch of 10,000 events).
    """
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    if payload.count(b"[") + payload.count(b"{") <= MAX_PARSE_DEPTH:
        return False
    brackets = payload.translate(None, _NOT_BRACKETS)
    steps = _BRACKET_STEPS[np.frombuffer(brackets, dtype=np.uint8)]
    return bool(np.cumsum(steps, dtype=np.int32).max() > MAX_PARSE_DEPTH)


_NOT_BRACKETS: Final = bytes(code for code in range(256) if code not in b"[]{}")
_BRACKET_STEPS: Final = np.zeros(256, dtype=np.int8)
_BRACKET_STEPS[list(b"[{")] = 1
_BRACKET_STEPS[list(b"]}")] = -1


def parse_object(
    value: object, source: str = "", position: int | None = None, run: str | None = None
) -> Parsed:
    """Validate one decoded JSON value (or a mapping) as a trial event."""
    if type(value) is dict:
        trial = plain_trial(value, run)
        if trial is not None:
            return trial
    if isinstance(value, TrialEvent):
        return value
    if not isinstance(value, Mapping):
        reason = f"a trial event must be a JSON object; got {type(value).__name__}"
        return _reject(reason, "invalid_event", value, source, position)
    if _too_deep(value):
        reason = f"a trial event nests deeper than {MAX_DEPTH} levels"
        return _reject(reason, "invalid_event", value, source, position)
    if run is not None:
        named = value.get("run", run)
        if named != run:
            reason = f"event names run {named!r} but arrived on run {run!r}'s channel"
            return _reject(reason, "run_mismatch", value, source, position)
        value = {**value, "run": run}
    try:
        return TrialEvent.model_validate(value)
    except ValidationError as exc:
        rejection = _reject(
            describe_validation_error(exc), "invalid_event", value, source, position
        )
        named = value.get("run")
        if isinstance(named, str):
            return rejection.model_copy(update={"run": named})
        return rejection


def plain_trial(value: dict[str, object], run: str | None = None) -> Trial | None:
    """The trial of a plain event (no signals), or None to validate in full.

    Accepts exactly what :class:`TrialEvent` accepts for such events (ids of
    1..256 characters without control characters, questions and trials also
    as integers, strict booleans and integers) and says None for anything
    else, valid or not, so pydantic words every rejection.
    """
    get = value.get
    if get("signals") is not None:
        return None
    named = get("run", run) if run is not None else get("run")
    if run is not None and named != run:
        return None
    # Known ids first, inline: this is the per-trial hot path.
    known = _KNOWN_IDS.get
    model, question, trial = get("model"), get("question"), get("trial")
    run_id = known(named) if type(named) is str else None
    model_id = known(model) if type(model) is str else None
    question_id = known(question) if type(question) in _LOOSE else None
    trial_id = known(trial) if type(trial) in _LOOSE else None
    if run_id is None:
        run_id = strict_id(named)
    if model_id is None:
        model_id = strict_id(model)
    if question_id is None:
        question_id = loose_id(question)
    if trial_id is None:
        trial_id = loose_id(trial)
    if run_id is None or model_id is None or question_id is None or trial_id is None:
        return None
    category = get("category")
    correct = get("correct")
    if category is None:
        if type(correct) is not bool:
            return None
        outcome = int(correct)
    else:
        if type(category) is not int or category < 0:
            return None
        if correct is not None and (type(correct) is not bool or correct != category):
            return None
        outcome = category
    prior = get("prior", False)
    if type(prior) is not bool:
        return None
    ts = get("ts")
    if ts is not None and type(ts) is not str:
        ts = finite_float(ts)
        if ts is None:
            return None
    else:
        ts = None
    tokens = seconds = None
    cost = get("cost")
    if cost is not None:
        if type(cost) is not dict or not cost.keys() <= {"tokens", "seconds"}:
            return None
        tokens, seconds = cost.get("tokens"), cost.get("seconds")
        if tokens is not None and (type(tokens) is not int or tokens < 0):
            return None
        if seconds is not None:
            seconds = finite_float(seconds)
            if seconds is None or seconds < 0.0:
                return None
    return new_trial(
        (
            run_id,
            model_id,
            question_id,
            trial_id,
            outcome,
            prior,
            tokens,
            seconds,
            ts,
            category is None,
            value,
        )
    )


def _too_deep(value: object) -> bool:
    """Whether ``value`` nests more than ``MAX_DEPTH`` lists or mappings.

    Walks iteratively, so input of any depth cannot exhaust the stack.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def describe_validation_error(error: ValidationError) -> str:
    """One line a user understands: ``field: problem; field: problem``."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"] if not isinstance(part, int))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "missing field"
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def raw_text(value: object) -> str:
    """A bounded text form of an input, for dead-letter records."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, default=str)
        except (TypeError, ValueError):
            text = _safe_repr(value)
        except RecursionError:
            text = f"({type(value).__name__} nested too deeply to show)"
    if len(text) > MAX_RAW_KEPT:
        return text[:MAX_RAW_KEPT] + f"... ({len(text)} characters)"
    return text


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except RecursionError:
        return f"({type(value).__name__} nested too deeply to show)"


def _reject(
    reason: str, kind: RejectionKind, raw: object, source: str, position: int | None
) -> Rejection:
    return Rejection(
        reason=reason, kind=kind, source=source, position=position, raw=raw_text(raw)
    )


def _json_reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    return str(error)
