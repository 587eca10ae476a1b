"""The sentences a refused input gets: one wording per reason, whatever the path.

Every reason comes from a check of our own, run once the fast decode has
refused an input (never on the path of good input), so the wording does
not depend on a library's version. :func:`read_json` reads bytes as the
decoder does (strict JSON: UTF-8, no ``NaN``, no lone surrogate escape,
numbers within a double) or says why not, e.g. ``invalid UTF-8 in the
string "m\\xff"`` or ``unexpected end at line 1 column 58``; an event that
is JSON but breaks the contract is worded by
:func:`~monitor.trial_event.field_problem` (``category: must be an integer
>= 0; got "1"``). Run configs are still pydantic models:
:func:`describe_validation_error` words their errors in the same form.
Also here: the bounded text of an input kept in a dead letter
(:func:`raw_text`), and the two depth bounds (:func:`opens_too_deep`,
:func:`nests_too_deep`).
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
from monitor.trial_event import shown

NESTED_TOO_DEEPLY: Final = "invalid JSON: nested too deeply to parse"
TOO_DEEP_EVENT: Final = f"a trial event nests deeper than {MAX_DEPTH} levels"


def describe_validation_error(error: ValidationError) -> str:
    """One line a user understands: ``field: problem; field: problem``.

    Worded from pydantic's error types (``int_type``, ``greater_than``, ...:
    codes, not its sentences) and the configs' own validators' messages.
    """
    problems = []
    for item in error.errors(include_url=False):
        names = [str(part) for part in item["loc"] if not isinstance(part, int)]
        kind = item["type"]
        if kind == "extra_forbidden" and names:
            problem = f"unknown field {shown(names.pop())}"
        elif kind == "missing":
            problem = "missing field"
        elif kind in ("value_error", "assertion_error"):  # our validators' words
            problem = item["msg"].removeprefix("Value error, ")
            problem = problem.removeprefix("Assertion failed, ")
        else:
            must = _must(kind, item.get("ctx") or {})
            problem = f"must {must}; got {shown(item['input'])}"
        where = ".".join(names)
        problems.append(f"{where}: {problem}" if where else problem)
    return "; ".join(problems)


# What pydantic's error types ask for, in our words.
_BOUNDS: Final = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}
_TYPES: Final = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "true or false",
    "list": "a list",
    "dict": "a table",
    "model": "a table",
}


def _must(kind: str, context: Mapping[str, object]) -> str:
    """What a value must be or have, after ``must``."""
    unit = "characters" if kind.startswith("string") else "items"
    if kind in _BOUNDS:
        key, operator = _BOUNDS[kind]
        return f"be {operator} {context.get(key)}"
    if kind in ("too_short", "string_too_short"):
        return f"have at least {context.get('min_length')} {unit}"
    if kind in ("too_long", "string_too_long"):
        return f"have at most {context.get('max_length')} {unit}"
    if kind == "literal_error":
        return f"be {context.get('expected')}"
    if kind == "string_pattern_mismatch":
        return f"be text matching {context.get('pattern')}"
    if kind == "finite_number":
        return "be a finite number"
    if kind == "int_from_float":
        return "be an integer"
    return f"be {_TYPES.get(kind.split('_')[0], f'valid ({kind})')}"


class NotJson(ValueError):
    """Bytes that are not JSON the decoder reads; the message says why."""


def read_json(data: bytes) -> object:
    """``data`` as Python objects, read as the decoder reads JSON.

    Strict JSON (RFC 8259): UTF-8 text, no ``NaN`` or ``Infinity``, no
    lone surrogate escape, every number within a double. For bytes whose
    brackets nest at most ``MAX_PARSE_DEPTH`` deep.

    Raises:
        NotJson: saying why, in our words, where (a line and column, or
            the string that holds invalid UTF-8).
    """
    try:
        return _ANY.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass  # why, from checks of our own:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotJson(_utf8_reason(data, exc.start)) from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except NotJson:
        raise
    except json.JSONDecodeError as exc:
        raise NotJson(_syntax_reason(text, exc.pos)) from None
    except ValueError:  # an integer of more digits than Python converts
        raise NotJson("a number out of range") from None
    except RecursionError:
        raise NotJson("nested too deeply to parse") from None
    string = _lone_surrogate(value)
    if string is not None:
        bad = next(i for i, char in enumerate(string) if "\ud800" <= char <= "\udfff")
        quoted = _quoted(string, bad)
        raise NotJson(f"a lone surrogate escape in the string {quoted}")
    return value


def json_reason(data: bytes) -> str:
    """Why ``data`` is not JSON the decoder reads (after ``invalid JSON: ``)."""
    try:
        read_json(data)
    except NotJson as exc:
        return str(exc)
    return "not JSON the decoder reads"


# Any JSON: the fast read, before checks of our own say why it failed.
_ANY: Final = msgspec.json.Decoder()
# A JSON string (a field name or a value), or the rest of an unterminated one.
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_CLOSED_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ESCAPE: Final = re.compile(r"\\u[0-9a-fA-F]{0,4}")


def _constant(name: str) -> object:
    raise NotJson(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise NotJson(f"the number {text[:40]} is out of range")
    return number


def _lone_surrogate(value: object) -> str | None:
    """A string in ``value`` holding a lone surrogate (not UTF-8), if any."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _utf8_reason(data: bytes, bad: int) -> str:
    """Where the first byte that is not UTF-8 is: the string that holds it
    (a field name or a value), quoted, else its line and column."""
    # Outside strings JSON has no quote, so these are the strings up to there.
    for string in _STRING.finditer(data):
        if string.start() > bad:
            break
        if bad < string.end():
            start, stop = string.span()
            if stop - start >= 2 and data[stop - 1 : stop] == b'"':
                stop -= 1
            inside = data[start + 1 : stop]
            return f"invalid UTF-8 in the string {_quoted(inside, bad - start - 1)}"
    line = data.count(b"\n", 0, bad) + 1
    column = bad - (data.rfind(b"\n", 0, bad) + 1) + 1
    return f"invalid UTF-8 at line {line} column {column}"


def _quoted(value: str | bytes, bad: int, before: int = 40, after: int = 20) -> str:
    """``value`` quoted around its byte ``bad``; bytes that are not UTF-8 as
    ``\\xff`` escapes, a lone surrogate as ``\\ud800``."""
    start, stop = max(0, bad - before), bad + after
    window = value[start:stop]
    if isinstance(window, bytes):
        text = window.decode("utf-8", "backslashreplace")
    else:
        text = window.encode("utf-8", "backslashreplace").decode()
    head = "..." if start > 0 else ""
    tail = "..." if stop < len(value) else ""
    return f'"{head}{text}{tail}"'


def _syntax_reason(text: str, position: int) -> str:
    """What is wrong at ``position``, where the JSON stops being JSON."""
    if not text[position:].strip():
        return f"unexpected end {_at(text, len(text.rstrip()))}"
    if text[position - 1 : position + 1] == "\\u":  # json points past the \
        position -= 1
    at = _at(text, position)
    character = text[position]
    if character == '"' and _CLOSED_STRING.match(text, position) is None:
        return f"a string that never ends, starting {at}"
    if character == "\\":
        escape = _ESCAPE.match(text, position)
        shown = escape[0] if escape else text[position : position + 2]
        return f"invalid escape {shown} {at}"
    if character.isprintable() and not character.isspace():
        return f"unexpected '{character}' {at}"
    return f"unexpected character U+{ord(character):04X} {at}"


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
    except ValueError:  # an integer of more digits than Python formats
        return f"({type(value).__name__} holding a number too long to show)"


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


def _at(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    return f"at line {line} column {column}"
