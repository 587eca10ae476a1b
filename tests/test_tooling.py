"""Lint, format and strict type checks run as part of the suite."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from monitor.cli.extras import EXTRA_OF_LIBRARY
from tests.services import missing_binary

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


@pytest.mark.slow
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


def test_each_optional_library_is_named_with_the_extra_that_installs_it() -> None:
    """monitor/cli/extras.py names, for each library, the extra in pyproject."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    distributions = metadata.packages_distributions()

    def normal(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def names(requirements: list[str]) -> set[str]:
        return {
            normal(re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0])
            for requirement in requirements
        }

    for library in EXTRA_OF_LIBRARY:
        if library not in distributions:
            missing_binary(f"{library} is not installed (pip install -e '.[test]')")
    for library, extra in EXTRA_OF_LIBRARY.items():
        if library == "starlette":  # FastAPI's own dependency
            assert "fastapi" in names(extras[extra])
            continue
        [distribution] = {normal(d) for d in distributions[library]}
        assert distribution in names(extras[extra]), (library, extra)
    named = {normal(d) for library in EXTRA_OF_LIBRARY for d in distributions[library]}
    for extra in ("http", "redis", "mqtt", "client", "inspect"):
        own = names(extras[extra]) - {"scorio-monitor"}
        assert own <= named, (extra, own - named)
    assert names(extras["service"]) == {"scorio-monitor"}
    assert extras["service"] == ["scorio-monitor[http,redis,mqtt,client]"]
    assert "scorio-monitor[service]" in extras["test"]


def test_every_package_has_a_py_typed_marker() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        wheel = tomllib.load(handle)["tool"]["hatch"]["build"]["targets"]["wheel"]
    for package in wheel["packages"]:
        assert (ROOT / package / "py.typed").is_file(), package


def test_every_declared_lower_bound_is_met_by_the_versions_installed_here() -> None:
    """The bounds in [project] are versions the suite ran with (pyproject's
    comment): whatever is installed for the run meets each one."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        project = tomllib.load(handle)["project"]
    requirements = [
        Requirement(text)
        for group in [
            project["dependencies"],
            *project["optional-dependencies"].values(),
        ]
        for text in group
    ]
    checked = 0
    for requirement in requirements:
        if requirement.name == "scorio-monitor":  # an extra of its own
            continue
        try:
            installed = Version(metadata.version(requirement.name))
        except metadata.PackageNotFoundError:
            missing_binary(
                f"{requirement.name} is not installed (pip install -e '.[test]')"
            )
            continue
        lower = [
            Version(spec.version)
            for spec in requirement.specifier
            if spec.operator in (">=", "==")
        ]
        assert lower, f"{requirement} has no lower bound"
        assert all(bound <= installed for bound in lower), (str(requirement), installed)
        assert requirement.specifier.contains(installed, prereleases=True)
        checked += 1
    assert checked >= 40
