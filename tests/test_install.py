"""The package as a user installs it: the wheel, its type markers, the base install.

The wheel is built once from this checkout (``pip wheel``); a fresh virtual
environment gets it without extras, as ``pip install scorio-monitor`` would,
from the package index pip is configured with. There the quick start's main
job must run with none of the service's libraries present, and a command
that needs an extra must say which. Marked ``install`` (about a minute on a
2-core VM): ``-m "not install"`` leaves it out.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scorio_core", "monitor", "adapters")
BASE_REQUIREMENTS = {
    "numpy", "scipy", "pydantic", "rich", "msgspec", "filelock", "threadpoolctl"
}  # fmt: skip
# Import names of every library an extra brings (pyproject's extras).
SERVICE_LIBRARIES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sse_starlette",
    "prometheus_client",
    "redis",
    "hiredis",
    "aiomqtt",
    "paho",
    "httpx",
    "tenacity",
    "inspect_ai",
)

pytestmark = [pytest.mark.install, pytest.mark.timeout(900)]


def run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", folder, ROOT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    [path] = folder.glob("scorio_monitor-*.whl")
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtual environment with the wheel and no extra; its bin folder."""
    venv = tmp_path_factory.mktemp("base") / "venv"
    created = run(sys.executable, "-m", "venv", venv)
    assert created.returncode == 0, created.stderr
    installed = run(venv / "bin" / "python", "-m", "pip", "install", wheel)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr
    return venv / "bin"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The quick start's stream and run config, copied so state stays in tmp."""
    for name in ("aime25.jsonl", "aime25.toml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    return tmp_path


def test_every_package_ships_py_typed_in_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"{package}/py.typed" for package in PACKAGES} <= names


def test_the_wheel_requires_only_the_base_libraries_without_an_extra(
    wheel: Path,
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith("/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = [line.removeprefix("Requires-Dist: ") for line in lines]
    unconditional = {
        re.split(r"[\s<>=!~\[;]", line, maxsplit=1)[0].lower()
        for line, original in zip(required, lines, strict=True)
        if original.startswith("Requires-Dist:") and "extra ==" not in line
    }
    assert unconditional == BASE_REQUIREMENTS
    extras = {
        line.removeprefix("Provides-Extra: ")
        for line in lines
        if line.startswith("Provides-Extra:")
    }
    assert {"http", "redis", "mqtt", "client", "service", "inspect", "test"} <= extras


def test_the_base_install_has_none_of_the_service_libraries(base: Path) -> None:
    probe = (
        "import importlib.util, json, sys; "
        "print(json.dumps([n for n in sys.argv[1:] "
        "if importlib.util.find_spec(n) is not None]))"
    )
    found = run(base / "python", "-c", probe, *SERVICE_LIBRARIES)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []


def test_the_quick_start_runs_on_the_base_install(base: Path, example: Path) -> None:
    watched = run(
        base / "scorio-monitor",
        "watch",
        "aime25.jsonl",
        "--config",
        "aime25.toml",
        cwd=example,
    )
    assert watched.returncode == 0, watched.stderr
    assert "6,600 trials" in watched.stdout and "llm11" in watched.stdout
    state = example / "aime25.jsonl.monitor.db"
    status = run(base / "scorio-monitor", "status", "--state", state, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)[0]["trials"] > 0
    plan = run(base / "scorio-monitor", "next", "--state", state, "--budget", "5")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith("model\tquestion\ttrials")
    scored = run(
        base / "scorio-monitor", "score", "aime25.jsonl", "--json", cwd=example
    )
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)[0]["run"] == "aime25"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ("serve",),
            "serve needs the [service] extra (",
        ),
        (
            ("watch", "aime25.jsonl", "--http", "0"),
            "watch --http needs the [http] extra (",
        ),
        (
            ("next", "--url", "http://127.0.0.1:9", "--run", "aime25", "--budget", "1"),
            "next --url needs the [client] extra (",
        ),
    ],
)
def test_a_command_that_needs_an_extra_says_which_in_one_line(
    base: Path, example: Path, arguments: tuple[str, ...], message: str
) -> None:
    result = run(base / "scorio-monitor", *arguments, cwd=example)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"scorio-monitor: error: {message}")
    assert "pip install 'scorio-monitor[" in line
    # The state file is not created by a command that could not start.
    assert not list(example.glob("*.monitor.db"))
