"""Other harnesses' trial rows (column and value maps) and ``.npz`` bulk ingest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scorio.eval as oracle

from adapters.results_files import (
    RowError,
    RowMapping,
    TrialRow,
    load_results_npz,
    read_row_items,
    read_trial_rows,
)
from monitor import Monitor, Rejection
from monitor.engine.scoring import ResultsMatrix
from monitor.feeds.files import CategoryMap, Located, ingest_matrix
from monitor.inputs.decode import decode_object
from tests.helpers import trial_results

INSPECT_LIKE = RowMapping(
    columns={"sample_id": "question", "epoch": "trial", "score": "category"},
    values=CategoryMap({"C": 1, "I": 0}),
)


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_columns_and_values_map_another_harness_rows(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "eval.jsonl",
        [
            {"model": "a", "sample_id": "q1", "epoch": 1, "score": "C"},
            {"model": "a", "sample_id": "q1", "epoch": 2, "score": "I"},
            {"model": "b", "sample_id": 7, "epoch": 1, "score": "C"},
        ],
    )
    assert list(read_trial_rows(path, INSPECT_LIKE)) == [
        TrialRow("eval", "a", "q1", "1", 1),
        TrialRow("eval", "a", "q1", "2", 0),
        TrialRow("eval", "b", "7", "1", 1),
    ]


def test_a_value_outside_the_map_is_an_error_on_its_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "eval.jsonl",
        [
            {"model": "a", "sample_id": "q1", "epoch": 1, "score": "C"},
            {"model": "a", "sample_id": "q2", "epoch": 1, "score": "P"},
        ],
    )
    rows = list(read_trial_rows(path, INSPECT_LIKE))
    assert rows[1] == RowError(2, "category 'P' is not in the value map (C, I)")
    items = list(read_row_items(path, INSPECT_LIKE))
    assert items[0] == Located(
        {
            "run": "eval",
            "model": "a",
            "question": "q1",
            "trial": "1",
            "category": 1,
        },
        1,
    )
    assert isinstance(items[1], Rejection)
    assert (items[1].source, items[1].position) == (str(path), 2)


def test_dotted_columns_reach_into_nested_json(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "eval.jsonl",
        [{"id": 3, "epoch": 1, "scores": {"match": {"value": "C"}}}],
    )
    mapping = RowMapping(
        columns={"id": "question", "epoch": "trial", "scores.match.value": "category"},
        values=CategoryMap({"C": 1, "I": 0}),
        run="bench",
        model="m",
    )
    assert list(read_trial_rows(path, mapping)) == [TrialRow("bench", "m", "3", "1", 1)]


def test_numeric_values_map_by_equality(tmp_path: Path) -> None:
    path = tmp_path / "graded.csv"
    path.write_text("model,question,trial,grade\nm,1,0,0.5\nm,2,0,1.0\nm,3,0,0\n")
    mapping = RowMapping(
        columns={"grade": "category"},
        values=CategoryMap({"0": 0, "0.5": 1, "1": 2}),
    )
    rows = list(read_trial_rows(path, mapping))
    assert [row.category for row in rows if isinstance(row, TrialRow)] == [1, 2, 0]


def test_a_fixed_run_and_model_replace_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("run,question,trial,correct\nold,1,0,true\nold,2,0,false\n")
    rows = list(read_trial_rows(path, RowMapping(run="new", model="solo")))
    assert rows == [
        TrialRow("new", "solo", "1", "0", 1),
        TrialRow("new", "solo", "2", "0", 0),
    ]


def test_npz_bulk_ingest_equals_scorio_bayes_per_model(tmp_path: Path) -> None:
    results = trial_results(seed=5, models=4, questions=30, trials=12)
    path = tmp_path / "bench.npz"
    np.savez(path, bench=results.astype(np.int8), models=np.array(list("wxyz")))
    (matrix,) = load_results_npz(path)
    monitor = Monitor()
    report = ingest_matrix(monitor, matrix, chunk_trials=100)
    assert (report.accepted, report.rejected) == (results.size, ())
    rows = {row.model: row for row in monitor.status("bench").models}
    for index, name in enumerate("wxyz"):
        mu, sigma = oracle.bayes(results[index])
        assert (rows[name].mu, rows[name].sigma) == pytest.approx(
            (mu, sigma), abs=1e-12
        )
        assert rows[name].trials == 30 * 12


def test_npz_ingested_twice_counts_each_trial_once(tmp_path: Path) -> None:
    results = trial_results(seed=6, models=2, questions=5, trials=3)
    matrix = ResultsMatrix("bench", ("a", "b"), results)
    monitor = Monitor()
    ingest_matrix(monitor, matrix)
    again = ingest_matrix(monitor, matrix)
    assert (again.accepted, again.duplicates) == (0, results.size)
    assert monitor.status("bench").trials == results.size


def test_npz_weights_declare_a_new_run(tmp_path: Path) -> None:
    results = np.random.default_rng(7).integers(0, 3, size=(2, 8, 5))
    path = tmp_path / "rubric.npz"
    np.savez(path, rubric=results, w=np.array([0.0, 0.5, 1.0]))
    (matrix,) = load_results_npz(path)
    monitor = Monitor()
    ingest_matrix(monitor, matrix)
    assert monitor.config("rubric").weights == [0.0, 0.5, 1.0]
    (first, second) = sorted(monitor.status("rubric").models, key=lambda r: r.model)
    weights = np.array([0.0, 0.5, 1.0])
    assert (first.mu, first.sigma) == pytest.approx(
        oracle.bayes(results[0], weights), abs=1e-12
    )
    assert (second.mu, second.sigma) == pytest.approx(
        oracle.bayes(results[1], weights), abs=1e-12
    )


def test_npz_weights_must_match_a_known_run() -> None:
    monitor = Monitor()
    monitor.configure({"run": "rubric", "weights": [0.0, 1.0, 2.0]})
    matrix = ResultsMatrix(
        "rubric", ("a",), np.zeros((1, 2, 2), dtype=np.int64), np.array([0, 0.5, 1])
    )
    with pytest.raises(ValueError, match="has weights"):
        ingest_matrix(monitor, matrix)


def test_npz_categories_outside_the_run_are_dead_lettered() -> None:
    results = np.array([[[0, 1, 2], [1, 1, 0]]])
    monitor = Monitor()
    report = ingest_matrix(monitor, ResultsMatrix("bench", ("a",), results))
    assert report.accepted == 5
    (rejection,) = report.rejected
    assert "category 2" in rejection.reason


@pytest.mark.parametrize(
    ("cell", "field"),
    [("correct", "maybe"), ("correct", "2"), ("category", "one"), ("category", "-1")],
)
def test_a_bad_row_value_gets_the_decoders_words(
    tmp_path: Path, cell: str, field: str
) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(f"model,question,trial,{cell}\na,1,1,{field}\n")
    (row,) = read_trial_rows(path, kind="csv")
    value: object = int(field) if field.lstrip("-").isdigit() else field
    if cell == "correct":
        value = field
    event = {"run": "rows", "model": "a", "question": "1", "trial": "1", cell: value}
    decoded = decode_object(event)
    assert isinstance(row, RowError) and isinstance(decoded, Rejection)
    assert row.reason == decoded.reason
