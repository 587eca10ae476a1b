"""The ``watch`` loop: JSON lines from a source into the engine, batch by batch.

Each batch is decoded line by line (a line holds one event or an array of
them), counted in one engine call, and committed together with the source's
cursor, so a restarted watch resumes after the last committed line.
A line that names no run counts against the stream's run when it has one.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.engine.monitor import Monitor
from monitor.feeds.files import IngestTotals, with_implied_run
from monitor.inputs.decode import Decoded, decode_payload
from monitor.inputs.reasons import too_large
from monitor.interfaces import LineSource
from monitor.limits import MAX_PAYLOAD_BYTES
from monitor.stores.records import IngestReport


def watch(
    monitor: Monitor,
    source: LineSource,
    on_report: Callable[[IngestReport], None] = lambda report: None,
    max_line_bytes: int = MAX_PAYLOAD_BYTES,
) -> IngestTotals:
    """Ingest every batch the source yields until it ends or is stopped."""
    totals = IngestTotals()
    for lines, cursor in source.batches():
        parsed: list[Decoded] = []
        positions: list[int | None] = []
        for line in lines:
            if line.too_long:
                items: list[Decoded] = [
                    too_large(line.too_long, max_line_bytes, source.name, line.number)
                ]
            else:
                items = decode_payload(
                    line.data, source.name, line.number, max_line_bytes
                )
            parsed.extend(items)
            positions.extend([line.number] * len(items))
        parsed = with_implied_run(monitor, parsed)
        report = monitor.ingest_parsed(
            parsed,
            source=source.name,
            positions=positions,
            cursor=None if cursor is None else (source.name, cursor),
        )
        totals.add(report, len(lines))
        on_report(report)
    return totals
