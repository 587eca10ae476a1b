"""The client when the monitor is away, is not one, or is shared: nothing silent."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.harness import AsyncMonitorClient, HttpTransport, Retry
from adapters.harness.breaker import BreakerSettings
from adapters.harness.transports import (
    MonitorUnavailableError,
    StateFileTransport,
    spool_of,
)
from monitor import Monitor, TrialEvent
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.adapters.late_service import Later, late_service
from tests.helpers import eventually, serving


def trial(index: int) -> TrialEvent:
    return TrialEvent(
        run="r", model="a", question=str(index % 5), trial=f"e:{index}", correct=True
    )


@pytest.fixture
async def later() -> AsyncIterator[Later]:
    async with late_service() as service:
        yield service


async def test_trials_wait_while_the_monitor_is_away_and_arrive_when_it_returns(
    later: Later, caplog: pytest.LogCaptureFixture
) -> None:
    client = AsyncMonitorClient(
        HttpTransport(f"http://127.0.0.1:{later.port}"),
        batch_size=10,
        flush_interval_s=0.05,
        max_buffered=50,
        retry=Retry(attempts=1),
        breaker=BreakerSettings(first_wait_s=0.2, max_wait_s=0.4),
    )
    with caplog.at_level(logging.INFO, logger="adapters.harness"):
        async with client:
            for index in range(40):
                await client.report(trial(index))

            async def away() -> bool:
                return client.monitor_away  # the background flush found none

            await eventually(away, timeout_s=10)
            assert client.pending == 40

            # While the breaker is open, calls fail at once: no attempt made.
            for _ in range(20):
                with pytest.raises(MonitorUnavailableError, match="next try") as fast:
                    await client.status("r")
                assert fast.value.attempts == 0

            # The buffer holds 50: ten more fit, the next 15 are dropped.
            for index in range(40, 65):
                await client.report(trial(index))
            assert (client.pending, client.dropped) == (50, 15)

            await later.start()

            async def delivered() -> bool:
                return client.pending == 0

            await eventually(delivered, timeout_s=10)
            assert not client.monitor_away
    status = later.service.monitor.status("r")
    assert status.trials == 50
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("is unreachable" in m for m in messages) == 1
    assert sum("dropping new trials" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    assert len(messages) <= 4, messages


async def test_an_address_that_is_not_a_monitor_is_said_once_and_its_trials_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        Service(Monitor()) as service,
        serving(create_app(service, HttpSettings())) as base,
    ):
        client = AsyncMonitorClient(
            HttpTransport(f"{base}/wrong"), batch_size=5, flush_interval_s=0.05
        )
        with caplog.at_level(logging.INFO, logger="adapters.harness"):
            async with client:
                await client.report([trial(index) for index in range(12)])

                async def refused() -> bool:
                    return client.refused == 12

                await eventually(refused, timeout_s=10)
                await client.report([trial(index) for index in range(12, 20)])
                assert (client.refused, client.pending) == (20, 0)
        assert service.monitor.runs == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1, errors
    assert "dropped 12 trials" in errors[0]
    assert f"{base}/wrong is not a scorio monitor" in errors[0]


# -- one state file, several processes --------------------------------------


async def test_a_process_that_finds_the_state_file_taken_spools_for_the_writer(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.db"
    async with StateFileTransport(state) as writer:
        other = StateFileTransport(state, close_wait_s=0.01)
        async with AsyncMonitorClient(other, batch_size=5) as client:
            assert writer.is_writer and not other.is_writer
            await client.report([trial(index) for index in range(12)])
            await client.flush()
            assert client.pending == 0  # spooled: on disk, not counted yet
        spooled = sorted(spool_of(state).glob("*.jsonl"))
        assert len(spooled) == 3
        kept = spooled[0].read_bytes()

        # The writer counts the spool before its own batch.
        await writer.send("r", [trial(index) for index in range(12, 15)])
        assert (await writer.status("r")).trials == 15
        assert not list(spool_of(state).glob("*.jsonl"))

        # A spooled file read again (a crash before its removal) adds nothing.
        (spool_of(state) / spooled[0].name).write_bytes(kept)
        await writer.send("r", [trial(15)])
        status = await writer.status("r")
        assert (status.trials, status.duplicates) == (16, 5)


async def test_a_spooling_process_becomes_the_writer_once_the_lock_is_free(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.db"
    first = StateFileTransport(state)
    second = StateFileTransport(state)
    async with first:
        await second.__aenter__()
        await second.send("r", [trial(0), trial(1)])
        assert not second.is_writer
    await second.send("r", [trial(2)])  # the lock is free: it writes now
    assert second.is_writer
    assert (await second.status("r")).trials == 3
    await second.__aexit__(None, None, None)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        assert monitor.status("r").trials == 3
