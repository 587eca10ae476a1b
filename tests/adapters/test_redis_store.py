"""The shared Redis store against real redis-server processes.

Reference semantics are MemoryStore's (and so the Ledger's): the same batches
must give the same answers, totals, counts and costs. Beyond that: workers
sharing one Redis count exactly once, events fire once, a restart keeps
everything, a dead server raises StoreError everywhere, and a run's keys
share one cluster hash slot.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis import Redis
from redis.crc import key_slot

from adapters.redis import keys as redis_keys
from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig, StoreError
from monitor.interfaces import Payload, Store
from monitor.schema import Status
from monitor.service.service import Service
from monitor.stores.batches import Batch, Previous, TrialBatch
from monitor.stores.memory import MemoryStore
from monitor.stores.records import (
    CountChanges,
    DeadLetter,
    ModelCounts,
    PendingEvent,
    StoredState,
)
from tests.helpers import eventually, server_examples
from tests.monitor.streams import messy, stream_of
from tests.services import RedisServer, redis_server

Trial = tuple[str, str, str, bool, int, int | None, float | None]
CountsView = dict[str, tuple[dict[str, tuple[list[int], list[int]]], int, int, float]]

RUNS = ("r1", "r{2}")
WEIGHTS = [0.0, 0.5, 1.0]


def delete_keys(url: str, prefix: str) -> None:
    """Remove this test's keys (never FLUSHALL: the server is shared)."""
    with Redis.from_url(url) as client:
        found = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if found:
            client.delete(*found)


@pytest.fixture
def store(redis: RedisServer, prefix: str) -> Iterator[RedisStore]:
    delete_keys(redis.url, prefix)
    opened = RedisStore(redis.url, prefix)
    yield opened
    opened.close()
    delete_keys(redis.url, prefix)


def trial_batch(run: str, trials: Sequence[Trial]) -> TrialBatch:
    batch = TrialBatch(run)
    for model, question, trial, prior, category, tokens, seconds in trials:
        batch.append(model, question, trial, category, prior, tokens, seconds)
    return batch


def as_lists(previous: Sequence[Previous]) -> list[list[int]]:
    """A store may answer a batch with a list or an array."""
    return [[int(category) for category in answer] for answer in previous]


def counts_view(counts: Mapping[str, ModelCounts]) -> CountsView:
    """Counts keyed by question: stores may list questions in any order."""
    return {
        model: (
            {
                question: (observed, prior)
                for question, observed, prior in zip(
                    value.questions, value.observed, value.prior, strict=True
                )
            },
            value.costed_trials,
            value.tokens,
            value.seconds,
        )
        for model, value in counts.items()
    }


def state_view(state: StoredState) -> tuple[object, ...]:
    """A loaded state without the empty entries only MemoryStore keeps."""
    return (
        state.configs,
        state.declared,
        {run: counts_view(c) for run, c in state.counts.items() if c},
        {run: t for run, t in state.totals.items() if any(astuple(t))},
        state.fired,
        state.cursors,
    )


# Ids with JSON and separator characters, so field encoding is exercised.
ids = st.sampled_from(["0", "1", "q,3", 'a"b', "\\", "é", "[1]"])
trials_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b:c", '["x"']),
        ids,
        ids,
        st.booleans(),
        st.integers(0, len(WEIGHTS) - 1),
        st.none() | st.integers(0, 1000),
        # Quarters add up exactly, in Python floats and in Redis alike.
        st.none() | st.integers(0, 40).map(lambda quarters: quarters / 4),
    ),
    max_size=14,
)
letters_strategy = st.lists(
    st.builds(
        DeadLetter,
        source=st.sampled_from(["file", "mqtt"]),
        reason=st.text(max_size=8),
        raw=st.text(max_size=8),
        run=st.none() | st.sampled_from(RUNS),
        position=st.none() | st.integers(0, 99),
        received_s=st.sampled_from([0.0, 1.5]),
    ),
    max_size=2,
)
batch_strategy = st.tuples(
    st.lists(st.tuples(st.sampled_from(RUNS), trials_strategy), max_size=3),
    letters_strategy,
    st.none() | st.tuples(st.sampled_from(["file", "mqtt"]), st.text(max_size=5)),
)


def assert_answers_as_memory(
    shared: RedisStore,
    batches: list[
        tuple[list[tuple[str, list[Trial]]], list[DeadLetter], tuple[str, str] | None]
    ],
) -> None:
    """Apply ``batches`` to ``shared`` and a memory store: the same answers."""
    memory = MemoryStore()
    for run in RUNS:
        for target in (memory, shared):
            target.save_config(RunConfig(run=run, weights=WEIGHTS))
    for trial_batches, letters, cursor in batches:
        batch = Batch(
            [trial_batch(run, trials) for run, trials in trial_batches],
            letters,
            cursor,
        )
        assert as_lists(shared.apply(batch)) == as_lists(memory.apply(batch))
    for run in RUNS:
        assert shared.totals(run) == memory.totals(run)
        assert counts_view(shared.counts(run)) == counts_view(memory.counts(run))
    assert state_view(shared.load()) == state_view(memory.load())
    assert shared.dead_letters(3) == memory.dead_letters(3)


@pytest.mark.slow
@server_examples()
@given(batches=st.lists(batch_strategy, min_size=1, max_size=5))
def test_random_batches_get_the_same_answers_as_the_memory_store(
    redis: RedisServer,
    prefix: str,
    batches: list[
        tuple[
            list[tuple[str, list[Trial]]],
            list[DeadLetter],
            tuple[str, str] | None,
        ]
    ],
) -> None:
    delete_keys(redis.url, prefix)
    # Tiny chunks: classification must stay sequential across script calls.
    shared = RedisStore(redis.url, prefix, chunk_size=3)
    try:
        assert_answers_as_memory(shared, batches)
    finally:
        shared.close()
        delete_keys(redis.url, prefix)


Cell = tuple[str, str, bool, int]
Costs = dict[str, tuple[int, int, float]]


def cells_of(counts: Mapping[str, ModelCounts]) -> tuple[dict[Cell, int], Costs]:
    """The counts as cell -> count (no zeros), and the costs per model."""
    cells: dict[Cell, int] = {}
    for model, value in counts.items():
        for question, observed, prior in zip(
            value.questions, value.observed, value.prior, strict=True
        ):
            for flag, row in ((False, observed), (True, prior)):
                for category, count in enumerate(row):
                    if count:
                        cells[(model, question, flag, category)] = count
    costs = {
        model: (value.costed_trials, value.tokens, value.seconds)
        for model, value in counts.items()
        if value.costed_trials or value.tokens or value.seconds
    }
    return cells, costs


class Follower:
    """Another worker's view of a run, kept up through the change log."""

    def __init__(self, store: RedisStore, run: str) -> None:
        self.store, self.run = store, run
        self.cells, self.costs = cells_of(store.counts(run))
        self.logged = 0

    def catch_up(self) -> None:
        changes = self.store.counts_if_changed(self.run)
        if isinstance(changes, dict):
            self.cells, self.costs = cells_of(changes)
        elif changes is not None:
            self.logged += 1
            for cell, delta in changes.cells.items():
                self.cells[cell] = self.cells.get(cell, 0) + delta
                if not self.cells[cell]:
                    del self.cells[cell]
            for model, (trials, tokens, seconds) in changes.costs.items():
                before = self.costs.get(model, (0, 0, 0.0))
                self.costs[model] = (
                    before[0] + trials,
                    before[1] + tokens,
                    before[2] + seconds,
                )


def assert_applied_alike(
    piece: list[Trial], writer: RedisStore, memory: MemoryStore, follower: Follower
) -> None:
    """Apply a chunk to Redis and to memory: same answers, same counts, and
    the follower of the change log sees the same counts and costs."""
    batch = Batch([trial_batch("r", piece)])
    assert as_lists(writer.apply(batch)) == as_lists(memory.apply(batch))
    follower.catch_up()
    expected = cells_of(memory.counts("r"))
    assert cells_of(writer.counts("r")) == expected
    assert (follower.cells, follower.costs) == expected


@pytest.mark.slow
@server_examples()
@given(
    pieces=st.lists(trials_strategy, min_size=1, max_size=6),
    chunk_size=st.sampled_from([2, 5, 2000]),
)
def test_a_follower_of_the_change_log_sees_the_stored_counts_and_costs(
    redis: RedisServer, prefix: str, pieces: list[list[Trial]], chunk_size: int
) -> None:
    delete_keys(redis.url, prefix)
    writer = RedisStore(redis.url, prefix, chunk_size=chunk_size)
    follower = Follower(RedisStore(redis.url, prefix), "r")
    memory = MemoryStore()
    try:
        for target in (memory, writer):
            target.save_config(RunConfig(run="r", weights=WEIGHTS))
        for piece in pieces:
            assert_applied_alike(piece, writer, memory, follower)
    finally:
        writer.close()
        follower.store.close()
        delete_keys(redis.url, prefix)


def test_chunks_past_the_slice_size_count_and_log_as_in_memory(
    redis: RedisServer, store: RedisStore
) -> None:
    # The script reads and writes its hashes 1,000 fields at a time: chunks
    # of 2,500 trials moving over 1,000 cells at once, with duplicates,
    # corrections that cancel, repeats inside the chunk and costs.
    rng = np.random.default_rng(11)
    writer = RedisStore(redis.url, store.prefix, chunk_size=2500)
    follower = Follower(store, "r")
    memory = MemoryStore()
    for target in (memory, writer):
        target.save_config(RunConfig(run="r", weights=WEIGHTS))
    first: list[Trial] = [
        (f"m{i % 7}", str(i // 7), str(i % 3), bool(i % 2), i % 3, i, None)
        for i in range(2500)
    ]
    later: list[Trial] = [
        (model, question, trial, prior, int(rng.integers(0, 3)), tokens, 0.25)
        for model, question, trial, prior, _, tokens, _ in (
            first[int(i)] for i in rng.integers(0, 2500, size=2500)
        )
    ]
    fresh: list[Trial] = [
        (f"n{i}", "q", "t", False, i % 3, None, 0.5) for i in range(1200)
    ]
    for piece in (first, later, later[::-1], fresh + first[:1300]):
        assert_applied_alike(piece, writer, memory, follower)
    # Every change came through the log, none through a whole re-read.
    assert follower.logged == 4
    assert writer.totals("r") == memory.totals("r")
    writer.close()
    # Each cell numbered once: the list and the numbers agree.
    with Redis.from_url(redis.url, decode_responses=True) as client:
        numbered = client.lrange(redis_keys.cells(store.prefix, "r"), 0, -1)
        numbers = client.hgetall(redis_keys.cell_numbers(store.prefix, "r"))
    assert len(set(numbered)) == len(numbered) == len(numbers) > 2000
    assert all(numbered[int(number)] == cell for cell, number in numbers.items())


def test_counts_and_totals_past_two_to_the_31_stay_exact(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    store.apply(Batch([trial_batch("r", [("m", "q", "t0", False, 1, None, None)])]))
    large = 2**31 + 5
    larger = 2**53 - 10
    with Redis.from_url(redis.url) as client:
        counts_key = redis_keys.counts(store.prefix, "r")
        client.hset(counts_key, '["m","q",0,1]', large)
        client.hset(counts_key, '["m","q",0,2]', larger)
        client.hset(redis_keys.totals(store.prefix, "r"), "trials", 2**40)
    follower = Follower(RedisStore(redis.url, store.prefix), "r")
    store.apply(
        Batch(
            [
                trial_batch(
                    "r",
                    [
                        ("m", "q", "t1", False, 1, None, None),
                        ("m", "q", "t2", False, 2, None, None),
                        ("m", "q", "t3", False, 2, None, None),
                        ("m", "q", "t0", False, 2, None, None),
                    ],
                )
            ]
        )
    )
    cells, _ = cells_of(store.counts("r"))
    assert cells == {("m", "q", False, 1): large, ("m", "q", False, 2): larger + 3}
    assert store.totals("r").trials == 2**40 + 3
    follower.catch_up()
    assert follower.cells == cells and follower.logged == 1
    with Redis.from_url(redis.url, decode_responses=True) as client:
        stored = client.hget(redis_keys.counts(store.prefix, "r"), '["m","q",0,2]')
    assert stored == str(larger + 3)
    follower.store.close()


def run_keys_dump(url: str, prefix: str, run: str) -> dict[str, object]:
    """Every key of a run, dumped, to tell whether anything changed."""
    with Redis.from_url(url) as client:
        return {key: client.dump(key) for key in redis_keys.run_keys(prefix, run)}


@pytest.mark.parametrize(
    "damage",
    ["a count not an integer", "a count past 2^53", "costs of the wrong type"],
)
def test_a_chunk_that_fails_leaves_every_key_untouched(
    redis: RedisServer, store: RedisStore, damage: str
) -> None:
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    trials = [("m", "q", "t0", False, 1, 3, None), ("m", "q", "t1", False, 2, 4, None)]
    store.apply(Batch([trial_batch("r", trials)]))
    with Redis.from_url(redis.url) as client:
        counts_key = redis_keys.counts(store.prefix, "r")
        if damage == "a count not an integer":
            client.hset(counts_key, '["m","q",0,2]', "1.5")
        elif damage == "a count past 2^53":
            client.hset(counts_key, '["m","q",0,2]', 2**60)
        else:
            client.delete(redis_keys.costs(store.prefix, "r"))
            client.set(redis_keys.costs(store.prefix, "r"), "x")
    before = run_keys_dump(redis.url, store.prefix, "r")
    # A new trial, a duplicate and a correction into the damaged cell.
    later = [
        ("m", "q", "t2", False, 0, 1, None),
        ("m", "q", "t0", False, 1, None, None),
        ("m", "q", "t0", False, 2, None, None),
    ]
    with pytest.raises(StoreError):
        store.apply(Batch([trial_batch("r", later)]))
    assert run_keys_dump(redis.url, store.prefix, "r") == before


def ingest_all(
    monitor: Monitor, events: Sequence[Mapping[str, object]], chunk: int = 50
) -> None:
    for start in range(0, len(events), chunk):
        monitor.ingest(events[start : start + chunk])


def messy_stream(seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    results = (rng.random((4, 10, 8)) < rng.random((4, 1, 1))).astype(np.int64)
    events = messy(stream_of(results), rng)
    events[len(events) // 2 : len(events) // 2] = [
        {"run": "bench", "model": "m0", "question": 1, "trial": 0, "category": 7},
        {"run": "bench", "model": "m0", "question": 11, "trial": 0, "correct": True},
    ]
    return events


def bench_config() -> RunConfig:
    return RunConfig(run="bench", question_count=10, max_trials_per_question=20)


def test_a_monitor_on_redis_gives_the_same_status_as_one_in_memory(
    store: RedisStore,
) -> None:
    events = messy_stream(5)
    with (
        Monitor(look_interval_s=0) as memory,
        Monitor(store, look_interval_s=0) as shared,
    ):
        for monitor in (memory, shared):
            monitor.configure(bench_config())
            ingest_all(monitor, events)
        assert shared.status("bench") == memory.status("bench")
        assert shared.status("bench").rejected == 2
        assert [(e.kind, e.subject) for e in shared.events_after("bench")] == [
            (e.kind, e.subject) for e in memory.events_after("bench")
        ]


def counted(monitor: Monitor) -> tuple[object, ...]:
    """What a status says about the counts (looks may differ between workers)."""
    status = monitor.status("bench")
    rows = sorted(
        (row.model, row.trials, row.mu, row.sigma, row.cost_tokens)
        for row in status.models
    )
    return status.trials, status.duplicates, status.corrections, tuple(rows)


def test_two_monitors_on_one_redis_follow_each_other_through_the_change_log(
    redis: RedisServer, store: RedisStore
) -> None:
    events = messy_stream(6)
    other = RedisStore(redis.url, store.prefix)
    with (
        Monitor(look_interval_s=0) as memory,
        Monitor(store, look_interval_s=0, shared_refresh_s=0) as first,
        Monitor(other, look_interval_s=0, shared_refresh_s=0) as second,
    ):
        for monitor in (memory, first, second):
            monitor.configure(bench_config())
        ingest_all(memory, events)
        # Alternating pieces: repeats and corrections cross workers.
        for index, start in enumerate(range(0, len(events), 7)):
            (first, second)[index % 2].ingest(events[start : start + 7])
            assert counted(first) == counted(second)
        assert counted(first) == counted(second) == counted(memory)
        second.ingest(
            [
                {
                    "run": "bench",
                    "model": "m9",
                    "question": 0,
                    "trial": 0,
                    "correct": True,
                    "cost": {"tokens": 7},
                }
            ]
        )
        changes = store.counts_if_changed("bench")
        # Only the other worker's cells, read from the log, not the whole counts.
        assert isinstance(changes, CountChanges)
        assert changes.cells == {("m9", "0", False, 1): 1}
        assert changes.costs == {"m9": (1, 7, 0.0)}
        assert store.counts_if_changed("bench") is None


def test_workers_of_the_release_before_meet_no_entry_they_cannot_read(
    redis: RedisServer, store: RedisStore
) -> None:
    # The release before followed ``changes`` and needed ``d`` in every
    # entry: a log under that name without ``d`` would stop such a worker
    # during a rolling upgrade; under another it reads the counts whole.
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    store.apply(Batch([trial_batch("r", [("m", "q", "t", False, 1, None, None)])]))
    log = redis_keys.changes(store.prefix, "r")
    with Redis.from_url(redis.url) as client:
        assert client.xlen(log) == 1
        before = redis_keys.totals(store.prefix, "r").removesuffix("totals")
        assert client.exists(before + "changes") == 0


def test_a_trimmed_change_log_falls_back_to_the_whole_counts(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    other = RedisStore(redis.url, store.prefix)
    other.apply(Batch([trial_batch("r", [("m", "q", "t", False, 2, None, None)])]))
    with Redis.from_url(redis.url) as client:
        client.delete(redis_keys.changes(store.prefix, "r"))
    whole = store.counts_if_changed("r")
    assert isinstance(whole, dict)
    assert counts_view(whole) == counts_view(other.counts("r"))
    other.close()


def test_a_follower_decodes_each_cell_once_and_reads_older_entries_whole(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    other = RedisStore(redis.url, store.prefix)
    # Newlines and separators inside ids: fields stay whole.
    first = [
        ("m\n1", 'q\n,"', "t", False, 2, 5, None),
        ("m", "é", "t", True, 1, None, None),
    ]
    other.apply(Batch([trial_batch("r", first)]))
    changes = store.counts_if_changed("r")
    assert isinstance(changes, CountChanges)
    assert changes.cells == {("m\n1", 'q\n,"', False, 2): 1, ("m", "é", True, 1): 1}
    assert changes.costs == {"m\n1": (1, 5, 0.0)}
    # A correction and a cell numbered after the last read.
    later = [("m", "é", "t", True, 0, None, None), ("m", "é", "u", True, 1, None, None)]
    other.apply(Batch([trial_batch("r", later)]))
    other.apply(Batch([trial_batch("r", [("n", "é", "t", False, 1, None, 0.5)])]))
    changes = store.counts_if_changed("r")
    assert isinstance(changes, CountChanges)
    assert changes.cells == {("m", "é", True, 0): 1, ("n", "é", False, 1): 1}
    assert changes.costs == {"n": (1, 0, 0.5)}
    with Redis.from_url(redis.url, decode_responses=True) as client:
        # Each cell numbered once, in the order the log first named them.
        numbered = client.lrange(redis_keys.cells(store.prefix, "r"), 0, -1)
        decoded = [json.loads(field) for field in numbered]
        assert sorted(decoded[:2]) == [["m", "é", 1, 1], ["m\n1", 'q\n,"', 0, 2]]
        assert sorted(decoded[2:]) == [["m", "é", 1, 0], ["n", "é", 0, 1]]
        totals_key = redis_keys.totals(store.prefix, "r")
        changes_key = redis_keys.changes(store.prefix, "r")
        # An entry as written before cell numbers: read the counts whole.
        client.hincrby(redis_keys.counts(store.prefix, "r"), '["m","old",0,0]', 3)
        client.hincrby(totals_key, "version", 1)
        older = json.dumps([[["m", "old", 0, 0], 3]])
        client.xadd(changes_key, {"w": "older", "d": older, "c": "[]"}, id="5-0")
        whole = store.counts_if_changed("r")
        assert isinstance(whole, dict)
        assert counts_view(whole) == counts_view(other.counts("r"))
        # Numbers and deltas that do not pair up, or an unknown number: whole.
        for version, number, delta in (
            (6, "0,1", "1"),
            (7, "0,x", "1,1"),
            (8, "9", "1"),
        ):
            client.hincrby(totals_key, "version", 1)
            entry = {"w": "older", "i": number, "n": delta, "c": "[]"}
            client.xadd(changes_key, entry, id=f"{version}-0")
            whole = store.counts_if_changed("r")
            assert isinstance(whole, dict)
    assert store.counts_if_changed("r") is None
    other.close()


def deliveries(
    rng: np.random.Generator, models: int, questions: int, trials: int
) -> list[Trial]:
    """Every trial at least once, shuffled, with repeats and corrections."""
    out: list[Trial] = []
    for m in range(models):
        for q in range(questions):
            for t in range(trials):
                for _ in range(1 + int(rng.integers(0, 3))):
                    category = int(rng.integers(0, 3))
                    out.append((f"m{m}", str(q), str(t), False, category, 1, None))
    return [out[i] for i in rng.permutation(len(out))]


def test_two_workers_applying_concurrently_count_every_trial_exactly_once(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r", weights=WEIGHTS))
    other = RedisStore(redis.url, store.prefix)
    workers = [store, other]
    streams = [deliveries(np.random.default_rng(seed), 3, 20, 10) for seed in (1, 2)]
    answers: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def work(index: int) -> None:
        start.wait()
        stream = streams[index]
        for offset in range(0, len(stream), 25):
            batch = Batch([trial_batch("r", stream[offset : offset + 25])])
            answers[index].extend(workers[index].apply(batch)[0])

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, range(2)))
    other.close()

    distinct = 3 * 20 * 10
    delivered = sum(len(stream) for stream in streams)
    totals = store.totals("r")
    assert sum(a.count(-1) for a in answers) == totals.trials == distinct
    assert totals.duplicates + totals.corrections == delivered - distinct
    # The counts agree with the per-trial index cell by cell.
    recount: dict[tuple[str, str], list[int]] = {}
    with Redis.from_url(redis.url, decode_responses=True) as client:
        stored = client.hgetall(redis_keys.trials(store.prefix, "r"))
    for field, category in stored.items():
        model, question, _, _ = json.loads(field)
        recount.setdefault((model, question), [0, 0, 0])[int(category)] += 1
    counts = store.counts("r")
    cells = {
        (model, question): row
        for model, value in counts.items()
        for question, row in zip(value.questions, value.observed, strict=True)
    }
    assert cells == recount
    assert sum(sum(row) for row in cells.values()) == distinct
    assert sum(value.costed_trials for value in counts.values()) == distinct


def pending(
    run: str, kinds: Sequence[str], subjects: Sequence[str]
) -> list[PendingEvent]:
    return [
        PendingEvent(run, kind, subject, {"subject": subject}, 1.0)
        for kind in kinds
        for subject in subjects
    ]


def test_each_event_fires_once_across_two_stores(
    redis: RedisServer, store: RedisStore
) -> None:
    other = RedisStore(redis.url, store.prefix)
    events = pending("r", ["model_done", "pair_resolved"], [str(i) for i in range(30)])
    events += pending("s", ["model_done"], ["a", "b"])
    start = threading.Barrier(2)
    fired: list[list[tuple[str, str, str, int]]] = [[], []]

    def work(index: int) -> None:
        target = (store, other)[index]
        order = np.random.default_rng(index).permutation(len(events))
        start.wait()
        for offset in range(0, len(events), 4):
            chunk = [events[i] for i in order[offset : offset + 4]]
            fired[index].extend(
                (e.run, e.kind, e.subject, e.seq) for e in target.record_events(chunk)
            )

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, range(2)))
    other.close()

    everything = fired[0] + fired[1]
    keys = [(run, kind, subject) for run, kind, subject, _ in everything]
    assert sorted(keys) == sorted((e.run, e.kind, e.subject) for e in events)
    for run, size in (("r", 60), ("s", 2)):
        stored = store.events_after(run)
        assert [e.seq for e in stored] == list(range(1, size + 1))
        assert sorted((e.kind, e.subject, e.seq) for e in stored) == sorted(
            (kind, subject, seq) for r, kind, subject, seq in everything if r == run
        )
    assert store.record_events(events) == []


def test_events_after_resumes_after_a_sequence_number(store: RedisStore) -> None:
    fired = store.record_events(pending("r", ["model_done"], ["a", "b", "c", "d"]))
    assert store.events_after("r") == fired
    assert store.events_after("r", fired[1].seq) == fired[2:]
    assert store.events_after("r", fired[0].seq, limit=2) == fired[1:3]
    assert store.events_after("r", fired[-1].seq) == []
    assert store.events_after("other") == []


def test_dead_letters_come_newest_last_and_the_stream_is_capped(
    redis: RedisServer, prefix: str
) -> None:
    capped = RedisStore(redis.url, prefix, dead_letter_limit=5)
    letters = [DeadLetter("file", "bad json", str(i), position=i) for i in range(300)]
    capped.apply(Batch(dead_letters=letters, cursor=("file", "300")))
    assert capped.dead_letters(3) == letters[-3:]
    assert capped.load().cursors == {"file": "300"}
    with Redis.from_url(redis.url) as client:
        # MAXLEN ~ trims whole stream nodes (100 entries each by default).
        assert client.xlen(redis_keys.dead_letters(prefix)) < 300
    capped.close()
    delete_keys(redis.url, prefix)


def test_an_auto_created_config_never_replaces_a_declared_one(
    store: RedisStore,
) -> None:
    declared = RunConfig(run="r", weights=WEIGHTS)
    store.save_config(declared)
    store.save_config(RunConfig(run="r"), declared=False)
    state = store.load()
    assert state.configs == {"r": declared}
    assert state.declared == {"r"}


def test_a_restart_with_persistence_keeps_all_state(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis", persistent=True) as server:
        with Monitor(RedisStore(server.url, "scorio"), look_interval_s=0) as first:
            first.configure(bench_config())
            ingest_all(first, messy_stream(7))
            before = first.status("bench")
            fired = first.events_after("bench")
            state = first.store.load()
        # SIGKILL: only what appendfsync always wrote survives.
        server.kill()
        server.start()
        with Monitor(RedisStore(server.url, "scorio")) as second:
            assert second.status("bench") == before
            assert second.events_after("bench") == fired
            assert second.look() == []
            assert state_view(second.store.load()) == state_view(state)


def test_a_store_keeps_working_across_a_server_restart(tmp_path: Path) -> None:
    events = messy_stream(8)
    with (
        redis_server(tmp_path / "redis", persistent=True) as server,
        Monitor(look_interval_s=0) as memory,
        Monitor(RedisStore(server.url, "scorio"), look_interval_s=0) as shared,
    ):
        for monitor in (memory, shared):
            monitor.configure(bench_config())
        half = len(events) // 2
        ingest_all(shared, events[:half])
        # The pooled connections die and the server forgets the scripts.
        server.kill()
        server.start()
        ingest_all(shared, events[half:])
        ingest_all(memory, events)
        assert shared.status("bench") == memory.status("bench")


def public_calls(target: RedisStore) -> dict[str, Callable[[], object]]:
    batch = Batch(
        [trial_batch("r", [("a", "1", "9", False, 1, None, None)])],
        [DeadLetter("file", "bad", "x", run="r")],
        ("file", "9"),
    )
    return {
        "load": target.load,
        "save_config": lambda: target.save_config(RunConfig(run="other")),
        "apply": lambda: target.apply(batch),
        "totals": lambda: target.totals("r"),
        "counts": lambda: target.counts("r"),
        "record_events": lambda: target.record_events(pending("r", ["k"], ["s"])),
        "events_after": lambda: target.events_after("r"),
        "dead_letters": target.dead_letters,
    }


def test_every_method_raises_store_error_when_the_server_is_down(
    tmp_path: Path,
) -> None:
    with redis_server(tmp_path / "redis", persistent=True) as server:
        target = RedisStore(server.url, "scorio")
        target.save_config(RunConfig(run="r", weights=WEIGHTS))
        target.apply(Batch([trial_batch("r", [("a", "1", "0", False, 2, 5, 1.0)])]))
        before = target.load()
        server.kill()
        untranslated = [
            name
            for name, call in public_calls(target).items()
            if not raises_store_error(call)
        ]
        assert untranslated == []
        with pytest.raises(StoreError):
            RedisStore(server.url, "scorio")
        target.close()
        server.start()
        after = RedisStore(server.url, "scorio")
        assert state_view(after.load()) == state_view(before)
        assert after.totals("r").rejected == 0
        assert after.dead_letters() == []
        after.close()


def raises_store_error(call: Callable[[], object]) -> bool:
    try:
        call()
    except StoreError:
        return True
    return False


def test_a_malformed_batch_is_refused_before_anything_is_applied(
    redis: RedisServer, store: RedisStore
) -> None:
    chunked = RedisStore(redis.url, store.prefix, chunk_size=2)
    good = [("a", str(q), "0", False, 1, None, None) for q in range(5)]
    bad = trial_batch("r", good)
    bad.category[-1] = -1
    with pytest.raises(ValueError, match="category"):
        chunked.apply(Batch([trial_batch("r", good), bad], cursor=("file", "1")))
    assert store.load() == StoredState()
    chunked.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("category", True),
        ("category", 1.0),
        ("category", -2),
        ("tokens", True),
        ("tokens", 1.5),
        ("seconds", float("inf")),
        ("seconds", float("nan")),
    ],
)
def test_a_bad_value_in_any_column_is_refused(
    store: RedisStore, column: str, value: object
) -> None:
    batch = trial_batch("r", [("a", str(q), "0", False, 1, 2, 0.5) for q in range(5)])
    getattr(batch, column)[3] = value
    with pytest.raises(ValueError, match=column):
        store.apply(Batch([batch]))
    assert store.load() == StoredState()


def test_a_client_that_returns_bytes_reads_the_same_state(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r{1}", weights=WEIGHTS))
    trials = [
        ("é", "q,1", 'a"b', True, 2, 3, 0.5),
        ("é", "2", "0", False, 1, None, None),
    ]
    store.apply(
        Batch(
            [trial_batch("r{1}", trials)],
            [DeadLetter("file", "bad", "raw é", run="r{1}", position=4)],
            ("file", "2"),
        )
    )
    store.record_events(pending("r{1}", ["model_done"], ["é"]))
    with Redis.from_url(redis.url) as client:
        raw = RedisStore(client=client, prefix=store.prefix)
        assert raw.load() == store.load()
        assert raw.counts("r{1}") == store.counts("r{1}")
        assert raw.totals("r{1}") == store.totals("r{1}")
        assert raw.events_after("r{1}") == store.events_after("r{1}")
        assert raw.dead_letters() == store.dead_letters()
        answer = raw.apply(Batch([trial_batch("r{1}", trials)]))
        assert as_lists(answer) == [[2, 1]]
        raw.close()


@given(run=st.text(min_size=1, max_size=20))
def test_the_keys_of_one_run_share_one_cluster_slot(run: str) -> None:
    tag = redis_keys.hash_tag(run)
    assert "{" not in tag
    assert "}" not in tag
    assert unquote(tag) == run
    slots = {
        key_slot(key.encode("utf-8", "surrogatepass"))
        for key in redis_keys.run_keys("scorio", run)
    }
    assert slots == {key_slot(tag.encode("utf-8", "surrogatepass"))}


def test_a_redis_store_is_a_store(store: RedisStore) -> None:
    typed: Store = store
    assert typed.is_shared


def test_trials_one_at_a_time_count_as_in_memory(store: RedisStore) -> None:
    """The per-trial path (Store.apply_trial) of the shared store."""
    results = (np.random.default_rng(6).random((3, 6, 5)) < 0.5).astype(np.int64)
    events = messy(stream_of(results), np.random.default_rng(7))
    with Monitor(look_interval_s=0) as local:
        shared = Monitor(store, look_interval_s=0)
        for monitor in (shared, local):
            monitor.configure(RunConfig(run="bench", question_count=6))
        for event in events:
            got, expected = shared.ingest(event), local.ingest(event)
            assert (got.accepted, got.duplicates, got.corrections) == (
                expected.accepted,
                expected.duplicates,
                expected.corrections,
            )
        assert shared.status("bench") == local.status("bench")
        assert astuple(store.totals("bench")) == astuple(local.store.totals("bench"))


def test_workers_take_turns_to_refresh_a_status(
    redis: RedisServer, store: RedisStore
) -> None:
    other = RedisStore(redis.url, store.prefix)
    assert store.status_turn("r", 0.5) == 0.0
    wait = other.status_turn("r", 0.5)
    assert 0.0 < wait <= 0.5
    assert other.status_turn("other run", 0.5) == 0.0
    turn = redis_keys.status_turn(store.prefix, "r")
    with Redis.from_url(redis.url) as client:
        while client.exists(turn):  # until the first worker's turn expires
            time.sleep(0.01)
    assert other.status_turn("r", 0.5) == 0.0
    other.close()


async def has_status(service: Service, run: str) -> bool:
    """Whether the service's first status of the run is out."""
    return run in service.snapshot.statuses


async def test_a_status_waits_for_its_turn_while_another_worker_holds_it(
    redis: RedisServer, store: RedisStore
) -> None:
    store.save_config(RunConfig(run="r"))
    other = RedisStore(redis.url, store.prefix)
    # Every answer the service got when it asked for the turn, in order.
    answers: list[float] = []

    def status_turn(run: str, seconds: float) -> float:
        wait = store.status_turn(run, seconds)
        answers.append(wait)
        return wait

    service = Service(Monitor(store), status_interval_s=0.01, status_turn=status_turn)
    async with service:
        while "r" not in service.snapshot.statuses:  # the first status is out
            await asyncio.sleep(0.01)
        # Another worker's turn, once the service's own first one lapsed.
        while other.status_turn("r", 1.0) != 0.0:
            await asyncio.sleep(0.01)
        answers.clear()
        feed = service.subscribe()
        await service.ingest_payloads(
            [
                Payload(
                    data=b'{"model": "a", "question": 1, "trial": 0, "correct": true}',
                    source="test",
                    run="r",
                )
            ]
        )
        while True:
            update = await asyncio.wait_for(feed.get(), timeout=5)
            if isinstance(update, Status) and update.trials == 1:
                break
        asked = list(answers)
    other.close()
    # Told to wait while the other worker held the turn (its TTL, from
    # Redis), and out only after an ask that took it: its turn had lapsed.
    assert asked and 0.0 < asked[0] <= 1.0
    taken = asked.index(0.0)
    assert all(wait > 0.0 for wait in asked[:taken])


async def test_a_worker_waiting_for_a_status_turn_does_not_ask_again_per_trial(
    redis: RedisServer, store: RedisStore
) -> None:
    """Each ask is a round trip to Redis, and every ingest wakes the refresher."""
    store.save_config(RunConfig(run="r"))
    other = RedisStore(redis.url, store.prefix)
    # Every answer the service got when it asked for the turn, in order.
    answers: list[float] = []

    def status_turn(run: str, seconds: float) -> float:
        wait = store.status_turn(run, seconds)
        answers.append(wait)
        return wait

    service = Service(Monitor(store), status_interval_s=0.01, status_turn=status_turn)
    async with service:
        await eventually(lambda: has_status(service, "r"))
        # Another worker's turn, for longer than this test takes, once the
        # service's own turn lapsed: every ask from here on is told to wait.
        while other.status_turn("r", 120.0) != 0.0:
            await asyncio.sleep(0.01)
        start = len(answers)
        for trial in range(50):
            event = {"model": "a", "question": 1, "trial": trial, "correct": True}
            await service.ingest_payloads(
                [Payload(data=json.dumps(event).encode(), source="test", run="r")]
            )
            await asyncio.sleep(0.01)

        async def asked() -> bool:
            return len(answers) > start

        await eventually(asked)
        during = answers[start:]
    other.close()
    # Told to wait (the other's turn), it asked no more while that lasts:
    # once for the 50 ingests, not once each.
    assert len(during) == 1 and during[0] > 0.0
