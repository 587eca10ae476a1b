"""tailpass_empirical against scorio's, on binary and categorical banks."""

from __future__ import annotations

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import scorio_core
from tests.scorio_core.strategies import IntMatrix, binary_bank

TOLERANCE = 1e-12


@st.composite
def rubric_bank(draw: st.DrawFn) -> tuple[IntMatrix, np.ndarray]:
    """R with 2-4 categories and scores in [0, 1], some repeated, unsorted."""
    categories = draw(st.integers(2, 4))
    rows, trials = draw(st.integers(1, 6)), draw(st.integers(1, 7))
    results = draw(
        arrays(np.int64, (rows, trials), elements=st.integers(0, categories - 1))
    )
    scores = draw(
        arrays(
            np.float64,
            categories,
            elements=st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0.0, 1.0),
        )
    )
    return results, scores


@st.composite
def grids(draw: st.DrawFn) -> list[float] | None:
    points = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5, unique=True))
    return draw(st.none() | st.just(sorted(points)))


@given(results=binary_bank(), data=st.data(), thresholds=grids())
def test_the_binary_profile_equals_scorio(
    results: IntMatrix, data: st.DataObject, thresholds: list[float] | None
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    ours = scorio_core.tailpass_empirical(results, k, thresholds=thresholds)
    theirs = oracle.tailpass_empirical(results, k, thresholds=thresholds)
    assert ours == pytest.approx(theirs, abs=TOLERANCE)


@given(bank=rubric_bank(), data=st.data(), thresholds=grids())
def test_the_categorical_profile_equals_scorio(
    bank: tuple[IntMatrix, np.ndarray],
    data: st.DataObject,
    thresholds: list[float] | None,
) -> None:
    results, scores = bank
    k = data.draw(st.integers(1, results.shape[1]))
    ours = scorio_core.tailpass_empirical(results, k, scores, thresholds=thresholds)
    theirs = oracle.tailpass_empirical(results, k, scores, thresholds=thresholds)
    assert ours == pytest.approx(theirs, abs=TOLERANCE)


def test_the_binary_ends_are_pass_at_k_and_pass_hat_k() -> None:
    results = np.array([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]])
    profile = scorio_core.tailpass_empirical(results, 3)
    assert profile[0] == pytest.approx(scorio_core.pass_at_k(results, 3))
    assert profile[-1] == pytest.approx(scorio_core.pass_hat_k(results, 3))
    assert not profile.flags.writeable


@pytest.mark.parametrize(
    ("arguments", "keywords"),
    [
        (([[0, 1]], 3), {}),
        (([[0, 1]], 1, [0.0, 1.5]), {}),
        (([[0, 1]], 1), {"thresholds": [0.5, 0.2]}),
        (([[0, 1]], 1), {"thresholds": []}),
        (([[0, 1]], 1), {"thresholds": [1.5]}),
        (([[0, 1]], 1, [0.0, 1j]), {}),
        (([[0, 2]], 1), {}),
    ],
)
def test_bad_input_raises_value_error_as_scorio(
    arguments: tuple[object, ...], keywords: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        oracle.tailpass_empirical(*arguments, **keywords)
    with pytest.raises(ValueError):
        scorio_core.tailpass_empirical(*arguments, **keywords)  # type: ignore[arg-type]
