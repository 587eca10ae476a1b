"""Inspect AI logs after the fact: ``.eval`` / ``.json`` log files into trials.

An eval that ran without the live hook (or before the monitor existed) is
read from its log with Inspect's own reader (``inspect_ai.log``). Each
scored (sample, epoch) becomes one trial, named exactly as the live hook
names it, so a log read after a hooked eval adds nothing:

==========  ==========================================================
run         the task's name (as the hook names it) unless ``run`` is given
model       the model as Inspect names it (``openai/gpt-4o``)
question    the sample id
trial       ``<eval id>:<epoch - 1>``
category    the index of the score's value among the run's weights
==========  ==========================================================

Weights are Inspect's own value of each score (``value_to_float``: C = 1,
P = 0.5, I = N = 0, numbers as they are), so the run's ``avg`` equals the
accuracy Inspect reports, partial credit included. A new run is declared
with the distinct values its logs hold (0 and 1 always among them); a run the
monitor knows keeps its weights, and a value that is none of them is refused.

Samples that errored or are unscored (NaN) are not trials; they are counted
and said once per log. A score that is no scalar Inspect can read (a list, a
mapping, an unknown word) is refused with its reason. With several scorers
the first is used unless ``scorer`` names one; a log without it is refused.
Early-stopped and cancelled logs are read as far as they go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from inspect_ai.log import (
    EvalSample,
    list_eval_logs,
    read_eval_log,
    read_eval_log_samples,
)
from inspect_ai.scorer import value_to_float

from adapters.harness.inspect_ai import _cost, _timestamp, attempt_id, run_name
from monitor.engine.monitor import Monitor
from monitor.feeds.files import Item, ItemBatch, ingest_batches
from monitor.schema import Cost, Rejection, RunConfig
from monitor.stores.records import IngestReport

_TO_FLOAT = value_to_float()
_LETTERS = frozenset({"C", "I", "P", "N"})  # Inspect compares these exactly
_WORDS = frozenset({"yes", "no", "true", "false"})  # and these in lower case
LOG_SUFFIXES = (".eval", ".json")


@dataclass(frozen=True, slots=True)
class LogTrial:
    """One scored sample-epoch: its trial fields and Inspect's value of it."""

    model: str
    question: str
    trial: str
    value: float
    cost: dict[str, float | int | None] | None
    ts: float | None


@dataclass(slots=True)
class InspectLog:
    """What one log file holds for the monitor."""

    path: Path
    run: str
    task: str
    model: str
    status: str
    trials: list[LogTrial] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    not_scored: int = 0
    errored: int = 0


def log_files(path: Path) -> list[Path]:
    """The Inspect logs at ``path``: the file itself, or every log under a directory.

    Raises:
        ValueError: when ``path`` holds no Inspect log.
    """
    if path.is_file():
        return [path]
    found = sorted(
        Path(info.name.removeprefix("file://"))
        for info in list_eval_logs(str(path), recursive=True, descending=False)
    )
    if not found:
        raise ValueError(
            f"{path}: no Inspect logs ({' or '.join(LOG_SUFFIXES)} files) in it"
        )
    return found


def read_log(
    path: Path, *, run: str | None = None, scorer: str | None = None
) -> InspectLog:
    """The trials of one Inspect log (see the module doc).

    Raises:
        ValueError: when the file is not an Inspect log Inspect can read.
    """
    try:
        header = read_eval_log(str(path), header_only=True)
    except Exception as exc:  # Inspect raises several kinds for a bad file
        raise ValueError(
            f"{path}: not an Inspect log Inspect can read ({exc})"
        ) from exc
    spec = header.eval
    log = InspectLog(
        path=path,
        run=run or run_name(spec.task),
        task=spec.task,
        model=spec.model,
        status=header.status,
    )
    for sample in read_eval_log_samples(str(path), all_samples_required=False):
        _add_sample(log, sample, spec.eval_id, scorer)
    return log


def read_logs(
    path: Path, *, run: str | None = None, scorer: str | None = None
) -> Iterator[InspectLog]:
    """Every log under ``path`` read in turn (see :func:`read_log`)."""
    for file in log_files(path):
        yield read_log(file, run=run, scorer=scorer)


def _add_sample(
    log: InspectLog, sample: EvalSample, eval_id: str, scorer: str | None
) -> None:
    where = f"{log.model} on sample {sample.id!r}, epoch {sample.epoch}"
    if sample.error is not None:
        log.errored += 1
        return
    scores = sample.scores or {}
    if scorer is not None and scorer not in scores:
        known = ", ".join(scores) or "none"
        log.refused.append(
            (where, f"no score from scorer {scorer!r} (scorers: {known})")
        )
        return
    score = (
        scores.get(scorer) if scorer is not None else next(iter(scores.values()), None)
    )
    if score is None:
        log.not_scored += 1
        return
    value = inspect_value(score.value)
    if isinstance(value, str):
        log.refused.append((where, value))
        return
    if math.isnan(value):
        log.not_scored += 1
        return
    cost = _cost(sample, log.model)
    log.trials.append(
        LogTrial(
            model=log.model,
            question=str(sample.id),
            trial=attempt_id(eval_id, sample.epoch),
            value=value,
            cost=None if cost is None else _fields(cost),
            ts=_timestamp(sample.completed_at),
        )
    )


def _fields(cost: Cost) -> dict[str, float | int | None]:
    return {k: v for k, v in msgspec.structs.asdict(cost).items() if v is not None}


def inspect_value(value: object) -> float | str:
    """Inspect's value of a score (``value_to_float``), or why it has none.

    Examples:
        >>> inspect_value("C"), inspect_value("P"), inspect_value(0.25)
        (1.0, 0.5, 0.25)
        >>> inspect_value([1, 0])
        'score value [1, 0] is no scalar (pick one scorer value with --scorer)'
    """
    if isinstance(value, bool | int | float):
        number = float(value)
        if math.isinf(number):
            return f"score value {value!r} is not finite"
        return number  # NaN stays: Inspect's "unscored"
    if isinstance(value, str):
        text = value.lower()
        if value in _LETTERS or text in _WORDS or _is_number(text):
            return _TO_FLOAT(value)
        return f"score value {value!r} has no value Inspect can read"
    return f"score value {value!r} is no scalar (pick one scorer value with --scorer)"


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def run_weights(values: Sequence[float]) -> list[float]:
    """The weights a new run is declared with: its distinct values, 0 and 1 among them.

    Examples:
        >>> run_weights([1.0, 0.5, 0.0, 1.0])
        [0.0, 0.5, 1.0]
        >>> run_weights([1.0])
        [0.0, 1.0]
    """
    return sorted({0.0, 1.0, *values})


def category_for(value: float, weights: Sequence[float]) -> int | None:
    """The category whose weight is ``value``; ``None`` when no weight is."""
    for index, weight in enumerate(weights):
        if math.isclose(weight, value, rel_tol=1e-9, abs_tol=1e-12):
            return index
    return None


@dataclass(slots=True)
class LogIngest:
    """What reading Inspect logs gave: the logs and the runs they declared."""

    logs: list[InspectLog] = field(default_factory=list)
    declared: dict[str, list[float]] = field(default_factory=dict)


def ingest_logs(
    monitor: Monitor,
    path: Path,
    *,
    run: str | None = None,
    scorer: str | None = None,
    on_report: Callable[[IngestReport], None] = lambda report: None,
) -> LogIngest:
    """Count every Inspect log under ``path`` through the one decoder.

    Every log is read before any is counted, so a new run is declared once
    with the values all its logs hold (a partial-credit scorer in the second
    file still finds its weight).
    """
    result = LogIngest(logs=list(read_logs(path, run=run, scorer=scorer)))
    by_run: dict[str, list[InspectLog]] = {}
    for log in result.logs:
        by_run.setdefault(log.run, []).append(log)
    for name, logs in by_run.items():
        if name in monitor.runs:
            weights = list(monitor.config(name).weights)
        else:
            weights = run_weights([t.value for log in logs for t in log.trials])
            monitor.configure(RunConfig(run=name, weights=weights))
            result.declared[name] = weights
        for log in logs:
            ingest_batches(monitor, [_batch(log, weights)], on_report)
    return result


def _batch(log: InspectLog, weights: Sequence[float]) -> ItemBatch:
    items: list[Item] = []
    source = str(log.path)
    for where, why in log.refused:
        items.append(Rejection(reason=f"{where}: {why}", source=source, run=log.run))
    for trial in log.trials:
        category = category_for(trial.value, weights)
        if category is None:
            items.append(
                Rejection(
                    reason=(
                        f"{trial.model} on {trial.question!r} ({trial.trial}): score "
                        f"value {trial.value:g} is no weight of run {log.run!r} "
                        f"(weights {list(weights)})"
                    ),
                    source=source,
                    run=log.run,
                )
            )
            continue
        event: dict[str, object] = {
            "run": log.run,
            "model": trial.model,
            "question": trial.question,
            "trial": trial.trial,
            "category": category,
        }
        if trial.cost is not None:
            event["cost"] = trial.cost
        if trial.ts is not None:
            event["ts"] = trial.ts
        items.append(event)
    return ItemBatch(source, items)
