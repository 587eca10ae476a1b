"""The files under deploy/ as the deploy tests read them, and their services.

The compose stack cannot run here (no Docker engine), so the tests run its
pieces natively from the same files: mosquitto and redis-server from
deploy/'s configs (copied to a temp dir with ports and paths adapted),
``serve`` workers from deploy/monitor.toml with the environment compose
would give them (interpolated from deploy/env.example), Prometheus from
deploy/prometheus/. Every adaptation replaces text that must be there, so a
changed deploy file fails loudly instead of being tested half-adapted.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Protocol

import aiomqtt
import httpx
import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.services import free_port, require_binary, stop, wait_for_port

ROOT: Final = Path(__file__).resolve().parents[2]
DEPLOY: Final = ROOT / "deploy"
DASHBOARD_FILE: Final = DEPLOY / "grafana" / "dashboards" / "scorio-monitor.json"
DATASOURCES_FILE: Final = (
    DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
)
PROVIDERS_FILE: Final = (
    DEPLOY / "grafana" / "provisioning" / "dashboards" / "scorio.yml"
)

# Series Prometheus makes itself rather than scraping them.
PROMETHEUS_METRICS: Final = frozenset({"up"})


def replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise AssertionError(f"expected {old!r} exactly once in the deploy file")
    return text.replace(old, new)


# -- environment and compose ---------------------------------------------------


def env_example() -> dict[str, str]:
    """``KEY=VALUE`` lines of deploy/env.example."""
    pairs = {}
    for line in (DEPLOY / "env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


_REFERENCE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<operator>:\?|:-)(?P<argument>[^}]*))?\}"
)


def interpolate(text: str, environment: Mapping[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME:?error}``, ``$$``."""

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match["name"]
        if environment.get(name):
            return environment[name]
        if match["operator"] == ":-":
            return str(match["argument"])
        raise KeyError(f"{name} is not set: {match['argument']}")

    return _REFERENCE.sub(value, text)


def compose_file() -> dict[str, Any]:
    """deploy/docker-compose.yml, YAML merge keys resolved."""
    document = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    if not isinstance(document, dict):
        raise AssertionError("docker-compose.yml is not a mapping")
    return document


def compose_service(name: str) -> dict[str, Any]:
    service = compose_file()["services"][name]
    if not isinstance(service, dict):
        raise AssertionError(f"service {name} is not a mapping")
    return service


def worker_services() -> list[str]:
    return sorted(
        name for name in compose_file()["services"] if name.startswith("monitor-")
    )


def worker_environment(
    service: str, redis_port: int, broker_port: int, http_port: int
) -> dict[str, str]:
    """What compose gives a worker, pointed at the local services."""
    values = env_example()
    environment = {
        key: interpolate(str(value), values)
        for key, value in compose_service(service)["environment"].items()
    }
    environment["SCORIO_MONITOR_STORE_URL"] = replace_once(
        environment["SCORIO_MONITOR_STORE_URL"],
        "@redis:6379/",
        f"@127.0.0.1:{redis_port}/",
    )
    environment["SCORIO_MONITOR_MQTT_URL"] = replace_once(
        environment["SCORIO_MONITOR_MQTT_URL"],
        "@mosquitto:1883",
        f"@127.0.0.1:{broker_port}",
    )
    environment["SCORIO_MONITOR_HTTP_LISTEN"] = f"127.0.0.1:{http_port}"
    return environment


def clean_environment() -> dict[str, str]:
    """This process's environment without any monitor settings."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("SCORIO_MONITOR_")
    }


# -- PromQL --------------------------------------------------------------------


def metric_names(expression: str) -> set[str]:
    """Names of every series an expression selects (parsed, not pattern-matched)."""
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            names.update(
                matcher.value
                for matcher in node.matchers.matchers
                if matcher.name == "__name__"
            )

    promql_parser.walk(promql_parser.parse(expression), visit)
    return names


def selectors(expression: str) -> set[str]:
    """Every vector selector of an expression, as PromQL text."""
    found: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.add(str(node))

    promql_parser.walk(promql_parser.parse(expression), visit)
    return found


def rule_expressions() -> dict[str, str]:
    """Alert name -> expression, from deploy/prometheus/alerts.yml."""
    document = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return {
        rule["alert"]: rule["expr"]
        for group in document["groups"]
        for rule in group["rules"]
    }


def dashboard() -> dict[str, Any]:
    document = json.loads(DASHBOARD_FILE.read_text())
    if not isinstance(document, dict):
        raise AssertionError("the dashboard is not a JSON object")
    return document


def dashboard_panels() -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    panels = []
    for panel in dashboard()["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*\w+\)$")


def dashboard_expressions() -> list[str]:
    """Panel queries and the metric selectors of query variables, as written."""
    expressions = [
        target["expr"]
        for panel in dashboard_panels()
        for target in panel.get("targets", [])
    ]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            if match is None:
                raise AssertionError(f"unexpected variable query in {variable}")
            expressions.append(match["selector"])
    return expressions


_VARIABLE = re.compile(r"\$(\w+)")


def as_prometheus_query(expression: str, run: str = "bench", model: str = "m0") -> str:
    """A dashboard query with Grafana's variables filled in as Grafana would."""
    values = {
        "__rate_interval": "1m",
        "z_threshold": "1.645",
        "run": run,
        "model": model,
    }

    def value(match: re.Match[str]) -> str:
        if match[1] not in values:
            raise AssertionError(f"no test value for dashboard variable ${match[1]}")
        return values[match[1]]

    return _VARIABLE.sub(value, expression)


def queried_by_dashboard() -> set[str]:
    return set().union(
        *(metric_names(as_prometheus_query(e)) for e in dashboard_expressions())
    )


def queried_by_rules() -> set[str]:
    return set().union(*(metric_names(e) for e in rule_expressions().values()))


def exported_names(exposition: str) -> set[str]:
    """Sample names in a /metrics page (``_bucket``, ``_total`` included)."""
    return {
        sample.name
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


# -- Dockerfile ----------------------------------------------------------------


class DockerCommand(Protocol):
    """One instruction as BuildKit's own parser (package ``dockerfile``) sees it."""

    cmd: str
    flags: tuple[str, ...]
    value: tuple[str, ...]
    json: bool


def docker_commands() -> list[DockerCommand]:
    # The package ships no type information; DockerCommand describes it.
    parser = importlib.import_module("dockerfile")
    commands: list[DockerCommand] = list(parser.parse_file(str(DEPLOY / "Dockerfile")))
    return commands


def build_stage() -> list[DockerCommand]:
    """The instructions of the first stage (the one that installs)."""
    commands = docker_commands()
    starts = [i for i, command in enumerate(commands) if command.cmd == "FROM"]
    return commands[: starts[1]] if len(starts) > 1 else commands


# -- clients -------------------------------------------------------------------

SHARED_TRIALS: Final = "$share/workers/scorio/+/trials"


def poll(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Call ``check`` until it is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(0.1)


def mqtt_client(
    port: int, user: str | None, password: str | None = None
) -> aiomqtt.Client:
    """A client logging in as a user of deploy/mosquitto/acl (env.example password)."""
    if user is not None and password is None:
        password = env_example()[f"MQTT_{user.upper()}_PASSWORD"]
    return aiomqtt.Client(
        "127.0.0.1",
        port,
        username=user,
        password=password,
        protocol=aiomqtt.ProtocolVersion.V311,
    )


async def collect(
    client: aiomqtt.Client, first_s: float = 5.0, quiet_s: float = 0.5
) -> list[aiomqtt.Message]:
    """Messages until none arrived for ``quiet_s`` (the first may take ``first_s``)."""
    messages: list[aiomqtt.Message] = []
    while True:
        try:
            async with asyncio.timeout(quiet_s if messages else first_s):
                messages.append(await anext(client.messages))
        except TimeoutError:
            return messages


# -- services ------------------------------------------------------------------


@contextmanager
def running(
    command: list[str], log: Path, environment: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A process writing to ``log``, stopped (and waited for) on exit."""
    with log.open("ab") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(environment) if environment is not None else None,
        )
    try:
        yield process
    finally:
        stop(process)


def password_file(folder: Path) -> Path:
    """The broker's password file, made by make-passwords.sh from env.example."""
    require_binary("mosquitto_passwd")
    target = folder / "passwd"
    subprocess.run(
        ["sh", str(DEPLOY / "mosquitto" / "make-passwords.sh"), str(target)],
        env={**os.environ, **env_example()},
        check=True,
        capture_output=True,
    )
    return target


@contextmanager
def deploy_broker(folder: Path) -> Iterator[int]:
    """mosquitto from deploy/mosquitto/ on a free port; yields the port."""
    binary = require_binary("mosquitto")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    text = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    text = replace_once(text, "\nlistener 1883\n", f"\nlistener {port} 127.0.0.1\n")
    text = replace_once(text, "/mosquitto/secrets/passwd", str(password_file(folder)))
    text = replace_once(
        text, "/mosquitto/config/acl", str(DEPLOY / "mosquitto" / "acl")
    )
    text = replace_once(text, "/mosquitto/data/", f"{folder}/")
    if os.geteuid() == 0:
        # As in tests/services.py: root mosquitto would drop to user
        # mosquitto and could not read the temp files.
        text += "user root\n"
    config = folder / "mosquitto.conf"
    config.write_text(text)
    with running([binary, "-c", str(config)], folder / "mosquitto.log") as process:
        wait_for_port(port, process)
        yield port


@contextmanager
def deploy_redis(folder: Path) -> Iterator[int]:
    """redis-server as the compose service starts it, on a free port."""
    binary = require_binary("redis-server")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    text = (DEPLOY / "redis" / "redis.conf").read_text()
    text = replace_once(text, "\nbind 0.0.0.0\n", "\nbind 127.0.0.1\n")
    text = replace_once(text, "\nport 6379\n", f"\nport {port}\n")
    text = replace_once(text, "\ndir /data\n", f"\ndir {folder}\n")
    config = folder / "redis.conf"
    config.write_text(text)
    command = [
        interpolate(str(part), env_example())
        for part in compose_service("redis")["command"]
    ]
    if command[:2] != ["redis-server", "/usr/local/etc/redis/redis.conf"]:
        raise AssertionError(f"unexpected redis command {command}")
    command[:2] = [binary, str(config)]
    with running(command, folder / "redis.log") as process:
        wait_for_port(port, process)
        yield port


def wait_for_log(log: Path, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    content = log.read_text(errors="replace") if log.exists() else ""
    raise AssertionError(f"{text!r} not in {log} after {timeout_s} s:\n{content}")


@contextmanager
def worker(
    service: str, folder: Path, redis_port: int, broker_port: int
) -> Iterator[str]:
    """A ``serve`` process from deploy/monitor.toml; yields its base URL."""
    http_port = free_port()
    environment = {
        **clean_environment(),
        **worker_environment(service, redis_port, broker_port, http_port),
    }
    log = folder / f"{service}.log"
    command = [
        sys.executable,
        "-m",
        "monitor.cli",
        "serve",
        "--config",
        str(DEPLOY / "monitor.toml"),
    ]
    with running(command, log, environment) as process:
        wait_for_port(http_port, process, timeout_s=30)
        yield f"http://127.0.0.1:{http_port}"


def prometheus_config(folder: Path, workers: Mapping[str, str], port: int) -> Path:
    """deploy/prometheus/prometheus.yml with local targets and a 1 s interval."""
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [
        str(DEPLOY / "prometheus" / name) for name in config["rule_files"]
    ]
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["targets"] = [
                f"127.0.0.1:{port}"
                if target == "localhost:9090"
                else workers[target.removesuffix(":8000")].removeprefix("http://")
                for target in static["targets"]
            ]
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def prometheus_server(folder: Path, workers: Mapping[str, str]) -> Iterator[str]:
    """A Prometheus scraping ``workers`` (service -> base URL); yields its URL."""
    binary = require_binary("prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [
        binary,
        f"--config.file={prometheus_config(folder, workers, port)}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    base = f"http://127.0.0.1:{port}"
    with running(command, folder / "prometheus.log") as process:
        wait_for_port(port, process, timeout_s=30)
        deadline = time.monotonic() + 30
        while httpx.get(f"{base}/-/ready").status_code != 200:
            if time.monotonic() > deadline:
                raise AssertionError("prometheus is not ready after 30 s")
            time.sleep(0.1)
        yield base
