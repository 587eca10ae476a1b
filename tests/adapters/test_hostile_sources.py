"""Poison messages between good ones on real MQTT and Redis Streams.

Each poison message is dead-lettered alone with a reason; the source keeps
running, good messages around it are counted exactly, nothing stays pending.
Poison includes invalid UTF-8 inside an event's strings, and stream entries
come in every documented form (``data`` or ``event`` JSON, or the event's
fields as stream fields).
"""

from __future__ import annotations

import asyncio
import itertools
import json

import aiomqtt
import httpx
import numpy as np
import pytest
import redis as redis_client
import scorio.eval as oracle
from hypothesis import example, given
from hypothesis import strategies as st
from redis.typing import EncodableT, FieldT

from adapters.mqtt import MqttSource
from adapters.redis import keys
from adapters.redis.entries import entry_payload
from adapters.redis.streams import RedisStreamSource
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings, MqttSettings, RedisStreamSettings
from monitor.http.app import create_app
from monitor.inputs.decode import decode_payload
from monitor.schema import Status
from monitor.service.service import Service
from tests.adapters.test_mqtt import presubscribe
from tests.helpers import eventually, server_examples, serving
from tests.hostile import DEEP, REPRODUCERS, RUN, good_stream, interleave, poison
from tests.services import MosquittoBroker, RedisServer


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# Bytes 0x80-0xFF only: never a quote, backslash or control character, so the
# JSON around them stays well formed and splittable.
bad_utf8 = (
    st.lists(st.integers(0x80, 0xFF), min_size=1, max_size=6)
    .map(bytes)
    .filter(_not_utf8)
)
# Invalid UTF-8 inside one string of an otherwise good event: a value, a
# field name, or (in an array) one event beside a good one.
utf8_poison = st.one_of(
    bad_utf8.map(
        lambda raw: (
            b'{"model": "m' + raw + b'", "question": 0, "trial": "u", "category": 1}'
        )
    ),
    bad_utf8.map(
        lambda raw: (
            b'{"model": "m0", "question": "' + raw + b'", "trial": "u", "category": 1}'
        )
    ),
    bad_utf8.map(
        lambda raw: (
            b'{"model": "m0", "question": 0, "trial": "u", "category": 1, '
            b'"n' + raw + b'": 1}'
        )
    ),
)
hostile = poison | utf8_poison

EXAMPLES = server_examples(3)
_numbers = itertools.count()
# More dead letters than any example makes (an array of 2,000 refused items).
ALL_LETTERS = 100_000
MANY_REFUSED = b"[" + b"1," * 1999 + b"1]"


def assert_counts_match(status: Status, results: np.ndarray) -> None:
    assert status.trials == results.size
    for row in status.models:
        mu, sigma = oracle.bayes(results[int(row.model[1:])])
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=1e-12)


@pytest.mark.slow
@EXAMPLES
@given(st.lists(hostile, min_size=1, max_size=6), st.integers(0, 2**16))
@example(bad=[MANY_REFUSED], seed=1644)
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
    await presubscribe(broker, config)
    expected = np.asarray(results)
    refusals = expected_refusals(messages)
    async with Service(monitor, [MqttSource(config)]) as service:
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:
            for message in messages:
                await client.publish(f"{topic_prefix}/{RUN}/trials", message, qos=1)

        async def settled() -> bool:
            status = await service.status(RUN)
            return status.trials == expected.size and status.rejected == refusals

        await eventually(settled)
        assert_counts_match(await service.status(RUN), expected)
        letters = monitor.store.dead_letters(ALL_LETTERS)
    # One dead letter per refusal: nothing refused twice (redelivered).
    assert len(letters) == refusals and all(letter.reason for letter in letters)


def expected_refusals(messages: list[bytes]) -> int:
    """How many events of the messages a monitor refuses (the decoder's and
    the run's refusals), each message read on the run's channel."""
    with Monitor() as reference:
        reference.configure(RunConfig(run=RUN, question_count=4))
        for message in messages:
            reference.ingest_parsed(decode_payload(message, run=RUN))
        return reference.status(RUN).rejected


@EXAMPLES
@given(
    st.lists(hostile, min_size=1, max_size=6),
    st.integers(0, 2**16),
    st.sampled_from(["data", "event"]),
)
# An array of 2,000 items, each refused: more dead letters than a page.
@example(bad=[MANY_REFUSED], seed=1644, field="data")
def test_redis_stream_poison_entries_are_rejected_alone(
    redis: RedisServer, prefix: str, bad: list[bytes], seed: int, field: str
) -> None:
    key_prefix = f"{prefix}-{next(_numbers)}"
    good, results = good_stream(seed % 5)
    messages = interleave(good, [b"[" * DEEP, REPRODUCERS[2], *bad], seed)
    client = redis_client.Redis(port=redis.port)
    stream = keys.trial_stream(key_prefix, RUN)
    for message in messages:
        client.xadd(stream, {field: message})
    asyncio.run(redis_round(redis, key_prefix, results, expected_refusals(messages)))
    assert int(client.xpending(stream, "monitor")["pending"]) == 0
    # Only a batch that failed as a whole goes to the poison stream.
    assert client.xlen(keys.poison_trials(key_prefix)) == 0


# Stream fields a producer may get wrong: names and values, invalid UTF-8
# among them, each entry beside good ones written as fields too.
field_names = st.sampled_from(
    [b"model", b"question", b"trial", b"category", b"correct", b"cost", b"ts", b"x"]
) | bad_utf8.map(lambda raw: b"f" + raw)
field_values = (
    st.sampled_from([b"1", b"-1", b"1.5", b"true", b"{", b"[[[", b"", b"NaN", b"1e400"])
    | bad_utf8
    | st.binary(max_size=8)
)
poison_fields = st.dictionaries(field_names, field_values, min_size=1, max_size=5)


@EXAMPLES
@given(st.lists(poison_fields, min_size=1, max_size=6), st.integers(0, 2**16))
def test_redis_stream_entries_as_fields_are_judged_alone(
    redis: RedisServer, prefix: str, bad: list[dict[bytes, bytes]], seed: int
) -> None:
    key_prefix = f"{prefix}-{next(_numbers)}"
    good_events, _ = good_stream(seed % 5)
    good = [as_fields(json.loads(event)) for event in good_events]
    entries = interleave_entries(good, bad, seed)
    client = redis_client.Redis(port=redis.port)
    stream = keys.trial_stream(key_prefix, RUN)
    for fields in entries:
        entry: dict[FieldT, EncodableT] = {
            name: value for name, value in fields.items()
        }
        client.xadd(stream, entry)
    # What the monitor makes of each entry as JSON (the form's meaning).
    with Monitor() as reference:
        reference.configure(RunConfig(run=RUN, question_count=4))
        for fields in entries:
            reference.ingest_parsed(decode_payload(entry_payload(fields), run=RUN))
        expected = reference.status(RUN)
    asyncio.run(fields_round(redis, key_prefix, expected))
    assert int(client.xpending(stream, "monitor")["pending"]) == 0
    assert client.xlen(keys.poison_trials(key_prefix)) == 0


def as_fields(event: dict[str, object]) -> dict[bytes, bytes]:
    """A good event as a producer writes it in fields: every value a string."""
    return {
        name.encode(): (value if isinstance(value, str) else json.dumps(value)).encode()
        for name, value in event.items()
    }


def interleave_entries(
    good: list[dict[bytes, bytes]], bad: list[dict[bytes, bytes]], seed: int
) -> list[dict[bytes, bytes]]:
    order = interleave(
        [b"g%d" % i for i in range(len(good))],
        [b"b%d" % i for i in range(len(bad))],
        seed,
    )
    return [(good if key[:1] == b"g" else bad)[int(key[1:])] for key in order]


async def fields_round(server: RedisServer, key_prefix: str, expected: Status) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(
        monitor, [RedisStreamSource(stream_settings(server, key_prefix))]
    ):

        async def settled() -> bool:
            status = monitor.status(RUN)
            return (status.trials, status.rejected) == (
                expected.trials,
                expected.rejected,
            )

        await eventually(settled)
    status = monitor.status(RUN)
    assert [(r.model, r.trials, r.mu, r.sigma) for r in status.models] == [
        (r.model, r.trials, r.mu, r.sigma) for r in expected.models
    ]
    assert len(monitor.store.dead_letters(ALL_LETTERS)) == expected.rejected


def stream_settings(server: RedisServer, key_prefix: str) -> RedisStreamSettings:
    return RedisStreamSettings.model_validate(
        {
            "url": server.url,
            "prefix": key_prefix,
            "consumer": f"{key_prefix}-worker",
            "discover_interval_s": 0.1,
            "block_ms": 50,
        }
    )


async def redis_round(
    server: RedisServer, key_prefix: str, results: object, refusals: int
) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    expected = np.asarray(results)
    source = RedisStreamSource(stream_settings(server, key_prefix))
    async with Service(monitor, [source]) as service:

        async def settled() -> bool:
            status = await service.status(RUN)
            return status.trials == expected.size and status.rejected == refusals

        await eventually(settled)
        client = redis_client.Redis(port=server.port)
        stream = keys.trial_stream(key_prefix, RUN)

        async def acknowledged() -> bool:
            return int(client.xpending(stream, "monitor")["pending"]) == 0

        await eventually(acknowledged)
        assert_counts_match(await service.status(RUN), expected)
    letters = monitor.store.dead_letters(ALL_LETTERS)
    assert len(letters) == refusals and all(letter.reason for letter in letters)
    assert json.dumps([letter.reason for letter in letters])


@pytest.mark.slow
@EXAMPLES
@given(st.lists(utf8_poison, min_size=1, max_size=4), st.integers(0, 2**16))
def test_http_bodies_with_invalid_utf8_count_every_good_event_beside_it(
    bad: list[bytes], seed: int
) -> None:
    """An array of events, some with invalid UTF-8: each of those refused
    (200, a dead letter each), the good ones of the same body counted."""
    good, results = good_stream(seed % 5)
    body = b"[" + b", ".join(interleave(good, bad, seed)) + b"]"
    asyncio.run(http_round(body, np.asarray(results), len(bad)))


async def http_round(body: bytes, expected: np.ndarray, refusals: int) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            response = await client.post(
                f"/runs/{RUN}/trials",
                content=body,
                headers={"Content-Type": "application/json"},
            )
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["accepted"] == expected.size
        reasons = [item["reason"] for item in answer["rejected"]]
        assert len(reasons) == refusals
        assert all(
            reason.startswith("invalid JSON: invalid UTF-8 in the string ")
            for reason in reasons
        )
        assert_counts_match(await service.status(RUN), expected)
        assert len(monitor.store.dead_letters(ALL_LETTERS)) == refusals
