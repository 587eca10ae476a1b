"""Run-level cuts on the signals, and computing them from an earlier log.

A rubric's thresholds are fixed for a run's life (the paper computes them
per data set after the fact; a streaming monitor must fix them before
counting). :data:`THRESHOLDS` says how each is computed (a percentile of a
signal over some attempts) or what the paper fixed it to;
:func:`thresholds_from_signals` computes a run's values from a pilot log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

import numpy as np

from monitor.rubrics.signals import Signals, signal_value

if TYPE_CHECKING:
    from monitor.rubrics.rubric import Rubric

Population = Literal["all", "correct", "wrong"]
Thresholds = Mapping[str, float]


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

# Pairs that must be ordered when a rubric uses both.
ORDERED_CUTS: Final = (("len_p33", "len_p66"), ("corr_p33", "corr_p66"))


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
        >>> from monitor.rubrics import RUBRICS
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
                value = float(signal_value(rubric.name, signal, row))
                if among != "all":
                    if row.get("is_correct") is None:
                        continue
                    correct = signal_value(rubric.name, "is_correct", row) >= 0.5
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
