"""Trials from Redis Streams: one consumer group per run's trial stream.

Producers ``XADD <prefix>:{<run>}:trials * event '<json event or array>'``
(``data`` is the same field under its older name), or the event's fields as
stream fields, their values read as the JSON they spell
(:mod:`adapters.redis.entries`); every entry goes to the one decoder, which
refuses a bad one alone (invalid UTF-8 included). Each
worker reads with ``XREADGROUP`` in batches and ``XACK``s an entry only after
the monitor committed it. Entries a dead worker left pending are taken over
with ``XAUTOCLAIM`` once idle longer than ``claim_idle_ms``. An entry that
keeps failing (delivered more than ``max_deliveries`` times) is moved to the
dead-letter stream ``<prefix>:deadletter:trials`` with the reason, then
acknowledged, so it cannot block the group.

Streams are found by ``SCAN`` for the key pattern every
``discover_interval_s``, so runs need no declaration here. Library errors
stop at this module: a lost connection is a logged reconnect with backoff.

On Redis Cluster (``cluster = true``) each run's stream lives in its run's
slot, so one ``XREADGROUP`` cannot name them all: each stream is read on
its own without blocking, and the source sleeps ``block_ms`` when none had
anything. ``SCAN`` runs on every master.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import redis.asyncio as redis_async
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError, ResponseError

from adapters.redis import keys
from adapters.redis.entries import entry_payload
from monitor.config import RedisStreamSettings
from monitor.interfaces import IngestSink, Payload
from monitor.service.retry import Backoff, ingest_durably

log = logging.getLogger(__name__)

_DEAD_LETTER_MAXLEN = 100_000

Entry = tuple[bytes, dict[bytes, bytes]]
Client = redis_async.Redis | RedisCluster


class RedisStreamSource:
    """A consumer in each run stream's group; acknowledges after commit."""

    def __init__(self, settings: RedisStreamSettings) -> None:
        self._settings = settings
        self._streams: list[str] = []
        self._last_discovery = -float("inf")
        self._last_claim = -float("inf")
        # Stream keys whose name is not UTF-8, said once each.
        self._unreadable: set[bytes] = set()

    @property
    def name(self) -> str:
        return "redis-stream"

    async def run(self, sink: IngestSink) -> None:
        backoff = Backoff()
        while True:
            client: Client = (
                RedisCluster.from_url(self._settings.url)
                if self._settings.cluster
                else redis_async.from_url(self._settings.url)
            )
            try:
                async with client:
                    backoff.reset()
                    self._streams = []
                    self._last_discovery = -float("inf")
                    while True:
                        await self._step(client, sink)
            except (RedisError, RedisClusterException) as exc:
                await backoff.wait("Redis stream source", exc)

    async def _step(self, client: Client, sink: IngestSink) -> None:
        now = time.monotonic()
        if now - self._last_discovery >= self._settings.discover_interval_s:
            await self._discover(client, sink)
            self._last_discovery = now
        if not self._streams:
            await asyncio.sleep(min(self._settings.block_ms / 1000, 1.0))
            return
        if now - self._last_claim >= self._settings.claim_idle_ms / 2000:
            for stream in self._streams:
                await self._claim_abandoned(client, sink, stream)
            self._last_claim = now
        if not self._settings.cluster:
            await self._read(client, sink, {stream: ">" for stream in self._streams})
            return
        processed = 0
        for stream in self._streams:
            processed += await self._read(client, sink, {stream: ">"}, block=False)
        if not processed:
            await asyncio.sleep(self._settings.block_ms / 1000)

    async def _read(
        self,
        client: Client,
        sink: IngestSink,
        streams: dict[str, str],
        block: bool = True,
        count: int | None = None,
    ) -> int:
        """Read one batch per stream at the given ids; returns entries processed."""
        wanted: dict[bytes | str | memoryview, int | bytes | str | memoryview] = {}
        wanted.update(streams)
        answer = await client.xreadgroup(
            self._settings.group,
            self._settings.consumer,
            wanted,
            count=self._settings.batch_size if count is None else count,
            block=(
                self._settings.block_ms if block and ">" in streams.values() else None
            ),
        )
        processed = 0
        for stream_name, entries in _stream_entries(answer):
            recovered = streams.get(stream_name) != ">"
            await self._process(client, sink, stream_name, entries, recovered=recovered)
            processed += len(entries)
        return processed

    async def _discover(self, client: Client, sink: IngestSink) -> None:
        pattern = keys.trial_stream_pattern(self._settings.prefix)
        found = set(self._streams)
        async for key in client.scan_iter(match=pattern, _type="stream", count=1000):
            if isinstance(key, bytes) and not _is_utf8(key):
                if key not in self._unreadable:
                    self._unreadable.add(key)
                    log.error(
                        "stream %r is not read: its name is not UTF-8, so it "
                        "names no run; XADD to a key whose run id is UTF-8",
                        key,
                    )
                continue
            name = _text(key)
            if name not in found:
                await self._join_group(client, name)
                found.add(name)
                # Entries this consumer took but never acknowledged (a crash):
                # read our pending list first, from id 0, one entry at a time,
                # so an entry that fails again is delivered again alone and
                # only it reaches max_deliveries (then the poison stream).
                while await self._read(client, sink, {name: "0"}, count=1):
                    pass
        self._streams = sorted(found)

    async def _join_group(self, client: Client, stream: str) -> None:
        try:
            await client.xgroup_create(
                stream, self._settings.group, id="0", mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _claim_abandoned(
        self, client: Client, sink: IngestSink, stream: str
    ) -> None:
        start = "0-0"
        while True:
            answer = await client.xautoclaim(
                stream,
                self._settings.group,
                self._settings.consumer,
                min_idle_time=self._settings.claim_idle_ms,
                start_id=start,
                count=self._settings.batch_size,
            )
            start, entries = _text(answer[0]), answer[1]
            if entries:
                await self._process(client, sink, stream, entries, recovered=True)
            if start == "0-0" or not entries:
                return

    async def _process(
        self,
        client: Client,
        sink: IngestSink,
        stream: str,
        entries: Sequence[Entry],
        recovered: bool = False,
    ) -> None:
        # Pending reads return a deleted entry with no fields (redis-py: an
        # empty dict, or None); XADD never makes one. Nothing to count, so
        # it is acknowledged, not dead-lettered.
        deleted = [entry[0] for entry in entries if entry and not entry[1]]
        if deleted:
            await client.xack(stream, self._settings.group, *deleted)
        entries = [entry for entry in entries if entry and entry[1]]
        if not entries:
            return
        if recovered:
            entries = await self._drop_poison(client, stream, entries)
            if not entries:
                return
        run = keys.run_of_trial_stream(stream)
        payloads = [
            Payload(
                data=entry_payload(fields),
                source=f"redis:{stream}:{_text(entry_id)}",
                run=run,
            )
            for entry_id, fields in entries
        ]
        await ingest_durably(sink, payloads)
        await client.xack(
            stream, self._settings.group, *[entry_id for entry_id, _ in entries]
        )

    async def _drop_poison(
        self, client: Client, stream: str, entries: Sequence[Entry]
    ) -> list[Entry]:
        """Dead-letter entries delivered too often; return the rest."""
        details = await client.xpending_range(
            stream,
            self._settings.group,
            min=_text(entries[0][0]),
            max=_text(entries[-1][0]),
            count=len(entries),
        )
        deliveries = {
            _text(item["message_id"]): int(item["times_delivered"])
            for item in details
            if isinstance(item["message_id"], bytes | str)
        }
        keep: list[Entry] = []
        for entry_id, fields in entries:
            delivered = deliveries.get(_text(entry_id), 0)
            if delivered <= self._settings.max_deliveries:
                keep.append((entry_id, fields))
                continue
            await client.xadd(
                keys.poison_trials(self._settings.prefix),
                {
                    "stream": stream,
                    "id": entry_id,
                    "reason": f"failed {delivered} deliveries",
                    "data": entry_payload(fields),
                },
                maxlen=_DEAD_LETTER_MAXLEN,
                approximate=True,
            )
            await client.xack(stream, self._settings.group, entry_id)
            log.error(
                "moved poison entry %s of %s to the dead-letter stream",
                _text(entry_id),
                stream,
            )
        return keep


def _stream_entries(answer: object) -> list[tuple[str, list[Entry]]]:
    """``XREADGROUP``'s answer (a RESP2 list or a RESP3 map) as typed pairs."""
    pairs = list(answer.items()) if isinstance(answer, dict) else answer
    result: list[tuple[str, list[Entry]]] = []
    for name, entries in pairs if isinstance(pairs, list) else []:
        result.append((_text(name), list(entries)))
    return result


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
