"""The shared state store: several monitor workers count exactly once in Redis.

:class:`RedisStore` implements :class:`monitor.interfaces.Store` with the
synchronous redis-py client (the engine is synchronous and runs in a worker
thread). Classification happens in Redis, not in the process: the
``apply_trials`` Lua script reads each trial's previous category and writes
the new one, the run's counts, totals and learned costs in one atomic step,
so two workers delivering the same trial get ``NEW`` exactly once between
them. Events fire once through the ``fire_events`` script (``HSETNX`` on the
run's fired hash). Key layout and TTL policy: :mod:`adapters.redis.keys`.

One ``apply`` is one ``MULTI``/``EXEC`` transaction: every chunk of every
trial batch (at most ``chunk_size`` trials per script call, each chunk seeing
the writes of the ones before it), the dead letters, their ``rejected``
counts and the source cursor. Redis runs it without interleaving other
clients, all or nothing, and the client never retries it (a retried EXEC
whose reply was lost would apply twice). A StoreError therefore means the
batch was applied entirely or not at all; only a lost reply leaves the
caller unsure, and redelivery then counts as duplicates, never twice.

Caveats from Redis itself: a command failing at run time inside a
transaction is not rolled back, so inputs are validated before anything is
sent and the scripts read before they write; durability is the server's
(``appendonly yes`` with ``appendfsync always`` makes an acknowledged apply
survive a crash), and it must not evict keys (``maxmemory-policy
noeviction``).

Redis Cluster (``cluster=True``): a transaction cannot span hash slots, so
``apply`` becomes one ``MULTI``/``EXEC`` per run on that run's slot (all its
chunks and its ``rejected`` counts; every key carries the run's hash tag),
after the run index ``SADD`` and before the dead letters and, last, the
cursor, each its own call. A batch is then all or nothing per run, not
across runs; a failure midway raises StoreError and the source redelivers,
so trials already applied count as duplicates (never twice), while the
dead letters of the runs already applied are recorded again. The scripts go
as ``EVAL`` with their text (as on one Redis), since a replica promoted by a
failover has no script cache. redis-py retries a call on connection errors and follows
slot moves; a retried transaction whose reply was lost is a redelivery
(duplicates, never double counts). Redis replicates asynchronously, so
each run's transaction and event write is followed by a ``WAIT`` for one
replica (see :mod:`adapters.redis.cluster`); without an acknowledgement the call fails
and the source redelivers, so no acknowledged trial or fired event is
lost when a master dies and its replica takes over.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import RedisError
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from adapters.redis import keys
from adapters.redis.changes import Versions
from adapters.redis.cluster import ClusterWrites
from adapters.redis.follower import ChangeFollower
from adapters.redis.marker import StoreMarker
from adapters.redis.question_trials import read_question_trials
from adapters.redis.records import (
    as_text,
    as_texts,
    dead_letter,
    model_counts,
    queue_dead_letter,
    run_totals,
    stored_event,
    stored_events,
    translated,
)
from adapters.redis.scripts import CHUNK_SIZE, Scripts, check_trials
from monitor.schema import RunConfig
from monitor.stores.batches import Batch, Previous, TrialAsBatch
from monitor.stores.history import (
    HISTORY_MAX,
    HistoryPoint,
    decode_point,
    encode_point,
)
from monitor.stores.question_trials import QuestionTrials
from monitor.stores.records import (
    CountChanges,
    DeadLetter,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
    StoredState,
)

DEAD_LETTER_LIMIT: Final = 10_000
DEFAULT_WIDTH: Final = 2


class RedisStore(TrialAsBatch):
    """Shared store in Redis for several monitor workers.

    Args:
        url: ``redis://host:port/db`` (or ``rediss://``, ``unix://``).
        prefix: The first part of every key; no braces.
        client: An existing client to use instead of ``url`` (the caller
            keeps owning it); a plain client must not retry writes on its
            own. A ``RedisCluster`` client means cluster mode.
        cluster: ``url`` names any node of a Redis Cluster.
        chunk_size: Trials per ``apply_trials`` call.
        dead_letter_limit: About how many dead letters are kept.
        timeout_s: Socket connect and read timeout.

    Raises:
        ValueError: for neither or both of ``url`` and ``client``, or a bad
            prefix or size.
        StoreError: when the server cannot be reached.
    """

    def __init__(
        self,
        url: str | None = None,
        prefix: str = "scorio",
        *,
        client: redis.Redis | RedisCluster | None = None,
        cluster: bool = False,
        chunk_size: int = CHUNK_SIZE,
        dead_letter_limit: int = DEAD_LETTER_LIMIT,
        timeout_s: float = 10.0,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give exactly one of url and client")
        if chunk_size < 1 or dead_letter_limit < 1:
            raise ValueError(
                "chunk_size and dead_letter_limit must be >= 1; got "
                f"{chunk_size} and {dead_letter_limit}"
            )
        self._prefix = keys.check_prefix(prefix)
        # Per run, the newest version of the counts this store has seen.
        self._versions = Versions()
        # Marks this store's entries in the change log, which it skips.
        self._writer = uuid.uuid4().hex
        self._dead_letter_limit = dead_letter_limit
        self._owns_client = client is None
        # hiredis (a dependency) packs the commands and, redis-py's default
        # when it is installed, parses the replies.
        with translated("connect"):
            if client is None and cluster:
                # Default cluster retries: they follow a failover and slot
                # moves; a retried write is a redelivery (see the module).
                client = RedisCluster.from_url(
                    str(url),
                    decode_responses=True,
                    encoding_errors="surrogatepass",
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                )
            elif client is None:
                # No automatic retries: a retried EXEC or script that did run
                # before its reply was lost would be applied twice.
                client = redis.Redis.from_url(
                    str(url),
                    decode_responses=True,
                    encoding_errors="surrogatepass",
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                    retry=Retry(NoBackoff(), 0),
                )
            self._client = client
            self._scripts = Scripts(client, self._prefix, self._writer, chunk_size)
        self._marker = StoreMarker(self._prefix, _shown(url))
        self._follower = ChangeFollower(
            client,
            self._prefix,
            self._writer,
            self._scripts,
            self._versions,
            self.counts,
            self._marker,
        )
        self._cluster: ClusterWrites | None = None
        if isinstance(client, RedisCluster):
            self._cluster = ClusterWrites(
                client,
                self._prefix,
                self._scripts,
                self._versions,
                dead_letter_limit,
                timeout_s,
            )

    @property
    def is_shared(self) -> bool:
        return True

    @property
    def prefix(self) -> str:
        return self._prefix

    # -- Store -------------------------------------------------------------

    def load(self) -> StoredState:
        self._marker.claim(self._client)
        with translated("load the state"):
            runs = sorted(as_text(run) for run in self._client.smembers(self._runs))
            if self._cluster is not None:
                # One transaction per run (its slot), then the cursors.
                replies: list[Any] = []
                for run in runs:
                    pipe = self._client.pipeline(transaction=True)
                    self._read_run(pipe, run)
                    replies += pipe.execute()
                replies.append(self._client.hgetall(keys.cursors(self._prefix)))
            else:
                pipe = self._client.pipeline(transaction=True)
                for run in runs:
                    self._read_run(pipe, run)
                pipe.hgetall(keys.cursors(self._prefix))
                replies = pipe.execute()
        state = StoredState()
        for index, run in enumerate(runs):
            config, counts, costs, totals, fired = replies[5 * index : 5 * index + 5]
            width = DEFAULT_WIDTH
            if config:
                stored = as_texts(config)
                state.configs[run] = RunConfig.model_validate_json(stored["config"])
                if stored["declared"] == "1":
                    state.declared.add(run)
                width = int(stored["width"])
            if counts:
                state.counts[run] = model_counts(width, counts, costs)
            if totals:
                state.totals[run] = run_totals(totals)
            # The counts as loaded are current as of this version.
            self._versions.set(run, int(as_texts(totals).get("version", 0)))
            for field in fired:
                kind, subject = json.loads(as_text(field))
                state.fired.add((run, kind, subject))
        state.cursors = as_texts(replies[-1])
        return state

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        key = keys.config(self._prefix, config.run)
        values: dict[FieldT, EncodableT] = {
            "config": config.model_dump_json(),
            "declared": int(declared),
            "width": len(config.weights),
        }
        with translated(f"save the config of run {config.run!r}"):
            if self._cluster is not None:
                # The index first: an indexed run without a config loads as
                # no config, a config missing from the index would be lost.
                self._client.sadd(self._runs, config.run)
            pipe = self._client.pipeline(transaction=True)
            if declared:
                pipe.hset(key, mapping=values)
            else:
                # Another worker may have declared the run meanwhile: an
                # auto-created config never replaces a stored one.
                for field, value in values.items():
                    pipe.hsetnx(key, field, value)
            if self._cluster is None:
                pipe.sadd(self._runs, config.run)
            pipe.execute()

    def apply(self, batch: Batch) -> list[Previous]:
        for trials in batch.trials:
            check_trials(trials)
        if self._cluster is not None:
            return self._cluster.apply(batch)
        with translated("apply a batch"):
            pipe = self._client.pipeline(transaction=True)
            # Read in the transaction: a store reset under this worker is
            # told before any trial is acknowledged.
            pipe.get(self._marker.key)
            positions: list[range] = []
            for trials in batch.trials:
                first = len(pipe)
                self._scripts.queue_apply(pipe, trials)
                positions.append(range(first, len(pipe)))
                pipe.sadd(self._runs, trials.run)
            for letter in batch.dead_letters:
                queue_dead_letter(pipe, self._prefix, letter, self._dead_letter_limit)
            if batch.cursor is not None:
                pipe.hset(keys.cursors(self._prefix), batch.cursor[0], batch.cursor[1])
            try:
                replies: list[Any] = pipe.execute() if len(pipe) > 1 else [None]
            except RedisError:
                # Applied or not, unknown: the next look reads the counts whole
                # (our own change-log entries are skipped, never re-added).
                for trials in batch.trials:
                    self._versions.unsure(trials.run)
                raise
        if len(replies) > 1:
            self._marker.check(replies[0])
        return [
            self._scripts.previous(
                trials.run,
                [replies[call] for call in calls],
                len(trials),
                self._versions,
            )
            for trials, calls in zip(batch.trials, positions, strict=True)
        ]

    def counts_if_changed(
        self, run: str
    ) -> dict[str, ModelCounts] | CountChanges | None:
        """What other processes changed in the run's counts since we last saw them.

        See :class:`adapters.redis.follower.ChangeFollower`.
        """
        return self._follower.changes(run)

    def status_turn(self, run: str, seconds: float) -> float:
        """Take the turn to refresh the run's status for ``seconds``.

        0 when taken; otherwise how long another worker still holds it.
        Workers then refresh a run's status as often between them as one
        worker alone would, not each at its own pace.
        """
        key = keys.status_turn(self._prefix, run)
        milliseconds = max(1, round(seconds * 1000))
        with translated(f"take the status turn of run {run!r}"):
            if self._client.set(key, self._writer, px=milliseconds, nx=True):
                return 0.0
            left = int(self._client.pttl(key))
        return max(left, 1) / 1000

    def totals(self, run: str) -> RunTotals:
        with translated(f"read the totals of run {run!r}"):
            values = self._client.hgetall(keys.totals(self._prefix, run))
        return run_totals(values)

    def counts(self, run: str) -> dict[str, ModelCounts]:
        with translated(f"read the counts of run {run!r}"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hget(keys.totals(self._prefix, run), "version")
            pipe.hget(keys.config(self._prefix, run), "width")
            pipe.hgetall(keys.counts(self._prefix, run))
            pipe.hgetall(keys.costs(self._prefix, run))
            version, width, counts, costs = pipe.execute()
        self._versions.set(run, int(version or 0))
        return model_counts(
            DEFAULT_WIDTH if width is None else int(width), counts, costs
        )

    def record_events(self, events: Sequence[PendingEvent]) -> list[StoredEvent]:
        by_run: dict[str, list[int]] = {}
        for index, event in enumerate(events):
            by_run.setdefault(event.run, []).append(index)
        if self._cluster is not None:
            return self._cluster.record_events(events, by_run)
        if not by_run:
            return []
        with translated("record events"):
            pipe = self._client.pipeline(transaction=True)
            for run, indices in by_run.items():
                self._scripts.queue_fire(pipe, run, [events[i] for i in indices])
            replies = pipe.execute()
        seqs = [0] * len(events)
        for indices, numbers in zip(by_run.values(), replies, strict=True):
            for index, number in zip(indices, numbers, strict=True):
                seqs[index] = int(number)
        return stored_events(events, seqs)

    def events_after(
        self, run: str, seq: int = 0, limit: int = 1000
    ) -> list[StoredEvent]:
        with translated(f"read the events of run {run!r}"):
            entries = self._client.xrange(
                keys.events(self._prefix, run),
                min=f"{max(seq, 0) + 1}-0",
                max="+",
                count=limit,
            )
        return [
            stored_event(run, entry_id, fields)
            for entry_id, fields in entries or []
            if entry_id is not None and fields is not None
        ]

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        with translated("read dead letters"):
            entries = self._client.xrevrange(
                keys.dead_letters(self._prefix), max="+", min="-", count=limit
            )
        return [
            dead_letter(fields)
            for _, fields in reversed(entries or [])
            if fields is not None
        ]

    def record_history(self, run: str, point: HistoryPoint) -> None:
        with translated(f"record the history of run {run!r}"):
            self._scripts.append_history(
                run, encode_point(point).decode(), point.trials, HISTORY_MAX
            )

    def history(self, run: str) -> list[HistoryPoint]:
        with translated(f"read the history of run {run!r}"):
            points = self._client.lrange(keys.history(self._prefix, run), 0, -1)
        return [decode_point(point) for point in points or []]

    def question_trials(self, run: str, question: str) -> QuestionTrials:
        with translated(f"read the trials of {question!r} in run {run!r}"):
            return read_question_trials(self._client, self._prefix, run, question)

    def close(self) -> None:
        if self._owns_client:
            with translated("close the connection"):
                self._client.close()

    def _read_run(self, pipe: Pipeline | ClusterPipeline, run: str) -> None:
        """Queue the five reads ``load`` needs of one run."""
        pipe.hgetall(keys.config(self._prefix, run))
        pipe.hgetall(keys.counts(self._prefix, run))
        pipe.hgetall(keys.costs(self._prefix, run))
        pipe.hgetall(keys.totals(self._prefix, run))
        pipe.hkeys(keys.fired(self._prefix, run))

    @property
    def _runs(self) -> str:
        return keys.runs(self._prefix)


def _shown(url: str | None) -> str:
    """The server's URL without its credentials, to name it in messages."""
    if url is None:
        return "the server of the given client"
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
