"""The engine: exactly-once counting, corrections, priors, rejections, events."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import scorio.eval as oracle

from monitor import Monitor, RunConfig, TrialEvent
from monitor.engine import arrays as engine
from monitor.errors import ConfigError, UnknownRunError
from tests.monitor.streams import last_write_wins, messy, stream_of

TOLERANCE = 1e-12


def results_tensor(
    seed: int, models: int = 3, questions: int = 8, trials: int = 6
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (
        rng.random((models, questions, trials)) < rng.random((models, questions, 1))
    ).astype(np.int64)


def test_a_messy_replay_equals_the_deduplicated_stream_and_scorio() -> None:
    results = results_tensor(1)
    events = stream_of(results)
    noisy = messy(events, np.random.default_rng(2))
    assert len(noisy) >= 1.3 * len(events)
    with Monitor() as replayed, Monitor() as clean:
        for config in (replayed, clean):
            config.configure(RunConfig(run="bench", question_count=8))
        for start in range(0, len(noisy), 37):
            replayed.ingest(noisy[start : start + 37])
        clean.ingest(last_write_wins(noisy))
        noisy_status, clean_status = replayed.status("bench"), clean.status("bench")
    assert noisy_status.models == clean_status.models
    assert noisy_status.pairs == clean_status.pairs
    assert noisy_status.trials == clean_status.trials == results.size
    assert (
        noisy_status.duplicates + noisy_status.corrections + noisy_status.trials
        == len(noisy)
    )
    for row in noisy_status.models:
        index = int(row.model[1:])
        mu, sigma = oracle.bayes(results[index])
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)


@pytest.mark.parametrize("size", [1, 5, 37, 10_000])
def test_any_batch_size_gives_the_same_counts(size: int) -> None:
    """Single trials, small batches and vectorized batches take different paths."""
    events = stream_of(results_tensor(3))
    noisy = messy(events, np.random.default_rng(4))
    with Monitor() as whole, Monitor() as split:
        for monitor in (whole, split):
            monitor.configure(RunConfig(run="bench", question_count=8))
        whole.ingest(last_write_wins(noisy))
        reports = [
            split.ingest(noisy[start] if size == 1 else noisy[start : start + size])
            for start in range(0, len(noisy), size)
        ]
        expected, got = whole.status("bench"), split.status("bench")
    assert got.models == expected.models
    assert (got.trials, got.duplicates, got.corrections) == (
        sum(r.accepted for r in reports),
        sum(r.duplicates for r in reports),
        sum(r.corrections for r in reports),
    )
    assert got.corrections > 0 and got.duplicates > 0


def test_a_repeat_with_the_same_category_is_a_no_op() -> None:
    monitor = Monitor()
    event = {"run": "r", "model": "a", "question": "q", "trial": 0, "category": 1}
    first = monitor.ingest(event)
    second = monitor.ingest(dict(event))
    assert (first.accepted, second.accepted, second.duplicates) == (1, 0, 1)
    status = monitor.status("r")
    assert (status.trials, status.duplicates, status.models[0].trials) == (1, 1, 1)


def test_a_repeat_with_another_category_moves_the_count() -> None:
    monitor = Monitor()
    event = {"run": "r", "model": "a", "question": "q", "trial": 0}
    monitor.ingest({**event, "category": 0})
    report = monitor.ingest({**event, "category": 1})
    assert report.corrections == 1
    status = monitor.status("r")
    assert status.corrections == 1 and status.trials == 1
    assert status.models[0].mu == pytest.approx(oracle.bayes(np.array([[1]]))[0])


def test_integer_and_string_ids_name_the_same_trial() -> None:
    monitor = Monitor()
    monitor.ingest(
        {"run": "r", "model": "a", "question": 3, "trial": 1, "correct": True}
    )
    report = monitor.ingest(
        {"run": "r", "model": "a", "question": "3", "trial": "1", "correct": True}
    )
    assert report.duplicates == 1


def test_prior_outcomes_count_as_r0() -> None:
    results = np.array([[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]])
    prior = np.array([[0, 2], [1, 2]])
    weights = [0.0, 0.5, 1.0]
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", weights=weights, question_count=2))
    events = [
        {
            "run": "r",
            "model": "m",
            "question": q,
            "trial": t,
            "category": int(results[q, t]),
        }
        for q in range(2)
        for t in range(5)
    ] + [
        {
            "run": "r",
            "model": "m",
            "question": q,
            "trial": t,
            "category": int(prior[q, t]),
            "prior": True,
        }
        for q in range(2)
        for t in range(2)
    ]
    monitor.ingest(events)
    row = monitor.status("r").models[0]
    assert (row.mu, row.sigma) == pytest.approx(
        oracle.bayes(results, np.array(weights), prior), abs=TOLERANCE
    )
    assert row.trials == 10


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (
            {"model": "a", "question": 1, "trial": 0, "category": 1},
            "run: missing field",
        ),
        ({"run": "r", "model": "a", "question": 1, "trial": 0}, "needs an outcome"),
        (
            {"run": "r", "model": "a", "question": 1, "trial": 0, "category": 7},
            "category 7 is outside 0..1",
        ),
        (
            {"run": "r", "model": "a", "question": 1, "trial": 0, "category": "1"},
            'category: must be an integer >= 0; got "1"',
        ),
        (
            {"run": "r", "model": "a", "question": 1.5, "trial": 0, "category": 1},
            "question: must be an integer or 1 to 256 characters of text without "
            "control characters; got 1.5",
        ),
        (
            {"run": "r", "model": "a", "question": 1, "trial": 0, "category": -1},
            "category: must be an integer >= 0; got -1",
        ),
        (
            {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": "yes"},
            'correct: must be true or false; got "yes"',
        ),
        (
            {"run": "r", "model": "a", "question": 1, "trial": 0, "category": True},
            "category: must be an integer >= 0; got true",
        ),
        (
            {"run": "other", "model": "a", "question": 1, "trial": 0, "category": 1},
            "unknown run 'other'; declared runs: r",
        ),
        (
            {"run": "r", "model": "zz", "question": 1, "trial": 0, "category": 1},
            "model 'zz' is not declared",
        ),
        (
            {"run": "r", "model": "a", "question": 99, "trial": 0, "category": 1},
            "question '99' is not declared",
        ),
    ],
)
def test_bad_events_are_rejected_with_a_reason_and_change_no_count(
    event: dict[str, object], reason: str
) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", models=["a", "b"], questions=["1", "2", "3"]))
    monitor.ingest({"run": "r", "model": "a", "question": 1, "trial": 5, "category": 1})
    before = monitor.status("r")
    report = monitor.ingest(event)
    assert report.accepted == 0 and len(report.rejected) == 1
    assert reason in report.rejected[0].reason
    after = monitor.status("r")
    assert after.models == before.models and after.trials == before.trials
    letters = monitor.store.dead_letters()
    assert letters[-1].reason == report.rejected[0].reason


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{broken", "invalid JSON"),
        ("[]", "empty batch"),
        ("42", "a trial event must be a JSON object; got int"),
        ('{"run": "r"}', "model: missing field"),
        ("x" * (2 << 20), "exceeds the limit"),
    ],
)
def test_bad_payloads_are_rejected_with_a_reason(payload: str, reason: str) -> None:
    monitor = Monitor()
    report = monitor.ingest_payload(payload, source="test", position=3)
    assert report.accepted == 0 and reason in report.rejected[0].reason
    assert report.rejected[0].position == 3
    assert monitor.store.dead_letters()[-1].reason == report.rejected[0].reason


def test_a_batch_payload_rejects_only_its_bad_elements() -> None:
    monitor = Monitor()
    report = monitor.ingest_payload(
        '[{"run": "r", "model": "a", "question": 1, "trial": 0, "correct": true},'
        ' {"run": "r", "model": "a", "question": 2}]'
    )
    assert report.accepted == 1 and len(report.rejected) == 1


def test_a_declared_question_count_caps_distinct_questions_within_a_batch() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=2))
    report = monitor.ingest(
        [
            {"run": "r", "model": "a", "question": q, "trial": 0, "correct": True}
            for q in "xyz"
        ]
    )
    assert report.accepted == 2
    assert (
        "would be distinct question 3 of question_count=2" in report.rejected[0].reason
    )
    assert monitor.status("r").rejected == 1


def test_correct_is_refused_in_a_categorical_run() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", weights=[0.0, 0.5, 1.0]))
    report = monitor.ingest(
        {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
    )
    assert "correct is only for binary runs" in report.rejected[0].reason


def test_an_open_run_counts_questions_seen_by_any_model() -> None:
    monitor = Monitor()
    monitor.ingest(
        [
            {"run": "r", "model": "a", "question": "q1", "trial": 0, "correct": True},
            {"run": "r", "model": "b", "question": "q2", "trial": 0, "correct": False},
        ]
    )
    status = monitor.status("r")
    assert status.open and status.question_count == 2
    # a has no trial on q2: that question contributes its prior, as for a declared M.
    a = next(row for row in status.models if row.model == "a")
    assert a.mu == pytest.approx((2 / 3 + 1 / 2) / 2)


def test_unknown_runs_are_refused_by_status() -> None:
    with pytest.raises(UnknownRunError):
        Monitor().status("nope")


def test_changing_weights_after_trials_is_refused() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r"))
    monitor.ingest(
        {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
    )
    with pytest.raises(ConfigError, match="cannot change them"):
        monitor.configure(RunConfig(run="r", weights=[0.0, 2.0]))


def test_an_invalid_config_mapping_names_the_problem() -> None:
    with pytest.raises(ConfigError, match="give questions or question_count, not both"):
        Monitor().configure({"run": "r", "questions": [1], "question_count": 1})


def test_signals_are_classified_by_the_runs_rubric() -> None:
    monitor = Monitor()
    config = monitor.configure(
        {
            "run": "r",
            "rubric": "scorio_conf_calibrated",
            "thresholds": {"confidence": 0.5},
        }
    )
    assert config.weights == [0.1, 0.2, 0.6, 1.0] and config.labels is not None
    base = {"run": "r", "model": "a", "question": "q"}
    report = monitor.ingest(
        [
            {
                **base,
                "trial": 0,
                "signals": {"is_correct": True, "bits_per_token": 0.2},
            },
            {**base, "trial": 1, "signals": {"is_correct": False, "bits_per_token": 2}},
            {**base, "trial": 2, "category": 2, "signals": {"is_correct": True}},
        ]
    )
    assert report.accepted == 3
    # confident correct (3), unconfident wrong (1) and the explicit category 2.
    mu, sigma = oracle.bayes(np.array([[3, 1, 2]]), np.array([0.1, 0.2, 0.6, 1.0]))
    row = monitor.status("r").models[0]
    assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)
    assert row.trials == 3
    again = monitor.ingest(
        {**base, "trial": 0, "signals": {"is_correct": True, "bits_per_token": 0.2}}
    )
    assert again.duplicates == 1


@pytest.mark.parametrize(
    ("config", "signals", "reason"),
    [
        ({"run": "r"}, {"is_correct": True}, "has no rubric"),
        (
            {"run": "r", "rubric": "scorio_format_aware"},
            {"is_correct": True},
            "has_box",
        ),
        (
            {"run": "r", "rubric": "scorio_format_aware"},
            {"is_correct": "yes", "has_box": True},
            "is_correct",
        ),
    ],
)
def test_unusable_signals_are_rejected_and_count_nothing(
    config: dict[str, object], signals: dict[str, object], reason: str
) -> None:
    monitor = Monitor()
    monitor.configure(config)
    event = {"run": "r", "model": "a", "question": "q", "trial": 0}
    report = monitor.ingest({**event, "signals": signals})
    assert report.accepted == 0
    assert report.rejected[0].kind == "signals"
    assert reason in report.rejected[0].reason
    status = monitor.status("r")
    assert (status.trials, status.rejected) == (0, 1)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"run": "r", "rubric": "nope"}, "unknown rubric"),
        (
            {"run": "r", "rubric": "scorio_conf_calibrated"},
            "needs threshold confidence",
        ),
        ({"run": "r", "rubric": "format_aware", "weights": [0, 1]}, "5 categories"),
        ({"run": "r", "thresholds": {"confidence": 1.0}}, "thresholds need a rubric"),
    ],
)
def test_a_bad_rubric_config_names_the_problem(
    config: dict[str, object], reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        Monitor().configure(config)


def test_the_rubric_of_a_run_with_trials_cannot_change() -> None:
    monitor = Monitor()
    monitor.configure({"run": "r", "rubric": "exact_match"})
    monitor.ingest({"run": "r", "model": "a", "question": 1, "trial": 0, "category": 2})
    with pytest.raises(ConfigError, match="rubric"):
        monitor.configure({"run": "r", "weights": [0.0, 0.0, 1.0]})


def test_columns_as_integer_arrays_text_or_events_count_the_same() -> None:
    """The bulk path factorizes integer ids in NumPy, text ids in Python."""
    noisy = messy(stream_of(results_tensor(3)), np.random.default_rng(8))
    model = [str(event["model"]) for event in noisy]
    question = np.array([int(str(event["question"])) for event in noisy])
    trial = np.array([int(str(event["trial"])) for event in noisy])
    category = np.array([int(str(event["category"])) for event in noisy])
    statuses = []
    for columns in ("arrays", "text", "events"):
        with Monitor() as monitor:
            monitor.configure(RunConfig(run="bench", question_count=8))
            for start in range(0, len(noisy), 64):
                part = slice(start, start + 64)
                if columns == "events":
                    monitor.ingest(noisy[part])
                    continue
                ids = (question[part], trial[part])
                if columns == "text":
                    ids = (ids[0].astype(str).tolist(), ids[1].astype(str).tolist())
                monitor.ingest_columns("bench", model[part], *ids, category[part])
            statuses.append(monitor.status("bench"))
    assert statuses[0] == statuses[1] == statuses[2]
    assert statuses[0].corrections > 0 and statuses[0].duplicates > 0


def test_integer_columns_past_the_question_count_are_dead_lettered() -> None:
    with Monitor() as monitor:
        monitor.configure(RunConfig(run="r", question_count=2))
        report = monitor.ingest_columns(
            "r", ["a"] * 4, np.array([7, 3, 7, 9]), np.array([0, 0, 1, 0]), [1] * 4
        )
        assert report.accepted == 3
        assert [r.position for r in report.rejected] == [3]
        assert "question '9' would be distinct question 3" in report.rejected[0].reason
        assert monitor.store.counts("r")["a"].questions == ["7", "3"]


def test_long_columns_count_in_chunks_like_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call past COLUMN_CHUNK_TRIALS is committed chunk by chunk (bounded
    memory); its report, rejection positions and counts are the one call's."""
    noisy = messy(stream_of(results_tensor(3)), np.random.default_rng(9))
    model = [str(event["model"]) for event in noisy]
    question = np.array([int(str(event["question"])) for event in noisy])
    question[[5, 70]] = 99  # undeclared: rejected, with positions
    trial = np.array([int(str(event["trial"])) for event in noisy])
    category = np.array([int(str(event["category"])) for event in noisy])
    outcomes = []
    for chunk in (len(noisy), 16):
        monkeypatch.setattr(engine, "COLUMN_CHUNK_TRIALS", chunk)
        with Monitor() as monitor:
            monitor.configure(
                RunConfig(run="bench", questions=[str(q) for q in range(8)])
            )
            report = monitor.ingest_columns("bench", model, question, trial, category)
            outcomes.append(
                (
                    (report.accepted, report.duplicates, report.corrections),
                    [r.position for r in report.rejected],
                    monitor.status("bench"),
                )
            )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == [5, 70]


def test_a_batch_mixing_plain_and_full_events_of_one_run_counts_them_all() -> None:
    """Plain dicts take the fast path, TrialEvent objects the full one."""
    trial = {"run": "r", "model": "a", "question": 1}
    with Monitor() as monitor:
        monitor.configure(RunConfig(run="r"))
        report = monitor.ingest(
            [
                {**trial, "trial": 0, "category": 5},  # refused: out of range
                TrialEvent(run="r", model="a", question="1", trial="1", correct=True),
                {**trial, "trial": 2, "correct": False},
            ]
        )
        assert (report.accepted, len(report.rejected)) == (2, 1)
        assert monitor.status("r").trials == 2


def test_arrays_of_json_bytes_count_each_trial_on_its_own_question() -> None:
    # Arrays of numbered trials as bytes: the run looks their questions up
    # once when it takes a batch and once more only when it must.
    rng = np.random.default_rng(11)
    results = rng.integers(0, 2, size=(3, 12, 4))
    events = [
        {
            "run": "r",
            "model": f"m{model}",
            "question": question,
            "trial": trial,
            "correct": bool(results[model, question, trial]),
        }
        for model, question, trial in np.ndindex(*results.shape)
    ]
    order = rng.permutation(len(events)).tolist()
    shuffled = [events[index] for index in order]
    with Monitor() as monitor:
        monitor.configure(RunConfig(run="r", question_count=12))
        for start in range(0, len(shuffled), 37):
            body = json.dumps(shuffled[start : start + 37]).encode()
            assert monitor.ingest_payload(body, source="t").accepted == len(
                shuffled[start : start + 37]
            )
        status = monitor.status("r")
    assert status.trials == results.size
    for row in status.models:
        mu, sigma = oracle.bayes(results[int(row.model[1:])])
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=TOLERANCE)


@pytest.mark.parametrize("value", [5, None, "bench", b"bench", 2.5])
def test_a_value_that_is_no_event_is_one_rejection(value: Any) -> None:
    monitor = Monitor()
    report = monitor.ingest(value)
    assert (report.accepted, len(report.rejected)) == (0, 1)
    assert "a trial event must be a JSON object" in report.rejected[0].reason
    assert len(monitor.store.dead_letters()) == 1
    number: Any = 5
    from_json = monitor.ingest_payload(json.dumps(number).encode())
    assert from_json.rejected[0].reason == monitor.ingest(number).rejected[0].reason
