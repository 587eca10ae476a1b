"""Redis CPU per applied trial: the shared store alone, without MQTT or workers.

Run: `.venv/bin/python benchmarks/redis_apply.py`

Starts its own redis-server (no persistence, as `benchmarks/service.py`) and
applies `--trials` new trials with one `RedisStore`, in batches of 1,000 laid
out as that benchmark's (10 models, question = i mod 1,000, trial = i div
1,000, two categories), then the first quarter again (all duplicates). It
reports the CPU time of the redis-server process per trial (from /proc), of
this process per trial, and Redis's own account of the time in each command
(`INFO commandstats`; the commands a script calls are counted on their own
too, so `EVAL` minus them is the script's Lua and conversions). Numbers from
a machine shared with other work are indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from adapters.redis.store import RedisStore
from monitor.stores.batches import Batch, TrialBatch
from tests.services import redis_server


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batches(count: int, size: int) -> list[TrialBatch]:
    rng = np.random.default_rng(0)
    models = rng.integers(0, 10, size=count).tolist()
    categories = (rng.random(count) < 0.5).astype(int).tolist()
    made = []
    for start in range(0, count, size):
        indices = range(start, min(start + size, count))
        made.append(
            TrialBatch(
                "run",
                model=[f"m{models[i]}" for i in indices],
                question=[str(i % 1000) for i in indices],
                trial=[str(i // 1000) for i in indices],
                category=[categories[i] for i in indices],
                prior=[False] * len(indices),
                tokens=[None] * len(indices),
                seconds=[None] * len(indices),
            )
        )
    return made


def command_times(client: redis.Redis, count: int) -> dict[str, float]:
    """Microseconds per trial in each command since the last reset."""
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): round(values["usec"] / count, 3)
        for name, values in sorted(stats.items(), key=lambda item: -item[1]["usec"])
        if values["usec"] / count >= 0.001
    }


def measure(count: int, folder: Path) -> dict[str, object]:
    with redis_server(folder) as server:
        assert server.process is not None
        pid = server.process.pid
        store = RedisStore(server.url, prefix="bench")
        work = batches(count, 1000)
        with redis.Redis.from_url(server.url, decode_responses=True) as client:
            client.config_resetstat()
            redis_start, own_start = process_cpu(pid), time.process_time()
            for trials in work:
                store.apply(Batch([trials]))
            redis_new = process_cpu(pid) - redis_start
            own_new = time.process_time() - own_start
            times = command_times(client, count)
            again = work[: len(work) // 4]
            redis_start = process_cpu(pid)
            for trials in again:
                store.apply(Batch([trials]))
            redis_duplicate = process_cpu(pid) - redis_start
        totals = store.totals("run")
        store.close()
    repeated = sum(len(trials) for trials in again)
    assert (totals.trials, totals.duplicates) == (count, repeated)
    return {
        "trials": count,
        "cpu_us_per_new_trial_redis": round(redis_new / count * 1e6, 2),
        "cpu_us_per_new_trial_client": round(own_new / count * 1e6, 2),
        "cpu_us_per_duplicate_redis": round(redis_duplicate / repeated * 1e6, 2),
        "command_us_per_new_trial": times,
        "load_1min_before": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        result = measure(arguments.trials, Path(folder))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
