"""/healthz under slow and silent clients (`hostile_http.py --slow-clients`).

Run: `.venv/bin/python benchmarks/hostile_http.py --slow-clients [--open-files 256]`

See benchmarks/hostile_http.py's docstring for what it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import httpx

from benchmarks.hostile_http import start_server, summary


def slow_attack(
    base: str, half_open: int, slowloris: int, stop: EventType, answers: Queue[object]
) -> None:
    """Silent and slow connections, each reopened once the server closes it
    (in its own process: the probe's timing is not the attackers' loop)."""
    host, port = base.removeprefix("http://").split(":")
    closed = collections.Counter[str]()
    head = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode()

    async def attacker(kind: str) -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                closed[f"{kind} connect failed"] += 1
                await asyncio.sleep(0.1)
                continue
            try:
                sent = 0
                while not stop.is_set():
                    if kind == "slowloris":
                        writer.write(head[sent % len(head) : sent % len(head) + 1])
                        sent += 1
                    try:
                        if await asyncio.wait_for(reader.read(1024), 1.0) == b"":
                            break  # the server closed it
                    except TimeoutError:
                        continue
                closed[kind] += not stop.is_set()
            except OSError:
                closed[kind] += 1
            finally:
                writer.close()

    async def run() -> None:
        await asyncio.gather(
            *(
                attacker(kind)
                for kind, count in (("half_open", half_open), ("slowloris", slowloris))
                for _ in range(count)
            )
        )

    asyncio.run(run())
    answers.put(dict(closed))


async def slow_clients(
    base: str, seconds: float, half_open: int, slowloris: int
) -> dict[str, object]:
    """/healthz latency while slow and silent connections keep coming back."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    answers: Queue[object] = context.Queue()
    attackers = context.Process(
        target=slow_attack, args=(base, half_open, slowloris, stop, answers)
    )
    attackers.start()
    await asyncio.sleep(3.0)  # every attacker connected at least once
    latencies: list[float] = []
    failures: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + seconds
    # The probe is another client than the attackers (as a health check
    # is): another loopback address.
    transport = httpx.AsyncHTTPTransport(
        local_address="127.0.0.2", limits=httpx.Limits(max_keepalive_connections=0)
    )
    async with httpx.AsyncClient(
        base_url=base, timeout=30, transport=transport
    ) as probe:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                response = await probe.get("/healthz")
                if response.is_success:
                    latencies.append(time.perf_counter() - started)
                else:
                    failures[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                failures[type(exc).__name__] += 1
            await asyncio.sleep(0.1)
    stop.set()
    closed = await asyncio.to_thread(answers.get)
    await asyncio.to_thread(attackers.join)
    return {
        "healthz": summary(latencies) if latencies else {},
        "healthz_failures": dict(failures),
        "attackers_closed_by_server": closed,
    }


def run_slow_clients(arguments: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        process, base = start_server(Path(folder), arguments.open_files)
        try:
            result = asyncio.run(
                slow_clients(
                    base, arguments.seconds, arguments.half_open, arguments.slowloris
                )
            )
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        log = (Path(folder) / "serve.err").read_text(errors="replace")
    print(log, file=sys.stderr)
    result["server_log_bytes"] = len(log.encode())
    result["server_log_accept_error_lines"] = sum(
        "accept()" in line for line in log.splitlines()
    )
    result["open_files"] = arguments.open_files
    print(json.dumps(result, indent=2))
    if not result["healthz"] or result["healthz_failures"]:
        sys.exit(1)
