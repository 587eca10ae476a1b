"""What a newcomer meets first: empty files, state file names, `next` without
`--run`, piped leaderboards, CSV given to `watch`, and the extras."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main
from tests.monitor.test_cli import one_line_error
from tests.services import require_libraries
from tests.test_install import SERVICE_LIBRARIES

ROOT = Path(__file__).resolve().parents[2]


def trial(model: str, question: int, category: int, run: str = "r") -> str:
    return json.dumps(
        {
            "run": run,
            "model": model,
            "question": str(question),
            "trial": 1,
            "category": category,
        }
    )


def without(
    libraries: tuple[str, ...], *arguments: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """The command line in a process where ``libraries`` cannot be imported."""
    hide = "".join(f"sys.modules[{name!r}] = None; " for name in libraries)
    code = f"import sys; {hide}from monitor.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_watch_of_an_empty_file_exits_nonzero_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("")
    assert main(["watch", str(path)]) == 1
    assert f"no trial events read: {path} is empty" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.monitor.db"))


def test_watch_of_an_empty_stdin_exits_nonzero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "watch", "-", "--state", "s.db"],
        input="",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "no trial events read: stdin is empty" in result.stderr


def test_a_second_watch_with_no_new_lines_says_so_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(trial("a", 1, 1) + "\n")
    assert main(["watch", str(path)]) == 0
    capsys.readouterr()
    assert main(["watch", str(path)]) == 0
    assert f"no new lines in {path} since the last watch" in capsys.readouterr().err


def test_results_csv_and_results_jsonl_keep_apart_state_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "results.csv"
    rows.write_text("run,model,question,trial,category\nr,a,1,1,1\n")
    lines = tmp_path / "results.jsonl"
    lines.write_text(trial("a", 1, 0) + "\n" + trial("b", 1, 1) + "\n")
    assert main(["ingest", str(rows), "--format", "csv", "--json"]) == 0
    assert main(["watch", str(lines), "--json"]) == 0
    capsys.readouterr()
    assert sorted(path.name for path in tmp_path.glob("*.monitor.db")) == [
        "results.csv.monitor.db",
        "results.jsonl.monitor.db",
    ]
    for state, trials in (("results.csv", 1), ("results.jsonl", 2)):
        assert (
            main(["status", "--state", str(tmp_path / f"{state}.monitor.db"), "--json"])
            == 0
        )
        (status,) = json.loads(capsys.readouterr().out)
        assert status["trials"] == trials


def test_next_plans_the_only_run_without_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(trial("a", 1, 1) + "\n" + trial("b", 1, 0) + "\n")
    assert main(["watch", str(path), "--json"]) == 0
    capsys.readouterr()
    state = str(tmp_path / "results.jsonl.monitor.db")
    assert main(["next", "--state", state, "--budget", "4"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "model\tquestion\ttrials"
    assert sum(int(row.split("\t")[2]) for row in rows[1:]) == 4


def test_next_without_run_names_the_runs_to_choose_from(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(trial("a", 1, 1, run="one") + "\n" + trial("a", 1, 1, run="two"))
    assert main(["watch", str(path), "--json"]) == 0
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "next",
            "--state",
            "results.jsonl.monitor.db",
            "--budget",
            "4",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    line = one_line_error(result)
    assert "holds 2 runs (one, two); choose one with --run" in line


@pytest.mark.slow
def test_org_model_names_stay_on_one_line_when_piped(tmp_path: Path) -> None:
    models = (
        "meta-llama/Llama-3.1-405B-Instruct-Turbo-FP8",
        "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
    )
    path = tmp_path / "results.jsonl"
    path.write_text("".join(trial(model, 1, 1) + "\n" for model in models))
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "watch", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(table) == len(models)  # one row each, none wrapped
    for model in models:
        assert sum(model in row for row in table) == 1


@pytest.mark.slow
def test_watch_of_csv_rows_says_once_to_ingest_them_as_csv(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(
        "model,question,trial,correct\n"
        + "".join(f"a,{question},0,true\n" for question in range(80))
    )
    line = one_line_error(
        subprocess.run(
            [sys.executable, "-m", "monitor", "watch", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    )
    assert f"`scorio-monitor ingest {path} --format csv`" in line
    assert not list(tmp_path.glob("*.monitor.db"))


def test_a_broken_first_line_with_commas_is_no_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        "oops, a, note\n" + trial("a", 1, 1) + "\n" + trial("a", 2, 0) + "\n"
    )
    assert main(["watch", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"{path}:1: rejected: invalid JSON" in captured.err
    (status,) = json.loads(captured.out)
    assert status["trials"] == 2


@pytest.mark.slow
def test_score_reports_the_column_of_a_truncated_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "score", "examples/aime25.jsonl"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    truncated = (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()[700]
    assert len(truncated) == 57  # the line stops after `"trial":`
    assert (
        "examples/aime25.jsonl:701: skipped: invalid JSON: unexpected end at "
        "line 1 column 58"
    ) in result.stderr


@pytest.mark.slow
def test_watch_http_prints_each_rejection_once(tmp_path: Path) -> None:
    require_libraries("fastapi", "uvicorn", "sse_starlette", "prometheus_client")
    path = tmp_path / "results.jsonl"
    path.write_text(
        trial("a", 1, 1) + "\n{not json\n" + trial("a", 2, 7) + "\n" + trial("b", 1, 0)
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor", "watch", str(path), "--http", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen: list[str] = []
    # Both rejections are printed as the file is read; then stop the server.
    while sum("rejected" in line for line in seen) < 2:
        line = process.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]
    err = "".join(seen) + rest
    assert process.returncode == 0, err
    assert err.count("invalid JSON") == 1, err
    assert err.count("category 7 is outside") == 1, err
    assert f"{path}:2: rejected: invalid JSON" in err


@pytest.mark.slow
def test_watch_and_score_import_no_service_library(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(trial("a", 1, 1) + "\n" + trial("b", 1, 0) + "\n")
    for command in (["watch", str(path)], ["score", str(path)]):
        result = without(SERVICE_LIBRARIES, *command, cwd=tmp_path)
        assert result.returncode == 0, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("library", "arguments", "message"),
    [
        (
            "uvicorn",
            ("watch", "r.jsonl", "--http", "0"),
            "watch --http needs the [http]",
        ),
        ("fastapi", ("serve",), "serve needs the [service]"),
        (
            "httpx",
            ("ingest", "r.jsonl", "--format", "jsonl", "--url", "http://127.0.0.1:9"),
            "ingest --url needs the [client]",
        ),
        (
            "httpx",
            ("watch", "r.jsonl", "--url", "http://127.0.0.1:9"),
            "watch --url needs the [client]",
        ),
    ],
)
def test_a_missing_extra_is_named_in_one_line(
    tmp_path: Path, library: str, arguments: tuple[str, ...], message: str
) -> None:
    (tmp_path / "r.jsonl").write_text(trial("a", 1, 1) + "\n")
    line = one_line_error(without((library,), *arguments, cwd=tmp_path))
    extra = message.rpartition("[")[2].removesuffix("]")
    named = re.fullmatch(
        rf"scorio-monitor: error: {re.escape(message)} extra \((\w+) is not "
        rf"installed\): pip install '\.\[{extra}\]' from a checkout of "
        "scorio-monitor",
        line,
    )
    assert named is not None, line
    # The hidden library, unless this install lacks another of the extra's.
    assert named[1] == library or importlib.util.find_spec(named[1]) is None
    assert not list(tmp_path.glob("*.monitor.db"))
