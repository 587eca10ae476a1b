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
replica (see ``_replicated``); without an acknowledgement the call fails
and the source redelivers, so no acknowledged trial or fired event is
lost when a master dies and its replica takes over.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any, Final

import numpy as np
import redis
from numpy.typing import NDArray
from redis._parsers import _RESP2Parser
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from adapters.redis import keys
from adapters.redis.changes import CellTable, add_costs, integers, read_entry
from monitor.errors import StoreError
from monitor.schema import RunConfig
from monitor.stores.batches import Batch, Previous, TrialAsBatch, TrialBatch
from monitor.stores.ledger import NEW
from monitor.stores.records import (
    CountChanges,
    DeadLetter,
    JsonValue,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
    StoredState,
)

CHUNK_SIZE: Final = 2000
DEAD_LETTER_LIMIT: Final = 10_000
DEFAULT_WIDTH: Final = 2
# Cluster: how stale a slot map without replicas may be before a re-read.
SLOT_MAP_MAX_AGE_S: Final = 5.0
# Change-log entries read per round trip when catching up with other writers.
CHANGES_PER_READ: Final = 1000
# How many quoted ids and row texts a store keeps before it starts over.
QUOTED_LIMIT: Final = 100_000

# A reply is text or bytes depending on the client's decode_responses.
Reply = str | bytes
ReplyMap = Mapping[Reply, Reply]


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
        self._versions: dict[str, int] = {}
        # Marks this store's entries in the change log, which it skips.
        self._writer = uuid.uuid4().hex
        # Per run, the numbered counts cells read so far (the change log
        # names cells by number).
        self._cells: dict[str, CellTable] = {}
        self._chunk_size = chunk_size
        # Ids as JSON strings, and rows as the text their fields start with,
        # kept across batches (a run's ids recur in every batch); emptied
        # past QUOTED_LIMIT entries.
        self._quoted: dict[str, str] = {}
        self._heads: dict[tuple[str, str, bool], str] = {}
        self._dead_letter_limit = dead_letter_limit
        self._wait_ms = max(1, int(timeout_s * 500))
        self._map_read_at = time.monotonic()
        # Cluster: events fired by a call that then failed, for the next call.
        self._unreported: list[StoredEvent] = []
        self._owns_client = client is None
        self._cluster = cluster or isinstance(client, RedisCluster)
        # hiredis (a dependency) packs the commands; replies go through
        # redis-py's own parser (RESP2 or 3 as the connection speaks), as
        # hiredis's reader cost more CPU per small apply (paced phase of
        # benchmarks/service.py: 884-896 us per message against 624-754).
        with _translated("connect"):
            if client is None and cluster:
                # Default cluster retries: they follow a failover and slot
                # moves; a retried write is a redelivery (see the module).
                client = RedisCluster.from_url(
                    str(url),
                    decode_responses=True,
                    encoding_errors="surrogatepass",
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                    parser_class=_RESP2Parser,
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
                    parser_class=_RESP2Parser,
                )
            self._client = client
            self._apply_trials_script = self._register("apply_trials.lua")
            self._fire_events_script = self._register("fire_events.lua")
            self._read_cells_script = self._register("read_cells.lua")

    @property
    def is_shared(self) -> bool:
        return True

    @property
    def prefix(self) -> str:
        return self._prefix

    # -- Store -------------------------------------------------------------

    def load(self) -> StoredState:
        with _translated("load the state"):
            runs = sorted(_text(run) for run in self._client.smembers(self._runs))
            if self._cluster:
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
                stored = _texts(config)
                state.configs[run] = RunConfig.model_validate_json(stored["config"])
                if stored["declared"] == "1":
                    state.declared.add(run)
                width = int(stored["width"])
            if counts:
                state.counts[run] = _model_counts(width, counts, costs)
            if totals:
                state.totals[run] = _run_totals(totals)
            # The counts as loaded are current as of this version.
            self._versions[run] = int(_texts(totals).get("version", 0))
            for field in fired:
                kind, subject = json.loads(_text(field))
                state.fired.add((run, kind, subject))
        state.cursors = _texts(replies[-1])
        return state

    def save_config(self, config: RunConfig, declared: bool = True) -> None:
        key = keys.config(self._prefix, config.run)
        values: dict[FieldT, EncodableT] = {
            "config": config.model_dump_json(),
            "declared": int(declared),
            "width": len(config.weights),
        }
        with _translated(f"save the config of run {config.run!r}"):
            if self._cluster:
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
            if not self._cluster:
                pipe.sadd(self._runs, config.run)
            pipe.execute()

    def apply(self, batch: Batch) -> list[Previous]:
        for trials in batch.trials:
            _check_trials(trials)
        if self._cluster:
            return self._apply_by_slot(batch)
        with _translated("apply a batch"):
            pipe = self._client.pipeline(transaction=True)
            positions: list[list[int]] = []
            for trials in batch.trials:
                calls = []
                for start in range(0, len(trials), self._chunk_size):
                    calls.append(len(pipe))
                    stop = min(start + self._chunk_size, len(trials))
                    self._apply_trials(
                        pipe, trials.run, self._arguments(trials, start, stop)
                    )
                positions.append(calls)
                pipe.sadd(self._runs, trials.run)
            for letter in batch.dead_letters:
                self._add_dead_letter(pipe, letter)
            if batch.cursor is not None:
                pipe.hset(keys.cursors(self._prefix), batch.cursor[0], batch.cursor[1])
            try:
                replies = pipe.execute() if len(pipe) else []
            except RedisError:
                # Applied or not, unknown: the next look reads the counts whole
                # (our own change-log entries are skipped, never re-added).
                for trials in batch.trials:
                    self._versions[trials.run] = -1
                raise
        return [
            self._previous(trials.run, [replies[call] for call in calls], len(trials))
            for trials, calls in zip(batch.trials, positions, strict=True)
        ]

    def _apply_by_slot(self, batch: Batch) -> list[Previous]:
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
        with _translated("apply a batch"):
            if runs:
                self._client.sadd(self._runs, *runs)
            by_run: dict[str, list[Reply]] = {}
            for run in runs:
                pipe = self._client.pipeline(transaction=True)
                for trials in batch.trials:
                    if trials.run != run:
                        continue
                    for start in range(0, len(trials), self._chunk_size):
                        stop = min(start + self._chunk_size, len(trials))
                        self._apply_trials(
                            pipe, run, self._arguments(trials, start, stop)
                        )
                for _ in letters.get(run, ()):
                    pipe.hincrby(keys.totals(self._prefix, run), "rejected", 1)
                try:
                    by_run[run] = pipe.execute()
                    self._replicated(run)
                except (RedisError, StoreError):
                    # Applied or not, unknown: the next look reads the counts
                    # whole (as in ``apply`` on one Redis).
                    self._versions[run] = -1
                    raise
            if batch.dead_letters:
                pipe = self._client.pipeline(transaction=False)
                for letter in batch.dead_letters:
                    self._add_dead_letter(pipe, letter, count_run=False)
                pipe.execute()
            if batch.cursor is not None:
                self._client.hset(
                    keys.cursors(self._prefix), batch.cursor[0], batch.cursor[1]
                )
        # Each run's replies in batch order (a run may have several batches).
        for trials in batch.trials:
            chunks = -(-len(trials) // self._chunk_size)
            replies = by_run[trials.run]
            previous.append(self._previous(trials.run, replies[:chunks], len(trials)))
            by_run[trials.run] = replies[chunks:]
        return previous

    def _replicated(self, run: str) -> None:
        """Return once a replica of the run's master has our writes to it.

        Redis replicates asynchronously: without this, a master that dies
        right after acknowledging would take the write with it, and the
        promoted replica would count a redelivered trial as new or fire an
        event again. ``WAIT`` covers the writes of its own connection, so a
        write of nothing (``HINCRBY`` by 0) goes first on the same one; the
        replication stream is ordered, so our transaction is covered too.
        A master without replicas (as the slot map says) is not waited for.
        """
        assert isinstance(self._client, RedisCluster)
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

    def _previous(self, run: str, replies: Sequence[Reply], count: int) -> Previous:
        """Previous categories from the ``apply_trials`` replies of one batch."""
        sizes = [
            min(self._chunk_size, count - start)
            for start in range(0, count, self._chunk_size)
        ]
        answers: list[NDArray[np.int64]] = []
        for reply, size in zip(replies, sizes, strict=True):
            version, _, categories = _text(reply).partition("|")
            self._note_version(run, int(version))
            # One NumPy parse per chunk, not an int() per trial.
            answer = np.full(size, NEW) if categories == "new" else integers(categories)
            if answer.size != size:
                raise StoreError(
                    f"apply_trials answered {answer.size} of {size} trials"
                )
            answers.append(answer)
        return np.concatenate(answers) if answers else np.zeros(0, np.int64)

    def counts_if_changed(
        self, run: str
    ) -> dict[str, ModelCounts] | CountChanges | None:
        """What other processes changed in the run's counts since we last saw them.

        Each apply that changes counts bumps the run's version and logs its
        deltas under that version; versions this store produced itself (one
        after the other) need no read. One ``HGET`` when nothing changed;
        otherwise the other writers' deltas from the change log (and the
        fields of cells numbered since the last read), or the whole counts
        when the log no longer holds every version since ours.
        """
        known = self._versions.get(run, 0)
        with _translated(f"read the changes of run {run!r}"):
            current = int(
                self._client.hget(keys.totals(self._prefix, run), "version") or 0
            )
            if current == known:
                return None
            if known < 0 or current < known:
                # Unsure what was applied, or the run's keys were replaced.
                self._cells.pop(run, None)
                return self.counts(run)
            entries: list[tuple[int, dict[str, str]]] = []
            while known + len(entries) < current:
                start = known + len(entries) + 1
                found = [
                    (_entry_version(entry_id), _texts(fields))
                    for entry_id, fields in self._client.xrange(
                        keys.changes(self._prefix, run),
                        min=f"{start}-0",
                        max=f"{current}-0",
                        count=CHANGES_PER_READ,
                    )
                    or []
                    if entry_id is not None and fields is not None
                ]
                versions = [version for version, _ in found]
                if versions != list(range(start, start + len(found))) or not found:
                    # Trimmed away, or written before the log: read them whole.
                    return self.counts(run)
                entries.extend(found)
            changes = self._summed(run, entries)
            if changes is None:
                return self.counts(run)
        self._versions[run] = current
        return changes

    def _summed(
        self, run: str, entries: list[tuple[int, dict[str, str]]]
    ) -> CountChanges | None:
        """The other writers' entries summed, or None to read the counts whole."""
        numbers: list[NDArray[np.int64]] = []
        deltas: list[NDArray[np.int64]] = []
        costs: dict[str, tuple[int, int, float]] = {}
        try:
            for _, fields in entries:
                if fields["w"] != self._writer:
                    entry_numbers, entry_deltas = read_entry(fields)
                    numbers.append(entry_numbers)
                    deltas.append(entry_deltas)
                    add_costs(costs, fields)
        except ValueError:  # an entry in an older layout, or malformed
            return None
        named = np.concatenate(numbers) if numbers else np.zeros(0, np.int64)
        cells = self._cells.setdefault(run, CellTable())
        wanted = int(named.max()) + 1 if named.size else 0
        if wanted > len(cells):
            # Cells numbered since the last read: their fields, once.
            pipe = self._client.pipeline(transaction=False)
            self._run_script(
                self._read_cells_script,
                pipe,
                [keys.cells(self._prefix, run)],
                [len(cells), wanted - 1],
            )
            if not cells.extend(_text(pipe.execute()[0]), wanted - len(cells)):
                return None
        return cells.changes(named, np.concatenate(deltas) if deltas else named, costs)

    def status_turn(self, run: str, seconds: float) -> float:
        """Take the turn to refresh the run's status for ``seconds``.

        0 when taken; otherwise how long another worker still holds it.
        Workers then refresh a run's status as often between them as one
        worker alone would, not each at its own pace.
        """
        key = keys.status_turn(self._prefix, run)
        milliseconds = max(1, round(seconds * 1000))
        with _translated(f"take the status turn of run {run!r}"):
            if self._client.set(key, self._writer, px=milliseconds, nx=True):
                return 0.0
            left = int(self._client.pttl(key))
        return max(left, 1) / 1000

    def _note_version(self, run: str, version: int) -> None:
        # Our own change right after the version we knew keeps us current; a
        # jump means another worker wrote in between (re-read next look).
        if version == self._versions.get(run, 0) + 1:
            self._versions[run] = version

    def totals(self, run: str) -> RunTotals:
        with _translated(f"read the totals of run {run!r}"):
            values = self._client.hgetall(keys.totals(self._prefix, run))
        return _run_totals(values)

    def counts(self, run: str) -> dict[str, ModelCounts]:
        with _translated(f"read the counts of run {run!r}"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hget(keys.totals(self._prefix, run), "version")
            pipe.hget(keys.config(self._prefix, run), "width")
            pipe.hgetall(keys.counts(self._prefix, run))
            pipe.hgetall(keys.costs(self._prefix, run))
            version, width, counts, costs = pipe.execute()
        self._versions[run] = int(version or 0)
        return _model_counts(
            DEFAULT_WIDTH if width is None else int(width), counts, costs
        )

    def record_events(self, events: Sequence[PendingEvent]) -> list[StoredEvent]:
        by_run: dict[str, list[int]] = {}
        for index, event in enumerate(events):
            by_run.setdefault(event.run, []).append(index)
        if self._cluster:
            return self._record_events_by_slot(events, by_run)
        if not by_run:
            return []
        with _translated("record events"):
            pipe = self._client.pipeline(transaction=True)
            for run, indices in by_run.items():
                self._fire_events(pipe, run, [events[i] for i in indices])
            replies = pipe.execute()
        seqs = [0] * len(events)
        for indices, numbers in zip(by_run.values(), replies, strict=True):
            for index, number in zip(indices, numbers, strict=True):
                seqs[index] = int(number)
        return _stored_events(events, seqs)

    def _record_events_by_slot(
        self, events: Sequence[PendingEvent], by_run: dict[str, list[int]]
    ) -> list[StoredEvent]:
        """``record_events`` on Redis Cluster: one script call per run's slot.

        Runs go one after another, so a call can fail after some runs' events
        fired; those are kept and returned by the next call that succeeds
        (the engine offers the same events again), once every master they
        were written to has had a replica acknowledge them.
        """
        with _translated("record events"):
            for run, indices in by_run.items():
                pipe = self._client.pipeline(transaction=True)
                run_events = [events[i] for i in indices]
                self._fire_events(pipe, run, run_events)
                self._unreported += _stored_events(run_events, pipe.execute()[0])
                self._replicated(run)
            for run in dict.fromkeys(e.run for e in self._unreported):
                if run not in by_run:
                    self._replicated(run)
        fired, self._unreported = self._unreported, []
        return fired

    def events_after(
        self, run: str, seq: int = 0, limit: int = 1000
    ) -> list[StoredEvent]:
        with _translated(f"read the events of run {run!r}"):
            entries = self._client.xrange(
                keys.events(self._prefix, run),
                min=f"{max(seq, 0) + 1}-0",
                max="+",
                count=limit,
            )
        return [
            _stored_event(run, entry_id, fields)
            for entry_id, fields in entries or []
            if entry_id is not None and fields is not None
        ]

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        with _translated("read dead letters"):
            entries = self._client.xrevrange(
                keys.dead_letters(self._prefix), max="+", min="-", count=limit
            )
        return [
            _dead_letter(fields)
            for _, fields in reversed(entries or [])
            if fields is not None
        ]

    def close(self) -> None:
        if self._owns_client:
            with _translated("close the connection"):
                self._client.close()

    # -- scripts and writes -------------------------------------------------

    def _register(self, name: str) -> Script:
        text = resources.files("adapters.redis").joinpath("lua", name).read_text()
        # Every call sends the text: without its comment lines it is 36-57%
        # smaller.
        text = "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("--")
        )
        script = self._client.register_script(text)
        # Loading at connect fails fast on a bad script or an unreachable
        # server (on a cluster it loads on every master).
        self._client.script_load(text)
        return script

    def _run_script(
        self,
        script: Script,
        pipe: Pipeline | ClusterPipeline,
        run_keys: list[str],
        arguments: Sequence[EncodableT],
    ) -> None:
        # EVAL with the text, not EVALSHA: inside MULTI a NOSCRIPT (after a
        # restart, or on a promoted replica) would fail one call of the
        # batch, and redis-py's guard against it (SCRIPT EXISTS before every
        # pipeline) costs a round trip per apply. Redis still compiles the
        # script once and finds it by the text's SHA1 after that.
        # (ClusterPipeline blocks its eval method, not the command; its
        # execute_command has no annotations.)
        pipe.execute_command(  # type: ignore[no-untyped-call]
            "EVAL", script.script, len(run_keys), *run_keys, *arguments
        )

    def _arguments(self, trials: TrialBatch, start: int, stop: int) -> list[str | int]:
        if len(self._quoted) + len(self._heads) > QUOTED_LIMIT:
            self._quoted.clear()
            self._heads.clear()
        return _trial_arguments(
            trials, start, stop, self._quoted, self._heads, self._writer
        )

    def _apply_trials(
        self, pipe: Pipeline | ClusterPipeline, run: str, arguments: list[str | int]
    ) -> None:
        self._run_script(
            self._apply_trials_script,
            pipe,
            [
                keys.trials(self._prefix, run),
                keys.counts(self._prefix, run),
                keys.totals(self._prefix, run),
                keys.costs(self._prefix, run),
                keys.changes(self._prefix, run),
                keys.cell_numbers(self._prefix, run),
                keys.cells(self._prefix, run),
            ],
            arguments,
        )

    def _fire_events(
        self,
        pipe: Pipeline | ClusterPipeline,
        run: str,
        events: Sequence[PendingEvent],
    ) -> None:
        arguments: list[str] = []
        for event in events:
            arguments += [
                json.dumps([event.kind, event.subject]),
                event.kind,
                event.subject,
                json.dumps(event.payload),
                repr(float(event.ts)),
            ]
        self._run_script(
            self._fire_events_script,
            pipe,
            [
                keys.fired(self._prefix, run),
                keys.event_seq(self._prefix, run),
                keys.events(self._prefix, run),
            ],
            arguments,
        )

    def _read_run(self, pipe: Pipeline | ClusterPipeline, run: str) -> None:
        """Queue the five reads ``load`` needs of one run."""
        pipe.hgetall(keys.config(self._prefix, run))
        pipe.hgetall(keys.counts(self._prefix, run))
        pipe.hgetall(keys.costs(self._prefix, run))
        pipe.hgetall(keys.totals(self._prefix, run))
        pipe.hkeys(keys.fired(self._prefix, run))

    def _add_dead_letter(
        self,
        pipe: Pipeline | ClusterPipeline,
        letter: DeadLetter,
        count_run: bool = True,
    ) -> None:
        """Queue the letter's XADD and, with ``count_run``, its run's count."""
        fields: dict[FieldT, EncodableT] = {
            "source": letter.source,
            "reason": letter.reason,
            "raw": letter.raw,
            "received_s": repr(float(letter.received_s)),
        }
        if letter.position is not None:
            fields["position"] = letter.position
        if letter.run is not None:
            fields["run"] = letter.run
            if count_run:
                pipe.hincrby(keys.totals(self._prefix, letter.run), "rejected", 1)
                pipe.sadd(self._runs, letter.run)
        pipe.xadd(
            keys.dead_letters(self._prefix),
            fields,
            maxlen=self._dead_letter_limit,
            approximate=True,
        )

    @property
    def _runs(self) -> str:
        return keys.runs(self._prefix)


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """The one place redis-py's exceptions become StoreError."""
    try:
        yield
    except (RedisError, RedisClusterException) as exc:
        raise StoreError(f"redis store cannot {action}: {exc}") from exc


def _check_trials(trials: TrialBatch) -> None:
    """Refuse a malformed batch before anything is sent (no half-applied EXEC)."""
    columns = (trials.model, trials.question, trials.trial, trials.prior)
    if any(len(c) != len(trials) for c in (*columns, trials.tokens, trials.seconds)):
        raise ValueError(
            f"trial batch of run {trials.run!r} has columns of unequal length"
        )
    # Plain ints and Nones pass in C loops; anything else item by item.
    categories = trials.category
    if not (set(map(type, categories)) <= {int} and min(categories, default=0) >= 0):
        for category in categories:
            if (
                not isinstance(category, int)
                or isinstance(category, bool)
                or category < 0
            ):
                raise ValueError(f"category must be an integer >= 0; got {category!r}")
    if not set(map(type, trials.tokens)) <= {int, type(None)}:
        for tokens in trials.tokens:
            if tokens is not None and (
                not isinstance(tokens, int) or isinstance(tokens, bool)
            ):
                raise ValueError(f"tokens must be an integer or None; got {tokens!r}")
    if trials.seconds.count(None) < len(trials.seconds):
        for seconds in trials.seconds:
            if seconds is not None and not math.isfinite(seconds):
                raise ValueError(f"seconds must be finite or None; got {seconds!r}")


def _trial_arguments(
    trials: TrialBatch,
    start: int,
    stop: int,
    quoted: dict[str, str],
    heads: dict[tuple[str, str, bool], str],
    writer: str,
) -> list[str | int]:
    """ARGV of ``apply_trials.lua`` for trials ``start:stop`` of the batch.

    Each trial's trials field and counts cell as Redis stores them, so the
    script builds no text per trial (Redis's time, shared by every worker),
    and ids quoted once (``quoted`` caches their JSON, ``heads`` each row's
    text up to the trial or category).
    """

    def quote(text: str) -> str:
        found = quoted.get(text)
        if found is None:
            found = quoted[text] = json.dumps(text)
        return found

    fields: list[str] = []
    cells: list[str] = []
    categories: list[str] = []
    rows = zip(
        trials.model[start:stop],
        trials.question[start:stop],
        trials.prior[start:stop],
        strict=True,
    )
    for row, trial, category in zip(
        rows, trials.trial[start:stop], trials.category[start:stop], strict=True
    ):
        head = heads.get(row)
        if head is None:
            head = heads[row] = f"[{quote(row[0])},{quote(row[1])},{int(row[2])},"
        fields.append(f"{head}{quoted.get(trial) or quote(trial)}]")
        text = str(category)
        categories.append(text)
        cells.append(f"{head}{text}]")
    costs: list[str | int] = []
    tokens, seconds = trials.tokens[start:stop], trials.seconds[start:stop]
    if tokens.count(None) + seconds.count(None) < 2 * (stop - start):
        reported = zip(tokens, seconds, strict=True)
        for number, (spent, took) in enumerate(reported, start=1):
            if spent is not None or took is not None:
                costs += [
                    number,
                    quote(trials.model[start + number - 1]),
                    "" if spent is None else spent,
                    "" if took is None else repr(float(took)),
                ]
    # Most chunks name each trial once: the script then keeps no table of
    # the categories it has set.
    repeats = len(set(fields)) < len(fields)
    return [
        stop - start,
        int(repeats),
        writer,
        *fields,
        *cells,
        *categories,
        *costs,
    ]


def _model_counts(
    width: int, counts: ReplyMap, costs: ReplyMap
) -> dict[str, ModelCounts]:
    """ModelCounts per model from the run's counts and costs hashes."""
    fields = [_text(field) for field in counts]
    cells = json.loads("[" + ",".join(fields) + "]") if fields else []
    tables: dict[str, dict[str, list[list[int]]]] = {}
    for (model, question, prior, category), value in zip(
        cells, counts.values(), strict=True
    ):
        rows = tables.setdefault(model, {}).get(question)
        if rows is None:
            rows = tables[model][question] = [[0] * width, [0] * width]
        if category >= width:
            raise StoreError(
                f"stored category {category} is outside 0..{width - 1} of the run"
            )
        rows[prior][category] += int(value)
    spent: dict[tuple[str, str], str] = {}
    for field, value in costs.items():
        model, measure = json.loads(_text(field))
        spent[(model, measure)] = _text(value)
    result = {}
    for model in sorted(tables):
        questions = sorted(tables[model])
        result[model] = ModelCounts(
            questions=questions,
            observed=[tables[model][question][0] for question in questions],
            prior=[tables[model][question][1] for question in questions],
            costed_trials=int(spent.get((model, "trials"), 0)),
            tokens=int(spent.get((model, "tokens"), 0)),
            seconds=float(spent.get((model, "seconds"), 0.0)),
        )
    return result


def _stored_events(
    events: Sequence[PendingEvent], seqs: Sequence[int | str]
) -> list[StoredEvent]:
    """The events ``fire_events.lua`` numbered (a 0 means it fired before)."""
    return [
        StoredEvent(
            seq=int(seq),
            run=event.run,
            kind=event.kind,
            subject=event.subject,
            payload=event.payload,
            ts=event.ts,
        )
        for event, seq in zip(events, seqs, strict=True)
        if int(seq)
    ]


def _entry_version(entry_id: Reply) -> int:
    return int(_text(entry_id).split("-")[0])


def _run_totals(values: ReplyMap) -> RunTotals:
    stored = _texts(values)
    return RunTotals(
        trials=int(stored.get("trials", 0)),
        duplicates=int(stored.get("duplicates", 0)),
        corrections=int(stored.get("corrections", 0)),
        rejected=int(stored.get("rejected", 0)),
    )


def _stored_event(run: str, entry_id: Reply, fields: ReplyMap) -> StoredEvent:
    stored = _texts(fields)
    payload: dict[str, JsonValue] = json.loads(stored["payload"])
    return StoredEvent(
        seq=int(_text(entry_id).split("-")[0]),
        run=run,
        kind=stored["kind"],
        subject=stored["subject"],
        payload=payload,
        ts=float(stored["ts"]),
    )


def _dead_letter(fields: ReplyMap) -> DeadLetter:
    stored = _texts(fields)
    position = stored.get("position")
    return DeadLetter(
        source=stored["source"],
        reason=stored["reason"],
        raw=stored["raw"],
        run=stored.get("run"),
        position=None if position is None else int(position),
        received_s=float(stored["received_s"]),
    )


def _text(value: Reply) -> str:
    """A reply as text, whether the client decodes responses or not."""
    return value if isinstance(value, str) else value.decode("utf-8", "surrogatepass")


def _texts(values: ReplyMap) -> dict[str, str]:
    return {_text(key): _text(value) for key, value in values.items()}
