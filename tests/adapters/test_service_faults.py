"""The service as users run it (`serve` processes), under faults.

Each test counts the same trials through a fault and checks the end state is
exact: every trial counted once (0 lost, 0 double counted), mu and sigma equal
to scorio on the true results.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiomqtt
import httpx
import numpy as np
import pytest
import scorio.eval as oracle
from redis import Redis

from adapters.redis import keys as redis_keys
from tests.helpers import (
    eventually,
    trial_events,
    trial_results,
    with_duplicates,
)
from tests.services import (
    MosquittoBroker,
    free_port,
    mosquitto_broker,
    redis_server,
    require_binary,
)

# Every test here takes seconds (the inner loop is -m "not slow").
pytestmark = pytest.mark.slow

COMMAND = [sys.executable, "-m", "monitor.cli", "serve", "--config"]


@contextmanager
def worker(config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as output:
        process = subprocess.Popen(
            [*COMMAND, str(config)], stdout=output, stderr=output
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def write_config(
    folder: Path,
    broker: MosquittoBroker,
    prefix: str,
    name: str = "worker",
    redis_url: str | None = None,
) -> tuple[Path, str]:
    """A `serve` config: SQLite by default, or Redis with a shared subscription."""
    port = free_port()
    config = folder / f"{name}.toml"
    store = (
        f'kind = "redis"\nurl = "{redis_url}"\nprefix = "{prefix}"'
        if redis_url
        else f'kind = "sqlite"\npath = "{folder / "state.db"}"'
    )
    shared = 'shared_group = "workers"' if redis_url else ""
    config.write_text(
        f"""
status_interval_s = 0.02
[store]
{store}
[mqtt]
url = "{broker.url}"
topic_prefix = "{prefix}"
client_id = "{prefix}-{name}"
{shared}
[http]
listen = "127.0.0.1:{port}"
[[runs]]
run = "bench"
question_count = 8
max_trials_per_question = 12
"""
    )
    return config, f"http://127.0.0.1:{port}"


@asynccontextmanager
async def publisher(broker: MosquittoBroker) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client("127.0.0.1", broker.port, identifier=None) as client:
        yield client


async def publish_all(
    broker: MosquittoBroker, topic: str, payloads: list[bytes], start: int = 0
) -> None:
    """Publish at QoS 1, reconnecting and resending on broker failures."""
    index = start
    while index < len(payloads):
        try:
            async with publisher(broker) as client:
                while index < len(payloads):
                    await client.publish(topic, payloads[index], qos=1)
                    index += 1
        except aiomqtt.MqttError:
            await asyncio.sleep(0.2)


async def status_of(base: str) -> dict[str, object] | None:
    try:
        async with httpx.AsyncClient(base_url=base, timeout=2.0) as http:
            response = await http.get("/runs/bench/status")
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def assert_exact(status: dict[str, object] | None, results: np.ndarray) -> None:
    assert status is not None and status["trials"] == results.size
    models = status["models"]
    assert isinstance(models, list)
    for row in models:
        assert (row["mu"], row["sigma"]) == pytest.approx(
            oracle.bayes(results[int(row["model"][1:])]), abs=1e-12
        )


async def wait_counted(base: str, count: int) -> None:
    async def done() -> bool:
        status = await status_of(base)
        return status is not None and status["trials"] == count

    await eventually(done, timeout_s=60)


async def test_kill_9_of_a_worker_mid_stream_then_restart_loses_nothing(
    tmp_path: Path, prefix: str
) -> None:
    results = trial_results(7, models=4, questions=8, trials=12)
    payloads = with_duplicates(trial_events(results), 0.3, seed=8)
    with mosquitto_broker(tmp_path / "broker", persistent=True) as broker:
        config, base = write_config(tmp_path, broker, prefix)
        topic = f"{prefix}/bench/trials"
        with worker(config, tmp_path / "worker.log") as first:
            await eventually(lambda: _up(base), timeout_s=30)
            sending = asyncio.create_task(publish_all(broker, topic, payloads))

            async def some_counted() -> bool:
                status = await status_of(base)
                return status is not None and int(status["trials"]) > results.size // 4  # type: ignore[call-overload]

            await eventually(some_counted)
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
        await sending
        with worker(config, tmp_path / "worker.log"):
            await wait_counted(base, results.size)
            assert_exact(await status_of(base), results)


async def test_a_broker_restart_mid_stream_loses_nothing(
    tmp_path: Path, prefix: str
) -> None:
    results = trial_results(9, models=3, questions=8, trials=12)
    payloads = with_duplicates(trial_events(results), 0.3, seed=10)
    with mosquitto_broker(tmp_path / "broker", persistent=True) as broker:
        config, base = write_config(tmp_path, broker, prefix)
        topic = f"{prefix}/bench/trials"
        with worker(config, tmp_path / "worker.log"):
            await eventually(lambda: _up(base), timeout_s=30)
            half = len(payloads) // 2
            await publish_all(broker, topic, payloads[:half])
            broker.restart()
            await publish_all(broker, topic, payloads, start=half)
            await wait_counted(base, results.size)
            assert_exact(await status_of(base), results)


async def test_a_worker_started_before_its_broker_answers_once_subscribed(
    tmp_path: Path, prefix: str
) -> None:
    # Until the source first subscribed, the broker drops the trials
    # published for it (no session of its id exists yet): a producer that
    # publishes once /healthz answers must find the subscription in place.
    results = trial_results(13, models=3, questions=8, trials=12)
    payloads = with_duplicates(trial_events(results), 0.3, seed=14)
    folder = tmp_path / "broker"
    folder.mkdir()
    binary = require_binary("mosquitto")
    broker = MosquittoBroker(binary, free_port(), folder, persistent=True)
    config, base = write_config(tmp_path, broker, prefix)
    log_file = tmp_path / "worker.log"

    async def backing_off() -> bool:
        # The source failed to connect a few times: its next try is 2 s
        # away, long after the broker below is up.
        lines = log_file.read_text(errors="replace").splitlines()
        return any(
            "MQTT source:" in line and line.endswith("retrying in 2.0 s")
            for line in lines
        )

    try:
        with worker(config, log_file):
            await eventually(backing_off)
            broker.start()
            await eventually(lambda: _up(base), timeout_s=30)
            await publish_all(broker, f"{prefix}/bench/trials", payloads)
            await wait_counted(base, results.size)
            assert_exact(await status_of(base), results)
    finally:
        broker.stop()


async def test_a_redis_restart_mid_stream_keeps_every_count(
    tmp_path: Path, prefix: str
) -> None:
    results = trial_results(11, models=3, questions=8, trials=12)
    payloads = with_duplicates(trial_events(results), 0.3, seed=12)
    with (
        mosquitto_broker(tmp_path / "broker", persistent=True) as broker,
        redis_server(tmp_path / "redis", persistent=True) as redis,
    ):
        config, base = write_config(tmp_path, broker, prefix, redis_url=redis.url)
        topic = f"{prefix}/bench/trials"
        log_file = tmp_path / "worker.log"
        with worker(config, log_file):
            await eventually(lambda: _up(base), timeout_s=30)
            half = len(payloads) // 2
            await publish_all(broker, topic, payloads[:half])
            redis.kill()  # a crash: AOF with fsync always keeps what was acknowledged
            await publish_all(broker, topic, payloads, start=half)

            async def store_down() -> bool:
                # The worker met the dead server and waits to retry.
                return "store unavailable" in log_file.read_text(errors="replace")

            await eventually(store_down)
            redis.start()
            await wait_counted(base, results.size)
            assert_exact(await status_of(base), results)


async def test_two_workers_sharing_a_subscription_count_exactly_and_fire_events_once(
    tmp_path: Path, prefix: str
) -> None:
    rng = np.random.default_rng(13)
    rates = np.array([0.9, 0.5, 0.1])[:, None, None]
    results = (rng.random((3, 8, 12)) < rates).astype(np.int64)
    payloads = with_duplicates(trial_events(results), 0.3, seed=14)
    events: list[dict[str, object]] = []
    with (
        mosquitto_broker(tmp_path / "broker") as broker,
        redis_server(tmp_path / "redis") as redis,
    ):
        first, base = write_config(tmp_path, broker, prefix, "one", redis.url)
        second, other = write_config(tmp_path, broker, prefix, "two", redis.url)
        async with aiomqtt.Client("127.0.0.1", broker.port) as watcher:
            await watcher.subscribe(f"{prefix}/bench/events", qos=1)

            async def collect() -> None:
                async for message in watcher.messages:
                    events.append(json.loads(bytes(message.payload)))

            reader = asyncio.create_task(collect())
            with (
                worker(first, tmp_path / "one.log"),
                worker(second, tmp_path / "two.log"),
            ):
                await eventually(lambda: _up(base), timeout_s=30)
                await eventually(lambda: _up(other), timeout_s=30)
                await publish_all(broker, f"{prefix}/bench/trials", payloads)
                await wait_counted(base, results.size)
                await wait_counted(other, results.size)

                async def stable() -> bool:
                    return any(event["kind"] == "ranking_stable" for event in events)

                await eventually(stable)

                # Every event stored in Redis has come out over MQTT (a
                # duplicate would be stored, and so published, too).
                async def all_published() -> bool:
                    with Redis.from_url(redis.url) as client:
                        stored = int(client.xlen(redis_keys.events(prefix, "bench")))
                    return stored > 0 and len(events) >= stored

                await eventually(all_published)
                # Each worker re-reads the other's counts at its looks (every
                # shared_refresh_s): its status converges to them.
                for url in (base, other):

                    async def exact(url: str = url) -> bool:
                        try:
                            assert_exact(await status_of(url), results)
                        except AssertionError:
                            return False
                        return True

                    await eventually(exact, timeout_s=10)
                assert_exact(await status_of(base), results)
                assert_exact(await status_of(other), results)
            reader.cancel()
    keys = [(event["kind"], event["subject"]) for event in events]
    assert len(keys) == len(set(keys)), keys
    assert {"pair_resolved", "model_done", "ranking_stable"} <= {
        kind for kind, _ in keys
    }
    logs = (tmp_path / "one.log").read_text() + (tmp_path / "two.log").read_text()
    assert logs.count("subscribed to $share/workers/") >= 2


async def _up(base: str) -> bool:
    try:
        async with httpx.AsyncClient(base_url=base, timeout=1.0) as http:
            return (await http.get("/healthz")).status_code == 200
    except httpx.HTTPError:
        return False
