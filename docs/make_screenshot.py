"""Take ``docs/dashboard.png`` (1400 px) and ``docs/dashboard-phone.png`` (390 px).

Serves an in-memory monitor with the run of ``examples/aime25.toml`` (the
paper's 11 models, 30 questions, a budget of 80 trials per question), posts
``examples/aime25.jsonl`` over HTTP in 20 batches so the ranking trace has
points, and photographs the page in the same headless Chromium the tests
use. The state is :func:`tests.monitor.dashboard_screens.example_board`'s,
the one ``tests/monitor/test_dashboard_layout.py`` measures; a page that
overflows its screen is not photographed. Run from the repository root:

    .venv/bin/python docs/make_screenshot.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Final, cast

from selenium import webdriver

from tests.monitor.dashboard_screens import (
    DESKTOP,
    PHONE,
    Screen,
    emulate,
    example_board,
    overflow,
)
from tests.monitor.test_dashboard import chromium

ROOT: Final = Path(__file__).resolve().parent.parent
# The phone's picture ends below the leaderboard: what its first two
# screens show (the whole page is four times as long).
PHONE_LAST: Final = ".area-leaderboard"


async def photograph(
    driver: webdriver.Chrome, screen: Screen, target: Path, last: str | None = None
) -> None:
    async with example_board(driver, screen) as page:
        found = await overflow(page)
        if found.page > screen.width or found.tiles or found.cards:
            raise SystemExit(f"the page overflows at {screen.width} px: {found}")
        # The whole page (or down to `last`) in one viewport: nothing cut off.
        bottom = (
            "document.documentElement.scrollHeight"
            if last is None
            else f"document.querySelector('{last}').getBoundingClientRect().bottom + 12"
        )
        height = cast(float, await page.script(f"return Math.ceil({bottom});"))
        await emulate(driver, screen, height=int(height))
        await asyncio.sleep(0.3)  # the frame at the new size
        await asyncio.to_thread(driver.save_screenshot, str(target))


def main() -> None:
    shots = [
        (DESKTOP, ROOT / "docs" / "dashboard.png", None),
        (PHONE, ROOT / "docs" / "dashboard-phone.png", PHONE_LAST),
    ]
    with (
        tempfile.TemporaryDirectory() as profile,
        chromium(Path(profile), width=DESKTOP.width, height=DESKTOP.height) as driver,
    ):
        for screen, target, last in shots:
            asyncio.run(photograph(driver, screen, target, last))
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
