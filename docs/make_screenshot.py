"""Take ``docs/dashboard.png``: the live dashboard over the example run.

Serves an in-memory monitor with the run of ``examples/aime25.toml`` (the
paper's 11 models, 30 questions, a budget of 80 trials per question), posts
``examples/aime25.jsonl`` over HTTP in 20 batches so the ranking trace has
points, and photographs the page in the same headless Chromium the tests
use (``tests/monitor/test_dashboard.py``). Run from the repository root:

    .venv/bin/python docs/make_screenshot.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import tomllib
from pathlib import Path
from typing import Final, cast

import httpx
from selenium import webdriver

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving
from tests.monitor.test_dashboard import Page, chromium

ROOT: Final = Path(__file__).resolve().parent.parent
BATCHES: Final = 20
WIDTH_PX: Final = 1440


async def feed(client: httpx.AsyncClient, run: str, lines: list[str]) -> None:
    """Post the stream in batches, the way a harness would send it."""
    size = -(-len(lines) // BATCHES)
    for start in range(0, len(lines), size):
        batch = []
        for line in lines[start : start + size]:
            try:
                batch.append(json.loads(line))
            except ValueError:
                # A broken line goes alone, so the page counts one rejection.
                await client.post(f"/runs/{run}/trials", content=line)
        await client.post(f"/runs/{run}/trials", json=batch)
        await asyncio.sleep(0.2)  # let a status refresh land between batches


async def photograph(driver: webdriver.Chrome, target: Path) -> None:
    config = RunConfig(**tomllib.loads((ROOT / "examples" / "aime25.toml").read_text()))
    lines = (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()
    monitor = Monitor()
    monitor.configure(config)
    async with (
        Service(monitor) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        page = Page(driver)
        await page.open(f"{base}/")
        await feed(client, config.run, lines)
        status = (await client.get(f"/runs/{config.run}/status")).json()
        await page.wait_for(f"document.body.dataset.trials === '{status['trials']}'")
        await asyncio.sleep(0.3)  # the last frame
        height = cast(int, await page.script("return document.body.scrollHeight;"))
        # The whole page in one viewport: no scroll bar, nothing cut off.
        metrics = {"width": WIDTH_PX, "height": height}
        await asyncio.to_thread(
            driver.execute_cdp_cmd,
            "Emulation.setDeviceMetricsOverride",
            {**metrics, "deviceScaleFactor": 1, "mobile": False},
        )
        await asyncio.sleep(0.3)
        await asyncio.to_thread(driver.save_screenshot, str(target))
        await page.open("about:blank")


def main() -> None:
    target = ROOT / "docs" / "dashboard.png"
    with (
        tempfile.TemporaryDirectory() as profile,
        chromium(Path(profile), width=WIDTH_PX, height=1000) as driver,
    ):
        asyncio.run(photograph(driver, target))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
