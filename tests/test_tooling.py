"""Lint, format and strict type checks run as part of the suite."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_check_is_clean() -> None:
    result = run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_names_the_top_level_packages_the_wheel_installs() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        wheel = tomllib.load(handle)["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["scorio_core", "monitor", "adapters"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "The wheel installs three top-level packages: `scorio_core`, `monitor` "
        "and `adapters`" in readme
    )
    assert "AdapterHub" in readme and "own virtual environment" in readme
