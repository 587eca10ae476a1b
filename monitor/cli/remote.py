"""``ingest --url`` and ``watch --url``: files into a running service.

The files are read and decoded here, by the service's own decoder (so a row
refused here would be refused there, in the same words); the trials go to
the service's HTTP API in batches (``POST /runs/{run}/trials``) through the
harness client, which retries what was not acknowledged. Counting stays
exactly once because the service counts a trial once per (run, model,
question, trial) however often it arrives: a batch sent again after a lost
answer, or a file ingested again, adds nothing. ``watch --url`` also keeps
its position in the file per service URL (a cursor file next to it,
written after the service acknowledged the batch), so a restarted watch goes
on where it stopped; a crash between the answer and the cursor only re-sends
one batch, and a watch into another service, or into one that lost what it
was sent, starts from the top.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from adapters.harness import BatchRefusedError, MonitorClient
from adapters.harness.transports.http import HttpTransport
from adapters.jsonl import Cursor, JsonLines
from monitor.config import load_run_configs
from monitor.errors import UnknownRunError
from monitor.feeds.files import ItemBatch, Located
from monitor.inputs.columns import Parsed, Trial
from monitor.inputs.decode import decode_events, decode_object, event_of
from monitor.inputs.reasons import too_large
from monitor.limits import MAX_PAYLOAD_BYTES
from monitor.schema import Rejection, Status, TrialEvent


@dataclass(slots=True)
class Sent:
    """What was sent: trials per run, the rejections found locally, and what
    the service refused (per run: trials, and the first reason)."""

    trials: int = 0
    runs: set[str] = field(default_factory=set)
    rejected: list[Rejection] = field(default_factory=list)
    refused: dict[str, tuple[int, str]] = field(default_factory=dict)
    offered: Counter[str] = field(default_factory=Counter)

    def add(self, other: Sent) -> None:
        """Fold in what a later batch sent."""
        self.trials += other.trials
        self.runs |= other.runs
        self.offered.update(other.offered)
        self.rejected.extend(other.rejected)
        for run, (count, reason) in other.refused.items():
            self.refuse(run, count, reason)

    def refuse(self, run: str, count: int, reason: str) -> None:
        before, first = self.refused.get(run, (0, reason))
        self.refused[run] = (before + count, first)


class RemoteSink:
    """Sends parsed items to a running service; a context manager.

    Args:
        url: The service's HTTP API, e.g. ``http://127.0.0.1:8000``.
        token: Its bearer token, if it asks for one.
        config: A run config file to declare first (``POST /runs``).
    """

    def __init__(self, url: str, token: str | None, config: Path | None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--url must be http(s)://; got {url!r}")
        # Trials the service refused out of batches it took: totalled per
        # run and said once (see _show_refused), not a warning per batch.
        self._refusals: list[tuple[str, int, str]] = []
        transport = HttpTransport(url, token=token, on_refused=self._refused)
        self._client = MonitorClient(transport, batch_size=500)
        self._config = config

    def __enter__(self) -> RemoteSink:
        self._client.__enter__()
        try:
            # A URL that is not a monitor fails here, once, before any file.
            self._client.check()
            for config in load_run_configs(self._config) if self._config else []:
                self._client.declare(config)
        except BaseException:
            self._client.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._client.close()

    def send(self, items: Iterable[object], source: str) -> Sent:
        """Send the trials among ``items``; return what went and what did not.

        Returns once the service acknowledged every trial it did not refuse
        (or raises when it cannot be reached).
        """
        sent = Sent()
        events: list[TrialEvent] = []
        for item in items:
            event = _event(item, source)
            if isinstance(event, Rejection):
                sent.rejected.append(event)
                continue
            events.append(event)
            sent.runs.add(event.run)
            sent.offered[event.run] += 1
        sent.trials = len(events)
        # A batch the service refuses (e.g. a run it does not know) is
        # noted and dropped; the rest of the file still goes.
        waiting = events
        while True:
            try:
                if waiting:
                    waiting = []
                    self._client.report(events)  # buffered whole, then sent
                self._client.flush()
            except BatchRefusedError as refusal:
                sent.refuse(refusal.run, refusal.trials, refusal.detail)
                sent.trials -= refusal.trials
                continue
            break
        # Noted on the client's thread, read once the flush returned.
        refusals, self._refusals = self._refusals, []
        for run, count, reason in refusals:
            sent.refuse(run, count, reason)
            sent.trials -= count
        return sent

    def _refused(self, run: str, count: int, reasons: list[str]) -> None:
        self._refusals.append((run, count, reasons[0] if reasons else "refused"))

    def holds(self, run: str) -> bool:
        """Whether the service counted trials of ``run``."""
        try:
            return self._client.status(run).trials > 0
        except UnknownRunError:
            return False

    def statuses(self, runs: Iterable[str]) -> list[Status]:
        return [self._client.status(run) for run in sorted(runs)]


def _event(item: object, source: str) -> TrialEvent | Rejection:
    """A trial event to send, or why the item is none.

    Items are decoded as the service would decode them (one decoder), so
    a row refused here would be refused there, in the same words.
    """
    if isinstance(item, Rejection):
        return item
    if isinstance(item, Located):
        decoded = decode_object(item.fields, source, item.position)
    elif isinstance(item, Trial | TrialEvent):
        decoded = item
    else:
        decoded = decode_object(item, source)
    if isinstance(decoded, Trial):
        return event_of(decoded)
    return decoded


def ingest_to_url(
    batches: Iterable[ItemBatch], url: str, token: str | None, config: Path | None
) -> tuple[Sent, list[Status]]:
    """Send every batch to the service; what went, and the runs' statuses."""
    total = Sent()
    with RemoteSink(url, token, config) as sink:
        for batch in batches:
            sent = sink.send(batch.items, batch.source)
            total.add(sent)
            _show(sent.rejected)
        _show_refused(total)
        return total, sink.statuses(_counted(total))


def watch_to_url(
    path: Path | None,
    open_source: Callable[[Cursor | None], JsonLines],
    url: str,
    token: str | None,
    config: Path | None,
    follow: bool = False,
) -> tuple[Sent, list[Status]]:
    """Follow ``path`` into the service, resuming from its cursor for ``url``.

    ``open_source`` opens the reader at a resume point (or the start).
    Trials the service refuses are totalled per run and said when the watch
    ends; a following watch also says the first refusal of each run at once.
    """
    total = Sent()
    cursors = UrlCursors(path, url)
    with RemoteSink(url, token, config) as sink:
        source = open_source(cursors.resume(sink))
        for lines, cursor in source.batches():
            parsed: list[Parsed] = []
            for line in lines:
                if line.too_long:
                    parsed.append(
                        too_large(
                            line.too_long, MAX_PAYLOAD_BYTES, source.name, line.number
                        )
                    )
                else:
                    parsed.extend(decode_events(line.data, source.name, line.number))
            sent = sink.send(parsed, source.name)
            if follow:
                for run in sorted(sent.refused.keys() - total.refused.keys()):
                    print(
                        f"scorio-monitor: the service refuses trials of run {run!r}: "
                        f"{sent.refused[run][1]} (a total follows when the watch ends)",
                        file=sys.stderr,
                    )
            total.add(sent)
            _show(sent.rejected)
            if cursor is not None:
                # Only after the service acknowledged the batch.
                cursors.save(cursor, _counted(total))
        _show_refused(total)
        return total, sink.statuses(_counted(total))


class UrlCursors:
    """Where ``watch --url`` of a file stopped, per service URL.

    Kept in ``PATH.url-cursor`` as JSON, ``{url: {"cursor": ..., "runs":
    [...]}}``: a watch of the same file into another service starts from the
    top, and one into a service that holds none of the trials sent to it
    before (restarted empty) starts over too. Sending again is harmless: the
    service counts each trial once.

    Args:
        path: The watched file (``None``, stdin, keeps no cursor).
        url: The service's URL.
    """

    def __init__(self, path: Path | None, url: str) -> None:
        self._path = path
        self._file = None if path is None else path.with_name(path.name + ".url-cursor")
        self._url = url.rstrip("/")
        self._entries: dict[str, dict[str, object]] = self._read()
        self._runs: set[str] = set()

    def resume(self, sink: RemoteSink) -> Cursor | None:
        """The position to resume from at this URL, or None for the start."""
        entry = self._entries.get(self._url)
        if entry is None:
            if self._entries:
                print(
                    f"scorio-monitor: {self._path} was sent to "
                    f"{', '.join(sorted(self._entries))}, not yet to {self._url}; "
                    "sending it from the start",
                    file=sys.stderr,
                )
            return None
        cursor = entry.get("cursor")
        runs = entry.get("runs")
        if not isinstance(cursor, str) or not isinstance(runs, list):
            return None
        lost = [run for run in runs if isinstance(run, str) and not sink.holds(run)]
        if lost:
            print(
                f"scorio-monitor: {self._url} holds no trials of run {lost[0]!r}, "
                f"which an earlier watch of {self._path} sent it (a new or emptied "
                "service?); sending the file from the start (each trial counts once)",
                file=sys.stderr,
            )
            return None
        self._runs = {run for run in runs if isinstance(run, str)}
        return Cursor.decode(cursor)

    def save(self, cursor: str, runs: set[str]) -> None:
        """Record ``cursor`` for this URL, and the runs the service took."""
        if self._file is None:
            return
        self._runs |= runs
        self._entries[self._url] = {"cursor": cursor, "runs": sorted(self._runs)}
        written = self._file.with_name(self._file.name + ".tmp")
        written.write_text(json.dumps(self._entries, indent=1), encoding="utf-8")
        written.replace(self._file)

    def _read(self) -> dict[str, dict[str, object]]:
        if self._file is None or not self._file.exists():
            return {}
        try:
            entries = json.loads(self._file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            entries = None
        if not isinstance(entries, dict) or not all(
            isinstance(entry, dict) for entry in entries.values()
        ):
            print(
                f"scorio-monitor: {self._file} is not a cursor file of this "
                "version (no service URL in it); sending the file from the start",
                file=sys.stderr,
            )
            return {}
        return entries


def _counted(sent: Sent) -> set[str]:
    """The runs the service took: not those it refused every trial of."""
    return {
        run
        for run in sent.runs
        if sent.offered[run] > sent.refused.get(run, (0, ""))[0]
    }


def _show_refused(sent: Sent) -> None:
    for run, (count, reason) in sorted(sent.refused.items()):
        print(
            f"scorio-monitor: the service refused {count} trials of run {run!r}: "
            f"{reason}",
            file=sys.stderr,
        )


def _show(rejections: list[Rejection]) -> None:
    for rejection in rejections:
        where = rejection.source.removeprefix("file:")
        position = "" if rejection.position is None else f":{rejection.position}"
        print(f"{where}{position}: rejected: {rejection.reason}", file=sys.stderr)
