"""The service's ingest pipe: payloads decoded, then counted in pieces.

Small input is decoded on the engine thread (a thread hop costs more than
decoding it); large input is decoded on the service's decode thread and
counted in pieces of ``INGEST_PIECE`` items, so other callers' engine calls
run in between: a big request delays a small one by one piece's work, not
by its own. Every payload goes through the one decoder
(:func:`monitor.inputs.decode.decode_payload`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from monitor.engine.monitor import Monitor
from monitor.inputs.columns import TrialColumns
from monitor.inputs.decode import Decoded, decode_payload
from monitor.inputs.reasons import too_large
from monitor.interfaces import Payload
from monitor.stores.records import IngestReport, combined_reports

# Items per engine call when a large payload list is counted in pieces (a
# piece of 1,000 rejections held the engine thread 35-45 ms, of 250 about a
# quarter), and the input size up to which parsing stays on the engine
# thread (a thread hop costs more than parsing a small payload).
INGEST_PIECE = 250
# With a shared store an engine call has a higher fixed cost (a network
# round trip, a script call), so up to this many pieces go in one call
# while they count without rejections: 1,000 trials held the engine 16 ms
# on Redis (250: 5 ms), 250 rejections 23 ms. A piece with rejections sends
# the next back to one at a time, so the longest hold stays about that of
# 250 rejections, or one group whose trials turned out rejected.
SHARED_GROUP = 4
PARSE_INLINE_BYTES = 64 * 1024


def decode_all(
    payloads: list[Payload], split: bool = False
) -> tuple[list[Decoded], list[str], list[int | None]]:
    """Every payload's items, with the source and position of each.

    With ``split``, a payload's columns come in pieces of ``INGEST_PIECE``.
    """
    parsed: list[Decoded] = []
    sources: list[str] = []
    positions: list[int | None] = []
    for payload in payloads:
        items: list[Decoded]
        if payload.oversize:
            items = [
                too_large(
                    payload.oversize,
                    payload.limit,
                    payload.source,
                    payload.position,
                    payload.run,
                )
            ]
        else:
            items = decode_payload(
                payload.data, payload.source, payload.position, run=payload.run
            )
            if split and type(items[0]) is TrialColumns:
                items = list(items[0].pieces(INGEST_PIECE))
        parsed.extend(items)
        sources.extend([payload.source] * len(items))
        if payload.position is None:
            positions.extend(range(len(items)))  # the index in a batch
        else:
            positions.extend([payload.position] * len(items))
    return parsed, sources, positions


def pieces(parsed: list[Decoded]) -> list[tuple[int, int]]:
    """(start, stop) of pieces of at most ``INGEST_PIECE`` trials each."""
    pieces = []
    start = weight = 0
    for index, item in enumerate(parsed):
        size = len(item) if type(item) is TrialColumns else 1
        if weight + size > INGEST_PIECE and index > start:
            pieces.append((start, index))
            start, weight = index, 0
        weight += size
    if start < len(parsed) or not pieces:
        pieces.append((start, len(parsed)))
    return pieces


async def count_in_pieces(
    call: Callable[[Callable[[], IngestReport], bool], Awaitable[IngestReport]],
    monitor: Monitor,
    parsed: list[Decoded],
    sources: list[str],
    positions: list[int | None],
    cursor: tuple[str, str] | None,
    group: int,
) -> IngestReport:
    """Count decoded items through ``call`` (the engine thread, as a heavy
    call): in pieces (see :func:`pieces`) without a cursor, whole with one.

    Up to ``group`` pieces go in one call while none is rejected.
    """
    spans = [(0, len(parsed))] if cursor is not None else pieces(parsed)
    reports: list[IngestReport] = []
    index, take = 0, 1
    while index < len(spans):
        start = spans[index][0]
        stop = spans[min(index + take, len(spans)) - 1][1]
        reports.append(
            await call(
                functools.partial(
                    monitor.ingest_parsed,
                    parsed[start:stop],
                    source=sources[start:stop],
                    positions=positions[start:stop],
                    cursor=cursor,
                ),
                True,  # heavy: queued light calls go first
            )
        )
        index += take
        take = 1 if reports[-1].rejected else group
    return combined_reports(reports)
