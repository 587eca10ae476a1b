"""The harness client over its three transports, against real servers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.harness import (
    AsyncMonitorClient,
    EmbeddedTransport,
    HttpTransport,
    MonitorClient,
    MonitorUnavailableError,
    MqttTransport,
    RequestRejectedError,
    Retry,
    transport_for,
)
from adapters.mqtt import MqttPublisher, MqttSource
from adapters.redis import RedisStore
from monitor import ConfigError, Monitor, RunConfig, TrialEvent, UnknownRunError
from monitor.config import HttpSettings, MqttSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.adapters.late_service import Later, late_service
from tests.helpers import eventually, serving
from tests.services import MosquittoBroker, free_port, redis_server

TOKEN = "s3cret"
QUICK = Retry(attempts=3, first_delay_s=0.01, max_delay_s=0.02)
PATIENT = Retry(attempts=60, first_delay_s=0.05, max_delay_s=0.1)


def trials(count: int, run: str = "r", model: str = "a") -> list[TrialEvent]:
    """``count`` distinct trials over 4 questions, alternately right and wrong."""
    return [
        TrialEvent(
            run=run,
            model=model,
            question=str(index % 4),
            trial=str(index // 4),
            category=index % 2,
        )
        for index in range(count)
    ]


@pytest.fixture
async def service() -> AsyncIterator[tuple[str, Service]]:
    """A real service behind a real HTTP server, with run ``r`` declared."""
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4, max_trials_per_question=9))
    async with Service(monitor, status_interval_s=0.01) as running:
        app = create_app(running, HttpSettings(token=TOKEN))
        async with serving(app) as base:
            yield base, running


def payloads(service: Service) -> int:
    """Payloads (requests or messages) the service has ingested."""
    return service.snapshot.latency.count


@pytest.fixture
async def later() -> AsyncIterator[Later]:
    async with late_service() as service:
        yield service


def retried(caplog: pytest.LogCaptureFixture, needle: str = "") -> bool:
    """Whether the client has logged a retry (whose reason contains ``needle``)."""
    return any(
        record.name == "adapters.harness.retry"
        and "retrying" in record.getMessage()
        and needle in record.getMessage()
        for record in caplog.records
    )


# -- embedded --------------------------------------------------------------


async def test_full_batches_are_sent_and_the_rest_waits_for_a_flush() -> None:
    monitor = Monitor()
    async with AsyncMonitorClient(EmbeddedTransport(monitor), batch_size=5) as client:
        await client.report(trials(12))
        assert (await client.status("r")).trials == 10
        assert client.pending == 2
        assert await client.flush() == 2
        assert (await client.status("r")).trials == 12
        assert client.pending == 0


async def test_closing_the_client_sends_what_is_buffered() -> None:
    monitor = Monitor()
    async with AsyncMonitorClient(EmbeddedTransport(monitor), batch_size=50) as client:
        await client.report(trials(7))
    assert monitor.status("r").trials == 7


async def test_the_background_task_sends_trials_without_a_flush() -> None:
    monitor = Monitor()
    transport = EmbeddedTransport(monitor)
    async with AsyncMonitorClient(
        transport, batch_size=50, flush_interval_s=0.05
    ) as client:
        await client.report(trials(3))
        assert client.pending == 3

        async def delivered() -> bool:
            return client.pending == 0

        await eventually(delivered, timeout_s=5)
        assert (await client.status("r")).trials == 3


async def test_an_embedded_monitor_answers_next_like_the_engine() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4, models=["a", "b"]))
    async with AsyncMonitorClient(EmbeddedTransport(monitor)) as client:
        await client.report(trials(8, model="a") + trials(3, model="b"))
        await client.flush()
        # Plans that reserve nothing (lease_s=0) answer alike.
        assert await client.next("r", 6, lease_s=0) == monitor.next("r", 6, lease_s=0)


async def test_a_batch_the_embedded_monitor_refuses_entirely_is_dropped() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", questions=["0", "1"]))
    async with AsyncMonitorClient(EmbeddedTransport(monitor), batch_size=10) as client:
        await client.report(trials(4)[2:])  # questions 2 and 3 are not declared
        with pytest.raises(RequestRejectedError, match="question"):
            await client.flush()
        assert client.pending == 0


def test_the_sync_client_reports_and_reads_from_a_plain_script() -> None:
    monitor = Monitor()
    with MonitorClient(EmbeddedTransport(monitor), batch_size=4) as client:
        client.report(trials(6, model="a"))
        assert client.pending == 2
        assert client.status("r").trials == 4
        client.report(trials(1, model="b"))
        assert client.flush() == 3
        plan = client.next("r", 4, lease_s=0)
        assert plan and plan == monitor.next("r", 4, lease_s=0)
        client.report(trials(3, model="c"))
    assert monitor.status("r").trials == 10


def test_the_sync_client_raises_a_failed_last_flush_on_close() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", questions=["0"]))
    client = MonitorClient(EmbeddedTransport(monitor), batch_size=10)
    with pytest.raises(RequestRejectedError), client:
        client.report(trials(2)[1:])  # question 1 is not declared


def test_run_ids_must_fit_in_a_url_path_segment_and_a_topic_level() -> None:
    monitor = Monitor()
    with MonitorClient(EmbeddedTransport(monitor)) as client:
        for run in ("a/b", "a+b", "a#b"):
            with pytest.raises(ValueError, match="must not contain"):
                client.report(trials(1, run=run))


def test_the_url_scheme_picks_the_transport() -> None:
    assert isinstance(transport_for("http://127.0.0.1:8000"), HttpTransport)
    assert isinstance(transport_for("mqtts://broker:8883"), MqttTransport)
    with pytest.raises(ValueError, match="http"):
        transport_for("redis://127.0.0.1:6379/0")


# -- HTTP ------------------------------------------------------------------


async def test_each_http_batch_is_one_request(service: tuple[str, Service]) -> None:
    base, running = service
    transport = HttpTransport(base, token=TOKEN)
    async with AsyncMonitorClient(transport, batch_size=5) as client:
        await client.report(trials(12))
        assert payloads(running) == 2
        await client.flush()
        assert payloads(running) == 3
        assert (await client.status("r")).trials == 12


async def test_http_status_next_and_declare_match_the_engine(
    service: tuple[str, Service],
) -> None:
    base, running = service
    async with AsyncMonitorClient(HttpTransport(base, token=TOKEN)) as client:
        declared = await client.declare(RunConfig(run="new", weights=[0, 0.5, 1]))
        assert declared.weights == [0, 0.5, 1]
        await client.report(trials(10, model="a") + trials(6, model="b"))
        await client.flush()
        status = await client.status("r")
        plan = await client.next("r", 5)
    monitor = running.monitor
    assert status == monitor.status("r")
    # The plan is a reservation, held by the service until reported.
    assert plan and all(item.lease == plan[0].lease for item in plan)
    flying = monitor.in_flight("r")
    assert flying == {(item.model, item.question): item.trials for item in plan}
    assert "new" in monitor.runs


async def test_the_client_retries_until_a_late_server_answers(
    later: Later, caplog: pytest.LogCaptureFixture
) -> None:
    later.service.monitor.configure(RunConfig(run="r", question_count=4))
    transport = HttpTransport(f"http://127.0.0.1:{later.port}", token=TOKEN)
    with caplog.at_level(logging.INFO, logger="adapters.harness"):
        async with AsyncMonitorClient(transport, retry=PATIENT) as client:
            await client.report(trials(3))
            flushing = asyncio.create_task(client.flush())

            async def failed_once() -> bool:
                return retried(caplog)

            await eventually(failed_once, timeout_s=10)
            assert not flushing.done()
            await later.start()
            assert await flushing == 3
            assert (await client.status("r")).trials == 3


async def test_the_client_retries_while_the_service_answers_503(
    tmp_path: Path, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server(tmp_path / "redis", persistent=True) as redis:
        monitor = Monitor(RedisStore(redis.url, prefix=prefix, timeout_s=1.0))
        monitor.configure(RunConfig(run="r", question_count=4))
        async with (
            Service(monitor) as running,
            serving(create_app(running, HttpSettings())) as base,
            AsyncMonitorClient(HttpTransport(base), retry=PATIENT) as client,
        ):
            redis.stop()
            await client.report(trials(5))
            with caplog.at_level(logging.INFO, logger="adapters.harness"):
                flushing = asyncio.create_task(client.flush())

                async def refused_for_now() -> bool:
                    return retried(caplog, "503")

                await eventually(refused_for_now, timeout_s=10)
            assert not flushing.done()  # 503 while the store is down
            redis.start()
            assert await flushing == 5
            assert (await client.status("r")).trials == 5


async def test_the_client_gives_up_after_its_attempts_and_keeps_the_trials() -> None:
    transport = HttpTransport(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(MonitorUnavailableError, match="gave up"):
        async with AsyncMonitorClient(transport, retry=QUICK) as client:
            await client.report(trials(2))
            with pytest.raises(MonitorUnavailableError) as raised:
                await client.flush()
            assert raised.value.attempts == 3
            assert client.pending == 2
            # ... and closing tries once more, then says so.


async def test_refusals_are_not_retried_and_say_why(
    service: tuple[str, Service], caplog: pytest.LogCaptureFixture
) -> None:
    base, _ = service
    slow = Retry(attempts=5, first_delay_s=5.0, max_delay_s=5.0)
    caplog.set_level(logging.INFO, logger="adapters.harness")
    async with AsyncMonitorClient(HttpTransport(base), retry=slow) as anonymous:
        await anonymous.report(trials(1))
        with pytest.raises(RequestRejectedError) as unauthorized:
            await anonymous.flush()
        assert unauthorized.value.status == 401
    wrong = HttpTransport(base, token="wrong")
    async with AsyncMonitorClient(wrong, retry=slow) as client:
        with pytest.raises(RequestRejectedError, match="not valid"):
            await client.declare(RunConfig(run="x"))
    async with AsyncMonitorClient(HttpTransport(base, token=TOKEN), retry=slow) as ok:
        with pytest.raises(UnknownRunError):
            await ok.status("missing")
        await ok.report(trials(1))
        await ok.flush()
        with pytest.raises(ConfigError, match="cannot change"):
            await ok.declare(RunConfig(run="r", weights=[0, 0.5, 1]))
        await ok.report(trials(1, run="undeclared"))
        with pytest.raises(RequestRejectedError, match="unknown run") as refused:
            await ok.flush()
        assert refused.value.status == 422 and ok.pending == 0
    assert not retried(caplog)


async def test_the_sync_client_works_over_http(service: tuple[str, Service]) -> None:
    base, running = service

    def script() -> int:
        with MonitorClient(HttpTransport(base, token=TOKEN), batch_size=3) as client:
            client.report(trials(7))
            return client.status("r").trials

    # A plain script blocks its thread; the server needs this one.
    assert await asyncio.to_thread(script) == 6
    assert running.monitor.status("r").trials == 7


# -- MQTT ------------------------------------------------------------------


@pytest.fixture
def mqtt_settings(mosquitto: MosquittoBroker, prefix: str) -> MqttSettings:
    return MqttSettings(
        url=mosquitto.url, topic_prefix=prefix, client_id=f"{prefix}-worker"
    )


@pytest.fixture
async def mqtt_service(
    mqtt_settings: MqttSettings, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Service]:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4))
    caplog.set_level(logging.INFO, logger="adapters.mqtt")
    async with Service(
        monitor, [MqttSource(mqtt_settings)], [MqttPublisher(mqtt_settings)]
    ) as running:

        async def subscribed() -> bool:
            return any("subscribed to" in r.getMessage() for r in caplog.records)

        await eventually(subscribed, timeout_s=10)
        yield running


async def test_mqtt_batches_are_one_message_each_and_status_is_read_back(
    mosquitto: MosquittoBroker, prefix: str, mqtt_service: Service
) -> None:
    transport = MqttTransport(mosquitto.url, topic_prefix=prefix)
    async with AsyncMonitorClient(transport, batch_size=4) as client:
        await client.report(trials(10))
        await client.flush()

        async def counted() -> bool:
            return (await client.status("r")).trials == 10

        await eventually(counted, timeout_s=10)
    assert payloads(mqtt_service) == 3


async def test_mqtt_cannot_plan_declare_or_find_an_unknown_run(
    mosquitto: MosquittoBroker, prefix: str, mqtt_service: Service
) -> None:
    transport = MqttTransport(mosquitto.url, topic_prefix=prefix, status_timeout_s=0.3)
    async with AsyncMonitorClient(transport) as client:
        with pytest.raises(NotImplementedError):
            await client.next("r", 1)
        with pytest.raises(NotImplementedError):
            await client.declare(RunConfig(run="r"))
        with pytest.raises(UnknownRunError):
            await client.status("missing")


async def test_an_unreachable_broker_is_reported_as_unavailable() -> None:
    transport = MqttTransport(f"mqtt://127.0.0.1:{free_port()}")
    with pytest.raises(MonitorUnavailableError, match="gave up"):
        async with AsyncMonitorClient(transport, retry=QUICK) as client:
            await client.report(trials(1))
            with pytest.raises(MonitorUnavailableError) as raised:
                await client.flush()
            assert raised.value.attempts == 3


def test_retry_delays_are_the_bounds_its_waits_are_drawn_under() -> None:
    policy = Retry(attempts=5, first_delay_s=1.0, max_delay_s=3.0)
    assert list(policy.delays()) == [1.0, 2.0, 3.0, 3.0]
    assert list(Retry(attempts=1).delays()) == []
