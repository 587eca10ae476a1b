"""Archives given to the wrong command: an Inspect log is named as one.

An Inspect AI ``.eval`` log is a zip archive, as an ``.npz`` is; the
command line tells them apart and points to the command that reads each.
"""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

import tests.adapters.inspect_models  # noqa: F401 (registers scorio-latency)

pytestmark = [
    pytest.mark.filterwarnings(text)
    for text in (
        "ignore:The 'initial' parameter is deprecated:DeprecationWarning",
        "ignore:Unclosed <MemoryObject:ResourceWarning",
    )
]


@pytest.fixture(scope="module")
def inspect_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Inspect log: two epochs of three samples."""
    task = Task(
        name="tiny",
        dataset=MemoryDataset(
            [
                Sample(id=f"q{index}", input=f"q{index}", target="yes")
                for index in range(3)
            ]
        ),
        solver=generate(),
        scorer=match(),
        epochs=2,
    )
    log_dir = tmp_path_factory.mktemp("inspect-log")
    with contextlib.redirect_stdout(io.StringIO()):
        model = get_model("scorio-latency/one", pattern="10", latency_s=0.0)
        (log,) = eval(task, model=model, log_dir=str(log_dir), display="none")
    gc.collect()
    return Path(log.location)


def run(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ["watch"],
        ["score"],
        ["ingest", "--format", "npz"],
        ["ingest", "--format", "jsonl"],
        ["ingest", "--format", "csv"],
    ],
)
def test_an_inspect_log_is_named_and_sent_to_format_inspect(
    inspect_log: Path, tmp_path: Path, command: list[str]
) -> None:
    name, *options = command
    error = one_line_error(run(name, str(inspect_log), *options, cwd=tmp_path))
    assert "is an Inspect AI log" in error and "is an .npz" not in error
    assert f"ingest {inspect_log} --format inspect" in error
    assert not list(tmp_path.iterdir())  # no state file made
    assert not list(inspect_log.parent.glob("*.db*"))


@pytest.mark.slow
def test_following_the_advice_reads_the_log(inspect_log: Path, tmp_path: Path) -> None:
    error = one_line_error(run("watch", str(inspect_log), cwd=tmp_path))
    advised = error.split("`")[1].split()
    assert advised[:2] == ["scorio-monitor", "ingest"]
    state = tmp_path / "state.db"
    result = run(*advised[1:], "--state", str(state), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "6 new trials" in result.stderr


def test_a_zip_that_is_no_npz_gets_one_line_and_no_state_file(tmp_path: Path) -> None:
    import zipfile

    other = tmp_path / "notes.npz"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("notes.txt", "not an array")
    for command in (["score"], ["ingest", "--format", "npz"]):
        name, *options = command
        error = one_line_error(run(name, str(other), *options, cwd=tmp_path))
        assert "is not an .npz archive" in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.npz"]
