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

from monitor.schema import Rejection, TrialEvent

MAX_PAYLOAD_BYTES: Final = 1 << 20
MAX_RAW_KEPT: Final = 4096

Parsed = TrialEvent | Rejection


def parse_payload(
    payload: str | bytes,
    source: str = "",
    position: int | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> list[Parsed]:
    """Parse one JSON payload: an event object or an array of them (a batch)."""
    size = len(payload.encode() if isinstance(payload, str) else payload)
    if size > max_bytes:
        return [
            _reject(
                f"payload of {size} bytes exceeds the limit of {max_bytes}",
                payload,
                source,
                position,
            )
        ]
    try:
        value = json.loads(payload.strip())
    except (ValueError, UnicodeDecodeError) as exc:
        return [
            _reject(f"invalid JSON: {_json_reason(exc)}", payload, source, position)
        ]
    if isinstance(value, list):
        if not value:
            return [
                _reject(
                    "empty batch: expected at least one trial event",
                    payload,
                    source,
                    position,
                )
            ]
        return [parse_object(item, source, position) for item in value]
    return [parse_object(value, source, position)]


def parse_object(
    value: object, source: str = "", position: int | None = None
) -> Parsed:
    """Validate one decoded JSON value (or a mapping) as a trial event."""
    if isinstance(value, TrialEvent):
        return value
    if not isinstance(value, Mapping):
        return _reject(
            f"a trial event must be a JSON object; got {type(value).__name__}",
            value,
            source,
            position,
        )
    try:
        return TrialEvent.model_validate(value)
    except ValidationError as exc:
        rejection = _reject(describe_validation_error(exc), value, source, position)
        run = value.get("run")
        if isinstance(run, str):
            return rejection.model_copy(update={"run": run})
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


def _reject(reason: str, raw: object, source: str, position: int | None) -> Rejection:
    return Rejection(reason=reason, source=source, position=position, raw=raw_text(raw))


def _json_reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    return str(error)
