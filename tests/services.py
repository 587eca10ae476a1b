"""Real service processes for tests: redis-server and mosquitto on free ports.

Each server runs from the session's temp directory with persistence off
unless a test asks for it, answers before the fixture returns, and is
stopped (and waited for) on teardown. A missing binary skips the test on a
developer machine but fails it when ``CI`` is set. A test that starts one
must be marked ``services`` (tests/conftest.py marks those using its
fixtures), so ``-m "not services"`` runs without any of them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def free_cluster_port() -> int:
    """A free port whose cluster bus port (``port + 10000``) is free too."""
    for _ in range(1000):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@dataclass
class Running:
    """The test being set up or run (tests/conftest.py sets it first)."""

    test: pytest.Item | None = None


running = Running()


def require_binary(name: str, package: str | None = None) -> str:
    """The binary's path; when missing, :func:`missing_binary` (names its package).

    Fails a test not marked ``services``: ``-m "not services"`` promises
    to start no server or browser.
    """
    test = running.test
    if test is not None and test.get_closest_marker("services") is None:
        pytest.fail(
            f"{test.nodeid} starts {name} but is not marked services: use a "
            "fixture of SERVICE_FIXTURES (tests/conftest.py) or "
            "@pytest.mark.services"
        )
    path = shutil.which(name) or next(
        (
            candidate
            for candidate in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
            if Path(candidate).exists()
        ),
        None,
    )
    if path is None:
        missing_binary(f"{name} is not installed (apt-get install {package or name})")
    return path


def missing_binary(message: str) -> NoReturn:
    """Fail when ``CI`` is set: under CI a missing binary must never pass.

    Only on a developer machine without ``CI`` does the test skip, and the
    skip says that CI fails instead.
    """
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(f"{message}; not CI, so skipped (CI=true fails here)")


def require_libraries(*names: str) -> None:
    """Skip (fail under ``CI``) unless every library is importable here."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if missing:
        missing_binary(
            f"{', '.join(missing)} is not installed (pip install -e '.[test]')"
        )


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], timeout_s: float = 10.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class RedisServer:
    """A redis-server of our own; ``restart`` keeps the port (and AOF data)."""

    binary: str
    port: int
    folder: Path
    persistent: bool
    process: subprocess.Popen[bytes] | None = None
    options: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        options = (
            ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
            if self.persistent
            else ["--save", "", "--appendonly", "no"]
        )
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.folder),
                "--daemonize",
                "no",
                *options,
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)
        self._wait_until_loaded()

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _wait_until_loaded(self) -> None:
        import redis

        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis did not answer PING")


@dataclass
class RedisClusterNodes:
    """A Redis Cluster of our own: masters, each with its replicas, AOF on."""

    nodes: list[RedisServer]
    cli: str

    @property
    def url(self) -> str:
        """Any node will do: the client discovers the rest."""
        return self.nodes[0].url

    def create(self, replicas: int) -> None:
        subprocess.run(
            [
                self.cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        self.wait_until_ok(replicas)

    def wait_until_ok(self, replicas: int = 0, timeout_s: float = 30.0) -> None:
        """Every live node sees all slots served and ``replicas`` per master."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self._node_ok(node, replicas) for node in self.live()):
                return
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok")

    def wait_for_promotion(self, replica: RedisServer, timeout_s: float = 30.0) -> None:
        """Until ``replica`` took over its failed master, and the cluster is ok."""
        deadline = time.monotonic() + timeout_s
        while self.role(replica) != "master":
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica on port {replica.port} was not promoted")
            time.sleep(0.1)
        self.wait_until_ok(timeout_s=timeout_s)

    def live(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.process and n.process.poll() is None]

    def masters(self) -> list[RedisServer]:
        return [n for n in self.live() if self.role(n) == "master"]

    def role(self, node: RedisServer) -> str:
        import redis

        with redis.Redis(port=node.port, decode_responses=True) as client:
            role: str = client.execute_command("ROLE")[0]
            return role

    def replica_of(self, master: RedisServer) -> RedisServer:
        import redis

        with redis.Redis(port=master.port, decode_responses=True) as client:
            replicas = client.execute_command("ROLE")[2]
        port = int(replicas[0][1])
        return next(node for node in self.nodes if node.port == port)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    @staticmethod
    def _node_ok(node: RedisServer, replicas: int) -> bool:
        import redis

        try:
            with redis.Redis(port=node.port, decode_responses=True) as client:
                info = client.cluster("info")
                ranges = client.execute_command("CLUSTER SLOTS")
        except redis.RedisError:
            return False
        # CLUSTER SLOTS lists a replica once it has replicated something.
        listed = all(len(entry) >= 3 + replicas for entry in ranges)
        served = int(info["cluster_slots_ok"]) == 16384
        return bool(info["cluster_state"] == "ok" and served and listed)


@dataclass
class MosquittoBroker:
    """A mosquitto of our own with a config file in a temp folder."""

    binary: str
    port: int
    folder: Path
    extra_config: str = ""
    persistent: bool = False
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.folder / "mosquitto.conf"
        # Started as root, mosquitto drops to user "mosquitto" and then cannot
        # write its persistence file into our folder: stay root instead.
        user = "user root\n" if os.geteuid() == 0 else ""
        persistence = (
            f"persistence true\npersistence_location {self.folder}/\n"
            if self.persistent
            else "persistence false\n"
        )
        config.write_text(
            f"listener {self.port} 127.0.0.1\n{user}allow_anonymous true\n"
            f"{persistence}max_queued_messages 100000\n{self.extra_config}"
        )
        self.process = subprocess.Popen(
            [self.binary, "-c", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def redis_server(folder: Path, persistent: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(
        require_binary("redis-server"), free_port(), folder, persistent
    )
    folder.mkdir(parents=True, exist_ok=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def redis_cluster(
    folder: Path, masters: int = 3, replicas: int = 1
) -> Iterator[RedisClusterNodes]:
    """``masters`` masters with ``replicas`` replicas each, AOF fsync always.

    ``redis-server --cluster-enabled yes`` per node (own folder, so the
    nodes.conf and AOF files never mix), joined by ``redis-cli --cluster
    create``; a node timeout of 1 s makes failovers quick.
    """
    binary = require_binary("redis-server")
    cli = require_binary("redis-cli", "redis-tools")
    nodes = []
    for index in range(masters * (1 + replicas)):
        node_folder = folder / f"node{index}"
        node_folder.mkdir(parents=True, exist_ok=True)
        options = (
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1000",
            # Masters ping replicas each second: a replica of an idle master
            # gets a replication offset, and CLUSTER SLOTS lists it.
            "--repl-ping-replica-period",
            "1",
        )
        nodes.append(RedisServer(binary, 0, node_folder, True, options=options))
    cluster = RedisClusterNodes(nodes, cli)
    try:
        for node in nodes:
            _start_on_a_free_port(node, {n.port for n in nodes if n.port})
        cluster.create(replicas)
        yield cluster
    finally:
        cluster.stop()


def _start_on_a_free_port(node: RedisServer, taken: set[int]) -> None:
    """Start the node; a port pair taken meanwhile (shared machine): retry."""
    used = {p for t in taken for p in (t, t + 10000)}
    error: RuntimeError | None = None
    for _ in range(5):
        port = free_cluster_port()
        if {port, port + 10000} & used:
            continue
        node.port = port
        try:
            node.start()
            return
        except RuntimeError as exc:
            error = exc
    raise error or RuntimeError("no free port pair apart from the other nodes")


@contextmanager
def mosquitto_broker(
    folder: Path, extra_config: str = "", persistent: bool = False
) -> Iterator[MosquittoBroker]:
    """A broker; ``persistent`` keeps sessions across a restart."""
    broker = MosquittoBroker(
        require_binary("mosquitto"), free_port(), folder, extra_config, persistent
    )
    folder.mkdir(parents=True, exist_ok=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
