"""Turning raw input into trial events, or into rejections with a clear reason.

Every source (JSONL line, HTTP body, MQTT payload, stream entry) goes through
here, so a bad input gets the same reason wherever it came from. Nothing here
raises on bad input: it returns a :class:`Rejection` instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from pydantic import ValidationError

from monitor.schema import Rejection, RejectionKind, TrialEvent

MAX_PAYLOAD_BYTES: Final = 1 << 20
MAX_RAW_KEPT: Final = 4096

Parsed = TrialEvent | Rejection


def parse_payload(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    run: str | None = None,
) -> list[Parsed]:
    """Parse one JSON payload: an event object or an array of them (a batch).

    ``run`` is the run the channel implies (e.g. an MQTT topic): events
    without a ``run`` take it; events naming another run are refused.
    """
    size = len(payload.encode() if isinstance(payload, str) else payload)
    if size > max_bytes:
        reason = f"payload of {size} bytes exceeds the limit of {max_bytes}"
        return [_reject(reason, "too_large", payload, source, position)]
    try:
        value = json.loads(payload.strip())
    except (ValueError, UnicodeDecodeError) as exc:
        reason = f"invalid JSON: {_json_reason(exc)}"
        return [_reject(reason, "invalid_json", payload, source, position)]
    if isinstance(value, list):
        if not value:
            reason = "empty batch: expected at least one trial event"
            return [_reject(reason, "invalid_event", payload, source, position)]
        return [parse_object(item, source, position, run) for item in value]
    return [parse_object(value, source, position, run)]


def parse_object(
    value: object, source: str = "", position: int | None = None, run: str | None = None
) -> Parsed:
    """Validate one decoded JSON value (or a mapping) as a trial event."""
    if isinstance(value, TrialEvent):
        return value
    if not isinstance(value, Mapping):
        reason = f"a trial event must be a JSON object; got {type(value).__name__}"
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
            text = repr(value)
    if len(text) > MAX_RAW_KEPT:
        return text[:MAX_RAW_KEPT] + f"... ({len(text)} characters)"
    return text


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
