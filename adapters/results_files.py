"""Finished results on disk: ``.npz`` tensors and CSV/JSONL trial rows.

``.npz`` files follow scorio's data files: each 3-D array is one run (its key
is the run id) shaped ``models x questions x trials``; optional arrays
``models`` (names) and ``w`` or ``weights`` apply to every run in the file.
Trial rows are one trial each with ``model``, ``question``, ``trial`` and
``category`` (or ``correct``), and optionally ``run``. A :class:`RowMapping`
reads other harnesses' rows: it renames columns (a dotted name reaches into
nested JSON objects), maps outcome values such as ``"C"``/``"I"`` onto
categories, and can fix the run or model of every row.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

import numpy as np

from monitor.engine.scoring import ResultsMatrix
from monitor.feeds.files import CategoryMap, Item, Located
from monitor.inputs.decode import decode_object
from monitor.inputs.reasons import json_reason
from monitor.schema import Rejection, TrialEvent

RowFormat: TypeAlias = Literal["csv", "jsonl"]

_NAME_KEYS = ("models",)
_WEIGHT_KEYS = ("w", "weights")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class TrialRow:
    """One trial read from a row file."""

    run: str
    model: str
    question: str
    trial: str
    category: int


@dataclass(frozen=True, slots=True)
class RowError:
    """A row that could not be read, with its 1-based line number."""

    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class RowMapping:
    """How another harness's rows become trials.

    Attributes:
        columns: Their column name to ours (``run``, ``model``, ``question``,
            ``trial``, ``category``, ``correct``), e.g. ``{"sample_id":
            "question", "epoch": "trial", "score": "category"}``. In JSON
            rows a dotted name such as ``scores.match.value`` reaches into
            nested objects.
        values: Maps the outcome's values onto categories, e.g. ``"C"`` to 1
            and ``"I"`` to 0; a value it does not cover rejects the row.
        run: The run of every row (default: the ``run`` column, else the
            file's stem).
        model: The model of every row (default: the ``model`` column).
    """

    columns: Mapping[str, str] = field(default_factory=dict)
    values: CategoryMap | None = None
    run: str | None = None
    model: str | None = None


def load_results_npz(path: Path) -> list[ResultsMatrix]:
    """Read every run tensor of an ``.npz`` file.

    Raises:
        ValueError: when the file holds no 3-D result array or names the
            wrong number of models.
    """
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    weights = next((arrays[key] for key in _WEIGHT_KEYS if key in arrays), None)
    names = next((arrays[key] for key in _NAME_KEYS if key in arrays), None)
    runs = [
        key
        for key, value in arrays.items()
        if key not in _WEIGHT_KEYS + _NAME_KEYS and value.ndim in (2, 3)
    ]
    if not runs:
        raise ValueError(
            f"{path} holds no results array shaped (models, questions, trials)"
        )
    matrices = []
    for run in runs:
        results = arrays[run]
        if results.ndim == 2:
            results = results[None, :, :]
        models = (
            tuple(str(name) for name in names)
            if names is not None
            else tuple(f"model-{index}" for index in range(results.shape[0]))
        )
        matrices.append(
            ResultsMatrix(
                run=run,
                models=models,
                results=np.asarray(results, dtype=np.int64),
                weights=None if weights is None else np.asarray(weights, dtype=float),
            )
        )
    return matrices


def read_trial_rows(
    path: Path,
    mapping: RowMapping | None = None,
    kind: RowFormat | None = None,
) -> Iterator[TrialRow | RowError]:
    """Yield each row of a CSV or JSONL file as a trial, or as an error.

    Args:
        path: A ``.csv`` file with a header, or JSON lines (an object, or an
            array of objects, per line).
        mapping: How this file's columns and values map to ours.
        kind: ``"csv"`` or ``"jsonl"``; None decides by the file's suffix
            (``.csv`` is CSV, anything else JSON lines).
    """
    for _, row in _numbered_rows(path, mapping or RowMapping(), kind):
        yield row


def _numbered_rows(
    path: Path, mapping: RowMapping, kind: RowFormat | None
) -> Iterator[tuple[int, TrialRow | RowError]]:
    default_run = path.stem
    if kind is None:
        kind = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    if kind == "csv":
        # Undecodable bytes become U+FFFD and reject their row, not the file.
        with path.open(newline="", errors="replace") as handle:
            reader = csv.DictReader(handle)
            for record in reader:
                line = reader.line_num
                yield line, _row(record, mapping, default_run, line)
        return
    with path.open(errors="replace") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                # In the decoder's words, its column counted on the line as read.
                reason = f"invalid JSON: {json_reason(text.encode())}"
                yield line, RowError(line, reason)
                continue
            for record in value if isinstance(value, list) else [value]:
                if not isinstance(record, dict):
                    yield line, RowError(line, "each row must be a JSON object")
                    continue
                yield line, _row(record, mapping, default_run, line)


def read_row_items(
    path: Path, mapping: RowMapping | None = None, kind: RowFormat | None = None
) -> Iterator[Item]:
    """Each row as a trial event, or as a rejection naming the file and line."""
    for line, row in _numbered_rows(path, mapping or RowMapping(), kind):
        if isinstance(row, RowError):
            yield Rejection(
                reason=row.reason,
                source=str(path),
                position=row.line,
                run=mapping.run if mapping is not None else None,
            )
        else:
            fields = {
                "run": row.run,
                "model": row.model,
                "question": row.question,
                "trial": row.trial,
                "category": row.category,
            }
            yield Located(fields, line)


def _row(
    record: Mapping[str, object], mapping: RowMapping, default_run: str, line: int
) -> TrialRow | RowError:
    fields = {key: value for key, value in record.items() if key not in mapping.columns}
    for theirs, ours in mapping.columns.items():
        value = _lookup(record, theirs)
        if value is not _MISSING:
            fields[ours] = value
    if mapping.run is not None:
        fields["run"] = mapping.run
    if mapping.model is not None:
        fields["model"] = mapping.model
    # A row file's missing columns, all named at once (the decoder would name
    # the first); every other problem is the decoder's to word.
    missing = [
        name
        for name in ("model", "question", "trial")
        if fields.get(name) in (None, "")
    ]
    if missing:
        return RowError(line, f"missing field(s): {', '.join(missing)}")
    if mapping.values is not None:
        category = _mapped_category(fields, mapping.values)
        if isinstance(category, str):
            return RowError(line, category)
        outcome: dict[str, object] = {"category": category}
    else:
        outcome = _outcome(fields)
        if not outcome:
            return RowError(line, "missing field: category (or correct)")
    # The row as a trial event (ids as text, an empty cell absent), checked
    # by the one decoder: a bad row gets the contract's words.
    event: dict[str, object] = {"run": _text(fields.get("run")) or default_run}
    for name in ("model", "question", "trial"):
        value = _text(fields.get(name))
        if value is not None:
            event[name] = value
    decoded = decode_object({**event, **outcome})
    if isinstance(decoded, Rejection):
        return RowError(line, decoded.reason)
    return TrialRow(
        run=decoded.run,
        model=decoded.model,
        question=decoded.question,
        trial=decoded.trial,
        category=decoded.outcome
        if isinstance(decoded, TrialEvent)
        else decoded.category,
    )


def _text(value: object) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _lookup(record: Mapping[str, object], name: str) -> object:
    """A field by name, or by a dotted path through nested objects."""
    if name in record:
        return record[name]
    value: object = record
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _mapped_category(fields: Mapping[str, object], values: CategoryMap) -> int | str:
    """The category the value map gives the row's outcome, or why none."""
    name = "category" if fields.get("category") not in (None, "") else "correct"
    if fields.get(name) in (None, ""):
        return "missing field: category (or correct)"
    category = values.category(fields[name])
    if category is None:
        keys = ", ".join(values.keys)
        return f"{name} {fields[name]!r} is not in the value map ({keys})"
    return category


def _outcome(fields: Mapping[str, object]) -> dict[str, object]:
    """The row's outcome as the contract's field, translated from text cells.

    A value that does not translate stays as it came, and no outcome stays
    absent (the row reader names it); the decoder words any other refusal.
    """
    value = fields.get("category")
    if value in (None, "") and "correct" in fields:
        correct = fields["correct"]
        text = str(correct).strip().lower()
        if isinstance(correct, bool) or text not in ("true", "1", "false", "0"):
            return {"correct": correct}
        return {"correct": text in ("true", "1")}
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            return {"category": int(value)}
        except ValueError:
            return {"category": value}
    return {"category": value}
