"""The shared Redis store on a real Redis Cluster (``cluster = true``).

Three masters with a replica each, started by ``redis-server
--cluster-enabled yes`` and joined by ``redis-cli --cluster create``, AOF
with fsync always. Batches here mix runs whose slots live on different
masters, so no call may cross slots. The same guarantees as on one Redis:
the memory store's answers, exactly-once counting between workers, events
fired once, and all of that across a master killed under load.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis import Redis
from redis.cluster import RedisCluster

from adapters.redis import keys as redis_keys
from adapters.redis.store import RedisStore
from adapters.redis.streams import RedisStreamSource
from monitor import Monitor, RunConfig, StoreError
from monitor.config import RedisStreamSettings, StoreSettings
from monitor.service.service import Service
from monitor.stores.batches import Batch
from monitor.stores.records import CountChanges, DeadLetter, PendingEvent
from tests.adapters.test_redis_store import (
    RUNS,
    WEIGHTS,
    Trial,
    assert_answers_as_memory,
    batch_strategy,
    bench_config,
    ingest_all,
    messy_stream,
    pending,
    trial_batch,
)
from tests.helpers import eventually, server_examples, trial_events, trial_results
from tests.services import RedisClusterNodes, redis_cluster

# Every test here takes seconds (the inner loop is -m "not slow").
pytestmark = pytest.mark.slow

# Slots 3300, 7365 and 15495: one run per master of a fresh cluster.
SPREAD = ("b", "c", "a")
T = TypeVar("T")


def delete_keys(url: str, prefix: str) -> None:
    """Remove this test's keys on every master (the cluster is shared)."""
    with RedisCluster.from_url(url) as client:
        for key in list(client.scan_iter(match=f"{prefix}:*", count=1000)):
            client.delete(key)


@pytest.fixture
def store(redis_cluster_nodes: RedisClusterNodes, prefix: str) -> Iterator[RedisStore]:
    delete_keys(redis_cluster_nodes.url, prefix)
    opened = RedisStore(redis_cluster_nodes.url, prefix, cluster=True)
    yield opened
    opened.close()
    delete_keys(redis_cluster_nodes.url, prefix)


def masters_of(url: str, runs: Sequence[str]) -> set[str]:
    with RedisCluster.from_url(url) as client:
        return {
            client.get_node_from_key(redis_keys.totals("p", run)).name for run in runs
        }


def test_the_runs_of_these_tests_live_on_different_masters(
    redis_cluster_nodes: RedisClusterNodes,
) -> None:
    # Otherwise a batch of them would never need more than one slot.
    assert len(masters_of(redis_cluster_nodes.url, SPREAD)) == 3
    assert len(masters_of(redis_cluster_nodes.url, RUNS)) == 2


@server_examples(25)
@given(batches=st.lists(batch_strategy, min_size=1, max_size=5))
def test_random_batches_across_slots_get_the_memory_stores_answers(
    redis_cluster_nodes: RedisClusterNodes,
    prefix: str,
    batches: list[
        tuple[
            list[tuple[str, list[Trial]]],
            list[DeadLetter],
            tuple[str, str] | None,
        ]
    ],
) -> None:
    url = redis_cluster_nodes.url
    delete_keys(url, prefix)
    shared = RedisStore(url, prefix, cluster=True, chunk_size=3)
    try:
        assert_answers_as_memory(shared, batches)
    finally:
        shared.close()
        delete_keys(url, prefix)


def test_a_monitor_on_a_cluster_gives_the_same_status_as_one_in_memory(
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


def spread_deliveries(seed: int, trials: int = 6) -> list[tuple[str, Trial]]:
    """Every trial of every run at least once, shuffled, repeats and corrections."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, Trial]] = []
    for run in SPREAD:
        for m in range(2):
            for q in range(15):
                for t in range(trials):
                    for _ in range(1 + int(rng.integers(0, 3))):
                        category = int(rng.integers(0, 3))
                        trial = (f"m{m}", str(q), str(t), False, category, 1, None)
                        out.append((run, trial))
    return [out[i] for i in rng.permutation(len(out))]


def as_batch(deliveries: Sequence[tuple[str, Trial]], cursor: str) -> Batch:
    """One batch holding a trial batch per run (so one per master)."""
    by_run: dict[str, list[Trial]] = {}
    for run, trial in deliveries:
        by_run.setdefault(run, []).append(trial)
    batches = [trial_batch(run, trials) for run, trials in by_run.items()]
    return Batch(batches, cursor=("worker", cursor))


def question_events(deliveries: Sequence[tuple[str, Trial]]) -> list[PendingEvent]:
    """An event per (run, model, question) seen, as a monitor would fire it."""
    seen = dict.fromkeys((run, f"{t[0]}/{t[1]}") for run, t in deliveries)
    return [PendingEvent(run, "question_seen", s, {}, 1.0) for run, s in seen]


def check_exact(store: RedisStore, url: str, trials: int = 6) -> None:
    """Each run: every distinct trial counted once, counts match the index."""
    distinct = 2 * 15 * trials
    with RedisCluster.from_url(url, decode_responses=True) as client:
        for run in SPREAD:
            assert store.totals(run).trials == distinct
            recount: dict[tuple[str, str], list[int]] = {}
            stored = client.hgetall(redis_keys.trials(store.prefix, run))
            for field, category in stored.items():
                model, question, _, _ = json.loads(field)
                recount.setdefault((model, question), [0, 0, 0])[int(category)] += 1
            counts = store.counts(run)
            cells = {
                (model, question): row
                for model, value in counts.items()
                for question, row in zip(value.questions, value.observed, strict=True)
            }
            assert cells == recount
            assert sum(sum(row) for row in cells.values()) == distinct
            assert sum(value.costed_trials for value in counts.values()) == distinct


def check_fired_once(
    store: RedisStore, fired: Sequence[tuple[str, str, int]], expected: set[str]
) -> None:
    """Every event fired exactly once, numbered 1..n per run without gaps."""
    assert sorted(f"{run}|{subject}" for run, subject, _ in fired) == sorted(expected)
    for run in SPREAD:
        stored = store.events_after(run, limit=10_000)
        assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
        assert sorted((e.subject, e.seq) for e in stored) == sorted(
            (subject, seq) for r, subject, seq in fired if r == run
        )


def test_two_workers_on_a_cluster_count_every_trial_once_and_fire_once(
    redis_cluster_nodes: RedisClusterNodes, store: RedisStore
) -> None:
    url = redis_cluster_nodes.url
    for run in SPREAD:
        store.save_config(RunConfig(run=run, weights=WEIGHTS))
    other = RedisStore(url, store.prefix, cluster=True)
    workers = [store, other]
    streams = [spread_deliveries(seed) for seed in (1, 2)]
    answers: list[list[int]] = [[], []]
    fired: list[tuple[str, str, int]] = []
    start = threading.Barrier(2)

    def work(index: int) -> None:
        start.wait()
        stream = streams[index]
        for offset in range(0, len(stream), 40):
            chunk = stream[offset : offset + 40]
            for previous in workers[index].apply(as_batch(chunk, str(offset))):
                answers[index].extend(previous)
            for event in workers[index].record_events(question_events(chunk)):
                fired.append((event.run, event.subject, event.seq))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, range(2)))
    other.close()

    check_exact(store, url)
    distinct = 3 * 2 * 15 * 6
    assert sum(a.count(-1) for a in answers) == distinct
    delivered = sum(len(stream) for stream in streams)
    totals = [store.totals(run) for run in SPREAD]
    assert sum(t.duplicates + t.corrections for t in totals) == delivered - distinct
    expected = {
        f"{e.run}|{e.subject}" for e in question_events(streams[0] + streams[1])
    }
    check_fired_once(store, [(r, s, q) for r, s, q in fired], expected)
    last = {str((len(stream) - 1) // 40 * 40) for stream in streams}
    assert store.load().cursors["worker"] in last


def test_a_follower_on_a_cluster_adds_up_to_the_whole_counts(
    redis_cluster_nodes: RedisClusterNodes, store: RedisStore
) -> None:
    for run in SPREAD:
        store.save_config(RunConfig(run=run, weights=WEIGHTS))
    other = RedisStore(redis_cluster_nodes.url, store.prefix, cluster=True)
    deliveries = spread_deliveries(3)
    followed: dict[str, dict[tuple[str, str, bool, int], int]] = {r: {} for r in SPREAD}
    for offset in range(0, len(deliveries), 50):
        other.apply(as_batch(deliveries[offset : offset + 50], str(offset)))
        for run in SPREAD:
            # Each run's change log and cell numbers, read on its master.
            changes = store.counts_if_changed(run)
            assert isinstance(changes, CountChanges)
            for cell, delta in changes.cells.items():
                followed[run][cell] = followed[run].get(cell, 0) + delta
    other.close()
    for run in SPREAD:
        whole = {
            (model, question, False, category): count
            for model, counts in store.counts(run).items()
            for question, row in zip(counts.questions, counts.observed, strict=True)
            for category, count in enumerate(row)
            if count
        }
        assert {cell: n for cell, n in followed[run].items() if n} == whole


def test_dead_letters_count_on_their_runs_master(store: RedisStore) -> None:
    letters = [
        DeadLetter("file", "bad json", str(i), run=SPREAD[i % 3]) for i in range(7)
    ]
    letters.append(DeadLetter("file", "no run", "x"))
    store.apply(Batch(dead_letters=letters, cursor=("file", "8")))
    assert [store.totals(run).rejected for run in SPREAD] == [3, 2, 2]
    assert store.dead_letters(100) == letters
    state = store.load()
    assert set(state.totals) == set(SPREAD)
    assert state.cursors == {"file": "8"}


def test_cluster_true_in_the_store_section(
    redis_cluster_nodes: RedisClusterNodes, prefix: str
) -> None:
    settings = StoreSettings.model_validate(
        {"kind": "redis", "url": redis_cluster_nodes.url, "cluster": True}
    )
    from monitor.cli.serving import _store

    opened = _store(settings)
    assert isinstance(opened, RedisStore)
    opened.save_config(RunConfig(run=f"{prefix}-x"))
    assert f"{prefix}-x" in opened.load().configs
    opened.close()
    delete_keys(redis_cluster_nodes.url, "scorio")
    with pytest.raises(ValueError, match="cluster = true needs kind redis"):
        StoreSettings.model_validate({"kind": "sqlite", "cluster": True})


def durably(call: Callable[[], T], failures: list[str]) -> T:
    """Offer a call until the store takes it, as the sources do."""
    while True:
        try:
            return call()
        except StoreError as error:
            failures.append(str(error))
            time.sleep(0.05)


def test_a_master_killed_under_load_fails_over_and_counts_stay_exact(
    tmp_path: Path,
) -> None:
    trials = 10
    with redis_cluster(tmp_path / "cluster") as cluster:
        url = cluster.url
        store = RedisStore(url, "scorio", cluster=True)
        other = RedisStore(url, "scorio", cluster=True)
        for run in SPREAD:
            store.save_config(RunConfig(run=run, weights=WEIGHTS))
        streams = [spread_deliveries(seed, trials) for seed in (3, 4)]
        progress = [0, 0]
        failures: list[str] = []
        fired: list[tuple[str, str, int]] = []
        start = threading.Barrier(3)

        def work(index: int) -> None:
            target = (store, other)[index]
            stream = streams[index]
            start.wait()
            for offset in range(0, len(stream), 20):
                chunk = stream[offset : offset + 20]
                batch = as_batch(chunk, str(offset))
                durably(partial(target.apply, batch), failures)
                events = question_events(chunk)
                for event in durably(partial(target.record_events, events), failures):
                    fired.append((event.run, event.subject, event.seq))
                progress[index] = offset + len(chunk)

        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(work, index) for index in range(2)]
            start.wait()
            while progress[0] < len(streams[0]) // 3:
                time.sleep(0.01)
            # The master of run "a", killed hard while both workers write.
            with RedisCluster.from_url(url) as client:
                name = client.get_node_from_key(redis_keys.totals("scorio", "a")).name
            victim = next(n for n in cluster.nodes if f"127.0.0.1:{n.port}" == name)
            replica = cluster.replica_of(victim)
            at_kill = list(progress)
            victim.kill()
            for future in done:
                future.result(timeout=120)

        # Killed mid-load; the workers wrote on through the promoted replica
        # (redis-py's own retries or ours above, as StoreErrors, carry them).
        assert cluster.role(replica) == "master"
        assert at_kill[0] < len(streams[0]) and at_kill[1] < len(streams[1])
        assert progress == [len(s) for s in streams]
        cluster.wait_until_ok()
        check_exact(store, url, trials)
        expected = {
            f"{e.run}|{e.subject}" for e in question_events(streams[0] + streams[1])
        }
        check_fired_once(store, fired, expected)
        # The killed master comes back from its AOF as a replica; a fresh
        # worker sees the same exact state and fires nothing again.
        victim.start()
        cluster.wait_until_ok()
        fresh = RedisStore(url, "scorio", cluster=True)
        check_exact(fresh, url, trials)
        assert fresh.record_events(question_events(streams[0])) == []
        for opened in (store, other, fresh):
            opened.close()


def test_a_write_no_replica_has_is_never_acknowledged(tmp_path: Path) -> None:
    """The loss async replication allows, made certain, must not be acknowledged.

    The replica of run "a"'s master is frozen (SIGSTOP) and cut off, so the
    master's later writes can reach no replica; then the master is killed
    and the frozen replica, resumed, takes over without them. An ``apply``
    acknowledged in between would be a lost trial. It must fail instead,
    and its redelivery after the failover counts every trial once.
    """
    with redis_cluster(tmp_path / "cluster") as cluster:
        url = cluster.url
        store = RedisStore(url, "scorio", cluster=True, timeout_s=1.0)
        store.save_config(RunConfig(run="a", weights=WEIGHTS))
        first = [("m", str(q), "0", False, 1, None, None) for q in range(10)]
        store.apply(Batch([trial_batch("a", first)]))
        with RedisCluster.from_url(url) as client:
            name = client.get_node_from_key(redis_keys.totals("scorio", "a")).name
        master = next(n for n in cluster.nodes if f"127.0.0.1:{n.port}" == name)
        replica = cluster.replica_of(master)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGSTOP)
        try:
            with Redis(port=master.port) as direct:
                direct.execute_command("CLIENT", "KILL", "TYPE", "replica")
            late = [("m", str(q), "1", False, 2, None, None) for q in range(10)]
            batch = Batch([trial_batch("a", late)])
            with pytest.raises(StoreError, match="no replica acknowledged"):
                store.apply(batch)
            master.kill()
        finally:
            replica.process.send_signal(signal.SIGCONT)
        cluster.wait_for_promotion(replica)
        failures: list[str] = []
        durably(partial(store.apply, batch), failures)
        totals = store.totals("a")
        # The late trials were lost with the master, so they count as new.
        assert (totals.trials, totals.duplicates) == (20, 0)
        counts = store.counts("a")["m"]
        assert [row[1:] for row in counts.observed] == [[1, 1]] * 10
        store.close()


async def test_streams_of_runs_on_every_master_feed_a_cluster_store(
    redis_cluster_nodes: RedisClusterNodes, store: RedisStore, prefix: str
) -> None:
    """The Redis Streams source on the cluster: one stream per run and slot."""
    url = redis_cluster_nodes.url
    streams_prefix = f"{prefix}-in"
    results = trial_results(4, models=2, questions=5, trials=3)
    events = trial_events(results)
    with RedisCluster.from_url(url) as client:
        for run in SPREAD:
            stream = redis_keys.trial_stream(streams_prefix, run)
            for event in events:
                client.xadd(stream, {"data": json.dumps(event)})
            client.xadd(stream, {"data": json.dumps(events[:3])})  # repeats
        source = RedisStreamSource(
            RedisStreamSettings(
                url=url,
                cluster=True,
                prefix=streams_prefix,
                consumer="w1",
                discover_interval_s=0.1,
                block_ms=50,
            )
        )
        monitor = Monitor(store)
        for run in SPREAD:
            monitor.configure(RunConfig(run=run, question_count=5))
        try:
            async with Service(monitor, [source]):

                async def counted() -> bool:
                    return all(
                        monitor.status(run).trials == results.size for run in SPREAD
                    )

                await eventually(counted)

                async def acknowledged() -> bool:
                    return all(
                        int(
                            client.xpending(
                                redis_keys.trial_stream(streams_prefix, run), "monitor"
                            )["pending"]
                        )
                        == 0
                        for run in SPREAD
                    )

                await eventually(acknowledged)
            # The service closed the store with the monitor: read anew.
            after = RedisStore(url, store.prefix, cluster=True)
            for run in SPREAD:
                totals = after.totals(run)
                assert (totals.trials, totals.duplicates) == (results.size, 3)
            after.close()
        finally:
            for key in client.scan_iter(match=f"{streams_prefix}:*"):
                client.delete(key)


def test_events_of_a_call_that_failed_midway_come_with_the_next_call(
    tmp_path: Path,
) -> None:
    """Run "b"'s events fire, then run "a"'s master has no replica to ack.

    The call fails, yet "b"'s events (and "a"'s, written but unconfirmed)
    are fired in Redis: the engine offers them again, and the retry must
    hand every one of them over once, or no listener would ever see them.
    """
    with redis_cluster(tmp_path / "cluster") as cluster:
        url = cluster.url
        store = RedisStore(url, "scorio", cluster=True, timeout_s=1.0)
        events = pending("b", ["model_done"], ["x", "y"])
        events += pending("a", ["model_done"], ["x", "y"])
        with RedisCluster.from_url(url) as client:
            name = client.get_node_from_key(redis_keys.totals("scorio", "a")).name
        master = next(n for n in cluster.nodes if f"127.0.0.1:{n.port}" == name)
        replica = cluster.replica_of(master)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGSTOP)
        try:
            with Redis(port=master.port) as direct:
                direct.execute_command("CLIENT", "KILL", "TYPE", "replica")
            with pytest.raises(StoreError, match="no replica acknowledged"):
                store.record_events(events)
        finally:
            replica.process.send_signal(signal.SIGCONT)
        failures: list[str] = []
        fired = durably(partial(store.record_events, events), failures)
        assert sorted((e.run, e.subject, e.seq) for e in fired) == [
            ("a", "x", 1),
            ("a", "y", 2),
            ("b", "x", 1),
            ("b", "y", 2),
        ]
        assert store.record_events(events) == []
        other = RedisStore(url, "scorio", cluster=True)
        assert other.record_events(events) == []
        for opened in (store, other):
            opened.close()
