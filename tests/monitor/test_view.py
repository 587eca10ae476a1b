"""The terminal view: headers that do not wrap mid-phrase, plurals, thresholds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.cli.terminal import plural, status_view

ROOT = Path(__file__).resolve().parents[2]


def example_monitor(lines: int | None = None) -> Monitor:
    monitor = Monitor()
    monitor.configure(RunConfig(run="aime25", question_count=30))
    for line in (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()[:lines]:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        monitor.ingest([event])
    return monitor


def rendered(monitor: Monitor, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(status_view(monitor.status("aime25")))
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize("width", [100, 160])
def test_the_header_keeps_each_phrase_on_one_line(width: int) -> None:
    monitor = example_monitor()
    status = monitor.status("aime25")
    lines = rendered(monitor, width)
    assert lines[0] == "aime25  ·  M=30 questions  ·  rule sequential  ·  running"
    assert lines[1] == (
        f"{status.trials:,} trials, {status.duplicates} duplicates, "
        f"{plural(status.corrections, 'correction')}, {status.rejected} rejected"
    )


def test_counts_of_one_are_singular() -> None:
    assert plural(1, "correction") == "1 correction"
    assert plural(1, "trial") == "1 trial"
    assert plural(0, "trial") == "0 trials"
    assert plural(1200, "trial") == "1,200 trials"
    monitor = Monitor()
    trial = {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
    monitor.ingest([trial])
    monitor.ingest([trial])
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(status_view(monitor.status("r")))
    assert "1 trial, 1 duplicate, 0 corrections, 0 rejected" in console.export_text()


def test_an_open_pair_shows_the_z_it_must_reach() -> None:
    monitor = example_monitor(2000)
    status = monitor.status("aime25")
    open_pairs = [pair for pair in status.pairs if not pair.resolved]
    assert open_pairs and all(pair.threshold is not None for pair in open_pairs)
    text = "\n".join(rendered(monitor, 160))
    pair = open_pairs[0]
    assert pair.threshold is not None
    assert (
        f"{pair.a} vs {pair.b}: z {pair.z:.2f}, needs {pair.threshold:.2f} to settle"
        in text
    )
    # Unsettled means below the boundary the rule asks for.
    assert all(pair.z < pair.threshold for pair in open_pairs if pair.threshold)


def test_next_prints_a_header_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    config = str(ROOT / "examples" / "aime25.toml")
    assert main(["watch", str(stream), "--config", config, "--json"]) == 0
    capsys.readouterr()
    state = str(tmp_path / "aime25.jsonl.monitor.db")
    assert main(["next", "--state", state, "--run", "aime25", "--budget", "5"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "model\tquestion\ttrials"
    assert sum(int(row.split("\t")[2]) for row in rows[1:]) == 5


def test_watch_and_score_name_their_groupings_and_agree_on_the_ci_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    config = str(ROOT / "examples" / "aime25.toml")
    assert main(["watch", str(stream), "--config", config, "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert main(["score", str(stream), "--question-count", "30", "--json"]) == 0
    (board,) = json.loads(capsys.readouterr().out)
    ci_groups = {row["model"]: row["group"] for row in board["models"]}
    assert {row["model"]: row["adjacent_group"] for row in status["models"]} == (
        ci_groups
    )
    settled = {row["model"]: row["group"] for row in status["models"]}
    assert settled != ci_groups  # the example is where the two differ
    state = str(tmp_path / "aime25.jsonl.monitor.db")
    assert main(["status", "--state", state, "--groups", "both"]) == 0
    watched = " ".join(capsys.readouterr().out.split())
    assert "settled group" in watched and "CI group" in watched
    assert "settled group: models the stopping rule has not yet told apart" in watched
    assert "CI group: the paper's Table 1" in watched
    assert main(["score", str(stream), "--question-count", "30"]) == 0
    scored = " ".join(capsys.readouterr().out.split())
    assert "group: the paper's Table 1" in scored
