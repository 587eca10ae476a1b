"""The Redis entry points pyproject declares open a RedisStore from a URL."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from redis import Redis

from adapters.redis.opener import open_redis_store
from adapters.redis.store import RedisStore
from monitor import Monitor
from monitor.stores import StoreOptions, open_store
from monitor.stores.factory import ENTRY_POINT_GROUP
from tests.services import RedisServer, missing_binary

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def declared_entry_points() -> list[EntryPoint]:
    """The store entry points as pyproject declares them (not as installed)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = project["entry-points"][ENTRY_POINT_GROUP]
    return [
        EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)
        for name, value in declared.items()
    ]


def test_every_redis_scheme_names_the_redis_opener_and_extra() -> None:
    plugins = declared_entry_points()
    assert {plugin.name for plugin in plugins} >= {"redis", "rediss", "redis+cluster"}
    for plugin in plugins:
        assert plugin.load() is open_redis_store
        assert plugin.extras == ["redis"]


def test_a_redis_url_opens_a_redis_store(redis: RedisServer, prefix: str) -> None:
    store = open_store(
        redis.url, StoreOptions(prefix=prefix), openers=declared_entry_points()
    )
    assert isinstance(store, RedisStore)
    try:
        with Monitor(store) as monitor:
            trial = {"run": "r", "model": "a", "question": 1, "trial": 0}
            monitor.ingest({**trial, "correct": True})
            assert monitor.status("r").trials == 1
    finally:
        with Redis.from_url(redis.url) as client:
            found = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if found:
                client.delete(*found)


def test_the_installed_package_opens_redis_urls(
    redis: RedisServer, prefix: str
) -> None:
    """Through the real metadata: what ``pip install`` registered."""
    installed = {plugin.name for plugin in entry_points(group=ENTRY_POINT_GROUP)}
    if "redis" not in installed:
        missing_binary(
            "the installed scorio-monitor predates its store entry points "
            "(pip install -e . --no-deps)"
        )
    assert installed >= {plugin.name for plugin in declared_entry_points()}
    store = open_store(redis.url, StoreOptions(prefix=prefix))
    try:
        assert isinstance(store, RedisStore)
    finally:
        store.close()
