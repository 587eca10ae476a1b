"""The Redis Streams source against a real redis-server, in process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
import redis
import scorio.eval as oracle
from redis.typing import EncodableT, FieldT

from adapters.redis import keys
from adapters.redis.streams import RedisStreamSource
from monitor import Monitor, RunConfig
from monitor.config import RedisStreamSettings
from monitor.interfaces import Payload
from monitor.service.service import Service
from monitor.stores.records import IngestReport
from tests.helpers import eventually, trial_events, trial_results
from tests.services import RedisServer


def settings(server: RedisServer, prefix: str, **values: object) -> RedisStreamSettings:
    return RedisStreamSettings.model_validate(
        {
            "url": server.url,
            "prefix": prefix,
            "consumer": f"{prefix}-worker",
            "discover_interval_s": 0.1,
            "block_ms": 50,
            **values,
        }
    )


def test_stream_keys_carry_the_run_as_a_hash_tag() -> None:
    assert keys.trial_stream("scorio", "aime25") == "scorio:{aime25}:trials"
    assert keys.run_of_trial_stream("scorio:{aime25}:trials") == "aime25"


async def test_entries_added_with_xadd_are_counted_exactly_and_acknowledged(
    redis: RedisServer, prefix: str
) -> None:
    results = trial_results(3, models=2, questions=5, trials=4)
    events = trial_events(results)
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "bench")
    for event in events[:10]:
        client.xadd(stream, {"data": json.dumps(event)})
    client.xadd(stream, {"data": json.dumps(events[10:20])})  # a batch entry
    for event in events[20:]:
        client.xadd(stream, {"data": json.dumps(event)})
    client.xadd(stream, {"data": json.dumps(events[0])})  # a repeat delivery
    monitor = Monitor()
    monitor.configure(RunConfig(run="bench", question_count=5))
    async with Service(monitor, [RedisStreamSource(settings(redis, prefix))]):

        async def counted() -> bool:
            return monitor.status("bench").trials == results.size

        await eventually(counted)

        async def acknowledged() -> bool:
            return int(client.xpending(stream, "monitor")["pending"]) == 0

        await eventually(acknowledged)
    status = monitor.status("bench")
    assert status.duplicates == 1
    for row in status.models:
        assert (row.mu, row.sigma) == pytest.approx(
            oracle.bayes(results[int(row.model[1:])]), abs=1e-12
        )


async def test_malformed_entries_are_dead_lettered_with_a_reason(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    client.xadd(stream, {"data": "{oops"})
    client.xadd(stream, {"model": "a", "question": "1", "trial": "0", "category": "x"})
    client.xadd(
        stream,
        {
            "data": json.dumps(
                {"model": "a", "question": 1, "trial": 1, "correct": True}
            )
        },
    )
    monitor = Monitor()
    async with Service(monitor, [RedisStreamSource(settings(redis, prefix))]):

        async def counted() -> bool:
            return "r" in monitor.runs and monitor.status("r").trials == 1

        await eventually(counted)
    reasons = [letter.reason for letter in monitor.store.dead_letters()]
    assert any(reason.startswith("invalid JSON") for reason in reasons)
    assert any(
        'category: must be an integer >= 0; got "x"' in reason for reason in reasons
    )


async def test_entries_a_dead_consumer_left_pending_are_claimed(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    client.xgroup_create(stream, "monitor", id="0", mkstream=True)
    for trial in range(5):
        client.xadd(
            stream,
            {
                "data": json.dumps(
                    {"model": "a", "question": 1, "trial": trial, "correct": True}
                )
            },
        )
    # A worker reads them and dies before acknowledging.
    client.xreadgroup("monitor", "crashed-worker", {stream: ">"}, count=10)
    monitor = Monitor()
    source = RedisStreamSource(settings(redis, prefix, claim_idle_ms=200))
    async with Service(monitor, [source]):

        async def counted() -> bool:
            return "r" in monitor.runs and monitor.status("r").trials == 5

        async def acknowledged() -> bool:
            return int(client.xpending(stream, "monitor")["pending"]) == 0

        await eventually(counted)
        # The acknowledgement follows the commit: wait for it, not for a clock.
        await eventually(acknowledged)


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
        return IngestReport(0, 0, 0, (), ())


async def test_a_poison_entry_goes_to_the_dead_letter_stream(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    client.xadd(stream, {"data": "poison"})
    source = RedisStreamSource(
        settings(redis, prefix, claim_idle_ms=100, max_deliveries=2, batch_size=1)
    )
    sink = FailingOn(b"poison")

    async def dead_lettered() -> bool:
        return client.xlen(keys.poison_trials(prefix)) == 1

    task = asyncio.create_task(supervised(source, sink))
    try:
        await eventually(dead_lettered, timeout_s=20)
        client.xadd(stream, {"data": "fine"})

        async def went_on() -> bool:
            return b"fine" in sink.counted

        await eventually(went_on)
    finally:
        task.cancel()
    entries = client.xrange(keys.poison_trials(prefix))
    assert isinstance(entries, list) and len(entries) == 1
    fields = entries[0][1]
    assert fields is not None and fields[b"reason"] == b"failed 3 deliveries"
    assert int(client.xpending(stream, "monitor")["pending"]) == 0


async def supervised(source: RedisStreamSource, sink: FailingOn) -> None:
    """Restart the source after each crash, as the service's supervisor does."""
    while True:
        try:
            await source.run(sink)
        except RuntimeError:
            await asyncio.sleep(0.05)


def redis_client(server: RedisServer) -> redis.Redis:
    return redis.Redis(port=server.port)


async def test_a_poison_entry_whose_fields_are_not_utf8_reaches_the_dead_letter_stream(
    redis: RedisServer, prefix: str
) -> None:
    """Moving it aside must not fail on the bytes it holds."""
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    client.xadd(stream, {"model": b"poison\xff", "question": "1"})
    source = RedisStreamSource(
        settings(redis, prefix, claim_idle_ms=100, max_deliveries=2, batch_size=1)
    )
    task = asyncio.create_task(supervised(source, FailingOn(b"poison")))
    try:

        async def dead_lettered() -> bool:
            return client.xlen(keys.poison_trials(prefix)) == 1

        await eventually(dead_lettered, timeout_s=20)
    finally:
        task.cancel()
    entries = client.xrange(keys.poison_trials(prefix))
    assert isinstance(entries, list) and entries[0][1] is not None
    assert entries[0][1][b"data"] == b'{"model":"poison\xff","question":"1"}'
    assert int(client.xpending(stream, "monitor")["pending"]) == 0


DOCUMENTED_FORMS: list[dict[FieldT, EncodableT]] = [
    # event '<json>', as the documentation writes it, and data '<json>'.
    {"event": json.dumps({"model": "a", "question": 1, "trial": 0, "category": 1})},
    {"data": json.dumps({"model": "a", "question": 1, "trial": 1, "correct": False})},
    {
        "event": json.dumps(
            [{"model": "b", "question": q, "trial": 0, "category": 1} for q in range(2)]
        )
    },
    # The event's fields as stream fields: Redis carries only strings.
    {"model": "a", "question": "2", "trial": "0", "category": "1"},
    {
        "model": "a",
        "question": "2",
        "trial": "1",
        "correct": "true",
        "cost": '{"tokens": 812, "seconds": 4.2}',
        "ts": "2026-11-27T10:00:00Z",
    },
    {
        "run": "r",
        "model": "b",
        "question": "3",
        "trial": "7",
        "category": "0",
        "prior": "false",
        "ts": "1764237600.5",
    },
]


async def test_every_documented_entry_form_is_counted(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    for fields in DOCUMENTED_FORMS:
        client.xadd(stream, fields)
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", weights=[0.0, 1.0]))
    async with Service(monitor, [RedisStreamSource(settings(redis, prefix))]):

        async def counted() -> bool:
            return monitor.status("r").trials == 7

        await eventually(counted)
    status = monitor.status("r")
    assert status.rejected == 0 and not monitor.store.dead_letters()
    assert {row.model: row.trials for row in status.models} == {"a": 4, "b": 3}
    assert {row.model: row.cost_tokens for row in status.models}["a"] == 812


async def test_invalid_utf8_in_any_entry_form_is_dead_lettered_alone(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    good: list[dict[FieldT, EncodableT]] = [
        {"data": json.dumps({"model": "a", "question": 1, "trial": t, "category": 1})}
        for t in range(4)
    ]
    bad: list[dict[FieldT, EncodableT]] = [
        {"data": b'{"model": "a\xff", "question": 1, "trial": 9, "category": 1}'},
        {
            "event": b'[{"model": "a", "question": 1, "trial": 8, "category": 1},'
            b' {"model": "\xc3", "question": 1, "trial": 9, "category": 1}]'
        },
        {"model": b"a\xff", "question": b"1", "trial": b"9", "category": b"1"},
        {"model": b"a", b"qu\xffestion": b"1", "trial": b"9", "category": b"1"},
    ]
    # A stream whose run id is not UTF-8 is never read (said once in the log).
    client.xadd(
        keys.trial_stream(prefix, "r").replace("{r}", "{r\xff}").encode("latin-1"),
        {"data": b"{}"},
    )
    for good_fields, bad_fields in zip(good, bad, strict=True):
        client.xadd(stream, good_fields)
        client.xadd(stream, bad_fields)
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", weights=[0.0, 1.0]))
    async with Service(monitor, [RedisStreamSource(settings(redis, prefix))]):

        async def settled() -> bool:
            status = monitor.status("r")
            return status.trials == 5 and status.rejected == 4

        await eventually(settled)

        async def acknowledged() -> bool:
            return int(client.xpending(stream, "monitor")["pending"]) == 0

        await eventually(acknowledged)
    reasons = [letter.reason for letter in monitor.store.dead_letters()]
    assert reasons == [
        'invalid JSON: invalid UTF-8 in the string "a\\xff"',
        'invalid JSON: invalid UTF-8 in the string "\\xc3"',
        'invalid JSON: invalid UTF-8 in the string "a\\xff"',
        'invalid JSON: invalid UTF-8 in the string "qu\\xffestion"',
    ]
    assert client.exists(keys.poison_trials(prefix)) == 0


async def test_after_a_crash_only_the_entry_that_fails_again_is_dead_lettered(
    redis: RedisServer, prefix: str
) -> None:
    """The batch that crashed is read again one entry at a time: the good
    entries of it count, the failing one alone goes to the poison stream."""
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    for data in (b"good-1", b"poison", b"good-2"):
        client.xadd(stream, {"data": data})
    source = RedisStreamSource(settings(redis, prefix, max_deliveries=2))
    sink = FailingOn(b"poison")
    task = asyncio.create_task(supervised(source, sink))
    try:

        async def went_on() -> bool:
            return sink.counted == [b"good-1", b"good-2"]

        await eventually(went_on, timeout_s=20)

        async def dead_lettered() -> bool:
            return client.xlen(keys.poison_trials(prefix)) == 1

        await eventually(dead_lettered, timeout_s=20)
    finally:
        task.cancel()
    entries = client.xrange(keys.poison_trials(prefix))
    assert isinstance(entries, list) and entries[0][1] is not None
    assert entries[0][1][b"data"] == b"poison"
    assert int(client.xpending(stream, "monitor")["pending"]) == 0


async def test_a_pending_entry_deleted_from_the_stream_is_let_go(
    redis: RedisServer, prefix: str
) -> None:
    client = redis_client(redis)
    stream = keys.trial_stream(prefix, "r")
    client.xgroup_create(stream, "monitor", id="0", mkstream=True)
    gone = client.xadd(stream, {"data": b"taken, then deleted"})
    config = settings(redis, prefix)
    client.xreadgroup("monitor", config.consumer, {stream: ">"})  # a crash after
    client.xdel(stream, gone)
    client.xadd(stream, {"data": b"next"})
    sink = FailingOn(b"never")
    task = asyncio.create_task(supervised(RedisStreamSource(config), sink))
    try:

        async def went_on() -> bool:
            return sink.counted == [b"next"]

        await eventually(went_on, timeout_s=20)
    finally:
        task.cancel()
    assert int(client.xpending(stream, "monitor")["pending"]) == 0
