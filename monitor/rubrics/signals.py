"""The per-trial signal vocabulary of the rubric schemas and how a value is checked.

A trial event names its signals (``is_correct``, ``completion_bpt``, a
verifier's three probabilities, ...) from :data:`SIGNALS`; each has a kind
(flag, score, number, probability) that says which values are valid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

import numpy as np

SignalKind = Literal["flag", "score", "number", "probability"]
Signals = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class SignalSpec:
    """One per-trial signal of the vocabulary: its type and meaning."""

    name: str
    kind: SignalKind
    description: str


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


def signal_value(rubric: str, name: str, signals: Signals) -> float:
    """Signal ``name`` of a trial as a float, checked against its kind.

    Raises:
        ValueError: The signal is missing or not a valid value of its kind;
            the message names ``rubric`` and the signal.
    """
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
