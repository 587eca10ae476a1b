"""Re-scoring each generation the way lm-eval scores a filtered response.

With ``repeats: K`` lm-eval logs all K generations of a document in
``resps[0]`` but scores only what the filter keeps (the first, a majority
vote, or the fraction of the first k). The task's config in the results file
records the filter steps and exact_match's options, so each generation can be
scored on its own: the filter's per-generation steps (``regex``,
``remove_whitespace``, ``lowercase``, ``uppercase``) extract an answer, and
exact_match's normalisation (``regexes_to_ignore`` in order, then
``ignore_case``, ``ignore_punctuation``, ``ignore_numbers``) is applied to the
answer and the target before comparing them. Selection steps (``take_first``,
``take_first_k``, ``majority_vote``) only tell what the harness logged, which
:meth:`Rescorer.logged_value` recomputes as a check.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

Steps = list[Mapping[str, object]]

_DEFAULT_REGEX: Final = r"#### (\-?[0-9\.\,]+)"
_PER_GENERATION: Final = frozenset(
    {"regex", "remove_whitespace", "lowercase", "uppercase"}
)
_SELECTION: Final = frozenset({"take_first", "take_first_k", "majority_vote"})
_MATCH_OPTIONS: Final = frozenset(
    {"regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers"}
)
_METRIC_KEYS: Final = frozenset({"metric", "aggregation", "higher_is_better"})


@dataclass(frozen=True, slots=True)
class Extraction:
    """One per-generation step of a filter, as lm-eval applies it."""

    function: str
    pattern: re.Pattern[str] | None = None
    group: int = 0
    fallback: str = "[invalid]"

    def apply(self, text: str) -> str:
        if self.function == "remove_whitespace":
            return text.strip()
        if self.function == "lowercase":
            return text.lower()
        if self.function == "uppercase":
            return text.upper()
        if self.pattern is None:
            return text
        # RegexFilter: findall, pick one match, its first non-empty group, strip.
        matches = self.pattern.findall(text)
        if not matches or not -len(matches) <= self.group < len(matches):
            return self.fallback
        match = matches[self.group]
        if isinstance(match, tuple):
            match = next((part for part in match if part), self.fallback)
        return str(match).strip()


@dataclass(frozen=True, slots=True)
class Rescorer:
    """A task's filter and exact_match, applied to one generation at a time."""

    extractions: tuple[Extraction, ...]
    functions: tuple[str, ...]
    k: int | None
    ignored: tuple[str, ...]
    ignore_case: bool
    ignore_punctuation: bool
    ignore_numbers: bool

    def correct(
        self, generations: list[str], target: str
    ) -> tuple[list[str], list[int]]:
        """Each generation's extracted answer, and whether it matches the target."""
        gold = self.normalise(target)
        extracted = [self.extract(text) for text in generations]
        return extracted, [int(self.normalise(answer) == gold) for answer in extracted]

    def extract(self, generation: str) -> str:
        for step in self.extractions:
            generation = step.apply(generation)
        return generation

    def normalise(self, text: str) -> str:
        """exact_match's normalisation, in the harness's order."""
        for pattern in self.ignored:
            text = re.sub(pattern, "", text)
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(str.maketrans("", "", string.punctuation))
        if self.ignore_numbers:
            text = text.translate(str.maketrans("", "", string.digits))
        # The harness compares numpy strings, which drop trailing NULs.
        return text.rstrip("\x00")

    def logged_value(
        self, extracted: list[str], correct: list[int], target: str
    ) -> float:
        """What the harness logs for this filter, given each generation."""
        first_k = "take_first_k" in self.functions and self.k is not None
        if "majority_vote" in self.functions:
            candidates = extracted[: self.k] if first_k else extracted
            vote = Counter(candidates).most_common(1)[0][0]
            return float(self.normalise(vote) == self.normalise(target))
        if first_k and "take_first" not in self.functions:
            kept = correct[: self.k]
            return sum(kept) / len(kept)
        return float(correct[0])


def pipelines(config: Mapping[str, object] | None) -> dict[str, Steps]:
    """A task config's filters by name (in order), each a list of steps."""
    entries = None if config is None else config.get("filter_list")
    found: dict[str, Steps] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        steps = entry.get("filter")
        found[entry["name"]] = [
            step
            for step in (steps if isinstance(steps, list) else [])
            if isinstance(step, dict)
        ]
    return found


def keeps_several(steps: Steps) -> bool:
    """Whether a filter logs a fraction over k generations (take_first_k alone)."""
    functions = {step.get("function") for step in steps}
    return "take_first_k" in functions and not functions & {
        "take_first",
        "majority_vote",
    }


def combines_several(steps: Steps) -> bool:
    """Whether a filter's logged value depends on more than one generation."""
    return any(
        step.get("function") in ("take_first_k", "majority_vote") for step in steps
    )


def build_rescorer(config: Mapping[str, object], filter_name: str) -> Rescorer | str:
    """The re-scorer of a task's filter, or why it cannot be re-applied."""
    output_type = config.get("output_type")
    if output_type != "generate_until":
        return f"the task's output_type is {output_type!r}, not generate_until"
    if config.get("process_results"):
        return "the task scores with its own process_results"
    if config.get("doc_to_choice") is not None:
        return "the task maps targets through doc_to_choice"
    match = _exact_match_options(config)
    if isinstance(match, str):
        return match
    found = pipelines(config)
    if not found and filter_name == "none":
        steps: Steps = [{"function": "take_first"}]
    elif filter_name in found:
        steps = found[filter_name]
    else:
        known = ", ".join(repr(name) for name in found) or "none"
        return f"the task has no filter {filter_name!r} (it has {known})"
    extractions = []
    k = None
    for step in steps:
        function = step.get("function")
        if function == "take_first_k":
            count = step.get("k")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                return f"take_first_k needs a positive k; got {count!r}"
            k = count
        elif function in _PER_GENERATION:
            extraction = _extraction(str(function), step)
            if isinstance(extraction, str):
                return f"filter {filter_name!r}: {extraction}"
            extractions.append(extraction)
        elif function not in _SELECTION:
            return f"filter {filter_name!r} uses {function!r}, which is not re-applied"
    ignored = match.get("regexes_to_ignore") or []
    if not isinstance(ignored, list) or not all(isinstance(p, str) for p in ignored):
        return "exact_match's regexes_to_ignore must be a list of patterns"
    return Rescorer(
        extractions=tuple(extractions),
        functions=tuple(str(step.get("function")) for step in steps),
        k=k,
        ignored=tuple(ignored),
        ignore_case=bool(match.get("ignore_case")),
        ignore_punctuation=bool(match.get("ignore_punctuation")),
        ignore_numbers=bool(match.get("ignore_numbers")),
    )


def _exact_match_options(config: Mapping[str, object]) -> Mapping[str, object] | str:
    # generate_until tasks without a metric_list score with plain exact_match.
    metrics = config.get("metric_list") or [{"metric": "exact_match"}]
    match = next(
        (
            entry
            for entry in (metrics if isinstance(metrics, list) else [])
            if isinstance(entry, dict) and entry.get("metric") == "exact_match"
        ),
        None,
    )
    if match is None:
        return "the task has no exact_match metric"
    unknown = set(match) - _METRIC_KEYS - _MATCH_OPTIONS
    if unknown:
        return f"exact_match options {sorted(unknown)} are not understood"
    return match


def _extraction(function: str, step: Mapping[str, object]) -> Extraction | str:
    if function != "regex":
        return Extraction(function)
    pattern = step.get("regex_pattern", _DEFAULT_REGEX)
    group = step.get("group_select", 0)
    fallback = step.get("fallback", "[invalid]")
    if (
        not isinstance(pattern, str)
        or isinstance(group, bool)
        or not isinstance(group, int)
        or not isinstance(fallback, str)
    ):
        return "a regex step needs a regex_pattern, an integer group_select"
    try:
        return Extraction("regex", re.compile(pattern), group, fallback)
    except re.error as exc:
        return f"invalid regex {pattern!r}: {exc}"
