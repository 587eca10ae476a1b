"""The terminal view as a user sees it: ``watch``, ``status`` and ``score`` in a
real tmux pane, at the widths terminals have."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from monitor import Monitor
from monitor.stores.sqlite import SqliteStore
from tests.monitor.screens import leaderboard_of
from tests.services import free_port, require_binary

# Each test starts a tmux server of its own.
pytestmark = pytest.mark.services

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
    require_binary("tmux")
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


def quick_start_screen(pane: Pane, tmp_path: Path, width: int) -> dict[str, list[str]]:
    """The quick start's watch, then status and score, in a pane ``width`` wide.

    Sections by command; lines the terminal wrapped joined again (so a line
    wider than the pane shows as one), trailing blanks cut.
    """
    for name in ("aime25.jsonl", "aime25.toml"):
        (tmp_path / name).write_bytes((ROOT / "examples" / name).read_bytes())
    monitor = shlex.join([sys.executable, "-m", "monitor"])
    script = tmp_path / "quick_start.sh"
    script.write_text(
        f"cd {shlex.quote(str(tmp_path))}\n"
        "echo '=== watch'\n"
        f"{monitor} watch aime25.jsonl --config aime25.toml\n"
        "echo '=== status'\n"
        f"{monitor} status\n"
        "echo '=== status --groups both'\n"
        f"{monitor} status --groups both\n"
        "echo '=== score'\n"
        f"{monitor} score aime25.jsonl --question-count 30\n"
    )
    start(pane, ["sh", str(script)], width=width, height=400)
    pane.wait_for("EXITED", timeout_s=120)
    screen = pane.tmux("capture-pane", "-p", "-J", "-t", "view", "-S", "-", "-E", "-")
    sections: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in screen.splitlines():
        if line.startswith("=== "):
            lines = sections.setdefault(line[4:].strip(), [])
        elif line.startswith("EXITED"):
            assert line == "EXITED 0"
            break
        elif line.strip():
            lines.append(line.rstrip())
    return sections


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 100, 140])
def test_the_quick_start_fits_the_terminal_without_losing_a_name_or_a_number(
    pane: Pane, tmp_path: Path, width: int
) -> None:
    sections = quick_start_screen(pane, tmp_path, width)
    assert set(sections) == {"watch", "status", "status --groups both", "score"}
    state = SqliteStore(tmp_path / "aime25.jsonl.monitor.db", read_only=True)
    with Monitor(state) as monitor:
        status = monitor.status("aime25")
    assert len(status.models) == 11
    for command, lines in sections.items():
        assert max(cell_len(line) for line in lines) <= width, command
        assert not [line for line in lines if "…" in line], command
        headers, rows = leaderboard_of(lines)
        assert [row["model"] for row in rows] == [m.model for m in status.models]
        assert [row["rank"] for row in rows] == [str(n) for n in range(1, 12)]
        assert headers[headers.index("avg") + 1] == "mu", command
        assert all(re.fullmatch(r"0\.\d{4}", row["mu"]) for row in rows)
        groups = [header for header in headers if "group" in header]
        both = ["settled group", "CI group"]
        assert groups == (both if command == "status --groups both" else ["group"])
        if command == "score":
            continue
        # Every model needs trials here: the forecast with its unit.
        assert all(re.fullmatch(r"~[\d,]+ trials", row["needs"]) for row in rows)
        text = " ".join(" ".join(lines).split())
        assert "P(llm11 better) >99.99%" in text and "rho" not in text
        assert re.search(r"llm09 vs llm07: z 1\.74, needs \d\.\d\d to settle", text)
        assert "next: run the trials `next` plans for the 11 models that need them" in (
            text
        )
        assert lines[-1] == (
            "  scorio-monitor next --state aime25.jsonl.monitor.db --run aime25 "
            "--budget 100"
        )


def test_long_org_model_names_show_whole_at_80_columns(
    pane: Pane, tmp_path: Path
) -> None:
    models = (
        "meta-llama/Llama-3.1-70B-Instruct",
        "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
    )
    stream = tmp_path / "long.jsonl"
    stream.write_text(
        "".join(
            json.dumps(
                {
                    "run": "r",
                    "model": model,
                    "question": question,
                    "trial": 0,
                    "correct": (question + index) % 3 > 0,
                }
            )
            + "\n"
            for index, model in enumerate(models)
            for question in range(12)
        )
    )
    start(
        pane,
        [sys.executable, "-m", "monitor", "watch", str(stream)],
        width=80,
        height=200,
    )
    pane.wait_for("EXITED")
    screen = pane.tmux("capture-pane", "-p", "-J", "-t", "view", "-S", "-", "-E", "-")
    lines = [line.rstrip() for line in screen.splitlines()]
    assert max(cell_len(line) for line in lines) <= 80
    assert not [line for line in lines if "…" in line]
    headers, rows = leaderboard_of(lines)
    assert sorted(row["model"] for row in rows) == sorted(models)
    assert {"rank", "group", "model", "avg", "mu"} <= set(headers)
