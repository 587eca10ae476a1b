"""What a monitor that is away, or hangs, costs a real Inspect eval.

Runs one Inspect eval (the test suite's latency provider, two models, 10
questions, Inspect's default concurrency, the monitor's hook and early
stopping) without a monitor and with ``SCORIO_MONITOR_URL`` pointing at a
monitor that is away (a port nothing listens on) or that hangs (a server
that accepts connections and never answers), alternating, and reports each
pair's wall time. The goal: at most 1 s longer either way.

    .venv/bin/python -m benchmarks.monitor_away --case both --repeats 5 --epochs 5
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
from tests.adapters.hung_server import hung_server
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


async def compare(
    url: str, repeats: int, epochs: int, latency_s: float
) -> tuple[list[float], list[float]]:
    """Wall times without the monitor and with it, alternating."""
    without_s: list[float] = []
    with_s: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        await one_eval(epochs, Path(folder) / "warm-up", latency_s)
        for index in range(repeats):
            os.environ.pop("SCORIO_MONITOR_URL", None)
            without = await one_eval(epochs, Path(folder) / f"w{index}", latency_s)
            os.environ["SCORIO_MONITOR_URL"] = url
            with_monitor = await one_eval(epochs, Path(folder) / f"m{index}", latency_s)
            os.environ.pop("SCORIO_MONITOR_URL", None)
            without_s.append(without)
            with_s.append(with_monitor)
            print(
                f"without {without:6.2f} s   monitor {with_monitor:6.2f} s   "
                f"{with_monitor - without:+.2f} s",
                flush=True,
            )
    return without_s, with_s


async def run(case: str, repeats: int, epochs: int, latency_s: float) -> None:
    os.environ["INSPECT_DISPLAY"] = "none"
    cases = ["away", "hung"] if case == "both" else [case]
    for name in cases:
        print(f"-- the monitor is {name}", flush=True)
        if name == "away":
            without_s, with_s = await compare(
                f"http://127.0.0.1:{free_port()}", repeats, epochs, latency_s
            )
        else:
            with hung_server() as url:
                without_s, with_s = await compare(url, repeats, epochs, latency_s)
        extra = [
            monitor - without
            for without, monitor in zip(without_s, with_s, strict=True)
        ]
        # On a shared machine the fastest run of each side is the eval's own
        # time; a pair's difference also carries the noise of both runs.
        print(
            f"extra time with the monitor {name}: fastest {min(with_s):.2f} s vs "
            f"{min(without_s):.2f} s ({min(with_s) - min(without_s):+.2f} s); "
            f"pairs: median {statistics.median(extra):+.2f} s, max "
            f"{max(extra):+.2f} s over {len(extra)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["away", "hung", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--latency-s", type=float, default=0.02)
    arguments = parser.parse_args()
    asyncio.run(
        run(arguments.case, arguments.repeats, arguments.epochs, arguments.latency_s)
    )


if __name__ == "__main__":
    main()
