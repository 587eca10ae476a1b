"""Trial stream entries as JSON payloads for the one decoder.

A producer may ``XADD`` a trial in either of two forms:

- one field, ``event`` or ``data``, holding a JSON event or an array of
  them: ``XADD scorio:{aime25}:trials * event '{"model": ...}'``. The JSON
  goes to the decoder as it is.
- the event's fields as stream fields: ``XADD scorio:{aime25}:trials *
  model qwen3-4b question 17 trial 3 category 1``. Redis carries only
  strings, so each value is read as the JSON it spells where it spells one:
  a number (``1``, ``-2.5e3``), ``true``, ``false`` or ``null`` as that
  value, text starting with ``{`` or ``[`` (``cost '{"tokens": 812}'``) as
  JSON to decode, anything else as a string (``ts
  2026-11-27T10:00:00Z``). The ids ``run``, ``model``, ``question`` and
  ``trial`` are always strings (``question 17`` is the id ``"17"``, as the
  integer 17 would be).

Nothing here parses or checks the event: the fields are only spelt as one
JSON object, and the decoder (:mod:`monitor.inputs.decode`) judges it as it
judges every other way in. Bytes that are not UTF-8 stay so in the JSON, so
the decoder refuses that entry (``invalid JSON: invalid UTF-8 ...``) while
the entries around it count. No function here raises on any entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

PAYLOAD_FIELDS: Final = (b"event", b"data")
ID_FIELDS: Final = frozenset({b"run", b"model", b"question", b"trial"})
_JSON_SCALAR: Final = re.compile(
    rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null"
)
_JSON_OPENERS: Final = (b"{", b"[")


def entry_payload(fields: Mapping[bytes, bytes]) -> bytes:
    """The JSON payload of a stream entry's fields (either form).

    Examples:
        >>> entry_payload({b"event": b'{"model": "m0"}'})
        b'{"model": "m0"}'
        >>> entry_payload({b"model": b"m0", b"question": b"17", b"category": b"1"})
        b'{"model":"m0","question":"17","category":1}'
    """
    if len(fields) == 1:
        ((name, value),) = fields.items()
        if name in PAYLOAD_FIELDS:
            return value
    members = [
        _string(name) + b":" + _value(name, value) for name, value in fields.items()
    ]
    return b"{" + b",".join(members) + b"}"


def _value(name: bytes, value: bytes) -> bytes:
    if name not in ID_FIELDS and (
        _JSON_SCALAR.fullmatch(value) or value.startswith(_JSON_OPENERS)
    ):
        return value
    return _string(value)


def _string(value: bytes) -> bytes:
    """``value`` as a JSON string; bytes that are not UTF-8 are kept as they
    are (invalid JSON, for the decoder to refuse)."""
    text = value.decode("utf-8", "surrogateescape")
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted.encode("utf-8", "surrogateescape")
