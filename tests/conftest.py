"""Test-wide settings: hypothesis profiles (derandomized under CI)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.services import (
    MosquittoBroker,
    RedisClusterNodes,
    RedisServer,
    mosquitto_broker,
    redis_cluster,
    redis_server,
)

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A session-wide redis-server (persistence off); isolate by key prefix."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    """A session-wide mosquitto; isolate by topic prefix."""
    with mosquitto_broker(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A key or topic prefix unique to the test, from its name."""
    name = request.node.name.replace("[", "-").replace("]", "")
    return "t-" + "".join(c if c.isalnum() or c == "-" else "-" for c in name)[:60]


@pytest.fixture(scope="session")
def redis_cluster_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisClusterNodes]:
    """A session-wide Redis Cluster (3 masters, 3 replicas); isolate by prefix."""
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster
