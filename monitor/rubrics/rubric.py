"""A categorical schema: signals and thresholds to a category with weights.

:class:`Rubric` checks its own definition, checks a run's thresholds, and
classifies one trial's signals by its rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from monitor.rubrics.reading import Reading
from monitor.rubrics.signals import SIGNALS, Signals, signal_value
from monitor.rubrics.thresholds import ORDERED_CUTS, THRESHOLDS, Thresholds

_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")


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
        >>> from monitor.rubrics import RUBRICS
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
        for low, high in ORDERED_CUTS:
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
        values = {name: signal_value(self.name, name, signals) for name in self.signals}
        for name in self.optional:
            if signals.get(name) is not None:
                values[name] = signal_value(self.name, name, signals)
        return self.rule(Reading(values, thresholds))
