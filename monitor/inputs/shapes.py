"""The narrow shapes JSON arrays of trial events are decoded as first.

Most arrays hold plain trials of one run with few fields; decoding them as
structs of just those fields (and, where an array names its run, checking
the run in C as it decodes) is the decoder's fast path. Each shape is the
trial contract with fewer fields: an array that does not fit one is tried
as the next, and finally as full events (:mod:`monitor.inputs.decode`),
so what is accepted and every refusal's words stay the contract's.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final, Literal

import msgspec

from monitor.inputs.columns import BARE, CORRECT_ONLY, NUMBERED, NUMBERED_CATEGORY

# The narrower shapes arrays are tried as first (see columns.NUMBERED ...):
# the same contract with fewer fields to decode, so one that fits is the
# fast path; a field it lacks makes it fail, and the next is tried.
ARRAY_FIELDS: Final[dict[str, list[tuple[Any, ...]]]] = {
    NUMBERED: [("model", str), ("question", int), ("trial", int), ("correct", bool)],
    NUMBERED_CATEGORY: [
        ("model", str),
        ("question", int),
        ("trial", int),
        ("category", int),
    ],
    CORRECT_ONLY: [
        ("model", str),
        ("question", str | int),
        ("trial", str | int),
        ("correct", bool),
    ],
    BARE: [
        ("model", str),
        ("question", str | int),
        ("trial", str | int),
        ("category", int | None, None),
        ("correct", bool | None, None),
    ],
}


@functools.lru_cache(maxsize=256)
def array_decoders(
    run: str | None, required: bool = False
) -> tuple[tuple[str, msgspec.json.Decoder[list[Any]]], ...]:
    """(kind, decoder) of arrays of each kind of :data:`ARRAY_FIELDS`.

    ``run`` None: an event's run may be any text or absent. Otherwise it
    must be ``run`` (or absent, unless ``required``): msgspec then checks
    every event's run in C as it decodes, and no column of runs is read.
    """
    named: Any = str if run is None else Literal.__getitem__(run)
    spec: tuple[Any, ...] = ("run", named) if required else ("run", named, "")
    decoders = []
    for kind, fields in ARRAY_FIELDS.items():
        # Fields with defaults after the others, as a struct needs.
        ordered: list[tuple[Any, ...]] = [field for field in fields if len(field) == 2]
        ordered.append(spec)
        ordered += [field for field in fields if len(field) == 3]
        struct: Any = msgspec.defstruct(
            f"_{kind.capitalize()}Event",
            ordered,
            forbid_unknown_fields=True,
            gc=False,
        )
        decoders.append((kind, msgspec.json.Decoder(list[struct])))
    return tuple(decoders)


# The first run an array names: a guess, which array_decoders(guess, True) checks.
_FIRST_RUN: Final = re.compile(rb'"run"\s*:\s*"([^"\\]*)"')


def named_run(payload: bytes) -> str | None:
    """The first run an array of events names, if it is plain text."""
    named = _FIRST_RUN.search(payload)
    if named is None:
        return None
    try:
        return named.group(1).decode()
    except UnicodeDecodeError:
        return None
