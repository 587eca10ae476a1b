"""The dashboard on a phone and on a desktop: screens, the example run, measures.

Shared by the layout tests (``test_dashboard_layout.py``) and
``docs/make_screenshot.py``, so that the screenshots in docs/ show the very
state the tests measure: the example run (``examples/aime25.toml`` and
``examples/aime25.jsonl``) posted over HTTP in 20 batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

import httpx
from selenium import webdriver

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving
from tests.monitor.test_dashboard import Page

ROOT: Final = Path(__file__).resolve().parents[2]
BATCHES: Final = 20


@dataclass(frozen=True)
class Screen:
    """A viewport as Chromium's device emulation sets it."""

    width: int
    height: int
    mobile: bool
    scale: float = 1.0


PHONE: Final = Screen(390, 844, mobile=True, scale=2.0)
DESKTOP: Final = Screen(1400, 1000, mobile=False)


async def emulate(driver: webdriver.Chrome, screen: Screen, height: int = 0) -> None:
    """Lay the page out as ``screen`` shows it (``height`` overrides its own)."""
    metrics = {
        "width": screen.width,
        "height": height or screen.height,
        "deviceScaleFactor": screen.scale,
        "mobile": screen.mobile,
    }
    await asyncio.to_thread(
        driver.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride", metrics
    )


async def stop_emulating(driver: webdriver.Chrome) -> None:
    await asyncio.to_thread(
        driver.execute_cdp_cmd, "Emulation.clearDeviceMetricsOverride", {}
    )


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
                await client.post(
                    f"/runs/{run}/trials",
                    content=line,
                    headers={"content-type": "application/json"},
                )
        await client.post(f"/runs/{run}/trials", json=batch)
        await asyncio.sleep(0.2)  # let a status refresh land between batches


@contextlib.asynccontextmanager
async def example_board(
    driver: webdriver.Chrome, screen: Screen
) -> AsyncIterator[Page]:
    """The dashboard on ``screen`` over the example run, every batch shown."""
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
        await emulate(driver, screen)
        try:
            await page.open(f"{base}/")
            await feed(client, config.run, lines)
            status = (await client.get(f"/runs/{config.run}/status")).json()
            await page.wait_for(
                f"document.body.dataset.trials === '{status['trials']}'"
            )
            # The questions table and the rejected inputs follow the last
            # status within 2 s.
            await page.wait_for(
                "document.querySelectorAll('#questions tbody tr').length === 30"
                " && document.querySelectorAll('#rejected li').length === 1",
                timeout_s=15,
            )
            yield page
        finally:
            # Close the page's event stream, or the server waits for it on exit.
            await page.open("about:blank")
            await stop_emulating(driver)


# What overflows: the page, a card (its tables scroll in their own .scroll
# box instead), a summary tile or anything in one (an element wider than its
# box, a line of text outside its tile).
READ_OVERFLOW: Final = """
const outside = (rect, box) =>
  rect.left < box.left - 0.5 || rect.right > box.right + 0.5
  || rect.top < box.top - 0.5 || rect.bottom > box.bottom + 0.5;
const tiles = [];
for (const tile of document.querySelectorAll('#summary .stat')) {
  const box = tile.getBoundingClientRect();
  const label = tile.querySelector('.label').textContent;
  for (const node of [tile, ...tile.querySelectorAll('*')]) {
    if (node.scrollWidth > node.clientWidth) {
      tiles.push(`${label}: ${node.className} is wider than its box`);
    }
  }
  const walker = document.createTreeWalker(tile, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode;
    if (text.textContent.trim() === '') continue;
    const range = document.createRange();
    range.selectNodeContents(text);
    for (const rect of range.getClientRects()) {
      if (outside(rect, box)) {
        tiles.push(`${label}: "${text.textContent.trim()}" leaves the tile`);
      }
    }
  }
}
const cards = Array.from(document.querySelectorAll('.card'))
  .filter((card) => card.scrollWidth > card.clientWidth)
  .map((card) => card.className);
return {inner: innerWidth, page: document.documentElement.scrollWidth, tiles, cards};
"""


@dataclass(frozen=True)
class Overflow:
    inner: int
    page: int
    tiles: list[str]
    cards: list[str]


async def overflow(page: Page) -> Overflow:
    found = cast(dict[str, object], await page.script(READ_OVERFLOW))
    return Overflow(
        inner=cast(int, found["inner"]),
        page=cast(int, found["page"]),
        tiles=cast(list[str], found["tiles"]),
        cards=cast(list[str], found["cards"]),
    )


# For each leaderboard row: is its model name (and its mu) on screen and not
# covered, with the table scrolled to its left end and to its right end? A
# cell counts when it lies inside every box that clips it and is what the
# browser finds at its centre.
READ_VISIBLE: Final = """
const table = document.querySelector('#leaderboard');
const clips = [];
let node = table.parentElement;
for (; node !== document.body; node = node.parentElement) {
  if (getComputedStyle(node).overflowX !== 'visible') clips.push(node);
}
const scroller = clips[0] ?? document.documentElement;
const shown = (cell) => {
  const rect = cell.getBoundingClientRect();
  const boxes = clips.map((clip) => clip.getBoundingClientRect());
  boxes.push({left: 0, right: innerWidth});
  const out = (box) => rect.left < box.left - 0.5 || rect.right > box.right + 0.5;
  if (boxes.some(out)) return false;
  const [x, y] = [(rect.left + rect.right) / 2, (rect.top + rect.bottom) / 2];
  const hit = document.elementFromPoint(x, y);
  return hit !== null && (cell.contains(hit) || hit.contains(cell));
};
const look = () => Array.from(table.querySelectorAll('tbody tr'), (row) => {
  window.scrollTo(0, row.getBoundingClientRect().top + scrollY - innerHeight / 2);
  return {model: row.dataset.model,
          name: shown(row.querySelector('[data-field=model]')),
          mu: shown(row.querySelector('[data-field=mu]'))};
});
scroller.scrollLeft = 0;
const left = look();
scroller.scrollLeft = scroller.scrollWidth;
const right = look();
scroller.scrollLeft = 0;
window.scrollTo(0, 0);
return {left, right};
"""


async def visible_rows(page: Page) -> dict[str, list[dict[str, object]]]:
    return cast(dict[str, list[dict[str, object]]], await page.script(READ_VISIBLE))
