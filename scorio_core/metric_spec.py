r"""The live metrics a run asks for: their syntax, values and inputs.

A run may ask for more than Bayes@N; every metric here depends only on each
question's outcome counts, so the monitor computes it from the count tables
it already keeps. Syntax (:meth:`MetricSpec.parse`), ``k`` a positive integer:

==========================  ============================================
``avg`` (or ``avg@N``)      avg@N with its Bayesian sigma (any weights)
``bayes`` (``bayes@N``)     Bayes@N itself (any weights)
``max@k``                   Max@k, best reward of k (any weights)
``pass@k``                  Pass@k (binary runs)
``pass^k``                  Pass^k; also ``unanimous@k`` and ``g_pass@k``
``g_pass@k:tau``            G-Pass@k_tau, tau in [0, 1]
``mg_pass@k``               mG-Pass@k
``maj@k``                   Maj@k, a strict majority of k
``auc@k``                   AUC@k over Pass@1..Pass@k
``geom@k``, ``geom_ds@k``   Geom@k, questionwise and dataset-level
``geo_spectrum_star@k``     GeoSpectrum*@k
==========================  ============================================

Each value is the ``_ci`` version of the scorio function: ``(mu, sigma, lo,
hi)`` of the metric's posterior (avg: the observed average with eq. 20's
sigma). Binary metrics count category 1 as a success.

:func:`scorio_core.count_metrics.live_metrics` computes them from count
tables; here are the request (:class:`MetricSpec`), the result
(:class:`MetricValue`) and a model's counts as read (:class:`ModelCounts`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

Family = Literal[
    "avg",
    "bayes",
    "max",
    "pass",
    "pass_hat",
    "g_pass_tau",
    "mg_pass",
    "maj",
    "auc",
    "geom",
    "geom_ds",
    "geo_spectrum_star",
]

_FAMILIES: Final[dict[str, Family]] = {
    "max": "max",
    "pass": "pass",
    "unanimous": "pass_hat",
    "g_pass": "pass_hat",
    "mg_pass": "mg_pass",
    "maj": "maj",
    "auc": "auc",
    "geom": "geom",
    "geom_ds": "geom_ds",
    "geo_spectrum_star": "geo_spectrum_star",
}

_ANY_WEIGHTS: Final = frozenset({"avg", "bayes", "max"})

_SYNTAX: Final = re.compile(
    r"^(?P<name>[a-z_]+)(?P<mark>[@^])(?P<k>[0-9]+)(?::(?P<tau>.+))?$"
)

# A live metric's cost per distinct question state grows like k (pass, pass^,
# max) or k^2 (the others); past this a status refresh would take seconds.
MAX_K: Final = 1024

SYNTAX_HELP: Final = (
    "avg, bayes, pass^k, or NAME@k with NAME one of pass, unanimous, g_pass, "
    "mg_pass, maj, auc, max, geom, geom_ds, geo_spectrum_star (g_pass@k:tau "
    "for G-Pass@k_tau)"
)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One requested live metric, keyed by the text the run wrote."""

    text: str
    family: Family
    k: int = 1
    tau: float | None = None

    @classmethod
    def parse(cls, text: str) -> MetricSpec:
        """Read ``"pass@4"``, ``"g_pass@8:0.75"``, ``"avg"`` ...

        Raises:
            ValueError: naming the text and the syntax.

        Examples:
            >>> MetricSpec.parse("g_pass@8:0.75")
            MetricSpec(text='g_pass@8:0.75', family='g_pass_tau', k=8, tau=0.75)
        """
        cleaned = text.strip()
        if cleaned in ("avg", "avg@N"):
            return cls(text, "avg")
        if cleaned in ("bayes", "bayes@N"):
            return cls(text, "bayes")
        match = _SYNTAX.match(cleaned)
        family: Family | None = None
        if match is not None:
            name, mark = match.group("name"), match.group("mark")
            family = _FAMILIES.get(name) if mark == "@" else None
            if mark == "^" and name == "pass":
                family = "pass_hat"
        if match is None or family is None:
            raise ValueError(f"unknown metric {text!r}; the syntax is {SYNTAX_HELP}")
        k = int(match.group("k"))
        if not 1 <= k <= MAX_K:
            raise ValueError(f"metric {text!r}: k must be in 1..{MAX_K}")
        tau_text = match.group("tau")
        if tau_text is None:
            return cls(text, family, k)
        if match.group("name") != "g_pass":
            raise ValueError(f"metric {text!r}: only g_pass@k takes ':tau'")
        try:
            tau = float(tau_text)
        except ValueError:
            tau = math.nan
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"metric {text!r}: tau must be a number in [0, 1]")
        return cls(text, "g_pass_tau", k, tau)

    @property
    def is_binary(self) -> bool:
        """Whether the metric needs binary outcomes (two categories)."""
        return self.family not in _ANY_WEIGHTS


@dataclass(frozen=True, slots=True)
class MetricValue:
    """A live metric: posterior mean, sd and credible interval."""

    mu: float
    sigma: float
    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class ModelCounts:
    """One model's count table as the metrics read it.

    ``observed`` and ``prior`` are ``rows x (C+1)`` non-negative integers of
    any integer type (``prior`` None: no prior outcomes); ``question_count``
    is ``M`` (rows beyond the seen ones have no trials and no prior outcomes).
    """

    observed: NDArray[np.integer]
    prior: NDArray[np.integer] | None
    question_count: int
