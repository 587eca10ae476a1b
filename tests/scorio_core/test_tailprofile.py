"""The posterior TailPass profile against scorio's: exact moments, utilities,
and seeded Monte Carlo draws."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import scorio_core

TOLERANCE = 1e-12


@st.composite
def fits(draw: st.DrawFn) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Arguments of tailpass: R, k, w, R0 and the keyword options."""
    categories = draw(st.integers(2, 3))
    rows, trials = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    results = draw(
        arrays(np.int64, (rows, trials), elements=st.integers(0, categories - 1))
    )
    scores = None
    if categories > 2 or draw(st.booleans()):
        scores = draw(
            arrays(
                np.float64,
                categories,
                elements=st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 1.0),
            )
        )
    prior_outcomes = None
    if draw(st.booleans()):
        prior_outcomes = draw(
            arrays(np.int64, (rows, 2), elements=st.integers(0, categories - 1))
        )
    k = draw(st.integers(1, 6))
    concentration = draw(
        st.sampled_from(["scalar", "vector", "matrix"]).map(
            lambda kind: (
                0.7
                if kind == "scalar"
                else np.linspace(0.5, 2.0, categories)
                if kind == "vector"
                else np.full((rows, categories), 1.3)
            )
        )
    )
    thresholds = draw(
        st.none()
        | st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4, unique=True).map(sorted)
    )
    options = {
        "eta": draw(st.floats(0.0, 1.0)),
        "prior": concentration,
        "thresholds": thresholds,
    }
    return (results, k, scores, prior_outcomes), options


def same(ours: object, theirs: object) -> None:
    assert np.asarray(ours, dtype=float) == pytest.approx(
        np.asarray(theirs, dtype=float), abs=TOLERANCE
    )


@pytest.mark.slow
@settings(max_examples=40)
@given(fit=fits(), lam=st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.0]))
def test_exact_moments_and_utilities_equal_scorio(
    fit: tuple[tuple[Any, ...], dict[str, Any]], lam: float
) -> None:
    arguments, options = fit
    ours = scorio_core.tailpass(*arguments, **options)
    theirs = oracle.tailpass(*arguments, **options)
    same(ours.thresholds, theirs.thresholds)
    same(ours.mean, theirs.mean)
    same(ours.question_mean, theirs.question_mean)
    same(ours.covariance, theirs.covariance)
    same(ours.std, theirs.std)
    size = len(theirs.thresholds)
    weights = np.full(size, 1.0 / size)
    same(ours.linear(weights), theirs.linear(weights))
    same(ours.moment(lam), theirs.moment(lam))
    same(ours.discovery(), theirs.discovery())
    same(ours.stability(), theirs.stability())
    same(
        np.concatenate(ours.ci(method="normal")),
        np.concatenate(theirs.ci(method="normal")),
    )
    same(ours.moment_ci(lam, method="normal"), theirs.moment_ci(lam, method="normal"))
    same(ours.at_k(ours.k + 2).mean, theirs.at_k(theirs.k + 2).mean)


@settings(max_examples=25)
@given(fit=fits(), seed=st.integers(0, 2**32 - 1))
def test_seeded_draws_and_their_utilities_equal_scorio(
    fit: tuple[tuple[Any, ...], dict[str, Any]], seed: int
) -> None:
    arguments, options = fit
    ours = scorio_core.tailpass(*arguments, **options).sample(20, rng=seed)
    theirs = oracle.tailpass(*arguments, **options).sample(20, rng=seed)
    same(ours.profile, theirs.profile)
    size = ours.profile.shape[1]
    weights = np.full(size, 1.0 / size)
    same(ours.linear(weights), theirs.linear(weights))
    for lam in (1.0, 2.0, 0.7):
        same(ours.moment(lam), theirs.moment(lam))
    same(ours.power_mean(0.5), theirs.power_mean(0.5))
    same(ours.qrs(aggregation="profile"), theirs.qrs(aggregation="profile"))
    same(ours.rollout(3), theirs.rollout(3))
    same(ours.harmonic(0.3), theirs.harmonic(0.3))
    same(ours.discovery(), theirs.discovery())
    same(ours.stability(), theirs.stability())
    target = np.linspace(1.0, 0.1, size)
    same(ours.shortfall(target), theirs.shortfall(target))
    same(np.concatenate(ours.summary()), np.concatenate(theirs.summary()))
    same(ours.at_k(2).profile, theirs.at_k(2).profile)


@pytest.mark.parametrize(
    ("arguments", "options"),
    [
        (([[0, 1]], 0), {}),
        (([[0, 1]], 2, [0.0, 1.5]), {}),
        (([[0, 1]], 2), {"eta": 1.5}),
        (([[0, 1]], 2), {"prior": 0.0}),
        (([[0, 1]], 2), {"prior": [1.0, 1.0, 1.0]}),
        (([[0, 1]], 2), {"thresholds": [0.6, 0.3]}),
        (([[0, 2]], 2), {}),
    ],
)
def test_bad_input_raises_value_error_as_scorio(
    arguments: tuple[object, ...], options: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        oracle.tailpass(*arguments, **options)
    with pytest.raises(ValueError):
        scorio_core.tailpass(*arguments, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [oracle, scorio_core])
@pytest.mark.parametrize(
    "call",
    [
        "profile.linear([0.5, 0.6])",
        "profile.moment(0.0)",
        "profile.ci(method='bayes')",
        "profile.sample(1)",
        "draws.rollout(1)",
        "draws.shortfall([0.2, 0.5])",
        "draws.summary(np.ones(3))",
    ],
)
def test_bad_utility_arguments_raise_value_error_as_scorio(
    module: Any, call: str
) -> None:
    profile = module.tailpass([[0, 1, 1]], 2)
    scope = {"np": np, "profile": profile, "draws": profile.sample(5, rng=0)}
    with pytest.raises(ValueError):
        eval(call, scope)
