"""The MQTT source and publisher against a real mosquitto, in process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Sequence
from pathlib import Path

import aiomqtt
import httpx
import pytest
import scorio.eval as oracle

from adapters.mqtt import MqttPublisher, MqttSource, run_of, trials_topic
from adapters.mqtt.source import MAX_ATTEMPTS
from adapters.prometheus import metrics_renderer
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings, MqttSettings
from monitor.errors import SourceConflictError
from monitor.http.app import create_app
from monitor.interfaces import Payload
from monitor.service.service import Service
from monitor.stores.records import IngestReport
from monitor.stores.sqlite import SqliteStore
from tests.helpers import (
    eventually,
    serving,
    trial_events,
    trial_results,
    with_duplicates,
)
from tests.services import MosquittoBroker


def settings(broker: MosquittoBroker, prefix: str, **values: object) -> MqttSettings:
    return MqttSettings.model_validate(
        {
            "url": broker.url,
            "topic_prefix": prefix,
            "client_id": f"{prefix}-worker",
            **values,
        }
    )


async def presubscribe(broker: MosquittoBroker, config: MqttSettings) -> None:
    """The source's persistent session, subscribed before the source starts.

    The broker keeps what is published meanwhile for the session (a shared
    subscription deals to it too), as for a restarted worker, so a test may
    publish at once instead of waiting for the source to subscribe.
    """
    async with aiomqtt.Client(
        "127.0.0.1", broker.port, identifier=config.identifier, clean_session=False
    ) as early:
        await early.subscribe(trials_topic(config), qos=1)


async def publish(broker: MosquittoBroker, topic: str, payloads: list[bytes]) -> None:
    async with aiomqtt.Client("127.0.0.1", broker.port) as client:
        for payload in payloads:
            await client.publish(topic, payload, qos=1)


def correct_trials(count: int) -> list[bytes]:
    """``count`` right answers of model ``a``, one per question, as JSON."""
    return [
        json.dumps({"model": "a", "question": q, "trial": 0, "correct": True}).encode()
        for q in range(count)
    ]


class Recorder:
    """A sink that keeps what it is offered; with ``hold`` it never returns
    (a worker that dies before committing)."""

    def __init__(self, hold: bool) -> None:
        self.seen: list[bytes] = []
        self._hold = hold

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        self.seen += [payload.data for payload in payloads]
        if self._hold:
            await asyncio.Event().wait()
        return IngestReport(len(payloads), 0, 0, (), ())


async def test_messages_not_committed_are_delivered_again_after_a_crash(
    mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = settings(mosquitto, prefix)
    payloads = correct_trials(5)
    crashed = Recorder(hold=True)
    await presubscribe(mosquitto, config)
    first = asyncio.create_task(MqttSource(config).run(crashed))
    await publish(mosquitto, f"{prefix}/r/trials", payloads)

    async def offered() -> bool:
        return bool(crashed.seen)

    await eventually(offered)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    restarted = Recorder(hold=False)
    second = asyncio.create_task(MqttSource(config).run(restarted))

    async def all_again() -> bool:
        return set(restarted.seen) == set(payloads)

    try:
        await eventually(all_again)
    finally:
        second.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await second


async def test_what_is_published_once_the_source_says_it_subscribed_arrives(
    mosquitto: MosquittoBroker, prefix: str
) -> None:
    # No session of this id exists before: the broker drops what is published
    # until the source subscribed, and keeps what is published after.
    config = settings(mosquitto, prefix)
    payloads = correct_trials(5)
    source = MqttSource(config)
    recorder = Recorder(hold=False)
    assert not source.is_subscribed
    running = asyncio.create_task(source.run(recorder))

    async def subscribed() -> bool:
        return source.is_subscribed

    async def all_seen() -> bool:
        return set(recorder.seen) == set(payloads)

    try:
        await eventually(subscribed)
        await publish(mosquitto, f"{prefix}/r/trials", payloads)
        await eventually(all_seen)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


def test_topics() -> None:
    assert run_of("scorio/aime25/trials") == "aime25"
    assert run_of("a/b/run-1/trials") == "run-1"
    shared = MqttSettings(url="mqtt://h", shared_group="workers")
    assert trials_topic(shared) == "$share/workers/scorio/+/trials"


async def test_trials_over_mqtt_appear_in_the_published_status_and_in_metrics(
    mosquitto: MosquittoBroker, prefix: str, tmp_path: Path
) -> None:
    results = trial_results(1, models=3, questions=6, trials=5)
    payloads = with_duplicates(trial_events(results), 0.3, seed=2)
    config = settings(mosquitto, prefix)
    monitor = Monitor(SqliteStore(tmp_path / "state.db"))
    monitor.configure(RunConfig(run="bench", question_count=6))
    service = Service(monitor, [MqttSource(config)], [MqttPublisher(config)])
    statuses: list[dict[str, object]] = []

    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as watcher:
        await watcher.subscribe(f"{prefix}/bench/status", qos=1)

        async def watch() -> None:
            async for message in watcher.messages:
                statuses.append(json.loads(bytes(message.payload)))

        reader = asyncio.create_task(watch())
        await presubscribe(mosquitto, config)
        async with service:
            await publish(mosquitto, f"{prefix}/bench/trials", payloads)

            async def all_counted() -> bool:
                return bool(statuses) and statuses[-1]["trials"] == results.size

            await eventually(all_counted)
            app = create_app(
                service, HttpSettings(), metrics_renderer(lambda: service.snapshot)
            )
            async with serving(app) as base, httpx.AsyncClient(base_url=base) as http:
                metrics = (await http.get("/metrics")).text
        reader.cancel()
    samples = {
        (line.split("{")[0], line.split('model="')[1].split('"')[0]): float(
            line.rsplit(" ", 1)[1]
        )
        for line in metrics.splitlines()
        if line.startswith("scorio_model_") and 'model="' in line
    }
    last = statuses[-1]
    assert last["duplicates"] == len(payloads) - results.size
    models = last["models"]
    assert isinstance(models, list)
    for row in models:
        mu, sigma = oracle.bayes(results[int(row["model"][1:])])
        assert (row["mu"], row["sigma"]) == pytest.approx((mu, sigma), abs=1e-12)
        assert samples[("scorio_model_score", row["model"])] == pytest.approx(
            mu, abs=1e-12
        )
    assert f"scorio_trials_ingested_total {float(results.size)}" in metrics


async def test_malformed_payloads_are_dead_lettered_and_the_service_keeps_going(
    mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = settings(mosquitto, prefix)
    monitor = Monitor()
    service = Service(monitor, [MqttSource(config)])
    good = json.dumps(
        {"model": "a", "question": 1, "trial": 0, "correct": True}
    ).encode()
    bad = [
        b"{not json",
        b"[]",
        json.dumps({"model": "a"}).encode(),
        b'{"run": "other", "model": "a", "question": 1, "trial": 0, "correct": true}',
    ]
    await presubscribe(mosquitto, config)
    async with service:
        await publish(mosquitto, f"{prefix}/r/trials", [*bad, good])

        async def counted() -> bool:
            return "r" in monitor.runs and monitor.status("r").trials == 1

        await eventually(counted)
        letters = monitor.store.dead_letters()
    reasons = [letter.reason for letter in letters]
    assert any(reason.startswith("invalid JSON") for reason in reasons)
    assert any("empty batch" in reason for reason in reasons)
    assert any("question: missing field" in reason for reason in reasons)
    assert any("arrived on run 'r'" in reason for reason in reasons)
    assert all(letter.source == f"mqtt:{prefix}/r/trials" for letter in letters)
    assert service.snapshot.rejected["invalid_json"] == 1


async def test_two_workers_under_one_client_id_end_with_one_stopping_clearly(
    mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = settings(mosquitto, prefix)
    services = [Service(Monitor(), [MqttSource(config)]) for _ in range(2)]
    async with services[0], services[1]:
        waits = [asyncio.ensure_future(service.failed()) for service in services]
        done, pending = await asyncio.wait(
            waits, timeout=30, return_when=asyncio.FIRST_COMPLETED
        )
        # The other one keeps the id and its work: a trial sent now is
        # counted there, with no more back and forth.
        survivor = services[1 - waits.index(next(iter(done)))]
        good = {"model": "a", "question": 1, "trial": 0, "correct": True}
        await publish(mosquitto, f"{prefix}/r/trials", [json.dumps(good).encode()])

        async def counted_by_the_survivor() -> bool:
            monitor = survivor.monitor
            return "r" in monitor.runs and monitor.status("r").trials == 1

        await eventually(counted_by_the_survivor)
        assert len(done) == 1 and not any(task.done() for task in pending)
        for task in pending:
            task.cancel()
    failure = done.pop().result()
    assert isinstance(failure, SourceConflictError)
    assert str(failure).startswith(
        f"another connection took MQTT client id '{prefix}-worker' ("
    )
    assert "two workers use one client id" in str(failure)


def test_a_per_process_client_id_has_no_persistent_session() -> None:
    stable = MqttSettings(url="mqtt://h", client_id="w-{hostname}")
    per_process = MqttSettings(url="mqtt://h", client_id="w-{hostname}-{pid}")
    assert stable.identifier == f"w-{socket.gethostname()}" and stable.persistent
    assert per_process.identifier == f"w-{socket.gethostname()}-{os.getpid()}"
    assert not per_process.persistent
    assert MqttSettings(url="mqtt://h").identifier == (
        f"scorio-monitor-{socket.gethostname()}"
    )


async def test_invalid_utf8_on_a_shared_subscription_stalls_no_worker(
    mosquitto: MosquittoBroker, prefix: str
) -> None:
    """Two workers share the trials; events with invalid UTF-8 among them
    are each refused once, and every good one is counted by one worker."""
    configs = [
        settings(
            mosquitto,
            prefix,
            shared_group=f"{prefix}-group",
            client_id=f"{prefix}-worker-{number}",
        )
        for number in range(2)
    ]
    for config in configs:
        await presubscribe(mosquitto, config)
    good = correct_trials(200)
    bad: list[bytes] = []
    for copy in range(7):
        bad += [
            b'{"model": "a\xff", "question": 1, "trial": 0, "correct": true}',
            b'{"model": "a", "question": "\xc3", "trial": 0, "correct": true}',
            # An array: its good event counts, the other is refused.
            b'[{"model": "a", "question": %d, "trial": 0, "correct": true}, '
            b'{"model": "\xed\xa0\x80", "question": 1, "trial": 0, "correct": true}]'
            % (900 + copy),
        ]
    mixed: list[bytes] = []
    for index, message in enumerate(good):
        mixed += [message, *bad[index : index + 1]]
    monitors = [Monitor(), Monitor()]
    services = [
        Service(monitor, [MqttSource(config)])
        for monitor, config in zip(monitors, configs, strict=True)
    ]
    async with services[0], services[1]:
        await publish(mosquitto, f"{prefix}/r/trials", mixed)

        async def settled() -> bool:
            counted = sum(
                monitor.status("r").trials
                for monitor in monitors
                if "r" in monitor.runs
            )
            refused = sum(sum(s.snapshot.rejected.values()) for s in services)
            return counted == 200 + 7 and refused == 21

        await eventually(settled)
    letters = [
        letter for monitor in monitors for letter in monitor.store.dead_letters()
    ]
    assert len(letters) == 21
    assert all(
        letter.reason.startswith("invalid JSON: invalid UTF-8 in the string")
        for letter in letters
    )
    # Both workers had their share of the traffic.
    assert all(service.snapshot.ingested > 0 for service in services)


class FailingOn:
    """A sink that fails on one marked payload, as a crashing bug would."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.counted: list[bytes] = []

    async def ingest_payloads(
        self, payloads: Sequence[Payload], cursor: tuple[str, str] | None = None
    ) -> IngestReport:
        if any(self.marker in payload.data for payload in payloads):
            raise RuntimeError("processing crashed")
        self.counted.extend(payload.data for payload in payloads)
        return IngestReport(len(payloads), 0, 0, (), ())


async def test_a_message_that_keeps_failing_is_not_delivered_for_ever(
    mosquitto: MosquittoBroker, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A commit that fails (a bug, not bad input) holds back only the
    message that fails, and that one only for ``MAX_ATTEMPTS`` attempts."""
    config = settings(mosquitto, prefix)
    source = MqttSource(config)
    sink = FailingOn(b"poison")
    await presubscribe(mosquitto, config)
    messages = [b"good-1", b"poison", b"good-2"]
    await publish(mosquitto, f"{prefix}/r/trials", messages)

    async def supervised() -> None:
        """Restart the source after each crash, as the service does."""
        while True:
            try:
                await source.run(sink)
            except RuntimeError:
                continue

    task = asyncio.create_task(supervised())
    try:

        async def went_on() -> bool:
            return sink.counted == [b"good-1", b"good-2"]

        await eventually(went_on)
        await publish(mosquitto, f"{prefix}/r/trials", [b"good-3"])

        async def still_going() -> bool:
            return sink.counted[-1:] == [b"good-3"]

        await eventually(still_going)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert sink.counted == [b"good-1", b"good-2", b"good-3"]
    told = [
        r.getMessage() for r in caplog.records if "without counting" in r.getMessage()
    ]
    assert told == [
        f"message on {prefix}/r/trials (6 bytes) failed to commit {MAX_ATTEMPTS} "
        "times; acknowledged without counting it"
    ]
