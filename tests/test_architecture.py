"""The import rules of STYLE.md: scorio_core -> monitor -> adapters, never back."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scorio_core", "monitor", "adapters")
CORE_THIRD_PARTY = {"numpy", "scipy"}
COMPOSITION_ROOT = "monitor/cli.py"


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", python_files("scorio_core"), ids=str)
def test_scorio_core_imports_only_the_standard_library_numpy_and_scipy(
    path: Path,
) -> None:
    allowed = (
        set(sys.stdlib_module_names) | CORE_THIRD_PARTY | {"scorio_core", "__future__"}
    )
    assert imported_modules(path) <= allowed, path


@pytest.mark.parametrize("path", python_files("monitor"), ids=str)
def test_monitor_never_imports_adapters_except_the_composition_root(path: Path) -> None:
    if path.relative_to(ROOT).as_posix() == COMPOSITION_ROOT:
        return
    assert "adapters" not in imported_modules(path), path


@pytest.mark.parametrize("path", python_files("adapters"), ids=str)
def test_adapters_never_import_each_other(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("adapters.")
        ):
            sibling = node.module.split(".")[1]
            assert sibling == path.stem or path.name == "__init__.py", path


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_exports_an_alphabetical_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(module, name), name
