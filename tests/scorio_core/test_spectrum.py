"""scorio_core's Maj, AUC, spectrum and geometric metrics against scorio."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import scorio_core
from tests.scorio_core.strategies import IntMatrix, binary_bank

TOLERANCE = 1e-12
Metric = Callable[..., object]

prior_pairs = st.tuples(st.floats(0.2, 5.0), st.floats(0.2, 5.0))
powers = st.floats(-1.0, 2.0, allow_nan=False).filter(lambda x: abs(x) > 1e-3)


def both(name: str, *arguments: object, **keywords: object) -> tuple[object, object]:
    """Run ours and scorio's; equal errors count as agreement."""
    answers: list[object] = []
    for module in (scorio_core, oracle):
        function: Metric = getattr(module, name)
        try:
            answers.append(function(*arguments, **keywords))
        except (ValueError, TypeError, ArithmeticError) as error:
            answers.append(type(error))
    return answers[0], answers[1]


def assert_agree(ours: object, theirs: object) -> None:
    if isinstance(theirs, type):
        assert ours is theirs
    elif isinstance(theirs, tuple) and isinstance(ours, tuple) and len(theirs) == 4:
        # (mu, sigma, lo, hi): sigma = sqrt(E[x^2] - mu^2) loses about
        # eps * mu^2 / sigma to cancellation in either implementation when
        # sigma is tiny beside mu (e.g. a power near -1 on one trial), and
        # the bounds inherit it.
        mu, sigma = float(theirs[0]), float(theirs[1])
        slack = 16 * np.finfo(float).eps * max(1.0, mu * mu) / max(sigma, 1e-300)
        tolerance = TOLERANCE + min(slack, 1e-6)
        assert ours[0] == pytest.approx(mu, abs=TOLERANCE, rel=TOLERANCE)
        assert ours[1:] == pytest.approx(theirs[1:], abs=tolerance, rel=TOLERANCE)
    else:
        assert ours == pytest.approx(theirs, abs=TOLERANCE, rel=TOLERANCE)


@pytest.mark.parametrize(
    "name",
    ["maj_at_k", "auc_at_k", "g_pass_at_k", "unanimous_at_k", "geo_spectrum_star_at_k"],
)
@given(results=binary_bank(), data=st.data())
def test_point_metrics_equal_scorio_for_every_k(
    name: str, results: IntMatrix, data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, results.shape[1] + 1))
    assert_agree(*both(name, results, k))


@pytest.mark.parametrize(
    "name",
    [
        "maj_at_k_ci",
        "auc_at_k_ci",
        "g_pass_at_k_ci",
        "unanimous_at_k_ci",
        "geo_spectrum_star_at_k_ci",
    ],
)
@given(
    results=binary_bank(),
    data=st.data(),
    confidence=st.floats(0.01, 0.999),
    prior=prior_pairs,
    clip=st.sampled_from([(0.0, 1.0), (0.2, 0.7), None]),
)
def test_posterior_metrics_equal_scorio(
    name: str,
    results: IntMatrix,
    data: st.DataObject,
    confidence: float,
    prior: tuple[float, float],
    clip: tuple[float, float] | None,
) -> None:
    k = data.draw(st.integers(1, results.shape[1] + 3))
    assert_agree(*both(name, results, k, confidence, clip, *prior))


@st.composite
def spectra(draw: st.DrawFn, k: int) -> list[float]:
    raw = draw(arrays(np.float64, k, elements=st.floats(0.0, 1.0)))
    total = float(raw.sum())
    scale = draw(st.floats(0.0, 1.0))
    return [float(x) for x in (raw * scale / total if total > 0 else raw)]


@given(results=binary_bank(), data=st.data(), prior=prior_pairs)
def test_threshold_spectrum_and_its_posterior_equal_scorio(
    results: IntMatrix, data: st.DataObject, prior: tuple[float, float]
) -> None:
    k = data.draw(st.integers(1, results.shape[1] + 2))
    weights = data.draw(spectra(k))
    assert_agree(*both("threshold_spectrum_at_k", results, k, weights))
    assert_agree(
        *both("threshold_spectrum_at_k_ci", results, k, weights, 0.9, (0, 1), *prior)
    )


@pytest.mark.parametrize("name", ["geom_at_k", "geom_ds_at_k"])
@given(results=binary_bank(), data=st.data(), first=powers, second=powers)
def test_geometric_blends_equal_scorio(
    name: str, results: IntMatrix, data: st.DataObject, first: float, second: float
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    assert_agree(*both(name, results, k, first, second))


@pytest.mark.parametrize("name", ["geom_at_k_ci", "geom_ds_at_k_ci"])
@given(
    results=binary_bank(),
    data=st.data(),
    first=powers,
    second=powers,
    prior=prior_pairs,
)
def test_geometric_blend_posteriors_equal_scorio(
    name: str,
    results: IntMatrix,
    data: st.DataObject,
    first: float,
    second: float,
    prior: tuple[float, float],
) -> None:
    k = data.draw(st.integers(1, results.shape[1] + 2))
    assert_agree(*both(name, results, k, first, second, 0.95, (0.0, 1.0), *prior))


@given(
    results=binary_bank(),
    data=st.data(),
    lam=st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0.0, 1.0),
    prior=prior_pairs,
)
def test_geo_spectrum_and_its_posterior_equal_scorio(
    results: IntMatrix, data: st.DataObject, lam: float, prior: tuple[float, float]
) -> None:
    k = data.draw(st.integers(1, results.shape[1]))
    weights = data.draw(st.none() | spectra(k))
    assert_agree(*both("geo_spectrum_at_k", results, k, lam, weights))
    assert_agree(
        *both(
            "geo_spectrum_at_k_ci",
            results,
            k,
            lam,
            weights,
            None,
            0.8,
            (0.0, 1.0),
            *prior,
        )
    )


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("threshold_spectrum_at_k", ([0.6, 0.6],)),
        ("threshold_spectrum_at_k", ([-0.1, 0.5],)),
        ("threshold_spectrum_at_k", ([0.5],)),
        ("threshold_spectrum_at_k", ([0.5, 1j],)),
        ("threshold_spectrum_at_k", (["a", "b"],)),
        ("geo_spectrum_at_k", (1.5,)),
        ("geom_at_k", (0.0, 0.0)),
        ("maj_at_k", ()),
    ],
)
def test_bad_arguments_raise_what_scorio_raises(
    name: str, arguments: tuple[object, ...]
) -> None:
    results = np.array([[0, 1, 1], [0, 0, 0]])
    k: object = 2 if name != "maj_at_k" else 2.0
    ours, theirs = both(name, results, k, *arguments)
    assert isinstance(theirs, type) and ours is theirs


def test_lam_and_lambda_together_is_a_type_error_as_in_scorio() -> None:
    results = np.array([[0, 1, 1], [1, 0, 0]])
    ours, theirs = both("geo_spectrum_at_k", results, 2, 0.3, None, 0.4)
    assert ours is TypeError and theirs is TypeError
    ours_alias = scorio_core.geo_spectrum_at_k(results, 2, lambda_=0.3)
    assert ours_alias == pytest.approx(oracle.geo_spectrum_at_k(results, 2, lam=0.3))
