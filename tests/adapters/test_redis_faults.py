"""A Redis store on a bad day: a server that lost the store, a full server.

Each test runs its own redis-server (persistence off, as a server started
without AOF), so restarting it or filling it touches no other test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis

from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig, StoreError
from tests.services import RedisServer, redis_server

RUN = "bench"

# Each test starts its own redis-server.
pytestmark = pytest.mark.services


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "redis") as started:
        yield started


def trial(question: int) -> dict[str, object]:
    return {"run": RUN, "model": "a", "question": question, "trial": 0, "correct": True}


def refusal(call: Callable[[], object]) -> str:
    """The StoreError of a call on a server that just came back (the first
    call may meet the dropped connection; the client reconnects on the next)."""
    messages = []
    for _ in range(3):
        with pytest.raises(StoreError) as refused:
            call()
        messages.append(str(refused.value))
        if "was reset" in messages[-1]:
            return messages[-1]
    raise AssertionError(f"no reset reported: {messages}")


def test_a_server_restarted_without_persistence_is_told_once_and_refused(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    monitor = Monitor(RedisStore(server.url, "t"), shared_refresh_s=0)
    monitor.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
    monitor.ingest([trial(question) for question in range(20)])
    assert monitor.status(RUN).trials == 20
    server.restart()  # no AOF: it comes back empty
    with caplog.at_level(logging.ERROR, logger="adapters.redis.marker"):
        message = refusal(lambda: monitor.ingest(trial(99)))
        assert message == (
            f"redis store at {server.url} was reset since this worker opened "
            "it (its data is lost); restart the worker (see the log)"
        )
        # Refused again, reads and the last look at closing too; said once.
        with pytest.raises(StoreError, match="was reset"):
            monitor.ingest(trial(100))
        with pytest.raises(StoreError, match="was reset"):
            monitor.status(RUN)
        with pytest.raises(StoreError, match="was reset"):
            monitor.close()
    told = [r.getMessage() for r in caplog.records if "LOST" in r.getMessage()]
    assert len(told) == 1
    assert f"the marker key t:store of {server.url}" in told[0]
    assert "restart the workers" in told[0] and "appendonly yes" in told[0]
    # A worker started now starts from what Redis holds, under a new marker:
    # none of the trials before the reset; the two refused ones (written
    # with the read that told the reset, never acknowledged) and a new one.
    with Redis.from_url(server.url) as client:
        assert client.exists("t:store") == 0
    with Monitor(RedisStore(server.url, "t")) as restarted:
        restarted.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
        restarted.ingest(trial(1))
        assert restarted.status(RUN).trials == 3
        with Redis.from_url(server.url) as client:
            assert client.exists("t:store") == 1


def test_a_second_worker_started_after_the_first_shares_its_marker(
    server: RedisServer,
) -> None:
    with (
        Monitor(RedisStore(server.url, "t"), shared_refresh_s=0) as first,
        Monitor(RedisStore(server.url, "t"), shared_refresh_s=0) as second,
    ):
        first.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
        first.ingest(trial(1))
        second.ingest(trial(2))
        assert first.status(RUN).trials == second.status(RUN).trials == 2


def test_a_full_server_is_reported_in_one_line_without_the_script(
    server: RedisServer,
) -> None:
    with Monitor(RedisStore(server.url, "t")) as monitor:
        monitor.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
        with Redis.from_url(server.url) as client:
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", "1")
            with pytest.raises(StoreError) as refused:
                monitor.ingest([trial(question) for question in range(5)])
            client.config_set("maxmemory", "0")
    message = str(refused.value)
    assert "\n" not in message and "EVAL" not in message and "local " not in message
    assert message.startswith("redis store cannot ")
    assert ": command not allowed when used memory > 'maxmemory'." in message
    assert message.endswith("raise maxmemory or free memory)")
