"""scorio_core.metrics against the published scorio package (the oracle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st

import scorio_core
from tests.scorio_core.strategies import (
    FloatVector,
    IntMatrix,
    binary_bank,
    categorical_bank,
)

TOLERANCE = 1e-12

Bank = tuple[IntMatrix, FloatVector, IntMatrix | None]


@given(categorical_bank())
def test_bayes_equals_scorio_on_categorical_banks(bank: Bank) -> None:
    results, weights, prior = bank
    assert scorio_core.bayes(results, weights, prior) == pytest.approx(
        oracle.bayes(results, weights, prior), abs=TOLERANCE
    )


@given(categorical_bank(), st.floats(0.5, 0.999), st.booleans())
def test_bayes_ci_equals_scorio(bank: Bank, confidence: float, clip: bool) -> None:
    results, weights, prior = bank
    bounds = (float(weights.min()), float(weights.max())) if clip else None
    assert scorio_core.bayes_ci(
        results, weights, prior, confidence, bounds
    ) == pytest.approx(
        oracle.bayes_ci(results, weights, prior, confidence, bounds), abs=TOLERANCE
    )


@given(binary_bank())
def test_bayes_defaults_to_binary_weights(results: IntMatrix) -> None:
    assert scorio_core.bayes(results) == pytest.approx(
        oracle.bayes(results), abs=TOLERANCE
    )


@given(categorical_bank(with_prior=False), st.floats(0.5, 0.999))
def test_avg_and_avg_ci_equal_scorio(bank: Bank, confidence: float) -> None:
    results, weights, _ = bank
    assert scorio_core.avg(results, weights) == pytest.approx(
        oracle.avg(results, weights), abs=TOLERANCE
    )
    assert scorio_core.avg_ci(
        results, weights, confidence, (-5.0, 5.0)
    ) == pytest.approx(
        oracle.avg_ci(results, weights, confidence, (-5.0, 5.0)), abs=TOLERANCE
    )


def test_documented_examples_of_the_scorio_api() -> None:
    results = np.array([[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]])
    weights = np.array([0.0, 0.5, 1.0])
    prior = np.array([[0, 2], [1, 2]])
    binary = np.array([[0, 1, 1, 0, 1], [1, 1, 0, 1, 1]])
    assert np.round(scorio_core.bayes(results, weights), 6).tolist() == [
        0.5625,
        0.091998,
    ]
    assert np.round(scorio_core.bayes(results, weights, prior), 6).tolist() == [
        0.575,
        0.084275,
    ]
    mu, sigma, low, high = scorio_core.bayes_ci(binary, bounds=(0.0, 1.0))
    assert (round(mu, 6), round(sigma, 6), round(low, 4), round(high, 4)) == (
        0.642857,
        0.118451,
        0.4107,
        0.875,
    )
    assert np.round(scorio_core.avg(binary), 6).tolist() == [0.7, 0.165831]


def test_a_one_dimensional_result_is_one_question() -> None:
    assert scorio_core.bayes([1, 0, 1]) == pytest.approx(
        oracle.bayes(np.array([1, 0, 1]))
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([[0, 3]], [0.0, 0.5, 1.0]), "R must hold categories in 0..2"),
        (([[0, -1]], [0.0, 1.0]), "got -1"),
        (([[0.5, 1.0]], None), "integer categories; got 0.5"),
        (([[np.nan, 1.0]], None), "finite integer categories; got nan"),
        (([[0, 2]], None), "R is not binary"),
        (([[0, 1]], [0.0, np.inf]), "w must hold finite numbers"),
        (([[0, 1]], [[0.0, 1.0]]), "w must be a non-empty 1-D array"),
        (([[0, 1]], ["a", "b"]), "w must hold numbers"),
        (
            ([[0, 1], [1, 1]], [0.0, 1.0], [[0, 1]]),
            "R0 must have the same number of rows",
        ),
        (([[0, 1]], [0.0, 1.0], [[0, 5]]), "R0 must hold categories in 0..1"),
        (([["x", "y"]], None), "R must hold integer categories"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(
    arguments: tuple[object, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        scorio_core.bayes(*arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_confidence_outside_the_open_unit_interval_is_rejected(
    confidence: float,
) -> None:
    with pytest.raises(ValueError, match="confidence must be"):
        scorio_core.bayes_ci([[0, 1]], confidence=confidence)


def test_inverted_bounds_are_rejected() -> None:
    with pytest.raises(ValueError, match="bounds must satisfy lo <= hi"):
        scorio_core.bayes_ci([[0, 1]], bounds=(1.0, 0.0))


@pytest.mark.parametrize(
    "weights",
    [
        [0, 1j],
        np.array([0.0, 1.0 + 0j]),
        ["0", "1"],
        [b"0", b"1"],
        np.array([0, 1], dtype=object),
    ],
)
@pytest.mark.parametrize("name", ["bayes", "avg"])
def test_complex_and_string_weights_are_refused_like_scorio(
    weights: object, name: str
) -> None:
    results = [[0, 1, 1], [1, 1, 0]]
    with pytest.raises(ValueError):
        getattr(oracle, name)(results, weights)
    with pytest.raises(ValueError, match="w must hold"):
        getattr(scorio_core, name)(results, weights)


@pytest.mark.parametrize(
    "weights", [[0.0, 1e307], [1e308, -1e308], [1.7e308, -1.7e308], [-1e307, 1e307]]
)
def test_avg_does_not_overflow_where_bayes_does_not(weights: list[float]) -> None:
    results = np.array([[0, 1, 1], [1, 1, 0], [1, 1, 1]])
    with np.errstate(all="raise"):
        average, sigma = scorio_core.avg(results, weights)
        mu, _ = scorio_core.bayes(results, weights)
    assert math.isfinite(mu) and math.isfinite(average) and math.isfinite(sigma)
    expected = oracle.avg(results, weights)
    assert average == pytest.approx(expected[0], rel=1e-12)
    assert sigma == pytest.approx(expected[1], rel=1e-12)
