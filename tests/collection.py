"""Which libraries a test module needs that this environment lacks.

A contributor with a partial install (the base package and pytest, say)
still collects the suite: a module whose imports need a missing library
becomes one skipped test naming it, instead of a collection error. The
imports are read with :mod:`ast`, not run: a module's top-level imports,
followed through the project's own modules (``tests``, ``monitor``,
``adapters``, ``scorio_core``), as Python would import them. Under ``CI``
nothing is skipped (tests/conftest.py): a missing library fails there.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN_PACKAGES = frozenset({"tests", "monitor", "adapters", "scorio_core"})


def missing_libraries(module: Path) -> list[str]:
    """Third-party top-level modules ``module`` imports, directly or through
    the project's modules, that cannot be found here; sorted."""
    seen: set[Path] = set()
    needed: set[str] = set()
    pending = [module.resolve()]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported_names(path):
            top = name.partition(".")[0]
            if top in OWN_PACKAGES:
                pending.extend(_own_files(name))
            elif top not in sys.stdlib_module_names and top != "__future__":
                needed.add(top)
    return sorted(name for name in needed if not _installed(name))


@functools.cache
def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@functools.cache
def _imported_names(path: Path) -> tuple[str, ...]:
    """Modules the file imports when it is imported: its top-level imports.

    Imports under ``if`` (``TYPE_CHECKING``), ``try`` or inside functions
    are not run on import, so they are left out. ``from package import
    name`` also names ``package.name``, which may be a module.
    """
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = _package_of(path)
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return tuple(names)


def _package_of(path: Path) -> str:
    # A module's package, or the package an __init__.py is: its folder.
    return ".".join(path.relative_to(ROOT).parent.parts)


def _own_files(name: str) -> list[Path]:
    """The files importing ``name`` runs: each package on the way, the module."""
    files = []
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        base = ROOT.joinpath(*parts[:depth])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                files.append(candidate)
    return files


def called_names(function: Callable[..., object]) -> frozenset[str]:
    """The plain names a function's body calls, e.g. ``redis_server``."""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return frozenset()
    tree = ast.parse(textwrap.dedent(source))
    return frozenset(
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    )
