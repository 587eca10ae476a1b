"""Live metrics from count tables: equal to scorio's batch functions when the
counts are rectangular, and each question's own posterior when they are not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st

from scorio_core import CountTable
from scorio_core.count_metrics import MetricSpec, ModelCounts, live_metrics
from scorio_core.counts import category_counts
from tests.scorio_core.strategies import IntMatrix, binary_bank, categorical_bank

TOLERANCE = 1e-12
Batch = Callable[[IntMatrix, float], tuple[float, float, float, float]]


def batch_binary(text: str) -> Batch:
    """The scorio function a binary live metric equals on rectangular counts."""
    name, _, rest = text.replace("^", "@").partition("@")
    k_text, _, tau = rest.partition(":")
    k = int(k_text)
    table: dict[str, Batch] = {
        "pass": lambda r, c: oracle.pass_at_k_ci(r, k, c),
        "unanimous": lambda r, c: oracle.unanimous_at_k_ci(r, k, c),
        "maj": lambda r, c: oracle.maj_at_k_ci(r, k, c),
        "auc": lambda r, c: oracle.auc_at_k_ci(r, k, c),
        "mg_pass": lambda r, c: oracle.mg_pass_at_k_ci(r, k, c),
        "geom": lambda r, c: oracle.geom_at_k_ci(r, k, confidence=c),
        "geom_ds": lambda r, c: oracle.geom_ds_at_k_ci(r, k, confidence=c),
        "geo_spectrum_star": lambda r, c: oracle.geo_spectrum_star_at_k_ci(r, k, c),
    }
    if text.startswith("pass^"):
        return lambda r, c: oracle.pass_hat_k_ci(r, k, c)
    if name == "g_pass":
        if tau:
            return lambda r, c: oracle.g_pass_at_k_tau_ci(r, k, float(tau), c)
        return lambda r, c: oracle.g_pass_at_k_ci(r, k, c)
    return table[name]


BINARY = [
    "pass@{k}",
    "pass^{k}",
    "unanimous@{k}",
    "g_pass@{k}",
    "g_pass@{k}:0.5",
    "mg_pass@{k}",
    "maj@{k}",
    "auc@{k}",
    "geom@{k}",
    "geom_ds@{k}",
    "geo_spectrum_star@{k}",
]


def counts_of(matrices: list[IntMatrix], categories: int) -> list[ModelCounts]:
    return [
        ModelCounts(
            category_counts(m, categories),
            np.zeros((m.shape[0], categories), dtype=np.int64),
            m.shape[0],
        )
        for m in matrices
    ]


@pytest.mark.parametrize("template", BINARY)
@given(
    first=binary_bank(),
    data=st.data(),
    confidence=st.floats(0.5, 0.99),
)
def test_binary_metrics_equal_the_batch_functions_on_rectangular_counts(
    template: str, first: IntMatrix, data: st.DataObject, confidence: float
) -> None:
    second = data.draw(st.sampled_from([first, 1 - first]))
    k = data.draw(st.integers(1, first.shape[1]))
    text = template.format(k=k)
    values = live_metrics(
        [MetricSpec.parse(text)],
        counts_of([first, second], 2),
        np.array([0.0, 1.0]),
        confidence,
    )
    for matrix, value in zip((first, second), values, strict=True):
        got = value[text]
        expected = batch_binary(text)(matrix, confidence)
        assert (got.mu, got.sigma, got.lo, got.hi) == pytest.approx(
            expected, abs=TOLERANCE
        )


@given(bank=categorical_bank(with_prior=False), data=st.data())
def test_any_weight_metrics_equal_the_batch_functions(
    bank: tuple[IntMatrix, np.ndarray, None], data: st.DataObject
) -> None:
    results, weights, _ = bank
    k = data.draw(st.integers(1, results.shape[1] + 2))
    bounds = (float(weights.min()), float(weights.max()))
    texts = ["avg", "bayes", f"max@{k}"]
    (value,) = live_metrics(
        [MetricSpec.parse(t) for t in texts],
        counts_of([results], weights.size),
        weights,
        0.9,
    )
    expected = {
        "avg": oracle.avg_ci(results, weights, 0.9, bounds),
        "bayes": oracle.bayes_ci(results, weights, None, 0.9, bounds),
        f"max@{k}": oracle.max_at_k_ci(results, k, weights, None, 0.9, bounds),
    }
    for text in texts:
        got = value[text]
        assert (got.mu, got.sigma, got.lo, got.hi) == pytest.approx(
            expected[text], abs=TOLERANCE, rel=TOLERANCE
        )


@given(results=binary_bank(), data=st.data())
def test_uneven_counts_give_each_question_its_own_posterior(
    results: IntMatrix, data: st.DataObject
) -> None:
    """Ragged: mu is the mean and sigma^2 M^2 the sum of one-question batch
    results, each question with its own number of trials."""
    cut = data.draw(
        st.lists(
            st.integers(1, results.shape[1]),
            min_size=results.shape[0],
            max_size=results.shape[0],
        )
    )
    rows = [row[:n][None, :] for row, n in zip(results, cut, strict=True)]
    counts = np.concatenate([category_counts(row, 2) for row in rows])
    k = data.draw(st.integers(1, min(cut)))
    latent = data.draw(st.integers(1, 6))
    single: dict[str, Callable[[IntMatrix], tuple[float, ...]]] = {
        f"pass@{k}": lambda r: oracle.pass_at_k_ci(r, k),
        f"maj@{k}": lambda r: oracle.maj_at_k_ci(r, k),
        f"g_pass@{k}:0.6": lambda r: oracle.g_pass_at_k_tau_ci(r, k, 0.6),
        f"geom@{k}": lambda r: oracle.geom_at_k_ci(r, k),
        # Max@k's posterior target is latent: any k, whatever a question's n.
        f"max@{latent}": lambda r: oracle.max_at_k_ci(
            r, latent, None, None, 0.95, (0, 1)
        ),
    }
    (value,) = live_metrics(
        [MetricSpec.parse(t) for t in single],
        [ModelCounts(counts, np.zeros_like(counts), len(rows))],
        np.array([0.0, 1.0]),
        0.95,
    )
    for text, batch in single.items():
        per_question = [batch(row) for row in rows]
        mu = float(np.mean([p[0] for p in per_question]))
        sigma = float(np.sqrt(sum(p[1] ** 2 for p in per_question)) / len(rows))
        assert value[text].mu == pytest.approx(mu, abs=TOLERANCE), text
        assert value[text].sigma == pytest.approx(sigma, abs=TOLERANCE), text


def test_unseen_questions_contribute_their_prior() -> None:
    seen = np.array([[1, 1, 0, 1]])
    table = CountTable.from_matrix(seen, [0.0, 1.0])
    (value,) = live_metrics(
        [MetricSpec.parse("pass@2"), MetricSpec.parse("avg")],
        [ModelCounts(table.observed_counts, table.prior_counts, 3)],
        np.array([0.0, 1.0]),
        0.95,
    )
    unseen = oracle.pass_at_k_ci(np.array([[1, 1, 0, 1]]), 2)
    # Two unseen questions under Beta(1, 1): E[1 - (1-p)^2] = 2/3.
    assert value["pass@2"].mu == pytest.approx((unseen[0] + 2 * (2 / 3)) / 3)
    # avg: the observed average over the one seen question.
    assert value["avg"].mu == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pass", "unknown metric"),
        ("pass@0", "k must be in 1..1024"),
        ("maj@1025", "k must be in 1..1024"),
        ("mean@3", "unknown metric"),
        ("maj^3", "unknown metric"),
        ("pass@3:0.5", "only g_pass@k takes"),
        ("g_pass@3:1.5", "tau must be"),
        ("g_pass@3:x", "tau must be"),
    ],
)
def test_a_bad_metric_name_says_the_syntax(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetricSpec.parse(text)


def test_a_binary_metric_on_a_categorical_run_is_refused() -> None:
    counts = counts_of([np.array([[0, 1, 2]])], 3)
    with pytest.raises(ValueError, match="needs binary outcomes"):
        live_metrics([MetricSpec.parse("pass@2")], counts, np.array([0, 0.5, 1]), 0.9)


@given(results=binary_bank(), data=st.data())
def test_prior_outcomes_enter_the_posterior_as_scorio_takes_them(
    results: IntMatrix, data: st.DataObject
) -> None:
    """Every question with one prior success and two prior failures: Beta(2, 3)
    for the Pass family, R0 for Max@k and Bayes@N."""
    prior_rows = np.tile(np.array([1, 0, 0]), (results.shape[0], 1))
    model = ModelCounts(
        category_counts(results, 2),
        category_counts(prior_rows, 2),
        results.shape[0],
    )
    k = data.draw(st.integers(1, results.shape[1]))
    texts = [f"pass@{k}", f"maj@{k}", f"max@{k}", "bayes"]
    (value,) = live_metrics(
        [MetricSpec.parse(t) for t in texts], [model], np.array([0.0, 1.0]), 0.95
    )
    expected = {
        f"pass@{k}": oracle.pass_at_k_ci(results, k, 0.95, (0, 1), 2.0, 3.0),
        f"maj@{k}": oracle.maj_at_k_ci(results, k, 0.95, (0, 1), 2.0, 3.0),
        f"max@{k}": oracle.max_at_k_ci(results, k, None, prior_rows, 0.95, (0, 1)),
        "bayes": oracle.bayes_ci(results, None, prior_rows, 0.95, (0, 1)),
    }
    for text in texts:
        got = value[text]
        assert (got.mu, got.sigma, got.lo, got.hi) == pytest.approx(
            expected[text], abs=TOLERANCE
        ), text
