"""Finished results on disk: ``.npz`` tensors and CSV/JSONL trial rows.

``.npz`` files follow scorio's data files: each 3-D array is one run (its key
is the run id) shaped ``models x questions x trials``; optional arrays
``models`` (names) and ``w`` or ``weights`` apply to every run in the file.
Trial rows are one trial each with ``model``, ``question``, ``trial`` and
``category`` (or ``correct``), and optionally ``run``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.scoring import ResultsMatrix

_NAME_KEYS = ("models",)
_WEIGHT_KEYS = ("w", "weights")


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
    path: Path, columns: Mapping[str, str] | None = None
) -> Iterator[TrialRow | RowError]:
    """Yield each row of a CSV or JSONL file as a trial, or as an error.

    Args:
        path: A ``.csv`` file with a header, or JSON lines (an object, or an
            array of objects, per line).
        columns: Optional renaming from this file's column names to ours,
            e.g. ``{"sample_id": "question", "epoch": "trial"}``.
    """
    rename = dict(columns or {})
    default_run = path.stem
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as handle:
            for line, record in enumerate(csv.DictReader(handle), start=2):
                yield _row(record, rename, default_run, line)
        return
    with path.open() as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                yield RowError(line, f"invalid JSON: {exc.msg} at column {exc.colno}")
                continue
            for record in value if isinstance(value, list) else [value]:
                if not isinstance(record, dict):
                    yield RowError(line, "each row must be a JSON object")
                    continue
                yield _row(record, rename, default_run, line)


def _row(
    record: Mapping[str, object], rename: dict[str, str], default_run: str, line: int
) -> TrialRow | RowError:
    fields = {rename.get(key, key): value for key, value in record.items()}
    missing = [
        name
        for name in ("model", "question", "trial")
        if fields.get(name) in (None, "")
    ]
    if missing:
        return RowError(line, f"missing field(s): {', '.join(missing)}")
    category = _category(fields)
    if isinstance(category, str):
        return RowError(line, category)
    return TrialRow(
        run=str(fields.get("run") or default_run),
        model=str(fields["model"]),
        question=str(fields["question"]),
        trial=str(fields["trial"]),
        category=category,
    )


def _category(fields: Mapping[str, object]) -> int | str:
    """The row's category, or a reason why it has none."""
    value = fields.get("category")
    if value in (None, "") and "correct" in fields:
        correct = fields["correct"]
        if isinstance(correct, bool):
            return int(correct)
        if str(correct).strip().lower() in ("true", "1"):
            return 1
        if str(correct).strip().lower() in ("false", "0"):
            return 0
        return f"correct must be true or false; got {correct!r}"
    if value in (None, ""):
        return "missing field: category (or correct)"
    if isinstance(value, bool):
        return f"category must be an integer; got {value!r}"
    try:
        number = int(str(value))
    except ValueError:
        return f"category must be an integer; got {value!r}"
    if number < 0:
        return f"category must be >= 0; got {number}"
    return number
