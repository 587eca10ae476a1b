"""End-to-end service throughput and latency: MQTT in, Redis shared state.

Run: `.venv/bin/python benchmarks/service.py`

Starts its own mosquitto and redis-server on free ports and one or two
`scorio-monitor serve` workers (Redis store, shared MQTT subscription).

- throughput: a publisher sends N trials as JSON arrays of 100 per QoS 1
  message (encoded beforehand) as fast as the broker takes them; the clock
  stops when a worker's status counts all N (the status is computed from the
  shared Redis counts). CPU per trial of every process (workers, Redis, the
  broker, this one), and the rate the busiest would allow with a core of its
  own: a projection for a machine with the cores, not a measurement.
- latency: single-trial messages paced at 1,000 trials/s; for each trial,
  the time from its publish to the first retained status on MQTT that
  counts it. Reported as p50 / p99 over the run.
- CPU: user + system time of the worker processes (from /proc), summed over
  the workers, per trial counted, for each phase (``bulk``: the throughput
  phase; ``paced``: the latency phase, its 1.5 s of idle edges included).

``--workers 1 2`` (the default) runs one, then two workers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import aiomqtt
import httpx
import numpy as np

from tests.services import free_port, mosquitto_broker, redis_server

ROOT = Path(__file__).resolve().parent.parent
BROKER_CONFIG = "max_inflight_messages 1000\nmax_queued_messages 1000000\n"


def write_config(
    folder: Path, broker_url: str, redis_url: str, name: str
) -> tuple[Path, str]:
    port = free_port()
    path = folder / f"{name}.toml"
    path.write_text(
        f"""
status_interval_s = 0.005
look_interval_s = 0.05
[store]
kind = "redis"
url = "{redis_url}"
prefix = "bench"
[mqtt]
url = "{broker_url}"
topic_prefix = "bench"
client_id = "bench-{name}"
shared_group = "workers"
max_batch = 1000
[http]
listen = "127.0.0.1:{port}"
[[runs]]
run = "run"
question_count = 1000
max_trials_per_question = 1000000
"""
    )
    return path, f"http://127.0.0.1:{port}"


def start_worker(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
            stdout=output,
            stderr=output,
            cwd=ROOT,
        )


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
    utime, stime = fields.split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(processes: list[subprocess.Popen[bytes]]) -> float:
    """User + system CPU time of the worker processes so far, from /proc."""
    return sum(process_cpu(process.pid) for process in processes)


async def wait_up(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=1.0) as http:
        for _ in range(300):
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"worker at {base} did not start")


async def counted(http: httpx.AsyncClient) -> int:
    response = await http.get("/runs/run/status")
    return int(response.json()["trials"]) if response.status_code == 200 else 0


def trials(count: int, offset: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    models = rng.integers(0, 10, size=count)
    outcomes = rng.random(count) < 0.5
    return [
        {
            "model": f"m{models[i]}",
            "question": (offset + i) % 1000,
            "trial": (offset + i) // 1000,
            "correct": bool(outcomes[i]),
        }
        for i in range(count)
    ]


def bodies(count: int, offset: int) -> list[bytes]:
    """The throughput phase's messages: JSON arrays of 100 trials.

    Encoded before the clock starts: the publisher shares the cores with the
    workers, and its JSON encoding is not the service's work.
    """
    events = trials(count, offset, seed=offset)
    return [
        json.dumps(events[index : index + 100]).encode()
        for index in range(0, count, 100)
    ]


async def throughput(
    port: int, base: str, messages: list[bytes], count: int
) -> tuple[float, int]:
    """Trials per second, and the run's count once all were counted."""
    # One client for every poll: a client per poll cost this process a TLS
    # context each time (about 17 % of its CPU), taken from the workers.
    async with httpx.AsyncClient(base_url=base, timeout=5.0) as http:
        before = await counted(http)
        start = time.perf_counter()
        async with aiomqtt.Client(
            "127.0.0.1", port, max_inflight_messages=1000
        ) as client:
            for body in messages:
                await client.publish("bench/run/trials", body, qos=1)
        while await counted(http) < before + count:
            await asyncio.sleep(0.02)
    return count / (time.perf_counter() - start), before + count


async def latency(
    port: int, seconds: float, rate: float, offset: int, base_count: int
) -> tuple[float, float]:
    """p50 and p99 of publish -> first retained status counting the trial.

    ``base_count`` is the run's count before the first trial; with two
    workers the retained status may come from the one whose view of the
    shared counts lags, so it is not taken from the first status seen.
    """
    events = trials(int(seconds * rate), offset, seed=offset + 1)
    published: list[float] = []
    seen: list[tuple[float, int]] = []
    async with (
        aiomqtt.Client("127.0.0.1", port) as watcher,
        aiomqtt.Client("127.0.0.1", port) as sender,
    ):
        await watcher.subscribe("bench/run/status", qos=0)

        async def watch() -> None:
            async for message in watcher.messages:
                trials_now = int(json.loads(bytes(message.payload))["trials"])
                seen.append((time.perf_counter(), trials_now))

        reader = asyncio.create_task(watch())
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        for index, event in enumerate(events):
            target = start + index / rate
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            published.append(time.perf_counter())
            await sender.publish("bench/run/trials", json.dumps(event), qos=1)
        await asyncio.sleep(1.0)
        reader.cancel()
    arrivals = np.array([moment for moment, _ in seen])
    counts = np.array([count for _, count in seen])
    delays = []
    for index, sent in enumerate(published):
        reached = np.flatnonzero(counts >= base_count + index + 1)
        if reached.size:
            delays.append(arrivals[reached[0]] - sent)
    values = np.array(delays) * 1000
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


async def measure(workers: int, count: int, folder: Path) -> dict[str, float | str]:
    with ExitStack() as stack:
        broker = stack.enter_context(mosquitto_broker(folder / "broker", BROKER_CONFIG))
        redis = stack.enter_context(redis_server(folder / "redis"))
        processes = []
        bases = []
        for index in range(workers):
            config, base = write_config(folder, broker.url, redis.url, f"w{index}")
            processes.append(start_worker(config, folder / f"w{index}.log"))
            bases.append(base)
        try:
            for base in bases:
                await wait_up(base)
            await asyncio.sleep(1.0)
            messages = bodies(count, offset=0)
            # Every process of the bulk phase, to see which one would cap the
            # rate where each had a core of its own.
            pids = {f"worker{index}": p.pid for index, p in enumerate(processes)}
            assert redis.process is not None and broker.process is not None
            pids["redis"] = redis.process.pid
            pids["broker"] = broker.process.pid
            pids["bench"] = os.getpid()
            each_start = {name: process_cpu(pid) for name, pid in pids.items()}
            cpu_start = cpu_seconds(processes)
            rate, total = await throughput(broker.port, bases[0], messages, count)
            cpu_bulk = cpu_seconds(processes) - cpu_start
            each = {
                name: (process_cpu(pid) - each_start[name]) / count * 1e6
                for name, pid in pids.items()
            }
            cpu_start = cpu_seconds(processes)
            paced = int(5.0 * 1000.0)
            p50, p99 = await latency(broker.port, 5.0, 1000.0, count, total)
            cpu_paced = cpu_seconds(processes) - cpu_start
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=30)
    return {
        "workers": workers,
        "trials_per_s": round(rate),
        "latency_p50_ms": round(p50, 2),
        "latency_p99_ms": round(p99, 2),
        # Summed over the workers: CPU spent per trial counted.
        "cpu_us_per_trial_bulk": round(cpu_bulk / count * 1e6, 1),
        "cpu_us_per_trial_paced": round(cpu_paced / paced * 1e6, 1),
        # Bulk phase, per process: CPU us per trial counted, and the rate the
        # busiest process would allow with a core to itself (a projection:
        # no process here has one; the bench process publishes and polls).
        **{f"cpu_us_per_trial_{name}": round(us, 2) for name, us in each.items()},
        "one_core_each_ceiling_per_s": round(1e6 / max(each.values())),
        "one_core_each_ceiling_by": max(each, key=lambda name: each[name]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--out", type=Path, help="also append the results to this JSON-lines file"
    )
    arguments = parser.parse_args()
    results = []
    for workers in arguments.workers:
        with tempfile.TemporaryDirectory() as folder:
            load = os.getloadavg()[0]
            result = asyncio.run(measure(workers, arguments.trials, Path(folder)))
            # The machine: its cores, and how busy it was (other jobs too).
            result["cpus"] = os.cpu_count() or 0
            result["load_1min_before"] = round(load, 2)
            results.append(result)
    print(json.dumps(results, indent=2))
    if arguments.out is not None:
        with arguments.out.open("a") as output:
            output.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
