"""The poison corpus's cases as Redis stream entries, in each documented form.

A producer may write a trial as one field holding its JSON (``data`` or
``event``) or as the event's fields (see :mod:`adapters.redis.entries`).
:func:`stream_fields` writes a case in a form the way a producer would, or
says the form cannot carry it without changing what it means.
"""

from __future__ import annotations

import json
import math
import re

from tests.poison_corpus import Case


def not_json(text: str) -> object:
    raise ValueError(f"{text} is not JSON")


def finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of a double's range")
    return number


# How a producer may write a case into a stream entry (adapters.redis.entries).
STREAM_FORMS = ("data", "event", "fields")
_ID_FIELDS = ("run", "model", "question", "trial")
_NUMBERED_IDS = ("question", "trial")
_READS_AS_JSON = re.compile(
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|[{\[].*",
    re.DOTALL,
)


def stream_fields(case: Case, form: str) -> dict[bytes, bytes] | None:
    """The case as a stream entry's fields in ``form``, or None if that form
    cannot carry it.

    ``data`` and ``event`` carry any payload. ``fields`` carries a strict
    JSON object (bytes that are not UTF-8 kept as they are) whose ids are
    strings (question and trial also integers) and whose other strings do
    not read as JSON: Redis holds only strings, so ``"1"`` and ``1`` are one
    field value.
    """
    if form != "fields":
        return {form.encode(): case.payload}
    if case.bytes_only:  # judged by its size, which fields do not keep
        return None
    try:
        value = json.loads(
            case.payload.decode("utf-8", "surrogateescape"),
            parse_constant=not_json,
            parse_float=finite_float,
        )
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not value:
        return None
    fields: dict[bytes, bytes] = {}
    for name, item in value.items():
        if isinstance(item, str):
            if name not in _ID_FIELDS and _READS_AS_JSON.fullmatch(item):
                return None
            text = item
        elif name in _ID_FIELDS:
            if name not in _NUMBERED_IDS or type(item) is not int:
                return None
            # An integer question or trial is read as its digits anyway.
            text = str(item)
        else:
            text = json.dumps(item, ensure_ascii=False)
        try:
            fields[name.encode("utf-8", "surrogateescape")] = text.encode(
                "utf-8", "surrogateescape"
            )
        except UnicodeEncodeError:  # a lone surrogate escape: not UTF-8 at all
            return None
    return fields
