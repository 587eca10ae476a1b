r"""Rubric schemas: per-trial signals to a category ``0..C`` with default weights.

This module holds the twelve categorical schemas named by the Bayes@N
paper's rubric experiments, as pure functions of one trial's signals and a
run's fixed thresholds, plus the helper that computes those thresholds from
an earlier log. No I/O and no engine state: the engine calls
:meth:`Rubric.classify`. Provenance differs per schema and each rubric's
``reference`` says which: Exact Match is the paper's binary case, three come
from the authors' library, eight are ours because the paper's definitions
were not available to us (docs/rubrics.md justifies them).

How the engine uses it (design note). A run config may name a rubric
(``rubric = "conf_calibrated"``) and fix its thresholds (``thresholds =
{confidence = 0.62}``), which :func:`thresholds_from_signals` computes from
an earlier log with the library's percentile rule; the run's ``weights``
default to the rubric's and must have its length, its ``labels`` default to
the rubric's. Config validation calls :meth:`Rubric.check_thresholds`, so a
missing threshold is a config error, not a stream of rejections. A trial
event may then carry ``signals`` (a JSON object, names from :data:`SIGNALS`)
instead of ``category``: the engine classifies it once, at ingestion, with
the run's rubric and thresholds, and counts the category like any other; a
``ValueError`` from :meth:`Rubric.classify` becomes a rejected input (kind
``category``) with its message as the reason. An event with both keeps its
``category`` (the source knows best). Thresholds are fixed for the run's
life, so a re-delivered event classifies to the same category and stays a
duplicate, and replays rebuild the same counts.

Conventions, all from the authors' library (scorio 0.2.3,
``scorio.categorical``): thresholds come from the pooled log of every model;
a continuous signal is "high" when ``value >= median``; a three-level split
uses the 25th and 75th percentiles (``>= q75`` high, ``<= q25`` low, checked
in that order). ``bits_per_token`` is minus the completion's mean natural-log
probability over ``ln 2``, a decreasing map of the library's confidence
signal, so "confident" is ``bits_per_token <= confidence``. Categories are
numbered by increasing default weight.

Formula:
    .. math::

        R_{\alpha i} = \mathrm{classify}(s_{\alpha i}, \theta), \qquad
        \mu = \frac{1}{M}\sum_\alpha \sum_{k=0}^{C} w_k \frac{n_{\alpha k} + 1}
        {N + C + 1}

References:
    Hariri, Samandar, Hinczewski, Chaudhary. Don't Pass@k: A Bayesian
    Framework for Large Language Model Evaluation. ICLR 2026,
    arXiv:2510.04265 (categorical outcomes and weights: Sec. 2, Algorithm 1).
    Each rubric's ``reference`` names the source of its definition;
    docs/rubrics.md tabulates them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

import numpy as np

SignalKind = Literal["flag", "count", "number", "probability", "reason"]
Signals = Mapping[str, object]
Thresholds = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class SignalSpec:
    """One per-trial signal of the vocabulary: its type and meaning."""

    name: str
    kind: SignalKind
    description: str


@dataclass(frozen=True, slots=True)
class ThresholdSpec:
    """A run-level cut on one signal, computed as a percentile of an earlier log."""

    name: str
    signal: str
    percentile: float
    description: str


_SIGNAL_ROWS: Final[tuple[tuple[str, SignalKind, str], ...]] = (
    ("is_correct", "flag", "the extracted answer matches the reference"),
    ("has_box", "flag", r"the final answer is given in \boxed{}"),
    ("finish_reason", "reason", "why generation stopped (length: budget hit)"),
    ("output_tokens", "count", "completion length in tokens"),
    ("bits_per_token", "number", "completion surprisal, -mean log2 p(token)"),
    ("prompt_bits_per_token", "number", "prompt surprisal, log2 prompt perplexity"),
    ("verifier_prob", "probability", "a verifier's probability of correctness"),
)
SIGNALS: Final[Mapping[str, SignalSpec]] = MappingProxyType(
    {row[0]: SignalSpec(*row) for row in _SIGNAL_ROWS}
)

_THRESHOLD_ROWS: Final = (
    ("confidence", "bits_per_token", 50.0, "confident if bits_per_token <= it"),
    ("length", "output_tokens", 50.0, "concise if output_tokens < it"),
    ("length_short", "output_tokens", 25.0, "short if output_tokens <= it"),
    ("length_long", "output_tokens", 75.0, "long if output_tokens >= it (first)"),
    ("prompt_surprise", "prompt_bits_per_token", 50.0, "unfamiliar if >= it"),
    ("verifier", "verifier_prob", 50.0, "accepted if verifier_prob >= it"),
)
THRESHOLDS: Final[Mapping[str, ThresholdSpec]] = MappingProxyType(
    {row[0]: ThresholdSpec(*row) for row in _THRESHOLD_ROWS}
)

FINISH_REASONS: Final = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "error", "unknown"}
)
# Harness spellings of "the token budget ran out" (inspect_ai, Anthropic).
_LENGTH_ALIASES: Final = frozenset({"max_tokens", "model_length"})
_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")


class Reading:
    """One trial's validated signals read against the run's fixed thresholds.

    Its properties hold every threshold direction of :data:`THRESHOLDS`.
    Flags are stored as 0.0/1.0 and the finish reason as text.
    """

    __slots__ = ("_cuts", "_values")

    def __init__(self, values: Mapping[str, float | str], cuts: Thresholds) -> None:
        self._values = values
        self._cuts = cuts

    def number(self, name: str) -> float:
        """A numeric signal (flags are 0.0 or 1.0)."""
        value = self._values[name]
        if isinstance(value, str):
            raise TypeError(f"signal {name} is text, not a number")
        return value

    @property
    def correct(self) -> bool:
        return self.number("is_correct") == 1.0

    @property
    def boxed(self) -> bool:
        return self.number("has_box") == 1.0

    @property
    def finish_reason(self) -> str:
        return str(self._values["finish_reason"])

    @property
    def confident(self) -> bool:
        return self.number("bits_per_token") <= self._cuts["confidence"]

    @property
    def concise(self) -> bool:
        return self.number("output_tokens") < self._cuts["length"]

    @property
    def short(self) -> bool:
        return self.number("output_tokens") <= self._cuts["length_short"]

    @property
    def long(self) -> bool:
        return self.number("output_tokens") >= self._cuts["length_long"]

    @property
    def accepted(self) -> bool:
        return self.number("verifier_prob") >= self._cuts["verifier"]

    @property
    def unfamiliar(self) -> bool:
        return self.number("prompt_bits_per_token") >= self._cuts["prompt_surprise"]


@dataclass(frozen=True, slots=True)
class Rubric:
    """A categorical schema: which signals and thresholds map a trial to ``0..C``.

    Args:
        name: snake_case id used in run configs, e.g. ``"exact_match"``.
        title: The schema's name in the paper, e.g. ``"Exact Match"``.
        signals: Names from :data:`SIGNALS` every trial must carry.
        thresholds: Names from :data:`THRESHOLDS` the run must fix.
        labels: Category names; index is the category ``0..C``.
        weights: Default weight per category (length ``C + 1``).
        reference: Where the definition and the weights come from.
        rule: Maps a validated :class:`Reading` to a category.

    Examples:
        >>> rubric = RUBRICS["conf_calibrated"]
        >>> rubric.classify({"is_correct": True, "bits_per_token": 0.4},
        ...                 {"confidence": 0.5})
        3
        >>> rubric.labels[3], rubric.weights[3]
        ('confident_correct', 1.0)
    """

    name: str
    title: str
    signals: tuple[str, ...]
    thresholds: tuple[str, ...]
    labels: tuple[str, ...]
    weights: tuple[float, ...]
    reference: str
    rule: Callable[[Reading], int] = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"rubric name must be snake_case; got {self.name!r}")
        if len(self.labels) < 2 or len(self.labels) != len(self.weights):
            raise ValueError(
                f"rubric {self.name}: needs >= 2 labels and one weight per label; "
                f"got {len(self.labels)} labels, {len(self.weights)} weights"
            )
        if not all(math.isfinite(weight) for weight in self.weights):
            raise ValueError(f"rubric {self.name}: weights must be finite")
        unknown = [s for s in self.signals if s not in SIGNALS]
        unknown += [t for t in self.thresholds if t not in THRESHOLDS]
        if unknown:
            raise ValueError(f"rubric {self.name}: unknown names {unknown}")

    @property
    def category_count(self) -> int:
        """``C + 1``, the length of the weight vector."""
        return len(self.labels)

    def check_thresholds(self, thresholds: Thresholds) -> None:
        """Raise ValueError unless ``thresholds`` fixes every cut this rubric uses.

        Extra names are ignored (one run config may serve several rubrics).
        """
        for name in self.thresholds:
            value = thresholds.get(name)
            if isinstance(value, bool) or not isinstance(
                value, int | float | np.integer | np.floating
            ):
                raise ValueError(
                    f"rubric {self.name} needs threshold {name} "
                    f"({THRESHOLDS[name].description}); got {value!r}"
                )
            if not math.isfinite(value):
                raise ValueError(f"threshold {name} must be finite; got {value}")
        if {"length_short", "length_long"} <= set(self.thresholds) and (
            thresholds["length_short"] > thresholds["length_long"]
        ):
            raise ValueError(
                "length_short must not exceed length_long; got "
                f"{thresholds['length_short']} > {thresholds['length_long']}"
            )

    def classify(self, signals: Signals, thresholds: Thresholds) -> int:
        """The category ``0..C`` of one trial.

        Args:
            signals: The trial's signals; names outside :attr:`signals` are
                ignored, ``None`` counts as missing.
            thresholds: The run's fixed cuts (see :func:`thresholds_from_signals`).

        Raises:
            ValueError: A signal this rubric needs is missing or invalid, or a
                threshold is missing; the message says which and why.
        """
        self.check_thresholds(thresholds)
        values = {
            name: _signal_value(self.name, name, signals) for name in self.signals
        }
        return self.rule(Reading(values, thresholds))


def thresholds_from_signals(
    rubric: Rubric,
    rows: Iterable[Signals],
    percentiles: Mapping[str, float] | None = None,
) -> dict[str, float]:
    r"""A rubric's thresholds from an earlier log, by the library's percentile rule.

    Pool every model's rows, as ``scorio.categorical`` does, so all models are
    judged against the same cut. Rows missing a signal are skipped for that
    signal's thresholds; an invalid value raises.

    Args:
        rubric: The rubric whose :attr:`Rubric.thresholds` to compute.
        rows: Signal rows of an earlier log.
        percentiles: Overrides of :data:`THRESHOLDS` percentiles, in
            ``[0, 100]``, keyed by threshold name.

    Returns:
        ``{threshold name: value}`` for the run config (``{}`` if none needed).

    Raises:
        ValueError: Unknown override, percentile out of range, an invalid
            signal value, or no value of a needed signal in ``rows``.

    Formula:
        :math:`\theta = \mathrm{percentile}_p(\{s_r\})` with linear
        interpolation (numpy's default), ``p = 50`` for a median split and
        ``25``/``75`` for the three-level split.

    Examples:
        >>> rows = [{"output_tokens": n} for n in (100, 200, 400, 800, 1600)]
        >>> thresholds_from_signals(RUBRICS["efficiency_adjusted"], rows)
        {'length_short': 200.0, 'length_long': 800.0}
    """
    chosen = dict(percentiles or {})
    strays = sorted(set(chosen) - set(rubric.thresholds))
    if strays:
        raise ValueError(f"rubric {rubric.name} has no thresholds {strays}")
    for name, percentile in chosen.items():
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(
                f"percentile for {name} must be in [0, 100]; got {percentile}"
            )
    needed = {THRESHOLDS[name].signal for name in rubric.thresholds}
    columns: dict[str, list[float]] = {signal: [] for signal in needed}
    for position, row in enumerate(rows):
        for signal in needed:
            if row.get(signal) is None:
                continue
            try:
                value = _signal_value(rubric.name, signal, row)
            except ValueError as exc:
                raise ValueError(f"row {position}: {exc}") from exc
            columns[signal].append(float(value))
    result: dict[str, float] = {}
    for name in rubric.thresholds:
        spec = THRESHOLDS[name]
        values = columns[spec.signal]
        if not values:
            raise ValueError(f"no {spec.signal} values in the log to compute {name}")
        percentile = chosen.get(name, spec.percentile)
        result[name] = float(np.percentile(np.asarray(values), percentile))
    return result


def _signal_value(rubric: str, name: str, signals: Signals) -> float | str:
    spec = SIGNALS[name]
    value = signals.get(name)
    if value is None:
        raise ValueError(
            f"rubric {rubric} needs signal {name} ({spec.description}); missing"
        )
    problem = f"signal {name} must be {_EXPECTED[spec.kind]}; got {value!r}"
    if spec.kind == "flag":
        if isinstance(value, bool | np.bool_ | int | np.integer) and value in (0, 1):
            return float(value)
        raise ValueError(problem)
    if spec.kind == "reason":
        if not isinstance(value, str):
            raise ValueError(problem)
        reason = "length" if value in _LENGTH_ALIASES else value
        if reason not in FINISH_REASONS:
            raise ValueError(problem)
        return reason
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise ValueError(problem)
    if spec.kind == "count" and not isinstance(value, int | np.integer):
        raise ValueError(problem)
    number = float(value)
    if not math.isfinite(number) or number < 0.0:
        raise ValueError(problem)
    if spec.kind == "probability" and number > 1.0:
        raise ValueError(problem)
    return number


_EXPECTED: Final[Mapping[SignalKind, str]] = MappingProxyType(
    {
        "flag": "true/false (or 0/1)",
        "count": "an integer >= 0",
        "number": "a finite number >= 0",
        "probability": "a number in [0, 1]",
        "reason": "one of " + ", ".join(sorted(FINISH_REASONS | _LENGTH_ALIASES)),
    }
)


def _grid(correct: bool, level: bool, *, worst_wrong: bool) -> int:
    """A 2 x 2 schema's category: wrong 0-1, correct 2-3, ``level`` on top.

    With ``worst_wrong`` a wrong answer *with* the level is the worst case
    (confidently wrong, a fooled verifier), so the level sits at 0 there.
    """
    if correct:
        return 2 + level
    return int(level != worst_wrong)


def _define(
    name: str,
    title: str,
    needs: str,
    categories: str,
    reference: str,
    rule: Callable[[Reading], int],
) -> Rubric:
    """A rubric from a table row: ``"signals | thresholds"``, ``"label:weight ..."``."""
    signals, _, thresholds = needs.partition("|")
    pairs = [item.split(":") for item in categories.split()]
    return Rubric(
        name,
        title,
        tuple(signals.split()),
        tuple(thresholds.split()),
        tuple(label for label, _ in pairs),
        tuple(float(weight) for _, weight in pairs),
        reference,
        rule,
    )


_LIBRARY: Final = "scorio 0.2.3 scorio.categorical (the paper's library)"
_OURS: Final = "ours (docs/rubrics.md); the paper's definition was not available"

# Categories are listed by increasing weight; the index is the category.
RUBRICS: Final[Mapping[str, Rubric]] = MappingProxyType(
    {
        rubric.name: rubric
        for rubric in (
            _define(
                "exact_match",
                "Exact Match",
                "is_correct |",
                "incorrect:0 correct:1",
                "paper: the binary case, C = 1 and w = (0, 1)",
                lambda r: int(r.correct),
            ),
            _define(
                "format_aware",
                "Format Aware",
                "is_correct has_box |",
                "wrong_unboxed:0 wrong_boxed:0.3 correct_unboxed:0.6 correct_boxed:1",
                f"{_LIBRARY}: 'Format Compliance & Correctness', its weights",
                lambda r: _grid(r.correct, r.boxed, worst_wrong=False),
            ),
            _define(
                "conf_calibrated",
                "Conf-Calibrated",
                "is_correct bits_per_token | confidence",
                "confident_wrong:0.1 unconfident_wrong:0.2 unconfident_correct:0.6 "
                "confident_correct:1",
                f"{_LIBRARY}: 'Confident & Correct', its weights",
                lambda r: _grid(r.correct, r.confident, worst_wrong=True),
            ),
            _define(
                "ood_robustness",
                "OOD Robustness",
                "is_correct prompt_bits_per_token | prompt_surprise",
                "familiar_wrong:0.1 unfamiliar_wrong:0.4 familiar_correct:0.7 "
                "unfamiliar_correct:1",
                f"{_LIBRARY}: 'Difficulty-Adjusted Correctness', its weights; "
                "matching it to this title is ours",
                lambda r: _grid(r.correct, r.unfamiliar, worst_wrong=False),
            ),
            _define(
                "strict_compliance",
                "Strict Compliance",
                "is_correct has_box finish_reason |",
                "non_compliant:0 compliant_correct:1",
                _OURS,
                lambda r: int(r.correct and r.boxed and r.finish_reason == "stop"),
            ),
            _define(
                "conf_wrong_penalty",
                "Conf-Wrong Penalty",
                "is_correct bits_per_token | confidence",
                "confident_wrong:-1 unconfident_wrong:0 correct:1",
                _OURS,
                lambda r: 2 if r.correct else int(not r.confident),
            ),
            _define(
                "verifier_only",
                "Verifier-Only",
                "verifier_prob | verifier",
                "verifier_rejects:0 verifier_accepts:1",
                f"{_OURS}; the signal is the library's verifier_pA",
                lambda r: int(r.accepted),
            ),
            _define(
                "format_confidence",
                "Format+Confidence",
                "is_correct has_box bits_per_token | confidence",
                "wrong:0 correct_plain:0.5 correct_boxed:0.75 correct_confident:0.75 "
                "correct_boxed_confident:1",
                _OURS,
                lambda r: r.correct * (1 + r.boxed + 2 * r.confident),
            ),
            _define(
                "length_robust",
                "Length-Robust",
                "is_correct finish_reason |",
                "wrong:0 truncated:0.5 correct:1",
                _OURS,
                lambda r: 2 if r.correct else int(r.finish_reason == "length"),
            ),
            _define(
                "verifier_probe",
                "Verifier Probe",
                "is_correct verifier_prob | verifier",
                "wrong_accepted:0.1 wrong_rejected:0.2 correct_rejected:0.6 "
                "correct_accepted:1",
                f"{_OURS}; the weights are Conf-Calibrated's",
                lambda r: _grid(r.correct, r.accepted, worst_wrong=True),
            ),
            _define(
                "efficiency_adjusted",
                "Efficiency-Adjusted",
                "is_correct output_tokens | length_short length_long",
                "wrong:0 correct_long:0.5 correct_typical:0.75 correct_short:1",
                f"{_OURS}; the split is the library's quartile rule",
                lambda r: 0 if not r.correct else 1 if r.long else 3 if r.short else 2,
            ),
            _define(
                "concise_high_conf",
                "Concise High-Conf",
                "is_correct output_tokens bits_per_token | length confidence",
                "wrong:0 correct:0.5 correct_concise_confident:1",
                _OURS,
                lambda r: r.correct * (1 + (r.concise and r.confident)),
            ),
        )
    }
)
