"""Rubric schemas: per-trial signals to a category ``0..C`` with default weights.

How the engine uses them. A run config names a rubric (``rubric =
"conf_calibrated"``, a key of :data:`RUBRICS`) and fixes its thresholds
(``thresholds = {tau_low_wrong = 0.9, corr_p33 = 0.4, corr_p66 = 0.7}``),
which :func:`thresholds_from_signals` computes from a pilot or earlier log by
the paper's percentiles. The run's ``weights`` default to the rubric's and
must have its length. Config validation calls :meth:`Rubric.check_thresholds`,
so a missing threshold is a config error, not a stream of rejections. A trial
event then carries ``signals`` (names from :data:`SIGNALS`) instead of
``category``; the run classifies it once, at ingestion
(:meth:`Rubric.classify`), and counts the category like any other. A
``ValueError`` from :meth:`Rubric.classify` becomes a rejected input with its
message. Thresholds are fixed for the run's life, so a re-delivered event
classifies to the same category and replays rebuild the same counts. Pure
functions of one trial's signals and a run's fixed thresholds: no I/O, no
engine state.

The rooms: :mod:`~monitor.rubrics.signals` (the signal vocabulary and value
checks), :mod:`~monitor.rubrics.thresholds` (run-level cuts and computing
them), :mod:`~monitor.rubrics.reading` (the paper's rubric variables),
:mod:`~monitor.rubrics.rubric` (the schema type) and
:mod:`~monitor.rubrics.tables` (the fifteen schemas and the decisions taken
where the paper is silent).
"""

from monitor.rubrics.reading import Reading
from monitor.rubrics.rubric import Rubric
from monitor.rubrics.signals import SIGNALS, SignalKind, Signals, SignalSpec
from monitor.rubrics.tables import RUBRICS
from monitor.rubrics.thresholds import (
    THRESHOLDS,
    Population,
    Thresholds,
    ThresholdSpec,
    thresholds_from_signals,
)

__all__ = [
    "RUBRICS",
    "SIGNALS",
    "THRESHOLDS",
    "Population",
    "Reading",
    "Rubric",
    "SignalKind",
    "SignalSpec",
    "Signals",
    "ThresholdSpec",
    "Thresholds",
    "thresholds_from_signals",
]
