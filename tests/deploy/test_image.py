"""deploy/Dockerfile without Docker: read by BuildKit's parser, its build replayed.

The build stage's COPY, WORKDIR, ENV and RUN lines are replayed under a
temp root, so deploy/install.sh installs the package into a fresh venv
exactly as the image build does; the installed ``scorio-monitor`` must run,
and the HEALTHCHECK command line must pass against its ``serve`` and fail
once it stopped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.deployment import (
    ROOT,
    build_stage,
    clean_environment,
    compose_service,
    docker_commands,
    running,
)
from tests.services import free_port, wait_for_port


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dockerfile's build stage replayed under a temp root; returns its venv.

    COPY lines copy from the repository (minus what the .dockerignore
    drops), WORKDIR and absolute ENV paths move under the temp root, and the
    RUN line runs as written. PIP_NO_CACHE_DIR is left out: the cache
    changes where files come from, not what is installed.
    """
    root = tmp_path_factory.mktemp("image")
    workdir = root
    environment = clean_environment()
    for command in build_stage():
        if command.cmd == "WORKDIR":
            workdir = root / command.value[0].lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif command.cmd == "ENV":
            pairs = dict(zip(command.value[::2], command.value[1::2], strict=True))
            for key, value in pairs.items():
                if key != "PIP_NO_CACHE_DIR":
                    environment[key] = (
                        str(root / value.lstrip("/"))
                        if value.startswith("/")
                        else value
                    )
        elif command.cmd == "COPY":
            assert not command.flags, "the build stage copies from the context only"
            *sources, target = command.value
            for source in sources:
                origin = ROOT / source
                if origin.is_dir():
                    shutil.copytree(
                        origin,
                        workdir / target,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True,
                    )
                else:
                    destination = workdir / target
                    if target.endswith("/"):
                        destination = destination / origin.name
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, destination)
        elif command.cmd == "RUN":
            result = subprocess.run(
                ["sh", "-c", command.value[0]],
                cwd=workdir,
                env={**environment, "PYTHON": sys.executable},
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    return Path(environment["VIRTUAL_ENV"])


@pytest.mark.timeout(900)
def test_the_image_install_steps_give_a_working_cli_in_a_fresh_venv(
    image_venv: Path,
) -> None:
    result = subprocess.run(
        [str(image_venv / "bin" / "scorio-monitor"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "serve" in result.stdout


@pytest.mark.timeout(900)
def test_the_health_check_passes_while_serving_and_fails_once_stopped(
    image_venv: Path, tmp_path: Path
) -> None:
    [check] = [c for c in docker_commands() if c.cmd == "HEALTHCHECK"]
    assert check.json and check.value[0] == "CMD" and check.value[1] == "python"
    command = [str(image_venv / "bin" / "python"), *check.value[2:]]
    port = free_port()
    environment = {
        **clean_environment(),
        "SCORIO_MONITOR_HTTP_LISTEN": f"127.0.0.1:{port}",
        "SCORIO_MONITOR_STORE_KIND": "memory",
    }
    serve = [str(image_venv / "bin" / "scorio-monitor"), "serve"]
    with running(serve, tmp_path / "serve.log", environment) as process:
        wait_for_port(port, process, timeout_s=30)
        assert (
            subprocess.run(command, env=environment, timeout=10, check=False).returncode
            == 0
        )
    stopped = subprocess.run(
        command, env=environment, timeout=10, capture_output=True, check=False
    )
    assert stopped.returncode != 0


def test_the_health_check_options_are_docker_durations_and_a_count() -> None:
    [check] = [c for c in docker_commands() if c.cmd == "HEALTHCHECK"]
    options = dict(flag.removeprefix("--").split("=", 1) for flag in check.flags)
    assert set(options) <= {
        "interval",
        "timeout",
        "start-period",
        "start-interval",
        "retries",
    }
    durations = [v for k, v in options.items() if k != "retries"]
    assert all(re.fullmatch(r"(\d+(ms|s|m|h))+", value) for value in durations)
    assert options["retries"].isdigit()


def test_the_image_runs_the_monitor_unprivileged_on_slim_python_311() -> None:
    commands = docker_commands()
    bases = [c.value[0] for c in commands if c.cmd == "FROM"]
    assert bases and all(base == "python:3.11-slim-bookworm" for base in bases)
    [user] = [c.value[0] for c in commands if c.cmd == "USER"]
    assert user not in ("root", "0")
    [entrypoint] = [c.value for c in commands if c.cmd == "ENTRYPOINT"]
    [arguments] = [c.value for c in commands if c.cmd == "CMD"]
    assert entrypoint == ("scorio-monitor",) and arguments[:2] == ("serve", "--config")
    mounts = dict(
        volume.split(":")[:2] for volume in compose_service("monitor-1")["volumes"]
    )
    assert mounts["./monitor.toml"] == arguments[2]
