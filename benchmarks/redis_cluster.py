"""Shared store throughput: one Redis against a Redis Cluster (3 masters).

Run: `.venv/bin/python benchmarks/redis_cluster.py`

Both with AOF and `appendfsync always`, on this machine's loopback. The
cluster has a replica per master, and every apply waits for one replica to
acknowledge (what makes an acknowledged trial survive a failover); the one
Redis has none. Each `RedisStore.apply` carries one batch of 1,000 new
trials of three runs (on three masters in the cluster), as a worker's
batches do; the rate is new trials per second from one worker thread.
Writes `benchmarks/results/redis_cluster.json`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapters.redis.store import RedisStore
from monitor import RunConfig
from monitor.stores.batches import Batch, TrialBatch
from tests.services import redis_cluster, redis_server

RUNS = ("b", "c", "a")  # one per master of a fresh three-master cluster


def batches(count: int, size: int) -> Iterator[Batch]:
    for number in range(count):
        parts = []
        for run in RUNS:
            part = TrialBatch(run)
            for index in range(size // len(RUNS)):
                trial = f"{number}-{index}"
                part.append(f"m{index % 10}", str(index % 500), trial, index % 2)
            parts.append(part)
        yield Batch(parts)


def rate(store: RedisStore, count: int, size: int) -> float:
    for run in RUNS:
        store.save_config(RunConfig(run=run))
    work = list(batches(count, size))
    start = time.perf_counter()
    for batch in work:
        store.apply(batch)
    elapsed = time.perf_counter() - start
    trials = sum(store.totals(run).trials for run in RUNS)
    return trials / elapsed


@contextmanager
def stores(folder: Path) -> Iterator[tuple[RedisStore, RedisStore]]:
    with (
        redis_server(folder / "one", persistent=True) as one,
        redis_cluster(folder / "cluster") as cluster,
    ):
        single = RedisStore(one.url)
        clustered = RedisStore(cluster.url, cluster=True)
        yield single, clustered
        single.close()
        clustered.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--size", type=int, default=999)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, stores(Path(folder)) as pair:
        single, clustered = pair
        result = {
            "batches": args.batches,
            "trials_per_batch": args.size,
            "one_redis_trials_per_s": round(rate(single, args.batches, args.size)),
            "cluster_trials_per_s": round(rate(clustered, args.batches, args.size)),
        }
    print(json.dumps(result, indent=2))
    out = Path(__file__).parent / "results" / "redis_cluster.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
