r"""Rubric schemas: per-trial signals to a category ``0..C`` with default weights.

This module holds the twelve categorical schemas of the Bayes@N paper's rubric
experiments (Appendix D.1, Tables 4 and 5), under the names of DESIGN section
5, plus three signal schemas of the authors' library (``scorio.categorical``)
under ``scorio_``-prefixed names, and the helper that computes a run's
thresholds from an earlier log. Pure functions of one trial's signals and a
run's fixed thresholds: no I/O, no engine state; the engine calls
:meth:`Rubric.classify`.

How the engine uses it. A run config names a rubric (``rubric =
"conf_calibrated"``) and fixes its thresholds (``thresholds = {tau_low_wrong
= 0.9, corr_p33 = 0.4, corr_p66 = 0.7}``), which :func:`thresholds_from_signals`
computes from a pilot or earlier log by the paper's percentiles. The run's
``weights`` default to the rubric's and must have its length. Config
validation calls :meth:`Rubric.check_thresholds`, so a missing threshold is a
config error, not a stream of rejections. A trial event then carries
``signals`` (names from :data:`SIGNALS`) instead of ``category``; the run
classifies it once, at ingestion, and counts the category like any other. A
``ValueError`` from :meth:`Rubric.classify` becomes a rejected input with its
message. Thresholds are fixed for the run's life (the paper computes them per
data set after the fact; a streaming monitor must fix them before counting),
so a re-delivered event classifies to the same category and replays rebuild
the same counts.

The paper's rules (Table 4), invalid checked first in every paper schema:
invalid is ``repeated_pattern = 1`` or ``verifier_invalid >= 0.5``; correct is
``is_correct >= 0.5``; high_conf is ``completion_bpt <= tau_high``;
wrong_high_conf is wrong with ``completion_bpt <= tau_low_wrong``; ood is
``prompt_bpt >= tau_prompt``; economical / moderate / verbose split
``token_ratio`` at ``len_p33`` and ``len_p66`` (``<=`` goes to the lower
class); boxed is ``has_box >= 0.5``; A_high is ``verifier_correct >= 0.6``.

Where the paper is silent we decided, and each decision can be changed by the
run (a threshold value, or its ``weights``):

- ``verifier_invalid`` is optional outside the two verifier schemas: when an
  event has no verifier, invalid is ``repeated_pattern = 1`` alone.
- The cuts ``0.5`` (invalid C) and ``0.6`` (A_high) are thresholds
  ``invalid_c`` and ``a_high`` with the paper's values as defaults.
- Conf-Calibrated: a correct attempt is high_conf when ``completion_bpt <=
  corr_p33``, mid when ``<= corr_p66``, low_conf above (Table 4 lists
  corr_p33/corr_p66 for this); a wrong attempt that is not wrong_high_conf is
  category 1 ("wrong and low_conf"), so every attempt has a category.
- Conf-Wrong Penalty: likewise, every wrong attempt that is not
  wrong_high_conf is category 2.
- Verifier-Only: after invalid, A_high gives 3; otherwise "high B" (2) when
  ``verifier_wrong >= verifier_invalid`` and "high C" (1) else: "high" is the
  larger of the two, so no attempt is left without a category.
- Default weights (the paper gives only Format Aware's ``[0, 0, 1, 2, 3]``):
  invalid scores 0; see :data:`RUBRICS` for each schema's intent.
- Percentiles are taken over every attempt of the log (all models pooled),
  invalid ones included; ``tau_low_wrong`` over wrong attempts and
  ``corr_p33``/``corr_p66`` over correct ones (by ``is_correct``), with
  numpy's linear interpolation.

References:
    Hariri, Samandar, Hinczewski, Chaudhary. Don't Pass@k: A Bayesian
    Framework for Large Language Model Evaluation. ICLR 2026,
    arXiv:2510.04265, Appendix D.1 (Tables 4 and 5), Algorithm 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

import numpy as np

SignalKind = Literal["flag", "score", "number", "probability"]
Population = Literal["all", "correct", "wrong"]
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
    """A run-level cut on one signal.

    ``percentile`` (of ``signal`` over the attempts in ``among``) is how
    :func:`thresholds_from_signals` computes it; a cut with a ``default`` is a
    fixed constant of the paper the run may override.
    """

    name: str
    signal: str
    percentile: float | None
    description: str
    among: Population = "all"
    default: float | None = None


_SIGNAL_ROWS: Final[tuple[tuple[str, SignalKind, str], ...]] = (
    ("is_correct", "score", "1 if the answer is correct (correct if >= 0.5)"),
    ("has_box", "score", "1 if a final boxed answer is present (boxed if >= 0.5)"),
    ("token_ratio", "number", "completion tokens / 32768 (shorter is smaller)"),
    ("repeated_pattern", "flag", "0 if the finish reason is stop, else 1"),
    ("prompt_bpt", "number", "prompt surprisal, -mean log2 p, bits per token"),
    ("completion_bpt", "number", "completion surprisal (lower: more confident)"),
    ("verifier_correct", "probability", "verifier's P(correct), the paper's A"),
    ("verifier_wrong", "probability", "verifier's P(wrong), the paper's B"),
    ("verifier_invalid", "probability", "verifier's P(invalid/off-task), C"),
    # The library's signals, for the scorio_ schemas.
    ("bits_per_token", "number", "completion surprisal, -mean log2 p(token)"),
    ("prompt_bits_per_token", "number", "prompt surprisal, log2 prompt perplexity"),
)
SIGNALS: Final[Mapping[str, SignalSpec]] = MappingProxyType(
    {row[0]: SignalSpec(*row) for row in _SIGNAL_ROWS}
)

_THRESHOLD_ROWS: Final[tuple[ThresholdSpec, ...]] = (
    ThresholdSpec("tau_high", "completion_bpt", 40.0, "high_conf if <= it"),
    ThresholdSpec(
        "tau_low_wrong", "completion_bpt", 60.0, "wrong_high_conf if <= it", "wrong"
    ),
    ThresholdSpec("tau_prompt", "prompt_bpt", 90.0, "ood if prompt_bpt >= it"),
    ThresholdSpec("len_p33", "token_ratio", 33.0, "economical if <= it"),
    ThresholdSpec("len_p66", "token_ratio", 66.0, "verbose if > it"),
    ThresholdSpec(
        "corr_p33", "completion_bpt", 33.0, "correct high_conf if <= it", "correct"
    ),
    ThresholdSpec(
        "corr_p66", "completion_bpt", 66.0, "correct low_conf if > it", "correct"
    ),
    ThresholdSpec("a_high", "verifier_correct", None, "A_high if >= it", default=0.6),
    ThresholdSpec(
        "invalid_c", "verifier_invalid", None, "invalid if >= it", default=0.5
    ),
    # The library's median cuts, for the scorio_ schemas.
    ThresholdSpec("confidence", "bits_per_token", 50.0, "confident if <= it"),
    ThresholdSpec(
        "prompt_surprise", "prompt_bits_per_token", 50.0, "unfamiliar if >= it"
    ),
)
THRESHOLDS: Final[Mapping[str, ThresholdSpec]] = MappingProxyType(
    {spec.name: spec for spec in _THRESHOLD_ROWS}
)

_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")
# Pairs that must be ordered when a rubric uses both.
_ORDERED: Final = (("len_p33", "len_p66"), ("corr_p33", "corr_p66"))


class Reading:
    """One trial's validated signals read against the run's fixed thresholds.

    Its properties are the paper's rubric variables (Table 4) and the
    library's; a variable whose signal the rubric does not need is not read.
    """

    __slots__ = ("_cuts", "_values")

    def __init__(self, values: Mapping[str, float], cuts: Thresholds) -> None:
        self._values = values
        self._cuts = cuts

    def number(self, name: str) -> float:
        """A signal's value (flags are 0.0 or 1.0)."""
        return self._values[name]

    def cut(self, name: str) -> float:
        """A threshold: the run's value, else the paper's default."""
        value = self._cuts.get(name)
        if value is None:
            default = THRESHOLDS[name].default
            if default is None:
                raise KeyError(name)
            return default
        return float(value)

    @property
    def invalid(self) -> bool:
        if self.number("repeated_pattern") == 1.0:
            return True
        rate = self._values.get("verifier_invalid")
        return rate is not None and rate >= self.cut("invalid_c")

    @property
    def correct(self) -> bool:
        return self.number("is_correct") >= 0.5

    @property
    def boxed(self) -> bool:
        return self.number("has_box") >= 0.5

    @property
    def high_conf(self) -> bool:
        return self.number("completion_bpt") <= self.cut("tau_high")

    @property
    def wrong_high_conf(self) -> bool:
        return not self.correct and (
            self.number("completion_bpt") <= self.cut("tau_low_wrong")
        )

    @property
    def ood(self) -> bool:
        return self.number("prompt_bpt") >= self.cut("tau_prompt")

    @property
    def length_class(self) -> int:
        """0 economical, 1 moderate, 2 verbose."""
        ratio = self.number("token_ratio")
        if ratio <= self.cut("len_p33"):
            return 0
        return 1 if ratio <= self.cut("len_p66") else 2

    @property
    def correct_confidence(self) -> int:
        """Among correct attempts: 0 low_conf, 1 mid, 2 high_conf."""
        bits = self.number("completion_bpt")
        if bits <= self.cut("corr_p33"):
            return 2
        return 1 if bits <= self.cut("corr_p66") else 0

    @property
    def a_high(self) -> bool:
        return self.number("verifier_correct") >= self.cut("a_high")

    @property
    def confident(self) -> bool:
        """The library's: bits_per_token at or below the median cut."""
        return self.number("bits_per_token") <= self.cut("confidence")

    @property
    def unfamiliar(self) -> bool:
        return self.number("prompt_bits_per_token") >= self.cut("prompt_surprise")


@dataclass(frozen=True, slots=True)
class Rubric:
    """A categorical schema: which signals and thresholds map a trial to ``0..C``.

    Args:
        name: snake_case id used in run configs, e.g. ``"exact_match"``.
        title: The schema's name in the paper (or library).
        signals: Names from :data:`SIGNALS` every trial must carry.
        thresholds: Names from :data:`THRESHOLDS` the rule reads.
        labels: Category names; index is the category ``0..C``.
        weights: Default weight per category (length ``C + 1``).
        reference: Where the definition and the weights come from.
        rule: Maps a validated :class:`Reading` to a category.
        optional: Signals read when present (``verifier_invalid`` for the
            paper's invalid rule).

    Examples:
        >>> rubric = RUBRICS["format_aware"]
        >>> rubric.classify({"is_correct": 1, "has_box": 0, "repeated_pattern": 0},
        ...                 {})
        3
        >>> rubric.labels[3], rubric.weights[3]
        ('correct_unboxed', 2.0)
    """

    name: str
    title: str
    signals: tuple[str, ...]
    thresholds: tuple[str, ...]
    labels: tuple[str, ...]
    weights: tuple[float, ...]
    reference: str
    rule: Callable[[Reading], int] = field(repr=False, compare=False)
    optional: tuple[str, ...] = ()

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
        unknown = [s for s in self.signals + self.optional if s not in SIGNALS]
        unknown += [t for t in self.thresholds if t not in THRESHOLDS]
        if unknown:
            raise ValueError(f"rubric {self.name}: unknown names {unknown}")

    @property
    def category_count(self) -> int:
        """``C + 1``, the length of the weight vector."""
        return len(self.labels)

    @property
    def required_thresholds(self) -> tuple[str, ...]:
        """The thresholds a run must fix (those without a paper default)."""
        return tuple(t for t in self.thresholds if THRESHOLDS[t].default is None)

    def check_thresholds(self, thresholds: Thresholds) -> None:
        """Raise ValueError unless ``thresholds`` fixes every cut this rubric needs.

        Extra names are ignored (one run config may serve several rubrics);
        a cut with a paper default may be left out.
        """
        for name in self.thresholds:
            value = thresholds.get(name)
            if value is None and THRESHOLDS[name].default is not None:
                continue
            if isinstance(value, bool) or not isinstance(
                value, int | float | np.integer | np.floating
            ):
                raise ValueError(
                    f"rubric {self.name} needs threshold {name} "
                    f"({THRESHOLDS[name].description}); got {value!r}"
                )
            if not math.isfinite(value):
                raise ValueError(f"threshold {name} must be finite; got {value}")
        for low, high in _ORDERED:
            if {low, high} <= set(self.thresholds) and thresholds[low] > thresholds[
                high
            ]:
                raise ValueError(
                    f"{low} must not exceed {high}; got "
                    f"{thresholds[low]} > {thresholds[high]}"
                )

    def classify(self, signals: Signals, thresholds: Thresholds) -> int:
        """The category ``0..C`` of one trial.

        Args:
            signals: The trial's signals; names outside the rubric's are
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
        for name in self.optional:
            if signals.get(name) is not None:
                values[name] = _signal_value(self.name, name, signals)
        return self.rule(Reading(values, thresholds))


def thresholds_from_signals(
    rubric: Rubric,
    rows: Iterable[Signals],
    percentiles: Mapping[str, float] | None = None,
) -> dict[str, float]:
    r"""A rubric's thresholds from a pilot or earlier log, by the paper's percentiles.

    Pool every model's rows, so all models are judged against the same cut.
    ``tau_low_wrong`` uses wrong attempts only and ``corr_p33``/``corr_p66``
    correct ones (``is_correct >= 0.5``). Rows missing a signal are skipped
    for that signal's thresholds; an invalid value raises. Cuts with a paper
    default (``a_high``, ``invalid_c``) are not computed.

    Args:
        rubric: The rubric whose thresholds to compute.
        rows: Signal rows of an earlier log.
        percentiles: Overrides of the :data:`THRESHOLDS` percentiles, in
            ``[0, 100]``, keyed by threshold name.

    Returns:
        ``{threshold name: value}`` for the run config (``{}`` if none needed).

    Raises:
        ValueError: Unknown override, percentile out of range, an invalid
            signal value, or no value of a needed signal in ``rows``.

    Formula:
        :math:`\theta = \mathrm{percentile}_p(\{s_r : r \in \text{among}\})`
        with linear interpolation (numpy's default).

    References:
        Hariri et al., ICLR 2026, Appendix D.1, Table 4.

    Examples:
        >>> rows = [{"token_ratio": r} for r in (0.1, 0.2, 0.3, 0.4)]
        >>> cuts = thresholds_from_signals(RUBRICS["efficiency_adjusted"], rows)
        >>> {name: round(value, 3) for name, value in cuts.items()}
        {'len_p33': 0.199, 'len_p66': 0.298}
    """
    computed = [t for t in rubric.thresholds if THRESHOLDS[t].percentile is not None]
    chosen = dict(percentiles or {})
    strays = sorted(set(chosen) - set(computed))
    if strays:
        raise ValueError(f"rubric {rubric.name} has no thresholds {strays}")
    for name, percentile in chosen.items():
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(
                f"percentile for {name} must be in [0, 100]; got {percentile}"
            )
    columns: dict[tuple[str, Population], list[float]] = {
        (THRESHOLDS[name].signal, THRESHOLDS[name].among): [] for name in computed
    }
    for position, row in enumerate(rows):
        for signal, among in columns:
            if row.get(signal) is None:
                continue
            try:
                value = float(_signal_value(rubric.name, signal, row))
                if among != "all":
                    if row.get("is_correct") is None:
                        continue
                    correct = _signal_value(rubric.name, "is_correct", row) >= 0.5
                    if correct != (among == "correct"):
                        continue
            except ValueError as exc:
                raise ValueError(f"row {position}: {exc}") from exc
            columns[(signal, among)].append(value)
    result: dict[str, float] = {}
    for name in computed:
        spec = THRESHOLDS[name]
        values = columns[(spec.signal, spec.among)]
        if not values:
            scope = "" if spec.among == "all" else f" among {spec.among} attempts"
            raise ValueError(
                f"no {spec.signal} values{scope} in the log to compute {name}"
            )
        percentile = chosen.get(name, spec.percentile or 0.0)
        result[name] = float(np.percentile(np.asarray(values), percentile))
    return result


def _signal_value(rubric: str, name: str, signals: Signals) -> float:
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
    if not isinstance(value, bool | np.bool_ | int | float | np.integer | np.floating):
        raise ValueError(problem)
    if spec.kind == "number" and isinstance(value, bool | np.bool_):
        raise ValueError(problem)
    number = float(value)
    if not math.isfinite(number) or number < 0.0:
        raise ValueError(problem)
    if spec.kind in ("probability", "score") and number > 1.0:
        raise ValueError(problem)
    return number


_EXPECTED: Final[Mapping[SignalKind, str]] = MappingProxyType(
    {
        "flag": "true/false (or 0/1)",
        "score": "true/false or a number in [0, 1]",
        "number": "a finite number >= 0",
        "probability": "a number in [0, 1]",
    }
)


def _paper(
    name: str,
    title: str,
    needs: str,
    categories: str,
    intent: str,
    rule: Callable[[Reading], int],
) -> Rubric:
    """A paper schema from a Table 5 row: invalid is category 0, checked first.

    ``needs`` is ``"signals | thresholds"`` beyond ``repeated_pattern`` and
    ``is_correct``; ``categories`` lists ``label:weight`` for categories 1..C.
    """
    signals, _, thresholds = needs.partition("|")
    pairs = [("invalid", "0"), *(item.split(":") for item in categories.split())]
    verifier = "verifier_invalid" in signals.split()
    return Rubric(
        name,
        title,
        ("repeated_pattern", *signals.split()),
        (*thresholds.split(), "invalid_c"),
        tuple(label for label, _ in pairs),
        tuple(float(weight) for _, weight in pairs),
        f"paper, Appendix D.1 Table 5; default weights ours: {intent}",
        lambda reading: 0 if reading.invalid else rule(reading),
        () if verifier else ("verifier_invalid",),
    )


def _library(
    name: str,
    title: str,
    needs: str,
    categories: str,
    rule: Callable[[Reading], int],
) -> Rubric:
    """A ``scorio.categorical`` schema: categories by increasing weight."""
    signals, _, thresholds = needs.partition("|")
    pairs = [item.split(":") for item in categories.split()]
    return Rubric(
        name,
        title,
        tuple(signals.split()),
        tuple(thresholds.split()),
        tuple(label for label, _ in pairs),
        tuple(float(weight) for _, weight in pairs),
        f"scorio 0.2.3 scorio.categorical schema {title!r}, its weights",
        rule,
    )


def _grid(correct: bool, level: bool, *, worst_wrong: bool) -> int:
    """A 2 x 2 library schema: wrong 0-1, correct 2-3, ``level`` on top.

    With ``worst_wrong`` a wrong answer *with* the level is the worst case.
    """
    if correct:
        return 2 + level
    return int(level != worst_wrong)


def _two_by_two(first: bool, second: bool) -> int:
    """Categories 1..4 of a paper 2 x 2 row order (wrong before correct)."""
    return 1 + 2 * first + second


RUBRICS: Final[Mapping[str, Rubric]] = MappingProxyType(
    {
        rubric.name: rubric
        for rubric in (
            _paper(
                "exact_match",
                "Exact Match",
                "is_correct |",
                "wrong:0 correct:1",
                "correct scores 1",
                lambda r: 1 + r.correct,
            ),
            _paper(
                "format_aware",
                "Format Aware",
                "is_correct has_box |",
                "wrong_unboxed:0 wrong_boxed:1 correct_unboxed:2 correct_boxed:3",
                "the paper's example [0, 0, 1, 2, 3]",
                lambda r: _two_by_two(r.correct, r.boxed),
            ),
            _paper(
                "conf_calibrated",
                "Conf-Calibrated",
                "is_correct completion_bpt | tau_low_wrong corr_p33 corr_p66",
                "wrong_low_conf:1 wrong_high_conf:0 correct_low_conf:2 "
                "correct_mid:3 correct_high_conf:4",
                "confident errors score least, confident correct answers most",
                lambda r: (
                    (3 + r.correct_confidence) if r.correct else 1 + r.wrong_high_conf
                ),
            ),
            _paper(
                "ood_robustness",
                "OOD Robustness",
                "is_correct prompt_bpt | tau_prompt",
                "ood_wrong:0 ind_wrong:0 ood_correct:2 ind_correct:1",
                "a correct answer to an unfamiliar (ood) prompt counts double",
                lambda r: _two_by_two(r.correct, not r.ood),
            ),
            _paper(
                "strict_compliance",
                "Strict Compliance",
                "is_correct has_box |",
                "not_compliant:0 correct_boxed:1",
                "only a correct boxed answer scores",
                lambda r: 1 + (r.correct and r.boxed),
            ),
            _paper(
                "conf_wrong_penalty",
                "Conf-Wrong Penalty",
                "is_correct completion_bpt | tau_low_wrong",
                "wrong_high_conf:-1 wrong_low_conf:0 correct:1",
                "a confident error is penalised below an invalid answer",
                lambda r: 3 if r.correct else 1 + (not r.wrong_high_conf),
            ),
            _paper(
                "verifier_only",
                "Verifier-Only",
                "verifier_correct verifier_wrong verifier_invalid | a_high",
                "high_c:0 high_b:0 a_high:1",
                "the verifier's acceptance alone scores",
                lambda r: (
                    3
                    if r.a_high
                    else 2
                    if r.number("verifier_wrong") >= r.number("verifier_invalid")
                    else 1
                ),
            ),
            _paper(
                "format_confidence",
                "Format+Confidence",
                "is_correct has_box completion_bpt | tau_high",
                "wrong_unboxed:0 wrong_boxed_low_conf:1 wrong_boxed_high_conf:0 "
                "correct_unboxed_low_conf:2 correct_unboxed_high_conf:3 "
                "correct_boxed_low_conf:4 correct_boxed_high_conf:5",
                "format first, then confidence; a confident boxed error scores 0",
                lambda r: (
                    (4 + 2 * r.boxed + r.high_conf)
                    if r.correct
                    else (2 + r.high_conf if r.boxed else 1)
                ),
            ),
            _paper(
                "length_robust",
                "Length-Robust",
                "is_correct |",
                "wrong:0 correct:1",
                "as Exact Match: length is not penalised",
                lambda r: 1 + r.correct,
            ),
            _paper(
                "verifier_probe",
                "Verifier Probe",
                "is_correct verifier_correct verifier_wrong verifier_invalid | a_high",
                "wrong_a_high:0 wrong_not_a_high:0 correct_not_a_high:1 "
                "correct_a_high:2",
                "correct answers the verifier also accepts score most",
                lambda r: (4 if r.a_high else 3) if r.correct else 2 - r.a_high,
            ),
            _paper(
                "efficiency_adjusted",
                "Efficiency-Adjusted",
                "is_correct token_ratio | len_p33 len_p66",
                "wrong_economical:0 wrong_moderate:0 wrong_verbose:0 "
                "correct_economical:3 correct_moderate:2 correct_verbose:1",
                "shorter correct answers score more",
                lambda r: 1 + 3 * r.correct + r.length_class,
            ),
            _paper(
                "concise_high_conf",
                "Concise High-Conf",
                "is_correct token_ratio completion_bpt | len_p33 len_p66 tau_high",
                "wrong:0 correct_verbose:1 correct_moderate:2 correct_economical:3 "
                "correct_economical_high_conf:4",
                "correct, shorter and confident scores most",
                lambda r: (
                    (5 if r.length_class == 0 and r.high_conf else 4 - r.length_class)
                    if r.correct
                    else 1
                ),
            ),
            _library(
                "scorio_format_aware",
                "Format Compliance & Correctness",
                "is_correct has_box |",
                "wrong_unboxed:0 wrong_boxed:0.3 correct_unboxed:0.6 correct_boxed:1",
                lambda r: _grid(r.correct, r.boxed, worst_wrong=False),
            ),
            _library(
                "scorio_conf_calibrated",
                "Confident & Correct",
                "is_correct bits_per_token | confidence",
                "confident_wrong:0.1 unconfident_wrong:0.2 unconfident_correct:0.6 "
                "confident_correct:1",
                lambda r: _grid(r.correct, r.confident, worst_wrong=True),
            ),
            _library(
                "scorio_ood_robustness",
                "Difficulty-Adjusted Correctness",
                "is_correct prompt_bits_per_token | prompt_surprise",
                "familiar_wrong:0.1 unfamiliar_wrong:0.4 familiar_correct:0.7 "
                "unfamiliar_correct:1",
                lambda r: _grid(r.correct, r.unfamiliar, worst_wrong=False),
            ),
        )
    }
)
