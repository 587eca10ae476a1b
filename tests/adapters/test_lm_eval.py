"""lm-eval ``--log_samples`` output read against what the harness logged.

The fixtures are real lm-eval 0.4.13 output (tests/fixtures/lm_eval/README.md):
every count is checked against the logged per-document metrics, the results
file's aggregates and the fixture model's known answers.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pytest
import scorio.eval as oracle

from adapters.lm_eval import (
    LmEvalOptions,
    LmEvalSamples,
    read_lm_eval,
    read_results,
)
from monitor import Monitor, Rejection, TrialEvent
from monitor.feeds.files import CategoryMap, Item, ingest_batches

OUTPUT = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval" / "output"
FOLDER = OUTPUT / "scorio__fixture-lm"
MODEL = "scorio/fixture-lm"
# The fixture model's answers per document, one character per repeat.
PATTERNS = {
    "0": "1111",
    "1": "0000",
    "2": "1010",
    "3": "0111",
    "4": "1000",
    "5": "0011",
}


def samples_path(task: str, folder: Path = FOLDER) -> Path:
    (path,) = folder.glob(f"samples_{task}_*.jsonl")
    return path


def results_file(folder: Path = FOLDER) -> Path:
    (path,) = folder.glob("results_*.json")
    return path


def logged(task: str, filter_name: str) -> dict[str, dict[str, object]]:
    """The harness's own lines of one filter, by doc_id."""
    lines = samples_path(task).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return {str(r["doc_id"]): r for r in records if r["filter"] == filter_name}


def split(items: Iterable[Item]) -> tuple[list[TrialEvent], list[Rejection]]:
    """Trials (checked against the wire schema) and rejections."""
    events: list[TrialEvent] = []
    rejections: list[Rejection] = []
    for item in items:
        if isinstance(item, Rejection):
            rejections.append(item)
        else:
            events.append(TrialEvent.model_validate(item))
    return events, rejections


def outcomes(events: list[TrialEvent], run: str) -> dict[str, dict[int, int]]:
    """question -> trial -> category for one run."""
    table: dict[str, dict[int, int]] = defaultdict(dict)
    for event in events:
        if event.run == run:
            repeat = int(str(event.trial).rpartition(":")[2])
            table[event.question][repeat] = event.outcome
    return dict(table)


def categories(events: list[TrialEvent], run: str | None = None) -> list[int]:
    return [e.outcome for e in events if run is None or e.run == run]


def copy_folder(tmp_path: Path, name: str = "scorio__fixture-lm") -> Path:
    folder = tmp_path / "output" / name
    shutil.copytree(FOLDER, folder)
    return folder


def test_each_document_counts_once_with_the_logged_metric_of_the_first_filter() -> None:
    events, rejections = split(read_lm_eval(OUTPUT))
    assert rejections == []
    results = json.loads(results_file().read_text())
    for task, first_filter, metric in [
        ("scorio_arith_gen", "strict-match", "exact_match"),
        ("scorio_arith_r4", "strict-match", "exact_match"),
        ("scorio_mc", "none", "acc"),
    ]:
        table = outcomes(events, task)
        assert len(table) == results["n-samples"][task]["effective"]
        harness = logged(task, first_filter)
        assert table == {doc: {0: harness[doc][metric]} for doc in harness}
    assert {event.model for event in events} == {MODEL}


def test_the_document_means_equal_the_results_file_aggregates() -> None:
    events, _ = split(read_lm_eval(OUTPUT))
    results = read_results(results_file())
    for task, filter_name, metric in [
        ("scorio_arith_gen", "strict-match", "exact_match"),
        ("scorio_arith_r4", "strict-match", "exact_match"),
        ("scorio_mc", "none", "acc"),
    ]:
        score = results.score(task, metric, filter_name)
        assert score is not None and score.value is not None
        assert np.mean(categories(events, task)) == pytest.approx(score.value)


def test_repeats_are_rescored_per_generation_as_the_harness_scores_them() -> None:
    events, rejections = split(read_lm_eval(OUTPUT, LmEvalOptions(repeats=True)))
    assert rejections == []
    table = outcomes(events, "scorio_arith_r4")
    assert table == {
        doc: {trial: int(mark) for trial, mark in enumerate(pattern)}
        for doc, pattern in PATTERNS.items()
    }
    first = logged("scorio_arith_r4", "strict-match")
    fractions = logged("scorio_arith_r4", "all@4")
    for doc, trials in table.items():
        assert trials[0] == first[doc]["exact_match"]
        assert np.mean(list(trials.values())) == fractions[doc]["exact_match"]
    all_four = read_results(results_file()).score(
        "scorio_arith_r4", "exact_match", "all@4"
    )
    assert all_four is not None
    assert np.mean(categories(events, "scorio_arith_r4")) == all_four.value


@pytest.mark.parametrize("filter_name", ["strict-match", "maj@4", "all@4"])
def test_rescoring_agrees_with_what_every_filter_logged(filter_name: str) -> None:
    options = LmEvalOptions(repeats=True, filter=filter_name)
    events, rejections = split(read_lm_eval(samples_path("scorio_arith_r4"), options))
    assert rejections == []
    assert len(events) == 24


@pytest.mark.parametrize("filter_name", ["strict-match", "flexible-extract"])
def test_rescoring_normalises_a_full_text_target_like_gsm8k(filter_name: str) -> None:
    options = LmEvalOptions(repeats=True, filter=filter_name)
    events, rejections = split(read_lm_eval(samples_path("scorio_arith_gen"), options))
    assert rejections == []
    harness = logged("scorio_arith_gen", filter_name)
    assert outcomes(events, "scorio_arith_gen") == {
        doc: {0: record["exact_match"]} for doc, record in harness.items()
    }


def test_multiple_choice_keeps_the_logged_accuracy_when_rescoring() -> None:
    options = LmEvalOptions(repeats=True)
    events, rejections = split(read_lm_eval(samples_path("scorio_mc"), options))
    assert rejections == []
    assert categories(events) == [1, 1, 0, 1]


def test_rescored_repeats_give_scorio_bayes_on_the_repeat_matrix() -> None:
    monitor = Monitor()
    reader = LmEvalSamples(samples_path("scorio_arith_r4"), LmEvalOptions(repeats=True))
    totals = ingest_batches(monitor, reader.batches())
    assert (totals.accepted, totals.rejected) == (24, 0)
    matrix = np.array([[int(m) for m in PATTERNS[str(q)]] for q in range(6)])
    (row,) = monitor.status("scorio_arith_r4").models
    assert (row.mu, row.sigma) == pytest.approx(oracle.bayes(matrix), abs=1e-12)


def test_fractions_of_a_keep_all_filter_are_refused_unless_mapped() -> None:
    path = samples_path("scorio_arith_r4")
    events, rejections = split(read_lm_eval(path, LmEvalOptions(filter="all@4")))
    assert events == []
    (rejection,) = rejections
    assert rejection.source == str(path) and rejection.position == 13
    assert "fraction of correct generations" in rejection.reason
    quarters = CategoryMap({"0": 0, "0.25": 1, "0.5": 2, "0.75": 3, "1": 4})
    options = LmEvalOptions(filter="all@4", values=quarters)
    events, rejections = split(read_lm_eval(path, options))
    assert rejections == []
    assert categories(events) == [p.count("1") for p in PATTERNS.values()]


def test_a_voting_first_filter_is_refused_unless_named(tmp_path: Path) -> None:
    folder = copy_folder(tmp_path)
    path = results_file(folder)
    results = json.loads(path.read_text())
    pipelines = results["configs"]["scorio_arith_r4"]["filter_list"]
    pipelines.insert(0, pipelines.pop(1))
    path.write_text(json.dumps(results))
    samples = samples_path("scorio_arith_r4", folder)
    _, rejections = split(read_lm_eval(samples))
    (rejection,) = rejections
    assert "first filter 'maj@4' combines several generations" in rejection.reason
    events, rejections = split(read_lm_eval(samples, LmEvalOptions(filter="maj@4")))
    assert rejections == []
    harness = logged("scorio_arith_r4", "maj@4")
    assert categories(events) == [r["exact_match"] for r in harness.values()]


def test_the_model_is_the_results_model_name_else_the_folder_name(
    tmp_path: Path,
) -> None:
    alone = tmp_path / "org__other-model"
    alone.mkdir()
    shutil.copy(samples_path("scorio_mc"), alone)
    events, _ = split(read_lm_eval(alone))
    assert {e.model for e in events} == {"org__other-model"}
    options = LmEvalOptions(model="named")
    events, _ = split(read_lm_eval(OUTPUT, options))
    assert {e.model for e in events} == {"named"}


def test_tasks_ingested_as_one_run_keep_their_documents_apart() -> None:
    events, _ = split(read_lm_eval(OUTPUT, LmEvalOptions(run="suite")))
    assert {e.run for e in events} == {"suite"}
    questions = [e.question for e in events]
    assert len(set(questions)) == len(questions) == 16
    assert "scorio_mc:3" in questions and "scorio_arith_gen:3" in questions


def test_bad_lines_are_rejected_with_file_and_line_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    folder = copy_folder(tmp_path)
    path = samples_path("scorio_mc", folder)
    lines = path.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(3, json.dumps({"doc_id": True, "filter": "none"}))
    lines.insert(4, "[1, 2]")
    path.write_text("\n".join(lines) + "\n")
    events, rejections = split(read_lm_eval(path))
    assert categories(events) == [1, 1, 0, 1]
    assert [(r.source, r.position) for r in rejections] == [
        (str(path), 2),
        (str(path), 4),
        (str(path), 5),
    ]
    assert rejections[0].reason.startswith("invalid JSON")
    assert "doc_id must be an integer" in rejections[1].reason
    assert rejections[2].reason == "a sample must be a JSON object"


def test_a_line_rescoring_cannot_reproduce_is_rejected(tmp_path: Path) -> None:
    folder = copy_folder(tmp_path)
    path = samples_path("scorio_arith_r4", folder)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[3]["exact_match"] = 1.0 - records[3]["exact_match"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    events, rejections = split(read_lm_eval(path, LmEvalOptions(repeats=True)))
    (rejection,) = rejections
    assert rejection.position == 4 and "cannot be re-applied" in rejection.reason
    assert len(events) == 20


def test_filters_that_cannot_be_reapplied_refuse_repeats(tmp_path: Path) -> None:
    folder = copy_folder(tmp_path)
    path = results_file(folder)
    results = json.loads(path.read_text())
    steps = results["configs"]["scorio_arith_r4"]["filter_list"][0]["filter"]
    steps.insert(1, {"function": "map", "mapping_dict": {}})
    path.write_text(json.dumps(results))
    samples = samples_path("scorio_arith_r4", folder)
    events, rejections = split(read_lm_eval(samples, LmEvalOptions(repeats=True)))
    (rejection,) = rejections
    assert events == [] and rejection.position == 1
    assert "uses 'map', which is not re-applied" in rejection.reason


def test_repeats_need_the_results_file_for_several_generations(
    tmp_path: Path,
) -> None:
    shutil.copy(samples_path("scorio_arith_r4"), tmp_path)
    (samples,) = tmp_path.iterdir()
    events, rejections = split(read_lm_eval(samples, LmEvalOptions(repeats=True)))
    (rejection,) = rejections
    assert events == [] and "no results file" in rejection.reason
    events, rejections = split(read_lm_eval(samples))
    assert rejections == [] and len(events) == 6


def test_a_filter_without_lines_is_reported() -> None:
    path = samples_path("scorio_mc")
    _, rejections = split(read_lm_eval(path, LmEvalOptions(filter="strict-match")))
    (rejection,) = rejections
    assert rejection.reason == "no line for filter 'strict-match'; the file has 'none'"


def test_a_graded_metric_stops_the_file_at_its_first_fraction(
    tmp_path: Path,
) -> None:
    folder = copy_folder(tmp_path)
    path = samples_path("scorio_mc", folder)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[1]["acc"] = 0.5
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    events, rejections = split(read_lm_eval(path))
    (rejection,) = rejections
    assert rejection.position == 2 and "acc = 0.5 is not 0 or 1" in rejection.reason
    assert [e.question for e in events] == ["0"]
    halves = CategoryMap({"0": 0, "0.5": 1, "1": 2})
    events, rejections = split(read_lm_eval(path, LmEvalOptions(values=halves)))
    assert rejections == [] and categories(events) == [2, 1, 0, 2]


def test_a_metric_the_samples_do_not_log_is_reported_once() -> None:
    path = samples_path("scorio_arith_gen")
    _, rejections = split(read_lm_eval(path, LmEvalOptions(metric="acc")))
    (rejection,) = rejections
    assert rejection.reason == "no metric 'acc'; the samples log: exact_match"


def test_legacy_json_array_files_are_read(tmp_path: Path) -> None:
    # lm-eval 0.4.0-0.4.2: one pretty-printed array, no filter or metrics keys,
    # named <model args>_<task>.jsonl next to results.json.
    legacy = []
    for line in samples_path("scorio_arith_r4").read_text().splitlines():
        record = json.loads(line)
        del record["filter"], record["metrics"]
        legacy.append(record)
    path = tmp_path / "pretrained__scorio__fixture-lm_scorio_arith_r4.jsonl"
    path.write_text(json.dumps(legacy, indent=2))
    events, rejections = split(read_lm_eval(path))
    assert rejections == []
    harness = logged("scorio_arith_r4", "strict-match")
    assert outcomes(events, path.stem) == {
        doc: {0: record["exact_match"]} for doc, record in harness.items()
    }
    shutil.copy(results_file(), tmp_path / "results.json")
    events, rejections = split(read_lm_eval(path, LmEvalOptions(repeats=True)))
    assert rejections == [] and {e.run for e in events} == {"scorio_arith_r4"}
    assert len(events) == 24


def test_standard_errors_of_na_read_as_none(tmp_path: Path) -> None:
    folder = copy_folder(tmp_path)
    path = results_file(folder)
    results = json.loads(path.read_text())
    results["results"]["scorio_mc"]["acc_stderr,none"] = "N/A"
    path.write_text(json.dumps(results))
    score = read_results(path).score("scorio_mc", "acc", "none")
    assert score is not None and (score.value, score.stderr) == (0.75, None)
    norm = read_results(path).score("scorio_mc", "acc_norm", "none")
    assert norm is not None and norm.stderr == 0.25


def test_following_a_directory_picks_up_new_files_and_finished_lines(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "output" / "scorio__fixture-lm"
    folder.mkdir(parents=True)
    shutil.copy(results_file(), folder)
    shutil.copy(samples_path("scorio_mc"), folder)
    later = samples_path("scorio_arith_gen").read_bytes()
    partial = len(b"".join(later.splitlines(keepends=True)[:3])) + 20
    target = folder / samples_path("scorio_arith_gen").name
    steps: list[Callable[[], object]] = []

    def sleep(seconds: float) -> None:
        steps.pop(0)()

    reader = LmEvalSamples(tmp_path / "output", follow=True, sleep=sleep)
    steps += [
        # lm-eval writes a samples file line by line: first a part, mid-line.
        lambda: target.write_bytes(later[:partial]),
        lambda: target.write_bytes(later),
        reader.stop,
    ]
    seen: list[list[str]] = []
    events: list[TrialEvent] = []
    for batch in reader.batches():
        batch_events, rejections = split(batch.items)
        assert rejections == []
        seen.append([e.question for e in batch_events])
        events.extend(batch_events)
    assert seen == [["0", "1", "2", "3"], ["0", "1", "2"], ["3", "4", "5"]]
    harness = logged("scorio_arith_gen", "strict-match")
    assert outcomes(events, "scorio_arith_gen") == {
        doc: {0: record["exact_match"]} for doc, record in harness.items()
    }
    assert steps == []
