"""The live terminal view as a user sees it: ``watch`` in a real tmux pane."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]


class Pane:
    """One tmux session on a private socket, running one command."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *arguments: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *arguments],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "view")

    def wait_for(self, text: str, timeout_s: float = 30.0) -> str:
        """The screen once ``text`` is on it."""
        deadline = time.monotonic() + timeout_s
        screen = self.screen()
        while time.monotonic() < deadline:
            if text in screen:
                return screen
            time.sleep(0.2)
            screen = self.screen()
        raise AssertionError(f"not on screen within {timeout_s} s:\n{screen}")


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    pane = Pane(tmp_path / "tmux.sock")
    yield pane
    subprocess.run(["tmux", "-S", str(pane.socket), "kill-server"], capture_output=True)


def start(pane: Pane, command: list[str], width: int = 160, height: int = 50) -> None:
    # The pane starts at tmux's default size and is resized at once; a COLUMNS
    # inherited from the test runner would pin rich to the wrong width.
    line = "env -u COLUMNS -u LINES " + shlex.join(command)
    # The exit status stays on screen after the command ends.
    line += "; echo EXITED $?; sleep 30"
    pane.tmux(
        "new-session", "-d", "-s", "view", "-x", str(width), "-y", str(height), line
    )


def example_lines() -> list[str]:
    return (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()


def trials_in(lines: list[str]) -> int:
    """Distinct (model, question, trial) among lines: what the header counts."""
    keys = set()
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # the example's one broken line
        keys.add((event["model"], event["question"], event["trial"]))
    return len(keys)


@pytest.mark.slow
def test_watch_follow_draws_the_table_while_the_stream_grows(
    pane: Pane, tmp_path: Path
) -> None:
    lines = example_lines()
    stream = tmp_path / "aime25.jsonl"
    stream.write_text("\n".join(lines[:300]) + "\n")
    start(
        pane,
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "watch",
            str(stream),
            "--follow",
            "--config",
            str(ROOT / "examples" / "aime25.toml"),
        ],
    )
    first = pane.wait_for(f"{trials_in(lines[:300])} trials")
    assert "rank" in first and "llm" in first
    for end in (600, 900):
        with stream.open("a") as handle:
            handle.write("\n".join(lines[end - 300 : end]) + "\n")
        screen = pane.wait_for(f"{trials_in(lines[:end])} trials", timeout_s=20)
        assert "mu" in screen and "EXITED" not in screen
    pane.tmux("send-keys", "-t", "view", "C-c")
    final = pane.wait_for("EXITED")
    assert "EXITED 0" in final


@pytest.mark.slow
def test_watch_http_draws_the_same_view_with_its_events(
    pane: Pane, tmp_path: Path
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    start(
        pane,
        [
            sys.executable,
            "-m",
            "monitor",
            "watch",
            str(stream),
            "--http",
            str(free_port()),
            "--config",
            str(ROOT / "examples" / "aime25.toml"),
        ],
    )
    screen = pane.wait_for("6,600 trials")
    assert "events:" in screen and "pair_unresolvable" in screen
    assert f"{stream}:701: rejected: invalid JSON" in screen
    pane.tmux("send-keys", "-t", "view", "C-c")
    assert "EXITED 0" in pane.wait_for("EXITED")
