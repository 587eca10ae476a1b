"""The wire path: JSON bytes to counts, against a naive scorio recompute.

Run: `.venv/bin/python benchmarks/wire.py`

The stream of `benchmarks/ingest.py` (1,000,000 trials of 20 models on 1,000
questions; a fifth of it for one event per call), each mode on a fresh
monitor, timed after its first tenth (which creates the count tables and the
stopping rule: a one-off, printed as ``*_setup_s``).

- one event per call: `Monitor().ingest(event)` and `ingest([event])` (a
  dict), `ingest_payload(bytes)` of one event and of an array of one.
- arrays from JSON bytes: `ingest_payload(bytes)` of arrays of 1,000 and of
  10,000 events (the bytes made beforehand), in memory and into SQLite (WAL,
  synchronous=FULL: on disk before the call returns); and, for comparison,
  the same arrays as lists of dicts through the Python API
  (``*_dict_path``: `json.loads`, then `ingest(list)`, which the one
  decoder converts in one msgspec call). Arrays
  of 2,000 and of 5,000 events in memory only, to show at which array size
  a ratio is crossed.

Baseline, measured in the same run: per arriving trial, `scorio.eval.bayes`
on that model's results matrix (30 questions x 80 trials), as
`benchmarks/streaming_update.py` does. It is measured right before and right
after each mode, and each rate is given as a ratio to the mean of the two
(``*_x_scorio``), so a shared machine's changing speed moves both alike.
The same by the process's CPU time (``*_cpu_per_s``, ``*_cpu_x_scorio``):
steadier when other jobs take the cores, but blind to waiting on the disk
(the SQLite modes' fsync), so the wall-clock figures are the ones to quote.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scorio.eval

from benchmarks.ingest import configured, events, timed
from monitor import Monitor


class Timed(NamedTuple):
    """A mode's rate by the wall clock and by the process's CPU time."""

    per_second: float
    cpu_per_second: float
    setup_s: float


def scorio_recompute_per_s(trials: int = 2000, seed: int = 0) -> Timed:
    """Trials per second when each one recomputes scorio.eval.bayes."""
    rng = np.random.default_rng(seed)
    results = (rng.random((20, 30, 80)) < rng.random((20, 1, 1))).astype(np.int64)
    models = rng.integers(0, 20, size=trials).tolist()
    start, cpu = time.perf_counter(), time.process_time()
    for model in models:
        scorio.eval.bayes(results[model])
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    return Timed(trials / wall_s, trials / cpu_s, 0.0)


def cpu_timed(ingest_all: Callable[[slice], None], size: int, warm: int) -> Timed:
    """:func:`benchmarks.ingest.timed`, with the CPU time as well."""
    cpu: list[float] = []

    def clocked(part: slice) -> None:
        cpu.append(time.process_time())
        ingest_all(part)
        cpu.append(time.process_time())

    rates = timed(clocked, size, warm)
    return Timed(rates.per_second, (size - warm) / (cpu[3] - cpu[2]), rates.setup_s)


def one_per_call(
    stream: list[dict[str, object]], ingest: Callable[..., object], wrap: str
) -> Timed:
    """One event per call; ``wrap``: the dict, [dict], bytes or [bytes]."""
    items: list[object]
    if wrap == "dict":
        items = list(stream)
    elif wrap == "list":
        items = [[event] for event in stream]
    elif wrap == "bytes":
        items = [json.dumps(event).encode() for event in stream]
    else:
        items = [json.dumps([event]).encode() for event in stream]

    def ingest_all(part: slice) -> None:
        for item in items[part]:
            ingest(item)

    return cpu_timed(ingest_all, len(stream), len(stream) // 10)


def arrays(
    stream: list[dict[str, object]],
    size: int,
    state: Path | None,
    warm: int,
    dict_path: bool = False,
    configure: Callable[[], Monitor] | None = None,
) -> Timed:
    """``ingest_payload`` of JSON arrays of ``size`` events.

    ``dict_path``: the arrays as lists of dicts (``json.loads``, then
    ``ingest``: the decoder's path for Python objects), for comparison.
    ``configure``: makes the monitor in memory (``state`` then unused).
    """
    bodies = [
        json.dumps(stream[offset : offset + size]).encode()
        for offset in range(0, len(stream), size)
    ]
    with configured(state) if configure is None else configure() as monitor:

        def ingest_all(part: slice) -> None:
            for body in bodies[part.start // size : part.stop // size]:
                if dict_path:
                    monitor.ingest(json.loads(body), source="bench")
                else:
                    monitor.ingest_payload(body, source="bench")

        rates = cpu_timed(ingest_all, len(stream), warm)
        assert monitor.status("bench").trials == len(stream)
        return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000)
    arguments = parser.parse_args()
    stream = events(arguments.trials, models=20, questions=1000, seed=0)
    warm = arguments.trials // 10
    single = stream[: arguments.trials // 5]
    report: dict[str, object] = {"cores": os.cpu_count(), "trials": arguments.trials}

    def measure(name: str, mode: Callable[[], Timed]) -> None:
        before = scorio_recompute_per_s()
        rates = mode()
        after = scorio_recompute_per_s()
        wall = (before.per_second + after.per_second) / 2
        cpu = (before.cpu_per_second + after.cpu_per_second) / 2
        report[f"{name}_per_s"] = round(rates.per_second)
        report[f"{name}_x_scorio"] = round(rates.per_second / wall, 1)
        report[f"{name}_scorio_per_s"] = round(wall)
        report[f"{name}_cpu_per_s"] = round(rates.cpu_per_second)
        report[f"{name}_cpu_x_scorio"] = round(rates.cpu_per_second / cpu, 1)
        report[f"{name}_setup_s"] = round(rates.setup_s, 3)

    # A first monitor pays one-off costs (imports, the stopping rule's
    # calibration) that would otherwise land on the first mode.
    one_per_call(single[:20_000], configured().ingest, "dict")
    for wrap in ("dict", "list", "bytes", "list_bytes"):
        monitor = configured()
        ingest = monitor.ingest if wrap in ("dict", "list") else monitor.ingest_payload
        measure(
            f"one_per_call_{wrap}",
            functools.partial(one_per_call, single, ingest, wrap),
        )
    with tempfile.TemporaryDirectory() as folder:
        for size in (1000, 2000, 5000, 10_000):
            measure(
                f"arrays_of_{size}_memory",
                functools.partial(arrays, stream, size, None, warm),
            )
            if size in (2000, 5000):
                # Only in memory: where between 1,000 and 10,000 a ratio
                # is crossed.
                continue
            measure(
                f"arrays_of_{size}_memory_dict_path",
                functools.partial(arrays, stream, size, None, warm, dict_path=True),
            )
            path = Path(folder) / f"wire-{size}.db"
            measure(
                f"arrays_of_{size}_sqlite",
                functools.partial(arrays, stream, size, path, warm),
            )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
