"""lm-eval ``--log_samples`` files as trial items, read once or followed.

A samples file holds one JSON line per (document, filter), and every filter's
line repeats the document's generations ``resps``, so only the lines of one
filter are read and each document counts once. Each document becomes trials
of run ``<task>``, model ``model_name`` from the results file (else the
samples file's folder, which lm-eval names after the model) and question
``doc_id`` (``<task>:<doc_id>`` when the options name another run, so the
tasks of a group can share one run):

- by default one trial per document whose category is the logged
  metric (``exact_match``, ``acc``: 0 or 1) of the task's first filter
  (``none`` when it has none); a filter whose value combines several
  generations (``maj@k``, a keep-all ``take_first_k``) is read only when
  named, and fractions only through a :class:`CategoryMap`;
- with ``repeats``, one trial per generation in ``resps[0]`` (the trial is
  its position), re-scored by :mod:`adapters.lm_eval.rescoring` and checked
  against the logged value; tasks with one generation per document
  (multiple choice) keep the logged metric.

A trial is one attempt: its id is ``<date>:<repeat>``, the date of the run
that wrote the file (the ``<date>`` of ``samples_<task>_<date>.jsonl`` and
``results_<date>.json``, new for every lm-eval run) and the generation's
position (``0`` without repeats). Two runs into one output directory so add
up, while reading the same files again counts nothing twice. Legacy files
(lm-eval 0.4.0-0.4.2, no date in the name) keep the bare position.

A ``--predict_only`` run logs no scores and replaces the task's metrics
with ``bypass``: multiple-choice tasks are scored as lm-eval scores ``acc``
(the gold choice has the highest logged log-likelihood); other tasks are
refused, saying that the task's metric and options are missing. A model
name lm-eval made up (no ``pretrained=`` or other naming model arg) is
refused with a hint to name the model.

A line that cannot be read becomes a :class:`Rejection` naming the file and
line (a sample number in legacy files, which are one JSON array).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from adapters.lm_eval.rescoring import (
    Rescorer,
    build_rescorer,
    combines_several,
    keeps_several,
    pipelines,
)
from adapters.lm_eval.results import name_parts, read_results, results_path
from monitor.inputs.files import CategoryMap, Item, ItemBatch
from monitor.inputs.reasons import raw_text
from monitor.schema import Rejection

_FIXED_KEYS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    }
)


@dataclass(frozen=True, slots=True)
class LmEvalOptions:
    """How samples become trials; ``None`` means: as the files say.

    Attributes:
        run: The run id (default: the task name).
        model: The model id (default: the results file's ``model_name``,
            else the samples file's folder name).
        filter: Which filter's lines to read (default: the task's first).
        metric: Which logged metric is the outcome (default: the line's first).
        repeats: One trial per generation, re-scored.
        values: Maps logged values onto categories (e.g. fractions).
    """

    run: str | None = None
    model: str | None = None
    filter: str | None = None
    metric: str | None = None
    repeats: bool = False
    values: CategoryMap | None = None


class LmEvalSamples:
    """Batches of trial items from lm-eval samples files.

    Args:
        path: One samples file, or an output directory searched recursively
            for ``samples_*.jsonl`` files.
        options: How samples become trials.
        follow: Keep reading new lines and new files until :meth:`stop`
            (lm-eval writes a task's file when the whole run ends).
        poll_interval_s: Wait between looks when following.
        batch_items: Most items per batch.
        sleep: Injectable sleep, for tests.
    """

    def __init__(
        self,
        path: Path,
        options: LmEvalOptions | None = None,
        *,
        follow: bool = False,
        poll_interval_s: float = 1.0,
        batch_items: int = 5000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._path = path
        self._options = options or LmEvalOptions()
        self._follow = follow
        self._poll_interval_s = poll_interval_s
        self._batch_items = batch_items
        self._sleep = sleep
        self._files: dict[Path, _SamplesFile] = {}
        self._stopped = False

    @property
    def name(self) -> str:
        return f"lm-eval:{self._path.resolve()}"

    def stop(self) -> None:
        """Ask a following reader to finish after its current batch."""
        self._stopped = True

    def batches(self) -> Iterator[ItemBatch]:
        """Yield the items of every file, then (following) of new lines and files.

        Raises:
            ValueError: when not following and the path does not exist.
        """
        if not self._follow and not self._path.exists():
            raise ValueError(f"no such file or directory: {self._path}")
        while not self._stopped:
            for samples in self._discover():
                chunk: list[Item] = []
                for item in samples.read(final=not self._follow):
                    chunk.append(item)
                    if len(chunk) >= self._batch_items:
                        yield ItemBatch(str(samples.path), chunk)
                        chunk = []
                if chunk:
                    yield ItemBatch(str(samples.path), chunk)
                if self._stopped:
                    return
            if not self._follow:
                return
            self._sleep(self._poll_interval_s)

    def _discover(self) -> list[_SamplesFile]:
        if self._path.is_dir():
            # lm-eval's own rule for samples files: "samples_" and ".json".
            paths = sorted(
                path
                for path in self._path.rglob("samples_*")
                if ".json" in path.name and path.is_file()
            )
        else:
            paths = [self._path] if self._path.is_file() else []
        for path in paths:
            if path not in self._files:
                self._files[path] = _SamplesFile(path, self._options)
        return list(self._files.values())


def read_lm_eval(path: Path, options: LmEvalOptions | None = None) -> Iterator[Item]:
    """Every item of a samples file or output directory, read once."""
    for batch in LmEvalSamples(path, options).batches():
        yield from batch.items


@dataclass(frozen=True, slots=True)
class _Context:
    """What a samples file's name and its results file say about its trials."""

    run: str
    model: str
    prefix: str
    attempt: str
    config: Mapping[str, object] | None


class _SamplesFile:
    """One samples file, read incrementally.

    The filter is chosen at the first line (from the task config when there
    is one, else the first line's filter: lines come grouped by filter in the
    config's order). A problem that would repeat on every line (a filter that
    cannot be read as asked) is reported once and ends the file.
    """

    def __init__(self, path: Path, options: LmEvalOptions) -> None:
        self.path = path
        self._options = options
        self._offset = 0
        self._line = 0
        self._context: _Context | None = None
        self._filter: str | None = None
        self._rescorer: Rescorer | None = None
        self._unscorable = ""
        self._refusal = ""
        self._seen: set[str] = set()
        self._filters: dict[str, None] = {}
        self._failed = False
        self._predict_only = False
        self._finished = False

    def read(self, final: bool) -> Iterator[Item]:
        """Items of the lines added since the last read.

        ``final`` also reads a last line without its newline and reports a
        chosen filter that has no line; otherwise such a line waits for its
        writer, as does a results file that does not parse yet.
        """
        if self._finished:
            return
        if self._context is None:
            opened = self._open(final)
            if opened is None:
                return
            self._context, problems = opened
            yield from problems
            if self._failed:
                self._finished = True
                return
        with self.path.open("rb") as handle:
            if self._offset == 0 and _first_byte(handle) == b"[":
                handle.seek(0)
                yield from self._read_array(handle, final)
                return
            handle.seek(self._offset)
            while raw := handle.readline():
                if not raw.endswith(b"\n") and not final:
                    break
                self._offset += len(raw)
                self._line += 1
                if raw.strip():
                    yield from self._line_items(raw, self._line)
        if final:
            self._finished = True
            if self._filters and not self._seen and not self._failed:
                present = ", ".join(repr(name) for name in self._filters)
                reason = f"no line for filter {self._filter!r}; the file has {present}"
                yield self._reject(reason, None, "")

    def _open(self, final: bool) -> tuple[_Context, list[Item]] | None:
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
            self._failed = True
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
        return _Context(run, model, prefix, attempt, config), problems

    def _read_array(self, handle: BinaryIO, final: bool) -> Iterator[Item]:
        """A legacy file: one JSON array of samples, read once it is complete."""
        text = handle.read()
        try:
            records = json.loads(text)
        except ValueError as exc:
            if final:
                self._finished = True
                yield self._reject(f"invalid JSON array: {exc}", None, text)
            return
        self._finished = True
        if not isinstance(records, list):
            yield self._reject("expected a JSON array of samples", None, text)
            return
        for number, record in enumerate(records, start=1):
            for item in self._items(record, None):
                if isinstance(item, Rejection):
                    reason = f"sample {number}: {item.reason}"
                    item = item.model_copy(update={"reason": reason})
                yield item

    def _line_items(self, raw: bytes, line: int) -> list[Item]:
        try:
            record = json.loads(raw)
        except ValueError as exc:
            return [self._reject(f"invalid JSON: {exc}", line, raw)]
        return self._items(record, line)

    def _items(self, record: object, line: int | None) -> list[Item]:
        if self._failed:
            return []
        if not isinstance(record, dict):
            return [self._reject("a sample must be a JSON object", line, record)]
        doc_id = record.get("doc_id")
        if (
            isinstance(doc_id, bool)
            or not isinstance(doc_id, int | str)
            or doc_id == ""
        ):
            reason = f"doc_id must be an integer; got {doc_id!r}"
            return [self._reject(reason, line, record)]
        name = record.get("filter")
        if name is not None and not isinstance(name, str):
            reason = f"filter must be a string; got {name!r}"
            return [self._reject(reason, line, record)]
        if self._filter is None:
            self._choose("none" if name is None else name)
        question = str(doc_id)
        if name is not None:
            self._filters[name] = None
            if name != self._filter:
                return []
        # Lines of legacy files name no filter: a document's first line is
        # its first filter's, so later ones are skipped like other filters'.
        if question in self._seen:
            return []
        self._seen.add(question)
        if self._predict_only:
            return self._predicted(record, question, line)
        if self._rescorer is not None:
            return self._rescored(self._rescorer, record, question, line)
        generations = _generations(record)
        if self._options.repeats and generations is not None and len(generations) > 1:
            self._failed = True
            reason = (
                f"cannot re-score the {len(generations)} generations per document: "
                f"{self._unscorable}; ingest without repeats for one trial per "
                "document"
            )
            return [self._reject(reason, line, record)]
        if self._refusal:
            self._failed = True
            return [self._reject(self._refusal, line, record)]
        return self._logged(record, question, line)

    def _choose(self, first_seen: str) -> None:
        """Pick the filter and how its lines are scored."""
        config = None if self._context is None else self._context.config
        found = pipelines(config)
        named = self._options.filter
        if named is not None:
            self._filter = named
        elif config is not None:
            self._filter = next(iter(found), "none")
        else:
            self._filter = first_seen
        steps = found.get(self._filter, [])
        metrics = (config or {}).get("metric_list")
        if metrics == [{"metric": "bypass"}]:
            # --predict_only: lm-eval scored nothing and kept no metric.
            self._predict_only = True
            return
        if self._options.repeats:
            built = (
                "no results file with the task's config was found"
                if config is None
                else build_rescorer(config, self._filter)
            )
            if isinstance(built, Rescorer):
                self._rescorer = built
            else:
                self._unscorable = built
        elif keeps_several(steps) and self._options.values is None:
            self._refusal = (
                f"filter {self._filter!r} logs the fraction of correct generations; "
                "use repeats to count each generation, or map the fractions to "
                "categories"
            )
        elif combines_several(steps) and named is None:
            self._refusal = (
                f"the task's first filter {self._filter!r} combines several "
                "generations; name it to count its value once per document, or "
                "use repeats"
            )

    def _predicted(
        self, record: Mapping[str, object], question: str, line: int | None
    ) -> list[Item]:
        """A --predict_only line: scored as the task would, where that is known.

        Multiple choice is: ``acc`` is whether the gold choice has the
        highest log-likelihood, which the logged responses hold. Generated
        answers are not: the task's metric and its options (exact_match's
        ignore_case, regexes_to_ignore, ...) are gone from the results file.
        """
        config = None if self._context is None else self._context.config
        output_type = (config or {}).get("output_type")
        if output_type != "multiple_choice":
            self._failed = True
            reason = (
                "a --predict_only run: lm-eval logged no scores, and its results "
                "file no longer says how the task scores (metric_list is "
                f"'bypass'; output_type {output_type!r}). Missing: the task's "
                "metric and its options. Re-run lm-eval without --predict_only "
                "to count this task"
            )
            return [self._reject(reason, line, record)]
        likelihoods = _choice_likelihoods(record)
        target = record.get("target")
        gold = (
            int(target)
            if isinstance(target, int | str) and str(target).isdigit()
            else None
        )
        if likelihoods is None or gold is None or gold >= len(likelihoods):
            reason = (
                "a --predict_only multiple-choice line needs resps of "
                "[[log-likelihood, is_greedy]] per choice and a target that is "
                f"the gold choice's index; got target {target!r}"
            )
            return [self._reject(reason, line, record)]
        best = max(range(len(likelihoods)), key=likelihoods.__getitem__)
        return [self._event(question, 0, int(best == gold))]

    def _logged(
        self, record: Mapping[str, object], question: str, line: int | None
    ) -> list[Item]:
        metric = self._options.metric or next(iter(_metric_names(record)), None)
        if metric is None:
            return [self._reject("the sample logs no metric", line, record)]
        if metric not in record:
            # The file's lines log the same metrics: say it once.
            self._failed = True
            present = ", ".join(_metric_names(record)) or "none"
            reason = f"no metric {metric!r}; the samples log: {present}"
            return [self._reject(reason, line, record)]
        category = self._category(metric, record[metric])
        if isinstance(category, str):
            # Without a value map, a value other than 0 or 1 means the metric
            # is no per-document outcome: counting only the documents that
            # happen to score 0 or 1 would bias the run, so stop here.
            self._failed = self._options.values is None
            return [self._reject(category, line, record)]
        return [self._event(question, 0, category)]

    def _category(self, metric: str, value: object) -> int | str:
        """The category of a logged value, or why it has none."""
        values = self._options.values
        if values is not None:
            category = values.category(value)
            if category is None:
                keys = ", ".join(values.keys)
                return f"{metric} = {value!r} is not in the value map ({keys})"
            return category
        if value is None:
            return (
                f"{metric} has no value (a --predict_only run scores nothing), "
                "and no results file with the task's config was found to score "
                "it; the rest of the file is skipped"
            )
        if isinstance(value, int | float) and value in (0, 1):
            return int(value)
        return (
            f"{metric} = {value!r} is not 0 or 1 (a score over several "
            "generations, or a graded one); use repeats to count each "
            "generation, or map the values to categories; the rest of the file "
            "is skipped"
        )

    def _rescored(
        self,
        rescorer: Rescorer,
        record: Mapping[str, object],
        question: str,
        line: int | None,
    ) -> list[Item]:
        generations = _generations(record)
        if not generations:
            reason = "resps must be [[generation, ...]] with strings"
            return [self._reject(reason, line, record)]
        target = record.get("target")
        if isinstance(target, bool) or not isinstance(target, str | int):
            reason = f"target must be a string; got {target!r}"
            return [self._reject(reason, line, record)]
        extracted, correct = rescorer.correct(generations, str(target))
        logged = record.get("exact_match")
        if isinstance(logged, int | float) and not isinstance(logged, bool):
            expected = rescorer.logged_value(extracted, correct, str(target))
            if abs(expected - logged) > 1e-9:
                reason = (
                    f"re-scored generations {correct} give exact_match "
                    f"{expected:g} under filter {self._filter!r}, but the harness "
                    f"logged {logged:g}; the task's scoring cannot be re-applied"
                )
                return [self._reject(reason, line, record)]
        return [self._event(question, trial, c) for trial, c in enumerate(correct)]

    def _event(self, question: str, trial: int, category: int) -> dict[str, object]:
        if self._context is None:
            raise RuntimeError("a samples file was read before it was opened")
        return {
            "run": self._context.run,
            "model": self._context.model,
            "question": self._context.prefix + question,
            "trial": self._context.attempt + str(trial)
            if self._context.attempt
            else trial,
            "category": category,
        }

    def _reject(self, reason: str, line: int | None, raw: object) -> Rejection:
        return Rejection(
            reason=reason,
            source=str(self.path),
            position=line,
            raw=raw_text(raw),
            run=None if self._context is None else self._context.run,
        )


def _generations(record: Mapping[str, object]) -> list[str] | None:
    """``resps[0]``: the first request's generations, one per repeat."""
    responses = record.get("resps")
    if not isinstance(responses, list) or not responses:
        return None
    first = responses[0]
    if not isinstance(first, list) or not all(isinstance(g, str) for g in first):
        return None
    return first


def _choice_likelihoods(record: Mapping[str, object]) -> list[float] | None:
    """Per choice, the log-likelihood of a multiple-choice line's ``resps``."""
    responses = record.get("resps")
    if not isinstance(responses, list) or not responses:
        return None
    values = []
    for response in responses:
        first = response[0] if isinstance(response, list) and response else None
        value = first[0] if isinstance(first, list) and first else first
        try:
            values.append(float(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    return values


def _metric_names(record: Mapping[str, object]) -> list[str]:
    """The ``metrics`` list, or (legacy files) every other numeric key."""
    listed = record.get("metrics")
    if isinstance(listed, list):
        return [name for name in listed if isinstance(name, str)]
    return [
        key
        for key, value in record.items()
        if key not in _FIXED_KEYS
        and (value is None or isinstance(value, int | float))
        and not isinstance(value, bool)
    ]


def _first_byte(handle: BinaryIO) -> bytes:
    """The first byte that is not whitespace (empty for an empty file)."""
    while chunk := handle.read(256):
        stripped = chunk.lstrip()
        if stripped:
            return stripped[:1]
    return b""
