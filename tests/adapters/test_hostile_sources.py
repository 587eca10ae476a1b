"""Poison messages between good ones on real MQTT and Redis Streams (issue 15).

Each poison message is dead-lettered alone with a reason; the source keeps
running, good messages around it are counted exactly, nothing stays pending.
"""

from __future__ import annotations

import asyncio
import itertools
import json

import aiomqtt
import numpy as np
import pytest
import redis as redis_client
import scorio.eval as oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.mqtt import MqttSource
from adapters.redis import keys
from adapters.redis.streams import RedisStreamSource
from monitor import Monitor, RunConfig
from monitor.config import MqttSettings, RedisStreamSettings
from monitor.schema import Status
from monitor.service.service import Service
from tests.helpers import eventually
from tests.hostile import DEEP, REPRODUCERS, RUN, good_stream, interleave, poison
from tests.services import MosquittoBroker, RedisServer

EXAMPLES = settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
_numbers = itertools.count()


def assert_counts_match(status: Status, results: np.ndarray) -> None:
    assert status.trials == results.size
    for row in status.models:
        mu, sigma = oracle.bayes(results[int(row.model[1:])])
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=1e-12)


@EXAMPLES
@given(st.lists(poison, min_size=1, max_size=6), st.integers(0, 2**16))
def test_mqtt_poison_messages_are_rejected_alone(
    mosquitto: MosquittoBroker, prefix: str, bad: list[bytes], seed: int
) -> None:
    topic_prefix = f"{prefix}-{next(_numbers)}"
    good, results = good_stream(seed % 5)
    messages = interleave(good, [b"[" * DEEP, *bad], seed)
    asyncio.run(mqtt_round(mosquitto, topic_prefix, messages, results))


async def mqtt_round(
    broker: MosquittoBroker, topic_prefix: str, messages: list[bytes], results: object
) -> None:
    config = MqttSettings.model_validate(
        {
            "url": broker.url,
            "topic_prefix": topic_prefix,
            "client_id": f"{topic_prefix}-worker",
        }
    )
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor, [MqttSource(config)]) as service:
        await asyncio.sleep(0.3)  # the source subscribes
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:
            for message in messages:
                await client.publish(f"{topic_prefix}/{RUN}/trials", message, qos=1)
        expected = np.asarray(results)

        async def counted() -> bool:
            return (await service.status(RUN)).trials == expected.size

        await eventually(counted)
        await asyncio.sleep(0.2)  # a redelivered poison would show up now
        assert_counts_match(await service.status(RUN), expected)
        letters = monitor.store.dead_letters()
    poison_count = len(messages) - expected.size
    assert len(letters) >= poison_count and all(letter.reason for letter in letters)


@EXAMPLES
@given(st.lists(poison, min_size=1, max_size=6), st.integers(0, 2**16))
def test_redis_stream_poison_entries_are_rejected_alone(
    redis: RedisServer, prefix: str, bad: list[bytes], seed: int
) -> None:
    key_prefix = f"{prefix}-{next(_numbers)}"
    good, results = good_stream(seed % 5)
    messages = interleave(good, [b"[" * DEEP, REPRODUCERS[2], *bad], seed)
    client = redis_client.Redis(port=redis.port)
    stream = keys.trial_stream(key_prefix, RUN)
    for message in messages:
        client.xadd(stream, {"data": message})
    asyncio.run(redis_round(redis, key_prefix, results))
    assert int(client.xpending(stream, "monitor")["pending"]) == 0
    # Only a batch that failed as a whole goes to the poison stream.
    assert client.xlen(keys.poison_trials(key_prefix)) == 0


async def redis_round(server: RedisServer, key_prefix: str, results: object) -> None:
    config = RedisStreamSettings.model_validate(
        {
            "url": server.url,
            "prefix": key_prefix,
            "consumer": f"{key_prefix}-worker",
            "discover_interval_s": 0.1,
            "block_ms": 50,
        }
    )
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    expected = np.asarray(results)
    async with Service(monitor, [RedisStreamSource(config)]) as service:

        async def counted() -> bool:
            return (await service.status(RUN)).trials == expected.size

        await eventually(counted)
        client = redis_client.Redis(port=server.port)
        stream = keys.trial_stream(key_prefix, RUN)

        async def acknowledged() -> bool:
            return int(client.xpending(stream, "monitor")["pending"]) == 0

        await eventually(acknowledged)
        assert_counts_match(await service.status(RUN), expected)
    letters = monitor.store.dead_letters()
    assert letters and all(letter.reason for letter in letters)
    assert json.dumps([letter.reason for letter in letters])
