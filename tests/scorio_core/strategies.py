"""Hypothesis strategies for results matrices, weights and priors."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.typing import NDArray

IntMatrix = NDArray[np.int64]
FloatVector = NDArray[np.float64]


@st.composite
def categorical_bank(
    draw: st.DrawFn, max_categories: int = 5, with_prior: bool = True
) -> tuple[IntMatrix, FloatVector, IntMatrix | None]:
    """(R, w, R0): categories 0..C, weights possibly negative, optional R0."""
    categories = draw(st.integers(2, max_categories))
    rows = draw(st.integers(1, 8))
    trials = draw(st.integers(1, 12))
    results = draw(
        arrays(np.int64, (rows, trials), elements=st.integers(0, categories - 1))
    )
    weights = draw(
        arrays(
            np.float64,
            categories,
            elements=st.floats(-5.0, 5.0, allow_nan=False, allow_subnormal=False),
        )
    )
    prior = None
    if with_prior and draw(st.booleans()):
        depth = draw(st.integers(0, 4))
        prior = draw(
            arrays(np.int64, (rows, depth), elements=st.integers(0, categories - 1))
        )
    return results, weights, prior


@st.composite
def binary_bank(draw: st.DrawFn, max_trials: int = 12) -> IntMatrix:
    rows = draw(st.integers(1, 8))
    trials = draw(st.integers(1, max_trials))
    return draw(arrays(np.int64, (rows, trials), elements=st.integers(0, 1)))
