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
from scorio.categorical import Thresholds as LibraryThresholds
from scorio.categorical import evaluate_schema

from monitor import Monitor, RunConfig
from monitor.rubrics import (
    RUBRICS,
    SIGNALS,
    THRESHOLDS,
    Rubric,
    Thresholds,
    thresholds_from_signals,
)

TOLERANCE = 1e-12
CUTS: Mapping[str, float] = {
    "tau_high": 0.5,
    "tau_low_wrong": 0.7,
    "tau_prompt": 3.0,
    "len_p33": 0.1,
    "len_p66": 0.3,
    "corr_p33": 0.3,
    "corr_p66": 0.6,
    "confidence": 1.0,
    "prompt_surprise": 3.0,
}
# The names docs/rubrics.md lists, Table 5's titles.
PAPER = {
    "exact_match": "Exact Match",
    "format_aware": "Format Aware",
    "conf_calibrated": "Conf-Calibrated",
    "ood_robustness": "OOD Robustness",
    "strict_compliance": "Strict Compliance",
    "conf_wrong_penalty": "Conf-Wrong Penalty",
    "verifier_only": "Verifier-Only",
    "format_confidence": "Format+Confidence",
    "length_robust": "Length-Robust",
    "verifier_probe": "Verifier Probe",
    "efficiency_adjusted": "Efficiency-Adjusted",
    "concise_high_conf": "Concise High-Conf",
}
LIBRARY = {
    "scorio_format_aware": "Format Compliance & Correctness",
    "scorio_conf_calibrated": "Confident & Correct",
    "scorio_ood_robustness": "Difficulty-Adjusted Correctness",
}

# A valid, correct, boxed, economical, confident, in-distribution attempt the
# verifier accepts; each row of TABLE_5 changes what its schema looks at.
BASE: Mapping[str, object] = {
    "repeated_pattern": 0,
    "is_correct": True,
    "has_box": True,
    "token_ratio": 0.05,
    "prompt_bpt": 2.0,
    "completion_bpt": 0.2,
    "verifier_correct": 0.9,
    "verifier_wrong": 0.08,
    "verifier_invalid": 0.02,
    "bits_per_token": 0.5,
    "prompt_bits_per_token": 2.0,
}
WRONG = {"is_correct": False}
UNBOXED = {"has_box": False}
LOW = {"completion_bpt": 0.8}  # above tau_high, tau_low_wrong and corr_p66
MID = {"completion_bpt": 0.45}  # correct mid: corr_p33 < bpt <= corr_p66
OOD = {"prompt_bpt": 3.5}
MODERATE = {"token_ratio": 0.2}
VERBOSE = {"token_ratio": 0.5}
NOT_A = {"verifier_correct": 0.3, "verifier_wrong": 0.6, "verifier_invalid": 0.1}
HIGH_C = {"verifier_correct": 0.3, "verifier_wrong": 0.25, "verifier_invalid": 0.45}
REPEATS = {"repeated_pattern": 1}
OFF_TASK = {"verifier_invalid": 0.5, "verifier_correct": 0.3, "verifier_wrong": 0.2}

# Table 5, one row per category: (schema, changes to BASE, category number).
TABLE_5: list[tuple[str, Mapping[str, object], int]] = [
    ("exact_match", WRONG, 1),
    ("exact_match", {}, 2),
    ("format_aware", {**WRONG, **UNBOXED}, 1),
    ("format_aware", WRONG, 2),
    ("format_aware", UNBOXED, 3),
    ("format_aware", {}, 4),
    ("conf_calibrated", {**WRONG, **LOW}, 1),
    ("conf_calibrated", WRONG, 2),
    ("conf_calibrated", LOW, 3),
    ("conf_calibrated", MID, 4),
    ("conf_calibrated", {}, 5),
    ("ood_robustness", {**WRONG, **OOD}, 1),
    ("ood_robustness", WRONG, 2),
    ("ood_robustness", OOD, 3),
    ("ood_robustness", {}, 4),
    ("strict_compliance", WRONG, 1),
    ("strict_compliance", UNBOXED, 1),
    ("strict_compliance", {}, 2),
    ("conf_wrong_penalty", WRONG, 1),
    ("conf_wrong_penalty", {**WRONG, **LOW}, 2),
    ("conf_wrong_penalty", {}, 3),
    ("conf_wrong_penalty", LOW, 3),
    ("verifier_only", HIGH_C, 1),
    ("verifier_only", NOT_A, 2),
    ("verifier_only", {}, 3),
    ("verifier_only", WRONG, 3),
    ("format_confidence", {**WRONG, **UNBOXED}, 1),
    ("format_confidence", {**WRONG, **LOW}, 2),
    ("format_confidence", WRONG, 3),
    ("format_confidence", {**UNBOXED, **LOW}, 4),
    ("format_confidence", UNBOXED, 5),
    ("format_confidence", LOW, 6),
    ("format_confidence", {}, 7),
    ("length_robust", WRONG, 1),
    ("length_robust", {}, 2),
    ("length_robust", VERBOSE, 2),
    ("verifier_probe", WRONG, 1),
    ("verifier_probe", {**WRONG, **NOT_A}, 2),
    ("verifier_probe", NOT_A, 3),
    ("verifier_probe", {}, 4),
    ("efficiency_adjusted", WRONG, 1),
    ("efficiency_adjusted", {**WRONG, **MODERATE}, 2),
    ("efficiency_adjusted", {**WRONG, **VERBOSE}, 3),
    ("efficiency_adjusted", {}, 4),
    ("efficiency_adjusted", MODERATE, 5),
    ("efficiency_adjusted", VERBOSE, 6),
    ("concise_high_conf", WRONG, 1),
    ("concise_high_conf", VERBOSE, 2),
    ("concise_high_conf", MODERATE, 3),
    ("concise_high_conf", LOW, 4),
    ("concise_high_conf", {}, 5),
]

# At a cut: Table 4's comparison decides the side.
BOUNDARIES: list[tuple[str, Mapping[str, object], int]] = [
    ("format_confidence", {"completion_bpt": 0.5}, 7),
    ("format_confidence", {"completion_bpt": math.nextafter(0.5, 1.0)}, 6),
    ("conf_wrong_penalty", {**WRONG, "completion_bpt": 0.7}, 1),
    ("conf_wrong_penalty", {**WRONG, "completion_bpt": 0.7001}, 2),
    ("ood_robustness", {"prompt_bpt": 3.0}, 3),
    ("ood_robustness", {"prompt_bpt": 2.9999}, 4),
    ("efficiency_adjusted", {"token_ratio": 0.1}, 4),
    ("efficiency_adjusted", {"token_ratio": 0.3}, 5),
    ("efficiency_adjusted", {"token_ratio": 0.3001}, 6),
    ("conf_calibrated", {"completion_bpt": 0.3}, 5),
    ("conf_calibrated", {"completion_bpt": 0.6}, 4),
    ("verifier_probe", {"verifier_correct": 0.6}, 4),
    ("verifier_probe", {"verifier_correct": 0.5999}, 3),
    ("exact_match", {"is_correct": 0.5}, 2),
    ("exact_match", {"is_correct": 0.4999}, 1),
    ("format_aware", {"has_box": 0.5}, 4),
    ("format_aware", {"has_box": 0.4999}, 3),
    ("exact_match", {"verifier_invalid": 0.5}, 0),
    ("exact_match", {"verifier_invalid": 0.4999}, 2),
]


def category(name: str, changes: Mapping[str, object], cuts: Thresholds = CUTS) -> int:
    return RUBRICS[name].classify({**BASE, **changes}, cuts)


def test_the_twelve_paper_schemas_and_three_library_ones_are_registered() -> None:
    assert {name: RUBRICS[name].title for name in PAPER} == PAPER
    assert {name: RUBRICS[name].title for name in LIBRARY} == LIBRARY
    assert set(RUBRICS) == set(PAPER) | set(LIBRARY)
    for name, rubric in RUBRICS.items():
        assert rubric.name == name
        assert len(rubric.weights) == len(rubric.labels) == rubric.category_count
        assert set(rubric.signals) | set(rubric.optional) <= set(SIGNALS)
        assert set(rubric.thresholds) <= set(THRESHOLDS)
        assert rubric.reference


def test_the_paper_names_of_signals_and_thresholds_are_used() -> None:
    paper_signals = {
        "is_correct",
        "has_box",
        "token_ratio",
        "repeated_pattern",
        "prompt_bpt",
        "completion_bpt",
        "verifier_correct",
        "verifier_wrong",
        "verifier_invalid",
    }
    paper_thresholds = {
        "tau_high",
        "tau_low_wrong",
        "tau_prompt",
        "len_p33",
        "len_p66",
        "corr_p33",
        "corr_p66",
    }
    used = {s for name in PAPER for s in RUBRICS[name].signals + RUBRICS[name].optional}
    cuts = {t for name in PAPER for t in RUBRICS[name].required_thresholds}
    assert used == paper_signals
    assert cuts == paper_thresholds


def test_the_registry_cannot_be_changed() -> None:
    mutable = cast(dict[str, Rubric], RUBRICS)
    with pytest.raises(TypeError):
        mutable["exact_match"] = RUBRICS["format_aware"]


def test_format_aware_defaults_to_the_papers_example_weights() -> None:
    assert RUBRICS["format_aware"].weights == (0.0, 0.0, 1.0, 2.0, 3.0)


def test_the_library_schemas_keep_the_library_weights() -> None:
    assert RUBRICS["scorio_format_aware"].weights == (0.0, 0.3, 0.6, 1.0)
    assert RUBRICS["scorio_conf_calibrated"].weights == (0.1, 0.2, 0.6, 1.0)
    assert RUBRICS["scorio_ood_robustness"].weights == (0.1, 0.4, 0.7, 1.0)


@pytest.mark.parametrize(("name", "changes", "expected"), TABLE_5)
def test_a_table_5_row_lands_in_its_category(
    name: str, changes: Mapping[str, object], expected: int
) -> None:
    assert category(name, changes) == expected


@pytest.mark.parametrize("name", sorted(PAPER))
def test_every_table_5_category_is_reachable_and_invalid_comes_first(
    name: str,
) -> None:
    reached = {expected for case, _, expected in TABLE_5 if case == name}
    assert reached == set(range(1, RUBRICS[name].category_count))
    assert RUBRICS[name].labels[0] == "invalid"
    assert RUBRICS[name].weights[0] == 0.0
    # Invalid wins over every other row, correct or not.
    for _, changes, _ in (row for row in TABLE_5 if row[0] == name):
        assert category(name, {**changes, **REPEATS}) == 0
        assert category(name, {**changes, **OFF_TASK}) == 0


@pytest.mark.parametrize(("name", "changes", "expected"), BOUNDARIES)
def test_a_value_at_a_cut_goes_to_table_4s_side(
    name: str, changes: Mapping[str, object], expected: int
) -> None:
    assert category(name, changes) == expected


def test_the_papers_fixed_cuts_are_defaults_a_run_may_override() -> None:
    almost = {"verifier_correct": 0.65}
    assert category("verifier_probe", almost) == 4
    assert category("verifier_probe", almost, {**CUTS, "a_high": 0.7}) == 3
    assert category("exact_match", {"verifier_invalid": 0.4}) == 2
    assert category("exact_match", {"verifier_invalid": 0.4}, {"invalid_c": 0.3}) == 0


def test_without_a_verifier_invalid_is_the_repeated_pattern_alone() -> None:
    row = {key: value for key, value in BASE.items() if key != "verifier_invalid"}
    assert RUBRICS["exact_match"].classify(row, {}) == 2
    assert RUBRICS["exact_match"].classify({**row, **REPEATS}, {}) == 0
    with pytest.raises(ValueError, match="needs signal verifier_invalid"):
        RUBRICS["verifier_only"].classify(row, {})


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
        ("is_correct", 1.5),
        ("has_box", "true"),
        ("repeated_pattern", 0.5),
        ("repeated_pattern", 2),
        ("token_ratio", -0.1),
        ("token_ratio", True),
        ("completion_bpt", -0.1),
        ("completion_bpt", math.nan),
        ("completion_bpt", math.inf),
        ("completion_bpt", "0.3"),
        ("prompt_bpt", -2.0),
        ("verifier_correct", 1.5),
        ("verifier_invalid", -0.5),
        ("bits_per_token", -0.1),
    ],
)
def test_an_invalid_signal_raises_and_says_what_is_expected(
    signal: str, value: object
) -> None:
    rubric = next(r for r in RUBRICS.values() if signal in r.signals)
    with pytest.raises(ValueError, match=f"signal {signal} must be"):
        rubric.classify({**BASE, signal: value}, CUTS)


def test_scores_may_be_fractions_and_extra_signals_are_ignored() -> None:
    rubric = RUBRICS["format_aware"]
    row = {"repeated_pattern": 0, "is_correct": 0.8, "has_box": np.int64(0), "x": 1}
    assert rubric.labels[rubric.classify(row, {})] == "correct_unboxed"


@pytest.mark.parametrize(
    "name",
    sorted(name for name, rubric in RUBRICS.items() if rubric.required_thresholds),
)
def test_a_missing_threshold_raises_and_names_it(name: str) -> None:
    rubric = RUBRICS[name]
    for threshold in rubric.required_thresholds:
        cuts = {key: value for key, value in CUTS.items() if key != threshold}
        with pytest.raises(ValueError, match=f"needs threshold {threshold}"):
            rubric.classify(BASE, cuts)
        with pytest.raises(ValueError, match=f"threshold {threshold}"):
            rubric.check_thresholds({**CUTS, threshold: math.nan})


@pytest.mark.parametrize(
    ("low", "high"), [("len_p33", "len_p66"), ("corr_p33", "corr_p66")]
)
def test_inverted_percentile_pairs_are_refused(low: str, high: str) -> None:
    rubric = next(r for r in RUBRICS.values() if {low, high} <= set(r.thresholds))
    with pytest.raises(ValueError, match=f"{low} must not exceed {high}"):
        rubric.check_thresholds({**CUTS, low: 0.9, high: 0.8})


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
            "repeated_pattern": st.sampled_from([0, 1]),
            "is_correct": st.floats(0.0, 1.0),
            "has_box": st.booleans(),
            "token_ratio": st.floats(0.0, 2.0),
            "prompt_bpt": st.floats(0.0, 50.0),
            "completion_bpt": st.floats(0.0, 50.0),
            "verifier_correct": st.floats(0.0, 1.0),
            "verifier_wrong": st.floats(0.0, 1.0),
            "verifier_invalid": st.floats(0.0, 1.0),
            "bits_per_token": st.floats(0.0, 50.0),
            "prompt_bits_per_token": st.floats(0.0, 50.0),
        }
    )
)
def test_any_valid_row_gets_a_category_of_every_rubric(row: dict[str, object]) -> None:
    for rubric in RUBRICS.values():
        assert 0 <= rubric.classify(row, CUTS) < rubric.category_count


class LogRow(TypedDict):
    repeated_pattern: int
    is_correct: bool
    has_box: bool
    token_ratio: float
    prompt_bpt: float
    completion_bpt: float
    verifier_correct: float
    verifier_wrong: float
    verifier_invalid: float
    bits_per_token: float
    prompt_bits_per_token: float


def log_rows(rng: np.random.Generator, count: int) -> list[LogRow]:
    """Signal rows like a harness writes them, with every signal present."""
    correct = rng.random(count) < 0.55
    repeats = rng.random(count) < 0.1
    rows: list[LogRow] = []
    for i in range(count):
        verifier = rng.dirichlet([4.0, 2.0, 0.7] if correct[i] else [1.5, 4.0, 0.7])
        bits = float(rng.gamma(2.0, 0.4))
        prompt = float(rng.gamma(3.0, 1.0))
        rows.append(
            LogRow(
                repeated_pattern=int(repeats[i]),
                is_correct=bool(correct[i] and not repeats[i]),
                has_box=bool(rng.random() < 0.8 and not repeats[i]),
                token_ratio=float(rng.beta(2.0, 8.0)),
                prompt_bpt=prompt,
                completion_bpt=bits,
                verifier_correct=float(verifier[0]),
                verifier_wrong=float(verifier[1]),
                verifier_invalid=float(verifier[2]),
                bits_per_token=bits,
                prompt_bits_per_token=prompt,
            )
        )
    return rows


def test_thresholds_are_the_papers_percentiles_of_the_log() -> None:
    rows = log_rows(np.random.default_rng(5), 61)
    bits = np.array([row["completion_bpt"] for row in rows])
    correct = np.array([row["is_correct"] for row in rows])
    ratio = np.array([row["token_ratio"] for row in rows])
    prompt = np.array([row["prompt_bpt"] for row in rows])
    everything = {
        name: value
        for rubric in RUBRICS.values()
        for name, value in thresholds_from_signals(rubric, rows).items()
    }
    assert everything == {
        "tau_high": np.percentile(bits, 40),
        "tau_low_wrong": np.percentile(bits[~correct], 60),
        "tau_prompt": np.percentile(prompt, 90),
        "len_p33": np.percentile(ratio, 33),
        "len_p66": np.percentile(ratio, 66),
        "corr_p33": np.percentile(bits[correct], 33),
        "corr_p66": np.percentile(bits[correct], 66),
        "confidence": np.median(bits),
        "prompt_surprise": np.median(prompt),
    }
    assert thresholds_from_signals(RUBRICS["exact_match"], rows) == {}
    assert thresholds_from_signals(RUBRICS["verifier_only"], rows) == {}


def test_thresholds_match_the_library_on_its_own_signals() -> None:
    """Median cuts as scorio.categorical.Thresholds computes them."""
    rows = log_rows(np.random.default_rng(6), 41)
    log_probability = np.array([-row["bits_per_token"] * math.log(2) for row in rows])
    perplexity = np.array([2.0 ** row["prompt_bits_per_token"] for row in rows])
    library = LibraryThresholds.from_columns(
        {"completion_avg_logprob": log_probability, "prompt_perplexity": perplexity}
    )
    ours = {
        name: value
        for name in LIBRARY
        for name, value in thresholds_from_signals(RUBRICS[name], rows).items()
    }
    assert ours["confidence"] == pytest.approx(-library.medians["C1"] / math.log(2))
    assert ours["prompt_surprise"] == pytest.approx(math.log2(library.medians["P2"]))


def test_log_rows_missing_a_signal_are_skipped() -> None:
    rows: list[dict[str, object]] = [
        {"completion_bpt": 1.0, "is_correct": False},
        {},
        {"completion_bpt": None, "is_correct": False},
        {"completion_bpt": 3.0, "is_correct": False},
        {"completion_bpt": 9.0},
        {"completion_bpt": 7.0, "is_correct": True},
    ]
    cuts = thresholds_from_signals(
        RUBRICS["conf_wrong_penalty"], rows, {"tau_low_wrong": 50}
    )
    assert cuts == {"tau_low_wrong": 2.0}


@pytest.mark.parametrize(
    ("rows", "percentiles", "reason"),
    [
        ([{"completion_bpt": 1.0}], {"tau_prompt": 50.0}, "has no thresholds"),
        ([{"completion_bpt": 1.0}], {"tau_low_wrong": 101.0}, r"in \[0, 100\]"),
        ([{"is_correct": False}], None, "no completion_bpt values among wrong"),
        (
            [{"completion_bpt": 1.0, "is_correct": True}],
            None,
            "no completion_bpt values among wrong",
        ),
        (
            [{"completion_bpt": -1.0, "is_correct": False}],
            None,
            "row 0: signal completion_bpt",
        ),
    ],
)
def test_bad_threshold_inputs_raise(
    rows: list[dict[str, object]], percentiles: dict[str, float] | None, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        thresholds_from_signals(RUBRICS["conf_wrong_penalty"], rows, percentiles)


def test_a_run_fixes_the_papers_thresholds_before_counting() -> None:
    """A pilot log gives the cuts; the run classifies signal events with them."""
    rubric = RUBRICS["concise_high_conf"]
    rng = np.random.default_rng(9)
    cuts = thresholds_from_signals(rubric, log_rows(rng, 200))
    monitor = Monitor()
    config = monitor.configure(
        {"run": "paper", "rubric": rubric.name, "thresholds": cuts}
    )
    assert config.weights == list(rubric.weights)
    rows = log_rows(rng, QUESTIONS * TRIALS)
    events = [
        {
            "run": "paper",
            "model": "m",
            "question": index // TRIALS,
            "trial": index % TRIALS,
            "signals": dict(row),
        }
        for index, row in enumerate(rows)
    ]
    assert monitor.ingest(events).accepted == len(events)
    matrix = np.array([rubric.classify(row, cuts) for row in rows])
    mu, sigma = oracle.bayes(
        matrix.reshape(QUESTIONS, TRIALS), np.array(rubric.weights)
    )
    (row,) = monitor.status("paper").models
    assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)


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
        ("scorio_format_aware", "Format Compliance & Correctness"),
        ("scorio_conf_calibrated", "Confident & Correct"),
        ("scorio_ood_robustness", "Difficulty-Adjusted Correctness"),
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
