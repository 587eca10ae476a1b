"""The Pace tile: finished when no more trials come, stalled only when they should.

``watch FILE --http`` reads the file once: once read to its end the run is
finished, however long ago its last trial came. ``watch --follow`` waits for
more, so its quiet feed has stalled. A stable run needs no more trials.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final, cast

import httpx
import pytest
from selenium import webdriver

from monitor import RunConfig
from tests.monitor.test_dashboard import ROOT, Page, browser, dashboard, trials

__all__ = ["browser"]  # the module's browser fixture, shared

READ_PACE: Final = """
return {rate: document.querySelector('[data-field=rate]').textContent,
        eta: document.querySelector('[data-field=eta]').textContent};
"""
# The page's clock, 14 minutes on: no trial came in that time.
LATER: Final = "const real = Date.now; Date.now = () => real() + 14 * 60000;"


pytestmark = pytest.mark.slow


@contextlib.contextmanager
def watching(tmp_path: Path, *options: str) -> Iterator[str]:
    """``watch`` of a copy of the example stream with ``--http 0``; its URL."""
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    config = str(ROOT / "examples" / "aime25.toml")
    command = [sys.executable, "-m", "monitor", "watch", str(stream), "--http", "0"]
    process = subprocess.Popen(
        [*command, "--config", config, *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen: list[str] = []
        while not (found := re.search(r"dashboard at (http://\S+)/", "".join(seen))):
            line = process.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
        yield found.group(1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


async def pace_later(page: Page, url: str, trials_shown: int) -> dict[str, str]:
    """The Pace tile 14 minutes after the last trial, by the page's clock."""
    await page.open(url)
    await page.wait_for(f"document.body.dataset.trials === '{trials_shown}'")
    await page.script(LATER)
    # The tile is redrawn on the clock (every 2 s): stalled, or finished.
    await page.wait_for(
        "document.querySelector('[data-field=rate]').dataset.stalled === 'true'"
        " || document.querySelector('[data-field=rate]').textContent === 'finished'",
        timeout_s=15,
    )
    return cast(dict[str, str], await page.script(READ_PACE))


async def wait_for_trials(base: str, run: str, count: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        for _ in range(600):
            status = (await client.get(f"/runs/{run}/status")).json()
            if status["trials"] == count:
                return
            await client.get("/healthz")  # a round trip between two looks
        raise AssertionError(f"{run} never reached {count} trials")


async def test_a_watched_file_read_to_its_end_is_finished_not_stalled(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    with watching(tmp_path) as base:
        await wait_for_trials(base, "aime25", 6600)
        assert httpx.get(f"{base}/input", timeout=10).json() == {"ended": True}
        page = Page(browser)
        try:
            pace = await pace_later(page, f"{base}/?run=aime25", 6600)
        finally:
            await page.open("about:blank")
    assert pace["rate"] == "finished", pace
    # The run is not settled: the tile says how many trials would settle it.
    assert re.fullmatch(r"input ended · ~[\d,]+ trials left to run", pace["eta"]), pace


async def test_a_followed_file_that_goes_quiet_has_stalled(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    with watching(tmp_path, "--follow") as base:
        await wait_for_trials(base, "aime25", 6600)
        assert httpx.get(f"{base}/input", timeout=10).json() == {"ended": False}
        page = Page(browser)
        try:
            pace = await pace_later(page, f"{base}/?run=aime25", 6600)
        finally:
            await page.open("about:blank")
    assert pace == {"rate": "0/min", "eta": "stalled: no new trial for 14 min"}, pace


async def test_a_stable_run_is_finished_not_stalled(browser: webdriver.Chrome) -> None:
    async with dashboard(browser, RunConfig(run="settled", question_count=10)) as board:
        await board.post("settled", trials({"a": 0.9, "b": 0.2}, 10, range(4)))
        assert (await board.status("settled"))["stable"] is True
        pace = await pace_later(board.page, board.base + "/?run=settled", 80)
        assert pace["rate"] == "finished", pace
        assert pace["eta"] == "stable: no trials needed", pace
