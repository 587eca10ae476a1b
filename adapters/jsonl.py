"""JSON-lines input: a file read once or followed as it grows, or stdin.

Lines come out in batches with their 1-based line numbers and a cursor
(``inode:offset:line``) that points just past the batch; committing the
cursor with the batch lets a restarted reader resume exactly where the last
committed batch ended. A partial last line (a writer mid-write) is left for
the next read when following. Lines longer than ``max_line_bytes`` are not
loaded: they come out as ``too_long`` with their length.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from monitor.interfaces import IngestSink, Line, Payload


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a file reader stands: which file (inode), byte offset, line."""

    inode: int
    offset: int
    line: int

    def encode(self) -> str:
        return f"{self.inode}:{self.offset}:{self.line}"

    @classmethod
    def decode(cls, text: str | None) -> Cursor | None:
        if not text:
            return None
        try:
            inode, offset, line = (int(part) for part in text.split(":"))
        except ValueError:
            return None
        return cls(inode, offset, line)


class JsonLines:
    """Batches of lines from a path (``None`` or ``"-"`` for stdin).

    Args:
        path: The file, or None/"-" for standard input.
        follow: Keep reading as the file grows until :meth:`stop`.
        resume: A cursor from an earlier run; ignored if the file was
            replaced (another inode) or is now shorter.
        max_line_bytes: Longer lines are skipped, reported as too long.
        batch_lines: Most lines per batch; or a function of the lines read
            so far (a resumed file's included) giving it batch by batch.
        poll_interval_s: Wait between reads when following an idle file.
        sleep: Injectable sleep, for tests.
    """

    def __init__(
        self,
        path: Path | None,
        *,
        follow: bool = False,
        resume: Cursor | None = None,
        max_line_bytes: int = 1 << 20,
        batch_lines: int | Callable[[int], int] = 2000,
        poll_interval_s: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._path = None if path is None or str(path) == "-" else path
        self._follow = follow
        self._resume = resume
        self._max_line_bytes = max_line_bytes
        self._batch_lines = (
            batch_lines if callable(batch_lines) else lambda read: batch_lines
        )
        self._poll_interval_s = poll_interval_s
        self._sleep = sleep
        self._stopped = False
        self._line = 0
        # Resolved once: callers ask per line, and resolving is a syscall per
        # path component.
        self._name = "stdin" if self._path is None else f"file:{self._path.resolve()}"

    @property
    def name(self) -> str:
        """Cursor name: ``file:<absolute path>``, or ``stdin``."""
        return self._name

    def stop(self) -> None:
        """Ask a following reader to finish after its current batch."""
        self._stopped = True

    def batches(self) -> Iterator[tuple[list[Line], str | None]]:
        """Yield (lines, encoded cursor after them); None for stdin."""
        if self._path is None:
            for batch in self._read(sys.stdin.buffer, seekable=False):
                yield batch, None
            return
        with self._path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            start = Cursor(stat.st_ino, 0, 0)
            resume = self._resume
            if (
                resume is not None
                and resume.inode == stat.st_ino
                and resume.offset <= stat.st_size
            ):
                start = resume
            handle.seek(start.offset)
            self._line = start.line
            for batch in self._read(handle, seekable=True):
                yield batch, Cursor(stat.st_ino, handle.tell(), self._line).encode()

    def _read(self, handle: BinaryIO, seekable: bool) -> Iterator[list[Line]]:
        following = self._follow and seekable
        while not self._stopped:
            batch: list[Line] = []
            most = self._batch_lines(self._line)
            while len(batch) < most:
                line_start = handle.tell() if seekable else 0
                # The line, its newline and one byte more: a line's length
                # is its payload's, without the newline (as any source's).
                raw = handle.readline(self._max_line_bytes + 2)
                if not raw:
                    break
                ended = raw.endswith(b"\n")
                length = len(raw) - ended
                if not ended:
                    rest, ended = (
                        self._skip_rest(handle)
                        if length > self._max_line_bytes
                        else (0, False)
                    )
                    if following and not ended:
                        # A writer is mid-line: read the whole line next time.
                        handle.seek(line_start)
                        break
                    length += rest
                self._line += 1
                if length > self._max_line_bytes:
                    batch.append(Line(self._line, b"", too_long=length))
                elif raw.strip():
                    batch.append(Line(self._line, raw))
            if batch:
                yield batch
            elif not following:
                return
            else:
                self._sleep(self._poll_interval_s)

    @staticmethod
    def _skip_rest(handle: BinaryIO) -> tuple[int, bool]:
        """Consume the rest of an oversized line: its length (without the
        newline) and whether the line ended (False at the end of the file)."""
        skipped = 0
        while True:
            chunk = handle.readline(1 << 16)
            if not chunk:
                return skipped, False
            if chunk.endswith(b"\n"):
                return skipped + len(chunk) - 1, True
            skipped += len(chunk)


class JsonLinesSource:
    """The service's view of a :class:`JsonLines` reader: a trial source.

    Reads run on a worker thread (file reads block); each batch is committed
    with the reader's cursor, so a restart resumes after the last batch.
    """

    def __init__(self, reader: JsonLines) -> None:
        self._reader = reader

    @property
    def name(self) -> str:
        return self._reader.name

    async def run(self, sink: IngestSink) -> None:
        batches = self._reader.batches()
        try:
            while True:
                item = await asyncio.to_thread(next, batches, None)
                if item is None:
                    return
                lines, cursor = item
                payloads = [
                    Payload(
                        data=line.data,
                        source=self.name,
                        position=line.number,
                        oversize=line.too_long,
                    )
                    for line in lines
                ]
                await sink.ingest_payloads(
                    payloads, None if cursor is None else (self.name, cursor)
                )
        finally:
            self._reader.stop()
