"""The HTTP API under hostile requests, and /healthz under slow clients.

Run: `.venv/bin/python benchmarks/hostile_http.py`
     `.venv/bin/python benchmarks/hostile_http.py --slow-clients [--open-files 256]`

Starts `scorio-monitor serve` (SQLite store) on a free port, declares one run
of 40 models x 1,000 questions and counts one trial per (model, question).
Then a "good" client posts one trial at a time, sequentially, and times each
answer, in turns alone (1 s windows) and while hostile clients, in another
process, run in parallel (2.5 s windows):

- `POST /runs/bench/next` with budget 1000 (the largest allowed) in a loop;
- 400 KB bodies of 200,000 `1`s (refused whole: over the item limit);
- batches of 10,000 events with an invalid category (10,000 rejections);
- `'[' * 2000` bodies (nested too deeply) and `text/plain` bodies (415);
- batches of 10,000 good events of a second run (counted in pieces);
- `Last-Event-ID` values `\\xb2` and 5,000 digits on the events route;
- an SSE subscriber that never reads its stream (point 5).

Reports p50/p99/max of the good requests in both phases, the delay beyond
their own work (p50 and p99 under load minus p50 alone), the CPU the server
got in each phase, every status code the hostile clients got (none may be
5xx), and the server's RSS before and after (VmRSS from /proc).

With `--slow-clients`, the server (optionally held to `--open-files`) gets
`--half-open` connections that never send a byte and `--slowloris`
connections that send a request head a byte a second, each reopened as soon
as the server closes it, while a probe (from 127.0.0.2, another client)
asks `/healthz` on a new connection every 0.1 s. Reports the probe's
p50/p99/max and failures, how often the server closed the attackers, and
the size of the server's log with its accept() error lines.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from monitor.service.snapshot import LATENCY_BUCKETS_S
from tests.services import free_port

ROOT = Path(__file__).resolve().parent.parent
JSON = {"Content-Type": "application/json"}
MODELS = 40
HOSTILE = ["next", "ones", "invalid", "deep", "bulk", "ids"]
QUESTIONS = 1000


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def start_server(
    folder: Path, open_files: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = folder / "serve.toml"
    config.write_text(
        f"""
[store]
kind = "sqlite"
path = "{folder / "state.db"}"
[http]
listen = "127.0.0.1:{port}"
[[runs]]
run = "bench"
question_count = {QUESTIONS}
[[runs]]
run = "bulk"
question_count = {QUESTIONS}
"""
    )

    def limit_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with (folder / "serve.err").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=limit_files,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).is_success:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("serve did not start")


async def fill(client: httpx.AsyncClient) -> None:
    events = [
        {"model": f"m{m}", "question": q, "trial": 0, "correct": (q * (m + 1)) % 3 == 0}
        for m in range(MODELS)
        for q in range(QUESTIONS)
    ]
    for start in range(0, len(events), 5000):
        response = await client.post(
            "/runs/bench/trials", json=events[start : start + 5000]
        )
        response.raise_for_status()


async def good_requests(
    client: httpx.AsyncClient, duration_s: float, first_trial: int
) -> list[float]:
    latencies = []
    trial = first_trial
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        body = {
            "model": "m0",
            "question": trial % QUESTIONS,
            "trial": trial,
            "category": 1,
        }
        started = time.perf_counter()
        response = await client.post("/runs/bench/trials", json=body)
        latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"good request failed: {response.status_code}")
        trial += 1
    return latencies


async def hostile(
    client: httpx.AsyncClient,
    name: str,
    stop: asyncio.Event,
    codes: collections.Counter[tuple[str, int]],
    gate: Callable[[], Awaitable[None]],
) -> None:
    ones = b"[" + b"1," * 199_999 + b"1]"
    invalid = json.dumps(
        [
            {"model": "x", "question": 0, "trial": t, "category": 9}
            for t in range(10_000)
        ]
    ).encode()
    deep = b"[" * 2000
    counter = 0
    while not stop.is_set():
        await gate()
        if stop.is_set():
            return
        if name == "next":
            response = await client.post("/runs/bench/next", json={"budget": 1_000})
        elif name == "ones":
            response = await client.post(
                "/runs/bench/trials", content=ones, headers=JSON
            )
        elif name == "invalid":
            response = await client.post(
                "/runs/bench/trials", content=invalid, headers=JSON
            )
        elif name == "deep":
            response = await client.post(
                "/runs/bench/trials", content=deep, headers=JSON
            )
            codes[(name, response.status_code)] += 1
            response = await client.post(
                "/runs/bench/trials",
                content=b"{}",
                headers={"Content-Type": "text/plain"},
            )
        elif name == "bulk":
            events = [
                {
                    "model": f"b{counter % 5}",
                    "question": q % QUESTIONS,
                    "trial": counter * 10 + q // QUESTIONS,
                    "correct": True,
                }
                for q in range(10_000)
            ]
            counter += 1
            response = await client.post("/runs/bulk/trials", json=events)
        else:  # ids
            response = await client.get(
                "/runs/bench/events", headers={b"Last-Event-ID": b"\xb2"}
            )
            codes[(name, response.status_code)] += 1
            response = await client.get(
                "/runs/bench/events", params={"since": "9" * 5000}
            )
        codes[(name, response.status_code)] += 1


def stalled_subscriber(base: str) -> socket.socket:
    """An SSE client that sends its request and never reads the answer."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(f"GET /runs/bench/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


def summary(latencies: list[float]) -> dict[str, float]:
    """Count and percentiles (ms) of the latencies."""
    values = np.array(latencies) * 1000
    return {
        "requests": len(values),
        "p50_ms": round(float(np.percentile(values, 50)), 2),
        "p99_ms": round(float(np.percentile(values, 99)), 2),
        "max_ms": round(float(values.max()), 2),
    }


async def engine_cpu(client: httpx.AsyncClient) -> dict[str, list[float]]:
    """Cumulative counts of ``scorio_engine_call_cpu_seconds`` per kind."""
    text = (await client.get("/metrics")).text
    counts: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "scorio_engine_call_cpu_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    kind = sample.labels["kind"]
                    counts.setdefault(kind, []).append(sample.value)
    return counts


def cpu_summary(
    before: dict[str, list[float]], after: dict[str, list[float]]
) -> dict[str, dict[str, object]]:
    """Engine calls per kind in between, and the bucket bounds (ms) that hold
    99 % and all of them (a call's CPU time: its work, not its waits)."""
    bounds = [*(bound * 1000 for bound in LATENCY_BUCKETS_S), float("inf")]
    result: dict[str, dict[str, object]] = {}
    for kind, counts in after.items():
        done = [
            a - b
            for a, b in zip(counts, before.get(kind, [0.0] * len(counts)), strict=True)
        ]
        total = done[-1]
        if not total:
            continue
        p99 = next(b for b, c in zip(bounds, done, strict=True) if c >= 0.99 * total)
        top = next(b for b, c in zip(bounds, done, strict=True) if c >= total)
        result[kind] = {
            "calls": int(total),
            "p99_le_ms": p99,
            "max_le_ms": top,
        }
    return result


def attack(
    base: str,
    names: list[str],
    stop: EventType,
    paused: EventType,
    busy: Synchronized[int],
    answers: Queue[dict[str, int]],
) -> None:
    """The hostile clients, in their own process (see :func:`measure`).

    While ``paused`` is set each client waits before its next request;
    ``busy`` counts the clients with a request under way.
    """

    async def gate() -> None:
        busy.value -= 1
        while paused.is_set() and not stop.is_set():
            await asyncio.sleep(0.02)
        busy.value += 1

    async def run() -> dict[str, int]:
        codes: collections.Counter[tuple[str, int]] = collections.Counter()
        done = asyncio.Event()
        async with httpx.AsyncClient(base_url=base, timeout=120) as attacker:
            tasks = [
                asyncio.create_task(hostile(attacker, name, done, codes, gate))
                for name in names
            ]
            while not stop.is_set():
                await asyncio.sleep(0.05)
            done.set()
            await asyncio.gather(*tasks)
        return {f"{n} {c}": k for (n, c), k in sorted(codes.items())}

    busy.value = len(names)
    answers.put(asyncio.run(run()))


async def measure(
    base: str, pid: int, duration_s: float, names: list[str]
) -> dict[str, object]:
    """Time the good client alone and while the hostile ones run, in turns.

    Windows of 2.5 s under hostile load alternate with windows of 1 s alone
    (after every hostile request under way has ended), so the two are timed
    on the same shared machine at the same time and its own load (other
    jobs) weighs on both alike. The hostile clients run in another process:
    in the good client's event loop, building their 10,000-event bodies
    would delay the good requests' timing on the client side.
    """
    limits = httpx.Limits(max_connections=20)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        await fill(client)
        await asyncio.sleep(1.0)
        rss_before = rss_mb(pid)
        context = multiprocessing.get_context("spawn")
        stop, paused = context.Event(), context.Event()
        busy = context.Value("i", 0)
        answers: Queue[dict[str, int]] = context.Queue()
        subscriber = stalled_subscriber(base)
        attacker = context.Process(
            target=attack, args=(base, names, stop, paused, busy, answers)
        )
        paused.set()
        attacker.start()
        cpu_before = await engine_cpu(client)
        alone: list[float] = []
        loaded: list[float] = []
        cpu = {"alone": 0.0, "loaded": 0.0}
        windows = max(1, round(duration_s / 2.5))
        for window in range(windows):
            paused.set()
            while busy.value > 0:
                await asyncio.sleep(0.02)
            started = cpu_s(pid)
            alone += await good_requests(client, 1.0, 10**6 + window * 10**4)
            cpu["alone"] += cpu_s(pid) - started
            paused.clear()
            await asyncio.sleep(0.3)  # the hostile requests are under way
            started = cpu_s(pid)
            loaded += await good_requests(client, 2.5, 2 * 10**6 + window * 10**4)
            cpu["loaded"] += cpu_s(pid) - started
        await asyncio.sleep(0.2)  # a status refresh takes the last counts
        cpu_after = await engine_cpu(client)
        stop.set()
        codes = await asyncio.to_thread(answers.get)
        await asyncio.to_thread(attacker.join)
        rss_after = rss_mb(pid)
        subscriber.close()
        status = (await client.get("/runs/bench/status")).json()
    own, under = summary(alone), summary(loaded)
    return {
        "alone": own,
        "under_hostile_load": under,
        # The good request's own work: its latency alone (the median).
        "delay_beyond_own_work_ms": {
            "p50": round(under["p50_ms"] - own["p50_ms"], 2),
            "p99": round(under["p99_ms"] - own["p50_ms"], 2),
        },
        # CPU the server got (cores): on a shared machine, little of it
        # under load means the machine, not the server, held the requests.
        "server_cpu_cores": {
            "alone": round(cpu["alone"] / sum(alone), 2),
            "under_load": round(cpu["loaded"] / sum(loaded), 2),
        },
        # Under load and alone together: what one call held the engine for.
        "engine_call_cpu": cpu_summary(cpu_before, cpu_after),
        "load_average": round(os.getloadavg()[0], 2),
        "hostile_answers": codes,
        "server_errors": sum(
            k for name, k in codes.items() if int(name.split()[1]) >= 500
        ),
        "rss_mb_before": round(rss_before, 1),
        "rss_mb_after": round(rss_after, 1),
        "good_trials_counted": status["trials"] - MODELS * QUESTIONS,
        "good_trials_sent": len(alone) + len(loaded),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--only", nargs="*", choices=HOSTILE, default=HOSTILE, help="hostile clients"
    )
    parser.add_argument("--slow-clients", action="store_true")
    parser.add_argument("--open-files", type=int, default=None)
    parser.add_argument("--half-open", type=int, default=500)
    parser.add_argument("--slowloris", type=int, default=500)
    arguments = parser.parse_args()
    if arguments.slow_clients:
        # Imported here: it imports this module's server and summary.
        from benchmarks.slow_clients import run_slow_clients

        run_slow_clients(arguments)
        return
    with tempfile.TemporaryDirectory() as folder:
        process, base = start_server(Path(folder))
        try:
            result = asyncio.run(
                measure(base, process.pid, arguments.seconds, arguments.only)
            )
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    print(json.dumps(result, indent=2))
    if os.environ.get("CI") is None and result["server_errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
