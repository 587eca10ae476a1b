"""scorio_core.maxreward against scorio, and its count kernels on ragged banks."""

from __future__ import annotations

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st

import scorio_core
from scorio_core.counts import category_counts
from scorio_core.maxreward import max_estimates, max_posterior_terms
from tests.scorio_core.strategies import (
    FloatVector,
    IntMatrix,
    binary_bank,
    categorical_bank,
)

TOLERANCE = 1e-12
Bank = tuple[IntMatrix, FloatVector, IntMatrix | None]


@given(bank=categorical_bank(), data=st.data())
def test_max_at_k_equals_scorio_on_categorical_banks(
    bank: Bank, data: st.DataObject
) -> None:
    results, weights, _ = bank
    k = data.draw(st.integers(1, results.shape[1]))
    assert scorio_core.max_at_k(results, k, weights) == pytest.approx(
        oracle.max_at_k(results, k, weights), abs=TOLERANCE
    )


@given(results=binary_bank(), data=st.data())
def test_max_at_k_defaults_to_binary_weights(
    results: IntMatrix, data: st.DataObject
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    assert scorio_core.max_at_k(results, k) == pytest.approx(
        oracle.max_at_k(results, k), abs=TOLERANCE
    )


@given(
    bank=categorical_bank(),
    data=st.data(),
    confidence=st.floats(0.01, 0.999),
    clip=st.sampled_from([None, (-1.0, 1.0), (0.0, 3.0)]),
)
def test_max_at_k_ci_equals_scorio_for_any_latent_k(
    bank: Bank,
    data: st.DataObject,
    confidence: float,
    clip: tuple[float, float] | None,
) -> None:
    results, weights, prior = bank
    k = data.draw(st.integers(1, results.shape[1] + 6))
    ours = scorio_core.max_at_k_ci(results, k, weights, prior, confidence, clip)
    theirs = oracle.max_at_k_ci(results, k, weights, prior, confidence, clip)
    assert ours == pytest.approx(theirs, abs=TOLERANCE, rel=TOLERANCE)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (([[0, 2]], 1, None), ValueError),
        (([[0, 1]], 3, [0.0, 1.0]), ValueError),
        (([[0, 1]], 0, [0.0, 1.0]), ValueError),
        (([[0, 1]], 1.0, [0.0, 1.0]), ValueError),
        (([[0, 1]], 1, [0.0, 1j]), ValueError),
        (([[0, 1]], 1, ["0", "1"]), ValueError),
    ],
)
def test_bad_input_raises_what_scorio_raises(
    arguments: tuple[object, ...], error: type[Exception]
) -> None:
    with pytest.raises(error):
        oracle.max_at_k(*arguments)
    with pytest.raises(error):
        scorio_core.max_at_k(*arguments)  # type: ignore[arg-type]


@given(bank=categorical_bank(with_prior=False), data=st.data())
def test_count_kernels_give_each_question_its_own_n(
    bank: Bank, data: st.DataObject
) -> None:
    results, weights, _ = bank
    k = data.draw(st.integers(1, results.shape[1]))
    # Each question alone is a rectangular bank: the ragged kernel must give
    # every row exactly what scorio gives that row on its own.
    cut = data.draw(
        st.lists(
            st.integers(k, results.shape[1]),
            min_size=len(results),
            max_size=len(results),
        )
    )
    rows = [row[:n] for row, n in zip(results, cut, strict=True)]
    counts = np.stack([category_counts(row[None, :], weights.size)[0] for row in rows])
    estimates = max_estimates(counts, weights, k)
    means, _ = max_posterior_terms((counts + 1).astype(float), weights, k)
    for row, estimate, mean in zip(rows, estimates, means, strict=True):
        assert estimate == pytest.approx(
            oracle.max_at_k(row[None, :], k, weights), abs=TOLERANCE
        )
        if k > 1:
            expected = oracle.max_at_k_ci(row[None, :], k, weights)[0]
            assert mean == pytest.approx(expected, abs=TOLERANCE)


@given(results=binary_bank(), data=st.data())
def test_repeated_and_unsorted_weights_group_into_levels_as_in_scorio(
    results: IntMatrix, data: st.DataObject
) -> None:
    categories = np.where(results == 1, 3, results)
    weights = np.array([0.5, -2.0, 0.5, -2.0])
    k = data.draw(st.integers(1, results.shape[1] + 3))
    assert scorio_core.max_at_k_ci(categories, k, weights) == pytest.approx(
        oracle.max_at_k_ci(categories, k, weights), abs=TOLERANCE
    )
    if k <= results.shape[1]:
        assert scorio_core.max_at_k(categories, k, weights) == pytest.approx(
            oracle.max_at_k(categories, k, weights), abs=TOLERANCE
        )
