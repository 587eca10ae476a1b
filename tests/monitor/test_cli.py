"""The command line as a new user meets it: version, entry points, errors."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_version_prints_the_installed_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == (
        f"scorio-monitor {metadata.version('scorio-monitor')}"
    )


def test_python_dash_m_monitor_is_the_command_line() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "usage: scorio-monitor" in result.stdout
    for command in ("watch", "status", "next", "score", "ingest", "serve"):
        assert command in result.stdout
