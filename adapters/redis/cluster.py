"""The store's writes on Redis Cluster: one transaction per run's hash slot.

A transaction cannot span hash slots, so ``apply`` becomes one
``MULTI``/``EXEC`` per run on that run's slot (all its chunks and its
``rejected`` counts; every key carries the run's hash tag), after the run
index ``SADD`` and before the dead letters and, last, the cursor, each its
own call; events fire one run at a time. Redis replicates asynchronously,
so each run's transaction and event write is followed by a ``WAIT`` for
one replica (:meth:`ClusterWrites.replicated`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from adapters.redis import keys
from adapters.redis.changes import Versions
from adapters.redis.records import (
    Pipe,
    Reply,
    queue_dead_letter,
    stored_events,
    translated,
)
from adapters.redis.scripts import Scripts
from monitor.errors import StoreError
from monitor.stores.batches import Batch, Previous
from monitor.stores.records import DeadLetter, PendingEvent, StoredEvent

# How stale a slot map without replicas may be before a re-read.
SLOT_MAP_MAX_AGE_S: Final = 5.0


class ClusterWrites:
    """``apply`` and ``record_events`` of a store on Redis Cluster.

    Args:
        client: The cluster client.
        prefix: The store's key prefix.
        scripts: The store's scripts.
        versions: The versions the store has seen.
        dead_letter_limit: About how many dead letters are kept.
        timeout_s: How long a ``WAIT`` for a replica may take, twice over.
    """

    def __init__(
        self,
        client: RedisCluster,
        prefix: str,
        scripts: Scripts,
        versions: Versions,
        dead_letter_limit: int,
        timeout_s: float,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._scripts = scripts
        self._versions = versions
        self._dead_letter_limit = dead_letter_limit
        self._wait_ms = max(1, int(timeout_s * 500))
        self._map_read_at = time.monotonic()
        # Events fired by a call that then failed, for the next call.
        self._unreported: list[StoredEvent] = []

    def apply(self, batch: Batch) -> list[Previous]:
        """``apply`` on Redis Cluster: one transaction per run's slot.

        Order matters for a failure midway (the source then redelivers): the
        run index before any run data, the cursor after everything else.
        """
        letters: dict[str, list[DeadLetter]] = {}
        for letter in batch.dead_letters:
            if letter.run is not None:
                letters.setdefault(letter.run, []).append(letter)
        runs = list(dict.fromkeys([t.run for t in batch.trials] + list(letters)))
        previous: list[Previous] = []
        with translated("apply a batch"):
            if runs:
                self._client.sadd(keys.runs(self._prefix), *runs)
            by_run: dict[str, list[Reply]] = {}
            for run in runs:
                pipe = _pipeline(self._client, transaction=True)
                for trials in batch.trials:
                    if trials.run == run:
                        self._scripts.queue_apply(pipe, trials)
                for _ in letters.get(run, ()):
                    pipe.hincrby(keys.totals(self._prefix, run), "rejected", 1)
                try:
                    by_run[run] = pipe.execute()
                    self.replicated(run)
                except (RedisError, StoreError):
                    # Applied or not, unknown: the next look reads the counts
                    # whole (as in ``apply`` on one Redis).
                    self._versions.unsure(run)
                    raise
            if batch.dead_letters:
                pipe = _pipeline(self._client, transaction=False)
                for letter in batch.dead_letters:
                    queue_dead_letter(
                        pipe,
                        self._prefix,
                        letter,
                        self._dead_letter_limit,
                        count_run=False,
                    )
                pipe.execute()
            if batch.cursor is not None:
                self._client.hset(
                    keys.cursors(self._prefix), batch.cursor[0], batch.cursor[1]
                )
        # Each run's replies in batch order (a run may have several batches).
        for trials in batch.trials:
            chunks = self._scripts.chunks(len(trials))
            replies = by_run[trials.run]
            previous.append(
                self._scripts.previous(
                    trials.run, replies[:chunks], len(trials), self._versions
                )
            )
            by_run[trials.run] = replies[chunks:]
        return previous

    def record_events(
        self, events: Sequence[PendingEvent], by_run: dict[str, list[int]]
    ) -> list[StoredEvent]:
        """``record_events`` on Redis Cluster: one script call per run's slot.

        Runs go one after another, so a call can fail after some runs' events
        fired; those are kept and returned by the next call that succeeds
        (the engine offers the same events again), once every master they
        were written to has had a replica acknowledge them.
        """
        with translated("record events"):
            for run, indices in by_run.items():
                pipe = _pipeline(self._client, transaction=True)
                run_events = [events[i] for i in indices]
                self._scripts.queue_fire(pipe, run, run_events)
                self._unreported += stored_events(run_events, pipe.execute()[0])
                self.replicated(run)
            for run in dict.fromkeys(e.run for e in self._unreported):
                if run not in by_run:
                    self.replicated(run)
        fired, self._unreported = self._unreported, []
        return fired

    def replicated(self, run: str) -> None:
        """Return once a replica of the run's master has our writes to it.

        Redis replicates asynchronously: without this, a master that dies
        right after acknowledging would take the write with it, and the
        promoted replica would count a redelivered trial as new or fire an
        event again. ``WAIT`` covers the writes of its own connection, so a
        write of nothing (``HINCRBY`` by 0) goes first on the same one; the
        replication stream is ordered, so our transaction is covered too.
        A master without replicas (as the slot map says) is not waited for.
        """
        key = keys.totals(self._prefix, run)
        slot = key_slot(key.encode("utf-8", "surrogatepass"))
        nodes = self._client.nodes_manager.slots_cache.get(slot)
        if not nodes or len(nodes) < 2:
            # No replica in the map: re-read it now and then, for replicas
            # added since (or not yet listed: CLUSTER SLOTS shows a replica
            # once it has replicated something).
            now = time.monotonic()
            if now - self._map_read_at < SLOT_MAP_MAX_AGE_S:
                return
            self._client.nodes_manager.initialize()
            self._map_read_at = now
            nodes = self._client.nodes_manager.slots_cache.get(slot)
            if not nodes or len(nodes) < 2:
                return
        pipe = self._client.get_redis_connection(nodes[0]).pipeline(transaction=False)
        pipe.hincrby(key, "version", 0)
        pipe.wait(1, self._wait_ms)
        if int(pipe.execute()[1]) < 1:
            # Perhaps the replica died: re-read the slot map for next time.
            self._client.nodes_manager.initialize()
            raise StoreError(f"no replica acknowledged the writes to run {run!r}")


def _pipeline(client: redis.Redis | RedisCluster, transaction: bool) -> Pipe:
    # RedisCluster.pipeline has no annotations; seen as either client it
    # is typed as Redis.pipeline is.
    return client.pipeline(transaction=transaction)
