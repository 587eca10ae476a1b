"""lm-eval sample records as trial items: validated, filtered, scored.

A samples file's records are read by :class:`RecordReader` once the file's
context is known (:class:`FileContext`: run, model, trial ids and the task's
config from its results file). It chooses the filter whose lines count, and
scores each document by the logged metric, by re-scoring each generation
(:mod:`adapters.lm_eval.rescoring`), or, for a ``--predict_only`` multiple
choice task, by the logged log-likelihoods. A record it cannot read becomes
a :class:`Rejection`; a problem that would repeat on every line is reported
once and ends the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from adapters.lm_eval.rescoring import (
    Rescorer,
    build_rescorer,
    combines_several,
    keeps_several,
    pipelines,
)
from monitor.feeds.files import CategoryMap, Item
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


@dataclass(frozen=True, slots=True)
class FileContext:
    """What a samples file's name and its results file say about its trials."""

    source: str
    run: str
    model: str
    prefix: str
    attempt: str
    config: Mapping[str, object] | None


class RecordReader:
    """One samples file's records, one at a time, as trial items.

    The filter is chosen at the first record (from the task config when there
    is one, else the first record's filter: lines come grouped by filter in
    the config's order). A problem that would repeat on every line (a filter
    that cannot be read as asked) is reported once and ends the file.
    """

    def __init__(self, context: FileContext, options: LmEvalOptions) -> None:
        self._context = context
        self._options = options
        self._filter: str | None = None
        self._rescorer: Rescorer | None = None
        self._unscorable = ""
        self._refusal = ""
        self._seen: set[str] = set()
        self._filters: dict[str, None] = {}
        self._failed = False
        self._predict_only = False

    @property
    def has_failed(self) -> bool:
        """Whether a problem ended the file (said once; later lines count nothing)."""
        return self._failed

    def items(self, record: object, line: int | None) -> list[Item]:
        """The trial items of one decoded record, or why it has none.

        ``line`` is the record's line number (``None`` in a legacy array).
        """
        if self._failed:
            return []
        if not isinstance(record, dict):
            return [self.reject("a sample must be a JSON object", line, record)]
        doc_id = record.get("doc_id")
        if (
            isinstance(doc_id, bool)
            or not isinstance(doc_id, int | str)
            or doc_id == ""
        ):
            reason = f"doc_id must be an integer; got {doc_id!r}"
            return [self.reject(reason, line, record)]
        name = record.get("filter")
        if name is not None and not isinstance(name, str):
            reason = f"filter must be a string; got {name!r}"
            return [self.reject(reason, line, record)]
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
            return [self.reject(reason, line, record)]
        if self._refusal:
            self._failed = True
            return [self.reject(self._refusal, line, record)]
        return self._logged(record, question, line)

    def _choose(self, first_seen: str) -> None:
        """Pick the filter and how its lines are scored."""
        config = self._context.config
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
        config = self._context.config
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
            return [self.reject(reason, line, record)]
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
            return [self.reject(reason, line, record)]
        best = max(range(len(likelihoods)), key=likelihoods.__getitem__)
        return [self._event(question, 0, int(best == gold))]

    def _logged(
        self, record: Mapping[str, object], question: str, line: int | None
    ) -> list[Item]:
        metric = self._options.metric or next(iter(_metric_names(record)), None)
        if metric is None:
            return [self.reject("the sample logs no metric", line, record)]
        if metric not in record:
            # The file's lines log the same metrics: say it once.
            self._failed = True
            present = ", ".join(_metric_names(record)) or "none"
            reason = f"no metric {metric!r}; the samples log: {present}"
            return [self.reject(reason, line, record)]
        category = self._category(metric, record[metric])
        if isinstance(category, str):
            # Without a value map, a value other than 0 or 1 means the metric
            # is no per-document outcome: counting only the documents that
            # happen to score 0 or 1 would bias the run, so stop here.
            self._failed = self._options.values is None
            return [self.reject(category, line, record)]
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
            return [self.reject(reason, line, record)]
        target = record.get("target")
        if isinstance(target, bool) or not isinstance(target, str | int):
            reason = f"target must be a string; got {target!r}"
            return [self.reject(reason, line, record)]
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
                return [self.reject(reason, line, record)]
        return [self._event(question, trial, c) for trial, c in enumerate(correct)]

    def _event(self, question: str, trial: int, category: int) -> dict[str, object]:
        return {
            "run": self._context.run,
            "model": self._context.model,
            "question": self._context.prefix + question,
            "trial": self._context.attempt + str(trial)
            if self._context.attempt
            else trial,
            "category": category,
        }

    def missing_filter(self) -> Rejection | None:
        """At the file's end: the chosen filter had no line although others did."""
        if self._filters and not self._seen and not self._failed:
            present = ", ".join(repr(name) for name in self._filters)
            reason = f"no line for filter {self._filter!r}; the file has {present}"
            return self.reject(reason, None, "")
        return None

    def reject(self, reason: str, line: int | None, raw: object) -> Rejection:
        """A rejection of a line (or sample) of this file."""
        return Rejection(
            reason=reason,
            source=self._context.source,
            position=line,
            raw=raw_text(raw),
            run=self._context.run,
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
