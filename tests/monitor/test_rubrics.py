"""Rubric schemas: hand-made signal rows, thresholds, and runs scored by scorio."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict, cast

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st
from scorio.categorical import Thresholds, evaluate_schema

from monitor import Monitor, RunConfig
from monitor.rubrics import (
    RUBRICS,
    SIGNALS,
    THRESHOLDS,
    Rubric,
    thresholds_from_signals,
)

TOLERANCE = 1e-12
CUTS: Mapping[str, float] = {
    "confidence": 1.0,
    "length": 1000.0,
    "length_short": 500.0,
    "length_long": 2000.0,
    "prompt_surprise": 3.0,
    "verifier": 0.5,
}
ISSUE_TITLES = {
    "Exact Match",
    "Format Aware",
    "Conf-Calibrated",
    "OOD Robustness",
    "Strict Compliance",
    "Conf-Wrong Penalty",
    "Verifier-Only",
    "Format+Confidence",
    "Length-Robust",
    "Verifier Probe",
    "Efficiency-Adjusted",
    "Concise High-Conf",
}

# A correct, boxed, finished, short, confident, familiar, verifier-accepted
# trial; each case below changes what its schema looks at.
BASE: Mapping[str, object] = {
    "is_correct": True,
    "has_box": True,
    "finish_reason": "stop",
    "output_tokens": 300,
    "bits_per_token": 0.5,
    "prompt_bits_per_token": 2.0,
    "verifier_prob": 0.9,
}
WRONG = {"is_correct": False}
UNSURE = {"bits_per_token": 1.5}

CASES: list[tuple[str, Mapping[str, object], str]] = [
    ("exact_match", {}, "correct"),
    ("exact_match", WRONG, "incorrect"),
    ("format_aware", {}, "correct_boxed"),
    ("format_aware", {"has_box": False}, "correct_unboxed"),
    ("format_aware", WRONG, "wrong_boxed"),
    ("format_aware", {**WRONG, "has_box": False}, "wrong_unboxed"),
    ("conf_calibrated", {}, "confident_correct"),
    ("conf_calibrated", UNSURE, "unconfident_correct"),
    ("conf_calibrated", WRONG, "confident_wrong"),
    ("conf_calibrated", {**WRONG, **UNSURE}, "unconfident_wrong"),
    ("ood_robustness", {}, "familiar_correct"),
    ("ood_robustness", {"prompt_bits_per_token": 4.0}, "unfamiliar_correct"),
    ("ood_robustness", WRONG, "familiar_wrong"),
    ("ood_robustness", {**WRONG, "prompt_bits_per_token": 4.0}, "unfamiliar_wrong"),
    ("strict_compliance", {}, "compliant_correct"),
    ("strict_compliance", {"has_box": False}, "non_compliant"),
    ("strict_compliance", {"finish_reason": "length"}, "non_compliant"),
    ("strict_compliance", {"finish_reason": "tool_calls"}, "non_compliant"),
    ("strict_compliance", WRONG, "non_compliant"),
    ("conf_wrong_penalty", {}, "correct"),
    ("conf_wrong_penalty", UNSURE, "correct"),
    ("conf_wrong_penalty", WRONG, "confident_wrong"),
    ("conf_wrong_penalty", {**WRONG, **UNSURE}, "unconfident_wrong"),
    ("verifier_only", {}, "verifier_accepts"),
    ("verifier_only", {**WRONG, "verifier_prob": 0.2}, "verifier_rejects"),
    ("verifier_only", WRONG, "verifier_accepts"),
    ("format_confidence", {}, "correct_boxed_confident"),
    ("format_confidence", {"has_box": False}, "correct_confident"),
    ("format_confidence", UNSURE, "correct_boxed"),
    ("format_confidence", {**UNSURE, "has_box": False}, "correct_plain"),
    ("format_confidence", WRONG, "wrong"),
    ("length_robust", {}, "correct"),
    ("length_robust", {"finish_reason": "length"}, "correct"),
    ("length_robust", {**WRONG, "finish_reason": "length"}, "truncated"),
    ("length_robust", {**WRONG, "finish_reason": "max_tokens"}, "truncated"),
    ("length_robust", WRONG, "wrong"),
    ("verifier_probe", {}, "correct_accepted"),
    ("verifier_probe", {"verifier_prob": 0.1}, "correct_rejected"),
    ("verifier_probe", WRONG, "wrong_accepted"),
    ("verifier_probe", {**WRONG, "verifier_prob": 0.1}, "wrong_rejected"),
    ("efficiency_adjusted", {}, "correct_short"),
    ("efficiency_adjusted", {"output_tokens": 1200}, "correct_typical"),
    ("efficiency_adjusted", {"output_tokens": 5000}, "correct_long"),
    ("efficiency_adjusted", WRONG, "wrong"),
    ("concise_high_conf", {}, "correct_concise_confident"),
    ("concise_high_conf", {"output_tokens": 1500}, "correct"),
    ("concise_high_conf", UNSURE, "correct"),
    ("concise_high_conf", WRONG, "wrong"),
]

# At a cut, the side the library's ">= threshold is high" rule gives.
BOUNDARIES: list[tuple[str, Mapping[str, object], str]] = [
    ("conf_calibrated", {"bits_per_token": 1.0}, "confident_correct"),
    (
        "conf_calibrated",
        {"bits_per_token": math.nextafter(1.0, 2.0)},
        "unconfident_correct",
    ),
    ("ood_robustness", {"prompt_bits_per_token": 3.0}, "unfamiliar_correct"),
    ("verifier_only", {"verifier_prob": 0.5}, "verifier_accepts"),
    ("verifier_only", {"verifier_prob": 0.4999}, "verifier_rejects"),
    ("concise_high_conf", {"output_tokens": 999}, "correct_concise_confident"),
    ("concise_high_conf", {"output_tokens": 1000}, "correct"),
    ("efficiency_adjusted", {"output_tokens": 500}, "correct_short"),
    ("efficiency_adjusted", {"output_tokens": 501}, "correct_typical"),
    ("efficiency_adjusted", {"output_tokens": 1999}, "correct_typical"),
    ("efficiency_adjusted", {"output_tokens": 2000}, "correct_long"),
]


def label(rubric: Rubric, changes: Mapping[str, object]) -> str:
    return rubric.labels[rubric.classify({**BASE, **changes}, CUTS)]


def test_all_twelve_schemas_of_the_issue_are_registered() -> None:
    assert {rubric.title for rubric in RUBRICS.values()} == ISSUE_TITLES
    for name, rubric in RUBRICS.items():
        assert rubric.name == name
        assert len(rubric.weights) == len(rubric.labels) == rubric.category_count
        assert set(rubric.signals) <= set(SIGNALS)
        assert set(rubric.thresholds) <= set(THRESHOLDS)
        assert rubric.reference


def test_the_registry_cannot_be_changed() -> None:
    mutable = cast(dict[str, Rubric], RUBRICS)
    with pytest.raises(TypeError):
        mutable["exact_match"] = RUBRICS["format_aware"]


def test_categories_are_numbered_by_increasing_default_weight() -> None:
    for rubric in RUBRICS.values():
        assert list(rubric.weights) == sorted(rubric.weights), rubric.name


def test_the_library_schemas_keep_the_library_weights() -> None:
    assert RUBRICS["exact_match"].weights == (0.0, 1.0)
    assert RUBRICS["format_aware"].weights == (0.0, 0.3, 0.6, 1.0)
    assert RUBRICS["conf_calibrated"].weights == (0.1, 0.2, 0.6, 1.0)
    assert RUBRICS["ood_robustness"].weights == (0.1, 0.4, 0.7, 1.0)


@pytest.mark.parametrize(("name", "changes", "expected"), CASES)
def test_a_hand_made_row_lands_in_its_category(
    name: str, changes: Mapping[str, object], expected: str
) -> None:
    assert label(RUBRICS[name], changes) == expected


@pytest.mark.parametrize("name", sorted(RUBRICS))
def test_every_category_is_reachable(name: str) -> None:
    reached = {expected for case, _, expected in CASES if case == name}
    assert reached == set(RUBRICS[name].labels)


@pytest.mark.parametrize(("name", "changes", "expected"), BOUNDARIES)
def test_a_value_at_a_cut_goes_to_the_libraries_side(
    name: str, changes: Mapping[str, object], expected: str
) -> None:
    assert label(RUBRICS[name], changes) == expected


@pytest.mark.parametrize(
    ("name", "signal"),
    [(name, signal) for name, rubric in RUBRICS.items() for signal in rubric.signals],
)
def test_a_missing_signal_raises_and_names_it(name: str, signal: str) -> None:
    row = {key: value for key, value in BASE.items() if key != signal}
    with pytest.raises(ValueError, match=f"needs signal {signal} .*missing"):
        RUBRICS[name].classify(row, CUTS)
    with pytest.raises(ValueError, match=f"needs signal {signal}"):
        RUBRICS[name].classify({**BASE, signal: None}, CUTS)


@pytest.mark.parametrize(
    ("signal", "value"),
    [
        ("is_correct", "yes"),
        ("is_correct", 2),
        ("is_correct", 1.0),
        ("has_box", "true"),
        ("finish_reason", "done"),
        ("finish_reason", 1),
        ("output_tokens", 3.5),
        ("output_tokens", -1),
        ("output_tokens", True),
        ("bits_per_token", -0.1),
        ("bits_per_token", math.nan),
        ("bits_per_token", math.inf),
        ("bits_per_token", "0.3"),
        ("prompt_bits_per_token", -2.0),
        ("verifier_prob", 1.5),
        ("verifier_prob", -0.5),
    ],
)
def test_an_invalid_signal_raises_and_says_what_is_expected(
    signal: str, value: object
) -> None:
    rubric = next(r for r in RUBRICS.values() if signal in r.signals)
    with pytest.raises(ValueError, match=f"signal {signal} must be"):
        rubric.classify({**BASE, signal: value}, CUTS)


def test_flags_may_be_zero_or_one_and_extra_signals_are_ignored() -> None:
    rubric = RUBRICS["format_aware"]
    row = {"is_correct": 1, "has_box": np.int64(0), "reasoning": "ignored"}
    assert rubric.labels[rubric.classify(row, {})] == "correct_unboxed"


@pytest.mark.parametrize(
    "name", sorted(name for name, rubric in RUBRICS.items() if rubric.thresholds)
)
def test_a_missing_threshold_raises_and_names_it(name: str) -> None:
    rubric = RUBRICS[name]
    for threshold in rubric.thresholds:
        cuts = {key: value for key, value in CUTS.items() if key != threshold}
        with pytest.raises(ValueError, match=f"needs threshold {threshold}"):
            rubric.classify(BASE, cuts)
        with pytest.raises(ValueError, match=f"threshold {threshold}"):
            rubric.check_thresholds({**CUTS, threshold: math.nan})


def test_inverted_length_quartiles_are_refused() -> None:
    rubric = RUBRICS["efficiency_adjusted"]
    with pytest.raises(ValueError, match="length_short must not exceed length_long"):
        rubric.check_thresholds({"length_short": 900.0, "length_long": 800.0})


def test_a_rubric_checks_its_own_definition() -> None:
    rule = RUBRICS["exact_match"].rule
    with pytest.raises(ValueError, match="one weight per label"):
        Rubric("x", "X", ("is_correct",), (), ("a", "b"), (0.0,), "", rule)
    with pytest.raises(ValueError, match="snake_case"):
        Rubric("Bad-Name", "X", ("is_correct",), (), ("a", "b"), (0.0, 1.0), "", rule)
    with pytest.raises(ValueError, match="unknown names"):
        Rubric("x", "X", ("mood",), (), ("a", "b"), (0.0, 1.0), "", rule)


@given(
    st.fixed_dictionaries(
        {
            "is_correct": st.booleans(),
            "has_box": st.booleans(),
            "finish_reason": st.sampled_from(["stop", "length", "error", "unknown"]),
            "output_tokens": st.integers(0, 10**6),
            "bits_per_token": st.floats(0.0, 50.0),
            "prompt_bits_per_token": st.floats(0.0, 50.0),
            "verifier_prob": st.floats(0.0, 1.0),
        }
    )
)
def test_any_valid_row_gets_a_category_of_every_rubric(row: dict[str, object]) -> None:
    for rubric in RUBRICS.values():
        assert 0 <= rubric.classify(row, CUTS) < rubric.category_count


class LogRow(TypedDict):
    is_correct: bool
    has_box: bool
    finish_reason: str
    output_tokens: int
    bits_per_token: float
    prompt_bits_per_token: float
    verifier_prob: float


def log_rows(rng: np.random.Generator, count: int) -> list[LogRow]:
    """Signal rows like a harness writes them, with every signal present."""
    correct = rng.random(count) < 0.55
    truncated = rng.random(count) < 0.15
    return [
        LogRow(
            is_correct=bool(correct[i] and not truncated[i]),
            has_box=bool(rng.random() < 0.8 and not truncated[i]),
            finish_reason="length" if truncated[i] else "stop",
            output_tokens=int(rng.integers(50, 8000)),
            bits_per_token=float(rng.gamma(2.0, 0.4)),
            prompt_bits_per_token=float(rng.gamma(3.0, 1.0)),
            verifier_prob=float(rng.beta(2.0, 2.0)),
        )
        for i in range(count)
    ]


def test_thresholds_are_the_percentiles_of_the_log() -> None:
    rows = log_rows(np.random.default_rng(5), 41)
    tokens = np.array([row["output_tokens"] for row in rows], dtype=float)
    bits = np.array([row["bits_per_token"] for row in rows], dtype=float)
    assert thresholds_from_signals(RUBRICS["efficiency_adjusted"], rows) == {
        "length_short": np.percentile(tokens, 25),
        "length_long": np.percentile(tokens, 75),
    }
    assert thresholds_from_signals(RUBRICS["concise_high_conf"], rows) == {
        "length": np.median(tokens),
        "confidence": np.median(bits),
    }
    assert thresholds_from_signals(RUBRICS["exact_match"], rows) == {}


def test_thresholds_match_the_library_on_its_own_signals() -> None:
    """Median and quartiles as scorio.categorical.Thresholds computes them."""
    rows = log_rows(np.random.default_rng(6), 41)
    log_probability = np.array([-row["bits_per_token"] * math.log(2) for row in rows])
    perplexity = np.array([2.0 ** row["prompt_bits_per_token"] for row in rows])
    tokens = np.array([row["output_tokens"] for row in rows], dtype=float)
    library = Thresholds.from_columns(
        {
            "completion_avg_logprob": log_probability,
            "prompt_perplexity": perplexity,
            "completion_length": tokens,
        }
    )
    ours = {
        name: value
        for rubric in RUBRICS.values()
        for name, value in thresholds_from_signals(rubric, rows).items()
    }
    assert ours["confidence"] == pytest.approx(-library.medians["C1"] / math.log(2))
    assert ours["prompt_surprise"] == pytest.approx(math.log2(library.medians["P2"]))
    assert ours["length"] == library.medians["C_len"]
    assert ours["length_short"] == library.q25["C_len"]
    assert ours["length_long"] == library.q75["C_len"]


def test_log_rows_missing_a_signal_are_skipped() -> None:
    rows: list[dict[str, float | None]] = [
        {"bits_per_token": 1.0},
        {},
        {"bits_per_token": None},
        {"bits_per_token": 3.0},
    ]
    assert thresholds_from_signals(RUBRICS["conf_calibrated"], rows) == {
        "confidence": 2.0
    }


def test_a_percentile_may_be_chosen_per_threshold() -> None:
    rows = [{"verifier_prob": p} for p in (0.1, 0.2, 0.3, 0.4, 0.5)]
    chosen = thresholds_from_signals(RUBRICS["verifier_only"], rows, {"verifier": 75})
    assert chosen == {"verifier": pytest.approx(0.4)}


@pytest.mark.parametrize(
    ("rows", "percentiles", "reason"),
    [
        ([{"bits_per_token": 1.0}], {"length": 50.0}, "has no thresholds"),
        ([{"bits_per_token": 1.0}], {"confidence": 101.0}, r"in \[0, 100\]"),
        ([{"is_correct": True}], None, "no bits_per_token values"),
        ([{"bits_per_token": 1.0}, {"bits_per_token": -1.0}], None, "row 1: signal"),
    ],
)
def test_bad_threshold_inputs_raise(
    rows: list[dict[str, object]], percentiles: dict[str, float] | None, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        thresholds_from_signals(RUBRICS["conf_calibrated"], rows, percentiles)


QUESTIONS, TRIALS, MODELS = 6, 7, 2


def classified_run(
    rubric: Rubric, seed: int
) -> tuple[dict[str, np.ndarray], list[dict[str, object]]]:
    """Thresholds from an earlier log; then R per model and its trial events."""
    rng = np.random.default_rng(seed)
    cuts = thresholds_from_signals(rubric, log_rows(rng, 101))
    results: dict[str, np.ndarray] = {}
    events: list[dict[str, object]] = []
    for model in (f"m{index}" for index in range(MODELS)):
        rows = log_rows(rng, QUESTIONS * TRIALS)
        matrix = np.array([rubric.classify(row, cuts) for row in rows])
        results[model] = matrix.reshape(QUESTIONS, TRIALS)
        events += [
            {
                "run": "rubric",
                "model": model,
                "question": question,
                "trial": trial,
                "category": int(results[model][question, trial]),
            }
            for question in range(QUESTIONS)
            for trial in range(TRIALS)
        ]
    return results, events


@pytest.mark.parametrize("name", sorted(RUBRICS))
def test_a_categorical_run_matches_scorio_bayes_with_the_schemas_weights(
    name: str,
) -> None:
    rubric = RUBRICS[name]
    results, events = classified_run(rubric, seed=sorted(RUBRICS).index(name))
    monitor = Monitor()
    monitor.configure(
        RunConfig(
            run="rubric",
            weights=list(rubric.weights),
            labels=list(rubric.labels),
            question_count=QUESTIONS,
        )
    )
    assert monitor.ingest(events).accepted == len(events)
    for row in monitor.status("rubric").models:
        mu, sigma = oracle.bayes(results[row.model], np.array(rubric.weights))
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)


@pytest.mark.parametrize(
    ("name", "library_schema"),
    [
        ("format_aware", "Format Compliance & Correctness"),
        ("conf_calibrated", "Confident & Correct"),
        ("ood_robustness", "Difficulty-Adjusted Correctness"),
    ],
)
def test_the_library_schemas_score_as_scorio_categorical_does(
    name: str, library_schema: str
) -> None:
    """Same log, same pooled thresholds: the same (mu, sigma) as the library."""
    rubric = RUBRICS[name]
    rows = log_rows(np.random.default_rng(7), QUESTIONS * TRIALS)
    cuts = thresholds_from_signals(rubric, rows)
    matrix = np.array([rubric.classify(row, cuts) for row in rows])
    # The library derives w from the scores present: every category must occur.
    assert set(matrix) == set(range(rubric.category_count))
    columns = {
        "model": np.array(["m"] * len(rows), dtype=object),
        "problem": np.array([i // TRIALS for i in range(len(rows))], dtype=object),
        "trial": np.array([i % TRIALS for i in range(len(rows))], dtype=float),
        "is_correct": np.array([float(row["is_correct"]) for row in rows]),
        "has_box": np.array([float(row["has_box"]) for row in rows]),
        "completion_avg_logprob": np.array(
            [-row["bits_per_token"] * math.log(2) for row in rows]
        ),
        "prompt_perplexity": np.array(
            [2.0 ** row["prompt_bits_per_token"] for row in rows]
        ),
    }
    library = evaluate_schema(columns, library_schema)["m"]
    ours = oracle.bayes(matrix.reshape(QUESTIONS, TRIALS), np.array(rubric.weights))
    assert ours == pytest.approx(library, abs=TOLERANCE)
