"""The sentences a refused input gets: one wording per reason, whatever the path.

msgspec says what the contract expected in its own terms (``Expected `int`,
got `str` - at `$[0].category```); :func:`describe_decode_error` turns that
into the line a user reads, ``field: problem; got value`` (``category: Input
should be a valid integer; got "1"``), the same for JSON bytes and for
Python objects. Run configs are still pydantic models: their errors are
worded by :func:`describe_validation_error` in the same form. Also here:
the bounded text of an input kept in a dead letter (:func:`raw_text`), and
the two depth bounds (:func:`opens_too_deep`, :func:`nests_too_deep`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec
import numpy as np
from pydantic import ValidationError

from monitor.limits import MAX_DEPTH, MAX_PARSE_DEPTH, MAX_RAW_KEPT
from monitor.schema import Rejection, RejectionKind
from monitor.trial_event import TS_EXPECTED

NESTED_TOO_DEEPLY: Final = "invalid JSON: nested too deeply to parse"
TOO_DEEP_EVENT: Final = f"a trial event nests deeper than {MAX_DEPTH} levels"

# msgspec's message, then where: ``- at `$.cost.tokens``` or, for a bad key
# of a mapping, ``- at `key` in `$.signals```.
_MESSAGE: Final = re.compile(
    r"^(?P<problem>.*?)(?: - at `(?P<key>key` in `)?(?P<path>[^`]*)`)?$"
)
_EXPECTED: Final = re.compile(
    r"^Expected `(?P<type>[^`]*)`(?:, got `(?P<got>[^`]*)`)?(?P<rest>.*)$"
)
_FIELD: Final = re.compile(
    r"^Object (?P<what>missing required|contains unknown) field `(?P<name>[^`]*)`$"
)
_PATH_PART: Final = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")

# What each type msgspec names means to a user (``| null`` dropped first).
_TYPES: Final = {
    "int": "a valid integer",
    "bool": "a valid boolean (true or false)",
    "str": "a valid string",
    "int | str": "a valid string or integer",
    "float": "a valid number",
    "object": "an object",
    "array": "an array",
    "bool | int | float | str": "a boolean, a number, a string or null",
}


def describe_decode_error(error: msgspec.ValidationError, value: object = None) -> str:
    """One line a user understands: ``field: problem; got value``.

    ``value`` is the input as plain Python objects, when known: the
    offending value is quoted from it.
    """
    match = _MESSAGE.match(str(error))
    if match is None:
        return str(error)
    problem, path = match["problem"], match["path"] or "$"
    parts = [key or index for key, index in _PATH_PART.findall(path)]
    names = [part for part in parts if not part.isdigit() and part != "..."]
    where = ".".join(names)
    field = _FIELD.match(problem)
    if field is not None:
        name = field["name"]
        if field["what"] == "missing required":
            return f"{where + '.' if where else ''}{name}: missing field"
        return f'{where + ": " if where else ""}unknown field "{name}"'
    expected = _EXPECTED.match(problem)
    if expected is None:
        sentence = "a finite number" if problem == "Number out of range" else problem
        return _line(where, f"Input should be {sentence}", path, value)
    kind = expected["type"].removesuffix(" | null")
    got = expected["got"]
    if not where and kind.startswith("object"):
        return f"a trial event must be a JSON object; got {_python_name(got)}"
    if match["key"]:
        return f"{where}: a key should be {_constraint(kind, expected['rest'])}"
    if names[-1:] == ["ts"] and not expected["rest"]:
        return _line(where, f"Input should be {TS_EXPECTED}", path, value)
    if got is not None:
        return _line(where, f"Input should be {_TYPES.get(kind, kind)}", path, value)
    return _line(
        where, f"Input should be {_constraint(kind, expected['rest'])}", path, value
    )


def _constraint(kind: str, rest: str) -> str:
    """``>= 0``, ``of length <= 256``, ``matching regex ...`` in words."""
    rest = rest.strip()
    if rest.startswith("matching regex"):
        if kind == "str" and "a-z" in rest:
            return "lowercase letters, digits and _, starting with a letter"
        return "text without control characters"
    bound = rest.removeprefix("of length ").split()
    if len(bound) != 2:
        return f"{kind} {rest}".strip()
    operator, number = bound
    number = number.removesuffix(".0")
    if rest.startswith("of length"):
        unit = {"str": "characters", "object": "entries", "array": "items"}.get(
            kind, "items"
        )
        return f"{'at least' if operator == '>=' else 'at most'} {number} {unit}"
    words = {
        ">=": "greater than or equal to",
        "<=": "less than or equal to",
        ">": "greater than",
        "<": "less than",
    }
    return f"{words.get(operator, operator)} {number}"


def _line(where: str, problem: str, path: str, value: object) -> str:
    found = _at(value, path)
    got = "" if found is _MISSING else f"; got {shown(found)}"
    return f"{where}: {problem}{got}" if where else f"{problem}{got}"


_MISSING: Final = object()


def _at(value: object, path: str) -> object:
    """The value at a msgspec path (``$.cost.tokens``, ``$[3].trial``)."""
    if value is None:
        return _MISSING
    for key, index in _PATH_PART.findall(path):
        if isinstance(value, Mapping) and key:
            value = value.get(key, _MISSING)
        elif isinstance(value, list) and index.isdigit() and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def shown(value: object) -> str:
    """A short JSON form of a value, for a reason."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _python_name(json_type: str | None) -> str:
    """The Python name of a JSON type (what earlier reasons said)."""
    names = {"array": "list", "object": "dict", "null": "NoneType"}
    return names.get(json_type or "", json_type or "a value")


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


def json_reason(error: Exception, data: bytes) -> str:
    """Why ``data`` is not JSON (or not UTF-8), after ``invalid JSON: ``.

    Worded as Python's ``json`` words it (``Expecting value at line 1 column
    58``), as these reasons always were; where msgspec is the stricter (a
    lone surrogate escape, ``NaN``), in msgspec's words. Only for refused
    bytes whose brackets nest at most ``MAX_PARSE_DEPTH`` deep.
    """
    if isinstance(error, UnicodeDecodeError):
        # msgspec reports the string it was reading (not where it is in the
        # payload, which differs between transports of the same event).
        return f"invalid UTF-8 in the string {_shown_bytes(error)}"
    try:
        json.loads(data.strip())
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError):
        pass
    return str(error).removeprefix("JSON is malformed: ")


def _shown_bytes(error: UnicodeDecodeError, before: int = 40, after: int = 20) -> str:
    """The string ``error`` is about, quoted around its bad byte; bytes that
    are not UTF-8 as ``\\xff`` escapes."""
    value = bytes(error.object)
    start, stop = max(0, error.start - before), error.start + after
    shown = value[start:stop].decode("utf-8", "backslashreplace")
    head = "..." if start > 0 else ""
    tail = "..." if stop < len(value) else ""
    return f'"{head}{shown}{tail}"'


def nests_too_deep(value: object) -> bool:
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


def opens_too_deep(payload: bytes) -> bool:
    """Whether brackets nest past ``MAX_PARSE_DEPTH`` anywhere in ``payload``.

    Brackets inside strings count too: a bound, not a parser, and only
    payloads with that many opening brackets are scanned at all (0.4 ms for
    a batch of 10,000 events).
    """
    if payload.count(b"[") + payload.count(b"{") <= MAX_PARSE_DEPTH:
        return False
    brackets = payload.translate(None, _NOT_BRACKETS)
    steps = _BRACKET_STEPS[np.frombuffer(brackets, dtype=np.uint8)]
    return bool(np.cumsum(steps, dtype=np.int32).max() > MAX_PARSE_DEPTH)


_NOT_BRACKETS: Final = bytes(code for code in range(256) if code not in b"[]{}")
_BRACKET_STEPS: Final = np.zeros(256, dtype=np.int8)
_BRACKET_STEPS[list(b"[{")] = 1
_BRACKET_STEPS[list(b"]}")] = -1


def raw_text(value: object) -> str:
    """A bounded text form of an input, for dead-letter records."""
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        if isinstance(value, msgspec.Struct):
            value = msgspec.to_builtins(value)
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


def reject(
    reason: str,
    kind: RejectionKind,
    raw: object,
    source: str,
    position: int | None,
    run: str | None = None,
) -> Rejection:
    """A rejection of ``raw`` (kept as bounded text)."""
    return Rejection(
        reason=reason,
        kind=kind,
        source=source,
        position=position,
        raw=raw_text(raw),
        run=run,
    )


def too_large_reason(size: int, limit: int) -> str:
    """Why an input over the size limit was refused, whatever carried it."""
    return f"payload of {size} bytes exceeds the limit of {limit}"


def too_large(
    size: int,
    limit: int,
    source: str,
    position: int | None = None,
    run: str | None = None,
) -> Rejection:
    """The rejection of an input too large to read (so not kept: its size)."""
    return Rejection(
        reason=too_large_reason(size, limit),
        kind="too_large",
        source=source,
        position=position,
        raw=f"({size} bytes, not kept)",
        run=run,
    )
