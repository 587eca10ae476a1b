"""The import rules: scorio_core -> monitor -> adapters, never back.

The layers, scorio_core's allowed third-party imports, the independence of
the adapters and the order of monitor's rooms are import-linter contracts
(``[tool.importlinter]`` in pyproject.toml); a test here runs them.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scorio_core", "monitor", "adapters")
CORE_THIRD_PARTY = {"numpy", "scipy"}


def lint_imports_command() -> list[str]:
    """The ``lint-imports`` of this interpreter's environment."""
    beside = Path(sys.executable).with_name("lint-imports")
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed (the test extra has it)")
    return [found, "--no-cache", "--no-logo"]


def test_the_import_contracts_are_kept() -> None:
    # This tree's packages first, whatever else the environment installed.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        lint_imports_command(),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "scorio_core").rglob("*.py")), ids=str)
def test_scorio_core_imports_only_the_standard_library_numpy_and_scipy(
    path: Path,
) -> None:
    """The allow-list the forbidden contract cannot state (it lists what is
    forbidden: the project's other dependencies)."""
    allowed = (
        set(sys.stdlib_module_names) | CORE_THIRD_PARTY | {"scorio_core", "__future__"}
    )
    assert imported_modules(path) <= allowed, path


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_exports_an_alphabetical_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(module, name), name
