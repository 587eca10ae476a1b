"""The ``ingest`` loop: finished results files into the engine.

Harness readers (adapters) turn their files into batches of *items*: a
trial event's mapping for each trial (decoded by :mod:`monitor.inputs.decode`),
or a :class:`Rejection` for an input they could not read (with its file and
line). :func:`ingest_batches` counts them batch by batch; :func:`ingest_matrix`
feeds a ``models x questions x trials`` tensor through the engine's columnar
path. :class:`CategoryMap` turns a harness's outcome values (``"C"``/``"I"``, or
fractions such as
``0.25``) into categories, the same way for every reader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from monitor.engine.monitor import Monitor
from monitor.engine.scoring import ResultsMatrix
from monitor.inputs.columns import Parsed
from monitor.inputs.decode import Decoded, decode_object
from monitor.schema import Rejection, RunConfig
from monitor.stores.memory import IngestReport, combined_reports


@dataclass(frozen=True, slots=True)
class Located:
    """A trial read at a known line of its file, so a refusal can say where."""

    fields: Mapping[str, object]
    position: int


Item = Mapping[str, object] | Located | Rejection

_CHUNK_TRIALS = 1 << 20


@dataclass(frozen=True, slots=True)
class ItemBatch:
    """Items read from one source (a file path), in order."""

    source: str
    items: Sequence[Item]


@dataclass(slots=True)
class IngestTotals:
    """What an ingest session read and counted."""

    items: int = 0
    accepted: int = 0
    duplicates: int = 0
    corrections: int = 0
    rejected: int = 0

    @property
    def valid(self) -> int:
        """Inputs that were valid trials (new, repeated or corrected)."""
        return self.accepted + self.duplicates + self.corrections

    def add(self, report: IngestReport, items: int) -> None:
        self.items += items
        self.accepted += report.accepted
        self.duplicates += report.duplicates
        self.corrections += report.corrections
        self.rejected += len(report.rejected)


class CategoryMap:
    """Outside outcome values mapped onto categories.

    A value matches a key by its text (``"C"``, ``"true"`` for JSON true) or,
    for numbers, by numeric equality (``1.0`` matches ``"1"``).

    Args:
        values: Key (as text) to category, e.g. ``{"C": 1, "I": 0}``.

    Raises:
        ValueError: when a category is negative.

    Examples:
        >>> scores = CategoryMap({"C": 1, "I": 0, "0.5": 1})
        >>> scores.category("C"), scores.category(0.5), scores.category("P")
        (1, 1, None)
    """

    def __init__(self, values: Mapping[str, int]) -> None:
        for key, category in values.items():
            if category < 0:
                raise ValueError(f"category for {key!r} must be >= 0; got {category}")
        self._by_text = {key.strip(): category for key, category in values.items()}
        self._by_number: dict[float, int] = {}
        for key, category in self._by_text.items():
            number = _number(key)
            if number is not None:
                self._by_number[number] = category

    @property
    def keys(self) -> list[str]:
        return list(self._by_text)

    def category(self, value: object) -> int | None:
        """The category of ``value``, or None when the map does not cover it."""
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = value.strip()
        else:
            text = str(value)
        if text in self._by_text:
            return self._by_text[text]
        number = value if isinstance(value, int | float) else _number(text)
        if number is None or isinstance(number, bool):
            return None
        return self._by_number.get(float(number))


def batched(
    source: str, items: Iterable[Item], size: int = 5000
) -> Iterator[ItemBatch]:
    """Items of one source in batches of at most ``size``."""
    batch: list[Item] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield ItemBatch(source, batch)
            batch = []
    if batch:
        yield ItemBatch(source, batch)


def ingest_batches(
    monitor: Monitor,
    batches: Iterable[ItemBatch],
    on_report: Callable[[IngestReport], None] = lambda report: None,
) -> IngestTotals:
    """Count every batch of items; a rejection is dead-lettered like bad JSON."""
    totals = IngestTotals()
    for batch in batches:
        parsed: list[Parsed] = []
        positions: list[int | None] = []
        for item in batch.items:
            if isinstance(item, Rejection):
                parsed.append(item)
                positions.append(item.position)
            elif isinstance(item, Located):
                parsed.append(decode_object(item.fields, batch.source, item.position))
                positions.append(item.position)
            else:
                parsed.append(decode_object(item, batch.source))
                positions.append(None)
        report = monitor.ingest_parsed(
            with_implied_run(monitor, parsed), source=batch.source, positions=positions
        )
        totals.add(report, len(batch.items))
        on_report(report)
    return totals


def with_implied_run(monitor: Monitor, parsed: Sequence[Decoded]) -> list[Decoded]:
    """Rejections that name no run, counted against the batch's one run.

    A stream or file of one run (the usual case) has its unreadable inputs
    counted in that run's ``rejected``, so the count equals what was reported.
    The run is the one the batch's trials name, or the monitor's only run; in
    a batch of several runs such an input counts against none.
    """
    named = {item.run for item in parsed if not isinstance(item, Rejection)}
    if len(named) == 1:
        run: str | None = named.pop()
    elif not named and len(monitor.runs) == 1:
        run = monitor.runs[0]
    else:
        return list(parsed)
    return [
        item.model_copy(update={"run": run})
        if isinstance(item, Rejection) and item.run is None
        else item
        for item in parsed
    ]


def ingest_matrix(
    monitor: Monitor, matrix: ResultsMatrix, chunk_trials: int = _CHUNK_TRIALS
) -> IngestReport:
    """Count a results tensor through :meth:`Monitor.ingest_columns`.

    Question ``q`` and trial ``t`` get the ids ``"q"`` and ``"t"``. A run
    the monitor does not know yet is declared with the tensor's question
    count as its M (the array says how many questions there are) and the
    weights the file carries, if any; its models stay open.

    Raises:
        ValueError: when the tensor is not 3-D, names the wrong number of
            models, or carries weights other than those of a known run.
    """
    results = matrix.results
    if results.ndim != 3 or len(matrix.models) != results.shape[0]:
        raise ValueError(
            f"run {matrix.run!r}: expected {len(matrix.models)} models x questions "
            f"x trials; got shape {results.shape}"
        )
    _declare_run(monitor, matrix)
    _, question_count, trial_count = results.shape
    step = max(1, chunk_trials // max(trial_count, 1))
    reports = []
    for model, per_model in zip(matrix.models, results, strict=True):
        for first in range(0, question_count, step):
            last = min(first + step, question_count)
            size = (last - first) * trial_count
            reports.append(
                monitor.ingest_columns(
                    matrix.run,
                    [model] * size,
                    np.repeat(np.arange(first, last), trial_count),
                    np.tile(np.arange(trial_count), last - first),
                    per_model[first:last].reshape(size),
                )
            )
    return combined_reports(reports)


def _declare_run(monitor: Monitor, matrix: ResultsMatrix) -> None:
    weights = None if matrix.weights is None else [float(w) for w in matrix.weights]
    if matrix.run not in monitor.runs:
        question_count = int(matrix.results.shape[1])
        declared: dict[str, object] = {
            "run": matrix.run,
            "question_count": question_count,
        }
        if weights is not None:
            declared["weights"] = weights
        monitor.configure(RunConfig.model_validate(declared))
        return
    known = monitor.config(matrix.run).weights
    if weights is not None and known != weights:
        raise ValueError(
            f"run {matrix.run!r} has weights {known}; the file carries {weights}"
        )


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
