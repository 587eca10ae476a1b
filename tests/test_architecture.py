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
COMPOSITION_ROOT = "monitor/cli/"


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
    if path.relative_to(ROOT).as_posix().startswith(COMPOSITION_ROOT):
        return
    assert "adapters" not in imported_modules(path), path


@pytest.mark.parametrize("path", python_files("adapters"), ids=str)
def test_adapters_never_import_each_other(path: Path) -> None:
    """An adapter (a module, or a package per outside system) imports only itself."""
    parts = path.relative_to(ROOT / "adapters").with_suffix("").parts
    if parts == ("__init__",):
        return
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [
                f"{node.module}.{alias.name}" for alias in node.names
            ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name == "adapters" or name.startswith("adapters."):
                assert name.split(".")[1:2] == [parts[0]], f"{path} imports {name}"


@pytest.mark.parametrize("package", PACKAGES)
def test_package_init_exports_an_alphabetical_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(module, name), name
