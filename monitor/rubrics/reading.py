"""One trial's signals read as the paper's rubric variables (Table 4).

A :class:`Reading` is what a rubric's rule sees: validated signal values and
the run's cuts, with the variables (invalid, correct, high_conf, ood, ...) as
properties.
"""

from __future__ import annotations

from collections.abc import Mapping

from monitor.rubrics.thresholds import THRESHOLDS, Thresholds


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
