"""The package as a user installs it: the wheel, its type markers, each install alone.

The wheel is built once from this checkout (``pip wheel``, as ``pip install
.`` builds it). Each documented install gets a fresh virtual environment of
its own: the base install (``pip install .``) and every extra alone
(``pip install '.[http]'`` and so on, here the wheel with the extra), from
the package index pip is configured with, through pip's one shared cache.
In each, the command the docs give for it runs: the quick start on the base
install, ``view`` with ``[http]``, a ``redis://`` store against a real
redis-server with ``[redis]``, the MQTT source and publisher against a real
mosquitto with ``[mqtt]``, ``--url`` commands against a running service
with ``[client]``, ``serve`` with ``[service]``, and a real ``inspect eval``
that the hook counts with ``[inspect]``. A command that needs a missing
extra must say which, in one line. Marked ``install`` and ``slow`` (several
minutes on a 2-core VM: pip downloads each extra's libraries once, then
installs them from its cache): ``-m "not install"`` leaves it out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.services import MosquittoBroker, RedisServer, free_port, stop, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scorio_core", "monitor", "adapters")
BASE_REQUIREMENTS = {
    "numpy", "scipy", "pydantic", "rich", "msgspec", "filelock", "threadpoolctl"
}  # fmt: skip
# Import names of the libraries each extra brings (pyproject's extras).
LIBRARIES_OF_EXTRA = {
    "http": ("fastapi", "starlette", "uvicorn", "sse_starlette", "prometheus_client"),
    "redis": ("redis", "hiredis"),
    "mqtt": ("aiomqtt", "paho"),
    "client": ("httpx", "tenacity"),
    "inspect": ("inspect_ai", "httpx", "tenacity"),
}
LIBRARIES_OF_EXTRA["service"] = tuple(
    name for extra in ("http", "redis", "mqtt", "client")
    for name in LIBRARIES_OF_EXTRA[extra]
)  # fmt: skip
SERVICE_LIBRARIES = tuple(
    dict.fromkeys(name for names in LIBRARIES_OF_EXTRA.values() for name in names)
)
# The hint every missing-extra message ends with.
HINT = re.compile(r"pip install '\.\[(\w+)\]' from a checkout of scorio-monitor$")

pytestmark = [pytest.mark.install, pytest.mark.slow, pytest.mark.timeout(900)]


def run(
    *command: str | Path, cwd: Path = ROOT, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A command in a clean environment: this checkout is not on its path."""
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**clean_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def clean_environment() -> dict[str, str]:
    """This process's environment without what would import this checkout."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }


@contextmanager
def started(
    *command: str | Path, port: int, cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """A server process listening on ``port``; its base URL, stopped after."""
    log = cwd / f"server-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(part) for part in command],
            cwd=cwd,
            env={**clean_environment(), **(env or {})},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            try:
                wait_for_port(port, process, timeout_s=60.0)
            except RuntimeError as exc:
                raise AssertionError(f"{exc}: {log.read_text()[-3000:]}") from exc
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(process)


def answer(url: str, data: bytes | None = None) -> object:
    """The JSON a GET (or, with ``data``, a JSON POST) of ``url`` answers."""
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def one_line_hint(result: subprocess.CompletedProcess[str], message: str) -> str:
    """The extra a command's one-line missing-extra error names."""
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"scorio-monitor: error: {message}"), line
    named = HINT.search(line)
    assert named is not None, line
    return named[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", folder, ROOT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    [path] = folder.glob("scorio_monitor-*.whl")
    return path


@pytest.fixture(scope="module")
def environment(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path
) -> Callable[[str], Path]:
    """Makes (once per module) a fresh virtual environment with the wheel and
    one extra ("": none); returns its bin folder."""
    made: dict[str, Path] = {}

    def make(extra: str) -> Path:
        if extra not in made:
            venv = tmp_path_factory.mktemp(extra or "base") / "venv"
            # No pip of its own (this pip installs into it) and no bytecode
            # compiled ahead: the environment holds the wheel and what it
            # depends on alone, in a third of the time.
            created = run(sys.executable, "-m", "venv", "--without-pip", venv)
            assert created.returncode == 0, created.stderr
            target = f"{wheel}[{extra}]" if extra else str(wheel)
            python = venv / "bin" / "python"
            installed = run(
                sys.executable, "-m", "pip", "--python", python,
                "install", "--no-compile", target,
            )  # fmt: skip
            assert installed.returncode == 0, (
                installed.stdout[-3000:] + installed.stderr
            )
            made[extra] = venv / "bin"
        return made[extra]

    return make


@pytest.fixture(scope="module")
def base(environment: Callable[[str], Path]) -> Path:
    """The base install's bin folder."""
    return environment("")


def installed_libraries(bin: Path) -> set[str]:
    """Which of the extras' libraries the environment can import."""
    probe = (
        "import importlib.util, json, sys; "
        "print(json.dumps([n for n in sys.argv[1:] "
        "if importlib.util.find_spec(n) is not None]))"
    )
    found = run(bin / "python", "-c", probe, *SERVICE_LIBRARIES)
    assert found.returncode == 0, found.stderr
    return set(json.loads(found.stdout))


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The quick start's stream and run config, copied so state stays in tmp."""
    for name in ("aime25.jsonl", "aime25.toml", "service.toml"):
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
    assert installed_libraries(base) == set()


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
    ("arguments", "message", "extra"),
    [
        (("serve",), "serve needs the [service] extra (", "service"),
        (
            ("watch", "aime25.jsonl", "--http", "0"),
            "watch --http needs the [http] extra (",
            "http",
        ),
        (
            ("next", "--url", "http://127.0.0.1:9", "--run", "aime25", "--budget", "1"),
            "next --url needs the [client] extra (",
            "client",
        ),
        (
            ("ingest", "aime25.jsonl", "--format", "inspect"),
            "ingest --format inspect needs the [inspect] extra (",
            "inspect",
        ),
    ],
)
def test_a_command_that_needs_an_extra_says_which_in_one_line(
    base: Path, example: Path, arguments: tuple[str, ...], message: str, extra: str
) -> None:
    result = run(base / "scorio-monitor", *arguments, cwd=example)
    assert one_line_hint(result, message) == extra
    # The state file is not created by a command that could not start.
    assert not list(example.glob("*.monitor.db"))


def test_view_on_the_base_install_names_the_http_extra(
    base: Path, example: Path
) -> None:
    watched = run(base / "scorio-monitor", "watch", "aime25.jsonl", cwd=example)
    assert watched.returncode == 0, watched.stderr
    viewed = run(
        base / "scorio-monitor", "view", "aime25.jsonl.monitor.db", cwd=example
    )
    assert one_line_hint(viewed, "view needs the [http] extra (") == "http"


# -- each extra alone ---------------------------------------------------------


@pytest.mark.parametrize("extra", ["http", "redis", "mqtt", "client", "service"])
def test_an_extra_alone_brings_its_libraries_and_no_other_extras(
    environment: Callable[[str], Path], extra: str
) -> None:
    found = installed_libraries(environment(extra))
    assert set(LIBRARIES_OF_EXTRA[extra]) <= found
    others = set(SERVICE_LIBRARIES) - set(LIBRARIES_OF_EXTRA[extra])
    assert found & others == set()


def test_http_alone_serves_view_and_names_service_for_serve(
    environment: Callable[[str], Path], example: Path
) -> None:
    bin = environment("http")
    watched = run(bin / "scorio-monitor", "watch", "aime25.jsonl", cwd=example)
    assert watched.returncode == 0, watched.stderr
    port = free_port()
    view = (bin / "scorio-monitor", "view", "aime25.jsonl.monitor.db", "--port")
    with started(*view, str(port), port=port, cwd=example) as url:
        assert answer(f"{url}/healthz") == {"status": "ok"}
        status = answer(f"{url}/runs/aime25/status")
    assert isinstance(status, dict) and status["trials"] == 6600
    # The dashboard's extra is not the service's: serve says which it needs.
    served = run(bin / "scorio-monitor", "serve", cwd=example)
    assert one_line_hint(served, "serve needs the [service] extra (") == "service"


REDIS_SCRIPT = """
import sys
from monitor import Monitor, TrialEvent
from monitor.stores.factory import StoreOptions, open_store

store = open_store(sys.argv[1], StoreOptions(prefix=sys.argv[2]))
with Monitor(store) as monitor:
    monitor.ingest([
        TrialEvent(run="r", model=m, question=q, trial=0, correct=(m == "a"))
        for m in ("a", "b") for q in range(3)
    ])
    print(monitor.status("r").trials)
"""


def test_redis_alone_opens_a_redis_store(
    environment: Callable[[str], Path], redis: RedisServer, prefix: str
) -> None:
    bin = environment("redis")
    stored = run(bin / "python", "-c", REDIS_SCRIPT, redis.url, prefix)
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.split() == ["6"]
    # Another process reads the same counts back from redis-server.
    read = run(
        bin / "python",
        "-c",
        "import sys; from monitor import Monitor; "
        "from monitor.stores.factory import StoreOptions, open_store; "
        "print(Monitor(open_store(sys.argv[1], StoreOptions(prefix=sys.argv[2])))"
        ".status('r').trials)",
        redis.url,
        prefix,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["6"]


MQTT_SCRIPT = """
import asyncio, json, sys

import aiomqtt

from adapters.mqtt import MqttPublisher, MqttSource
from monitor import Monitor
from monitor.config import MqttSettings
from monitor.service.service import Service


async def main(url: str, prefix: str, port: int) -> None:
    settings = MqttSettings(url=url, topic_prefix=prefix, client_id=prefix)
    source, publisher = MqttSource(settings), MqttPublisher(settings)
    async with Service(Monitor(), [source], [publisher]) as service:
        async with asyncio.timeout(60):
            while not source.is_subscribed:
                await asyncio.sleep(0.05)
            trial = {"model": "a", "question": 1, "trial": 0, "correct": True}
            async with aiomqtt.Client("127.0.0.1", port) as client:
                await client.publish(
                    f"{prefix}/r/trials", json.dumps(trial).encode(), qos=1
                )
                await client.subscribe(f"{prefix}/r/status", qos=1)
                async for message in client.messages:
                    status = json.loads(bytes(message.payload))
                    if status["trials"] == 1:
                        break
    print(status["run"], status["trials"], service.monitor.status("r").trials)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def test_mqtt_alone_runs_the_source_and_the_publisher(
    environment: Callable[[str], Path], mosquitto: MosquittoBroker, prefix: str
) -> None:
    bin = environment("mqtt")
    result = run(
        bin / "python", "-c", MQTT_SCRIPT, mosquitto.url, prefix, str(mosquitto.port)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # Counted from the trials topic, published on the status topic.
    assert result.stdout.split() == ["r", "1", "1"]


def service_environment(example: Path, port: int) -> dict[str, str]:
    """``serve --config service.toml`` on ``port``, its state in ``example``."""
    return {
        "SCORIO_MONITOR_HTTP_LISTEN": f"127.0.0.1:{port}",
        "SCORIO_MONITOR_STORE_PATH": str(example / "service.monitor.db"),
    }


def test_client_alone_feeds_and_asks_a_running_service(
    environment: Callable[[str], Path], example: Path
) -> None:
    bin = environment("client")
    assert "aiomqtt" not in installed_libraries(bin)
    port = free_port()
    # The service runs from this checkout's own environment.
    serve = (sys.executable, "-m", "monitor", "serve", "--config", "service.toml")
    this_checkout = {"PYTHONPATH": str(ROOT), **service_environment(example, port)}
    with started(*serve, port=port, cwd=example, env=this_checkout) as url:
        fed = run(
            bin / "scorio-monitor",
            "ingest",
            "aime25.jsonl",
            "--format",
            "jsonl",
            "--url",
            url,
            cwd=example,
        )
        assert fed.returncode == 0, fed.stderr
        status = answer(f"{url}/runs/aime25/status")
        planned = run(
            bin / "scorio-monitor",
            "next",
            "--url",
            url,
            "--run",
            "aime25",
            "--budget",
            "5",
            cwd=example,
        )
    assert isinstance(status, dict) and status["trials"] == 6600
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.startswith("model\tquestion\ttrials")


def test_service_alone_serves_and_answers_healthz(
    environment: Callable[[str], Path], example: Path
) -> None:
    bin = environment("service")
    port = free_port()
    serve = (bin / "scorio-monitor", "serve", "--config", "service.toml")
    env = service_environment(example, port)
    with started(*serve, port=port, cwd=example, env=env) as url:
        assert answer(f"{url}/healthz") == {"status": "ok"}
        trial = {"model": "a", "question": 1, "trial": 0, "correct": True}
        counted = answer(f"{url}/runs/aime25/trials", json.dumps(trial).encode())
    assert isinstance(counted, dict) and counted["accepted"] == 1


@pytest.fixture
def inspect_tasks(tmp_path: Path) -> Path:
    """The test tasks and their model provider, importable as in this checkout."""
    folder = tmp_path / "tasks"
    package = folder / "tests" / "adapters"
    package.mkdir(parents=True)
    for name in ("tests/__init__.py", "tests/adapters/__init__.py"):
        (folder / name).write_text("")
    for name in ("inspect_models.py", "inspect_tasks.py"):
        shutil.copy(ROOT / "tests" / "adapters" / name, package / name)
    return folder


def inspect_eval(
    bin: Path, tasks: Path, env: Mapping[str, str], epochs: int = 2
) -> subprocess.CompletedProcess[str]:
    return run(
        bin / "inspect",
        "eval",
        "tests/adapters/inspect_tasks.py@yesno",
        "-T",
        f"epochs={epochs}",
        "--log-dir",
        tasks / "logs",
        cwd=tasks,
        # Wide enough that Inspect's console log keeps each message on one line.
        env={
            "PYTHONPATH": str(tasks),
            "INSPECT_DISPLAY": "plain",
            "COLUMNS": "500",
            **env,
        },
    )


def test_inspect_alone_loads_the_hook_and_counts_a_real_eval(
    environment: Callable[[str], Path], inspect_tasks: Path
) -> None:
    bin = environment("inspect")
    # As installed alone: no MQTT library, which the hook must not need.
    assert "aiomqtt" not in installed_libraries(bin)
    state = inspect_tasks / "state.db"
    evaluated = inspect_eval(bin, inspect_tasks, {"SCORIO_MONITOR_STATE": str(state)})
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr
    status = run(bin / "scorio-monitor", "status", "--state", state, "--json")
    assert status.returncode == 0, status.stderr
    [run_status] = json.loads(status.stdout)
    assert run_status["run"] == "yesno" and run_status["trials"] == 10 * 2


def test_inspect_alone_with_an_mqtt_url_says_once_it_needs_mqtt(
    environment: Callable[[str], Path], inspect_tasks: Path
) -> None:
    bin = environment("inspect")
    evaluated = inspect_eval(
        bin, inspect_tasks, {"SCORIO_MONITOR_URL": "mqtt://127.0.0.1:9"}, epochs=1
    )
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr
    output = evaluated.stdout + evaluated.stderr
    said = [line for line in output.splitlines() if "needs the [mqtt] extra" in line]
    assert len(said) == 1, output[-3000:]
    assert re.search(HINT.pattern.removesuffix("$"), said[0]) is not None, said
