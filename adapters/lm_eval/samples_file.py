"""One lm-eval samples file, read incrementally into trial items.

A :class:`SamplesFile` remembers how far it read, so a followed file yields
only its new complete lines; a legacy file (one JSON array) is read once it
parses. Opening the file finds its run, model and trial ids from its name
and its results file; each record then goes to a
:class:`~adapters.lm_eval.records.RecordReader`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from adapters.lm_eval.records import FileContext, LmEvalOptions, RecordReader
from adapters.lm_eval.results import name_parts, read_results, results_path
from monitor.feeds.files import Item
from monitor.schema import Rejection


class SamplesFile:
    """One samples file, read incrementally."""

    def __init__(self, path: Path, options: LmEvalOptions) -> None:
        self.path = path
        self._options = options
        self._offset = 0
        self._line = 0
        self._records: RecordReader | None = None
        self._finished = False

    def read(self, final: bool) -> Iterator[Item]:
        """Items of the lines added since the last read.

        ``final`` also reads a last line without its newline and reports a
        chosen filter that has no line; otherwise such a line waits for its
        writer, as does a results file that does not parse yet.
        """
        if self._finished:
            return
        if self._records is None:
            opened = self._open(final)
            if opened is None:
                return
            context, problems = opened
            self._records = RecordReader(context, self._options)
            yield from problems
            if self._finished:
                return
        records = self._records
        with self.path.open("rb") as handle:
            if self._offset == 0 and _first_byte(handle) == b"[":
                handle.seek(0)
                yield from self._read_array(records, handle, final)
                return
            handle.seek(self._offset)
            while raw := handle.readline():
                if not raw.endswith(b"\n") and not final:
                    break
                self._offset += len(raw)
                self._line += 1
                if raw.strip():
                    yield from _line_items(records, raw, self._line)
        if final:
            self._finished = True
            missing = records.missing_filter()
            if missing is not None:
                yield missing

    def _open(self, final: bool) -> tuple[FileContext, list[Item]] | None:
        """The file's context and any problems; ``None`` to try again later.

        A problem that makes every trial wrong (a model name lm-eval made up)
        finishes the file.
        """
        task, date = name_parts(self.path)
        found = results_path(self.path, date)
        results = None
        problems: list[Item] = []
        if found is not None:
            try:
                results = read_results(found)
            except (OSError, ValueError) as exc:
                if not final:
                    return None  # the harness may be writing it right now
                reason = f"cannot read the results file: {exc}"
                problems.append(Rejection(reason=reason, source=str(found)))
        if date is None and results is not None:
            # Legacy names are <model args>_<task>: find the task's suffix.
            task = next((t for t in results.configs if task.endswith(f"_{t}")), task)
        model = (
            self._options.model
            or (results.model_name if results is not None else None)
            or self.path.resolve().parent.name
        )
        if (
            self._options.model is None
            and results is not None
            and results.model_name is not None
            and not results.names_its_model
        ):
            # lm-eval made this name up: trials under it would be a model
            # nobody can recognise, and a new one on every run.
            self._finished = True
            reason = (
                f"lm-eval named the model {results.model_name!r} itself: its "
                "--model_args have no pretrained= (nor model=, path=, engine=, "
                "peft=, delta=); name the model with --model NAME, or run "
                "lm-eval with --model_args pretrained=NAME"
            )
            problems.append(Rejection(reason=reason, source=str(self.path)))
        config = None if results is None else results.configs.get(task)
        run = self._options.run or task
        prefix = "" if run == task else f"{task}:"
        attempt = "" if date is None else f"{date}:"
        context = FileContext(str(self.path), run, model, prefix, attempt, config)
        return context, problems

    def _read_array(
        self, records: RecordReader, handle: BinaryIO, final: bool
    ) -> Iterator[Item]:
        """A legacy file: one JSON array of samples, read once it is complete."""
        text = handle.read()
        try:
            samples = json.loads(text)
        except ValueError as exc:
            if final:
                self._finished = True
                yield records.reject(f"invalid JSON array: {exc}", None, text)
            return
        self._finished = True
        if not isinstance(samples, list):
            yield records.reject("expected a JSON array of samples", None, text)
            return
        for number, record in enumerate(samples, start=1):
            for item in records.items(record, None):
                if isinstance(item, Rejection):
                    reason = f"sample {number}: {item.reason}"
                    item = item.model_copy(update={"reason": reason})
                yield item


def _line_items(records: RecordReader, raw: bytes, line: int) -> list[Item]:
    try:
        record = json.loads(raw)
    except ValueError as exc:
        return [records.reject(f"invalid JSON: {exc}", line, raw)]
    return records.items(record, line)


def _first_byte(handle: BinaryIO) -> bytes:
    """The first byte that is not whitespace (empty for an empty file)."""
    while chunk := handle.read(256):
        stripped = chunk.lstrip()
        if stripped:
            return stripped[:1]
    return b""
