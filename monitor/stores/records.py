"""What stores hold and hand back: value types of counts, totals, events, letters.

A store (:class:`monitor.interfaces.Store`) is the source of truth for what
was counted; these frozen or plain records are what it stores and returns:
a model's sufficient statistics (:class:`ModelCounts`), the run totals, the
changes other writers made, dead letters, events pending and fired, the
whole state a restart reads (:class:`StoredState`), and the report of one
ingest call. Events fire once because ``record_events`` keeps each ``(run,
kind, subject)`` at most once and hands back only the new ones, numbered in
firing order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from monitor.schema import Rejection, RunConfig

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected input and why; ``run`` when the input named a valid one."""

    source: str
    reason: str
    raw: str
    run: str | None = None
    position: int | None = None
    received_s: float = 0.0


@dataclass(slots=True)
class ModelCounts:
    """Sufficient statistics of one model in one run, as stored."""

    questions: list[str] = field(default_factory=list)
    observed: list[list[int]] = field(default_factory=list)
    prior: list[list[int]] = field(default_factory=list)
    costed_trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class CountChanges:
    """What other writers changed in a run's counts since a store last looked.

    One row per changed cell, as columns, so a large change is applied with
    NumPy rather than cell by cell: row ``i`` adds ``delta[i]`` to the cell
    ``(models[model[i]], questions[question[i]], prior[i], category[i])``.
    ``costs`` maps a model to the (trials, tokens, seconds) added. Cheaper to
    apply than a full re-read of the counts when the run is large.
    """

    models: list[str]
    model: NDArray[np.int64]
    questions: list[str]
    question: NDArray[np.int64]
    prior: NDArray[np.bool_]
    category: NDArray[np.int64]
    delta: NDArray[np.int64]
    costs: dict[str, tuple[int, int, float]]

    @classmethod
    def from_cells(
        cls,
        cells: Mapping[tuple[str, str, bool, int], int],
        costs: Mapping[str, tuple[int, int, float]] | None = None,
    ) -> CountChanges:
        """Changes from a ``(model, question, prior, category) -> delta`` map."""
        models = list(dict.fromkeys(cell[0] for cell in cells))
        questions = list(dict.fromkeys(cell[1] for cell in cells))
        model_number = {model: index for index, model in enumerate(models)}
        question_number = {question: index for index, question in enumerate(questions)}
        size = len(cells)
        return cls(
            models=models,
            model=np.fromiter((model_number[c[0]] for c in cells), np.int64, size),
            questions=questions,
            question=np.fromiter(
                (question_number[c[1]] for c in cells), np.int64, size
            ),
            prior=np.fromiter((c[2] for c in cells), np.bool_, size),
            category=np.fromiter((c[3] for c in cells), np.int64, size),
            delta=np.fromiter(cells.values(), np.int64, size),
            costs=dict(costs or {}),
        )

    @property
    def cells(self) -> dict[tuple[str, str, bool, int], int]:
        """The changes as ``(model, question, prior, category) -> delta``."""
        summed: dict[tuple[str, str, bool, int], int] = {}
        for model, question, prior, category, delta in zip(
            self.model.tolist(),
            self.question.tolist(),
            self.prior.tolist(),
            self.category.tolist(),
            self.delta.tolist(),
            strict=True,
        ):
            cell = (self.models[model], self.questions[question], prior, category)
            summed[cell] = summed.get(cell, 0) + delta
        return summed


@dataclass(slots=True)
class RunTotals:
    """Run-level counters: unique trials counted and what was not counted."""

    trials: int = 0
    duplicates: int = 0
    corrections: int = 0
    rejected: int = 0


@dataclass(slots=True)
class CostTotals:
    """Cost reported by new trials of one model."""

    trials: int = 0
    tokens: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event the engine wants to fire (if it never fired before)."""

    run: str
    kind: str
    subject: str
    payload: Mapping[str, JsonValue]
    ts: float


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A fired event with its sequence number (the resume point)."""

    seq: int
    run: str
    kind: str
    subject: str
    payload: Mapping[str, JsonValue]
    ts: float

    def document(self) -> dict[str, JsonValue]:
        """The wire form (MQTT, server-sent events, webhooks)."""
        return {
            "seq": self.seq,
            "run": self.run,
            "kind": self.kind,
            "subject": self.subject,
            "payload": dict(self.payload),
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest call did."""

    accepted: int
    duplicates: int
    corrections: int
    rejected: tuple[Rejection, ...]
    events: tuple[StoredEvent, ...]
    runs: tuple[str, ...] = ()


def combined_reports(reports: Sequence[IngestReport]) -> IngestReport:
    """One report for the pieces of one ingest call (runs sorted, as one call's)."""
    if len(reports) == 1:
        return reports[0]
    return IngestReport(
        accepted=sum(report.accepted for report in reports),
        duplicates=sum(report.duplicates for report in reports),
        corrections=sum(report.corrections for report in reports),
        rejected=tuple(r for report in reports for r in report.rejected),
        events=tuple(e for report in reports for e in report.events),
        runs=tuple(sorted({run for report in reports for run in report.runs})),
    )


@dataclass(slots=True)
class StoredState:
    """Everything needed to rebuild the engine after a restart."""

    configs: dict[str, RunConfig] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)
    counts: dict[str, dict[str, ModelCounts]] = field(default_factory=dict)
    totals: dict[str, RunTotals] = field(default_factory=dict)
    fired: set[tuple[str, str, str]] = field(default_factory=set)
    cursors: dict[str, str] = field(default_factory=dict)
