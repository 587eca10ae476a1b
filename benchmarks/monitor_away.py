"""What a monitor that is away costs a real Inspect eval.

Runs one Inspect eval (the test suite's latency provider, two models, 10
questions, Inspect's default concurrency, the monitor's hook and early
stopping) without a monitor and with ``SCORIO_MONITOR_URL`` pointing at a
port nothing listens on, alternating, and reports each pair's wall time.
The goal: at most 1 s longer with the monitor away.

    .venv/bin/python -m benchmarks.monitor_away --repeats 5 --epochs 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

from inspect_ai import eval_async

from adapters.harness.early_stopping import MonitorEarlyStopping
from tests.adapters.test_inspect_loop import model, yes_no
from tests.services import free_port


async def one_eval(epochs: int, log_dir: Path, latency_s: float) -> float:
    models = [model("a", "1", latency_s), model("b", "10", latency_s)]
    started = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):
        await eval_async(
            yes_no(epochs, MonitorEarlyStopping()),
            model=models,
            log_dir=str(log_dir),
            fail_on_error=False,
        )
    return time.monotonic() - started


async def compare(repeats: int, epochs: int, latency_s: float) -> list[float]:
    os.environ["INSPECT_DISPLAY"] = "none"
    away_url = f"http://127.0.0.1:{free_port()}"
    extra: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        await one_eval(epochs, Path(folder) / "warm-up", latency_s)
        for index in range(repeats):
            os.environ.pop("SCORIO_MONITOR_URL", None)
            without = await one_eval(epochs, Path(folder) / f"w{index}", latency_s)
            os.environ["SCORIO_MONITOR_URL"] = away_url
            away = await one_eval(epochs, Path(folder) / f"a{index}", latency_s)
            os.environ.pop("SCORIO_MONITOR_URL", None)
            extra.append(away - without)
            extra_s = away - without
            print(f"without {without:6.2f} s   away {away:6.2f} s   {extra_s:+.2f} s")
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--latency-s", type=float, default=0.02)
    arguments = parser.parse_args()
    extra = asyncio.run(
        compare(arguments.repeats, arguments.epochs, arguments.latency_s)
    )
    print(
        f"extra time with the monitor away: median {statistics.median(extra):+.2f} s, "
        f"max {max(extra):+.2f} s over {len(extra)} pairs"
    )


if __name__ == "__main__":
    main()
