"""Command-line start-up: ``--help``, ``--version`` and ``status``, wall clock.

Run: `.venv/bin/python benchmarks/startup.py [--repeats 7]`

Each figure is a fresh ``python -m monitor ...`` process, timed from start to
exit, repeated; the median and the fastest run are reported with the load
average at the time (the machine's other work slows every run alike).
``status`` reads the state file of the quick start (``watch
examples/aime25.jsonl --config examples/aime25.toml``), written once into a
temporary directory first. Goals: ``--help`` under 0.3 s, ``status`` under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "monitor"]


def wall_times(arguments: list[str], repeats: int, cwd: Path) -> list[float]:
    """Seconds from start to exit of ``repeats`` fresh processes."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [*COMMAND, *arguments],
            cwd=cwd,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        stream = workdir / "aime25.jsonl"
        shutil.copy(ROOT / "examples" / "aime25.jsonl", stream)
        config = str(ROOT / "examples" / "aime25.toml")
        wall_times(["watch", str(stream), "--config", config], 1, workdir)
        state = str(workdir / "aime25.jsonl.monitor.db")
        cases = {
            "help": ["--help"],
            "version": ["--version"],
            "status": ["status", "--state", state],
            "status_json": ["status", "--state", state, "--json"],
        }
        report: dict[str, object] = {
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average_1min": round(os.getloadavg()[0], 2),
            "repeats": options.repeats,
        }
        for name, arguments in cases.items():
            times = wall_times(arguments, options.repeats, workdir)
            report[f"{name}_median_s"] = round(statistics.median(times), 3)
            report[f"{name}_min_s"] = round(min(times), 3)
        report["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
