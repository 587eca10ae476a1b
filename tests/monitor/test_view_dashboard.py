"""``view STATE`` and the store's history in a real headless Chromium.

A finished state file opens read-only with its whole ranking trace; the Pace
tile of a stalled feed says it stalled (a viewed file while its writer has
it open), and its ETA counts the forecasts; a viewed file whose writer closed
is finished.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import httpx
import pytest

from monitor import Monitor, RunConfig
from tests.monitor.test_dashboard import Page, chromium, dashboard, example_trials

BATCHES = 20


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def finished_state(tmp_path: Path) -> Path:
    """The example stream counted in 20 batches a second apart, then closed."""
    events = example_trials()
    clock = Clock()
    path = tmp_path / "aime25.monitor.db"
    with Monitor(path, clock=clock) as monitor:
        monitor.configure(RunConfig(run="aime25", question_count=30))
        size = -(-len(events) // BATCHES)
        for first in range(0, len(events), size):
            monitor.ingest(
                [{**e, "run": "aime25"} for e in events[first : first + size]]
            )
            clock.now += 1.0
            monitor.status("aime25")
    return path


@pytest.fixture
def viewer(finished_state: Path) -> Iterator[str]:
    """``scorio-monitor view STATE --port 0``; yields its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "view",
            str(finished_state),
            "--port",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"read-only at (http://\S+?)/ ", line)
        assert found, line
        yield found.group(1)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
        if process.stderr is not None:
            process.stderr.close()


@pytest.mark.slow
def test_view_serves_a_finished_state_file_read_only_with_every_look(
    viewer: str, finished_state: Path, tmp_path: Path
) -> None:
    history = httpx.get(f"{viewer}/runs/aime25/history", timeout=10).json()
    assert [p["trials"] for p in history][-1] == 6600
    assert len(history) == BATCHES
    assert {"model", "mu", "sigma", "group"} == set(history[-1]["models"][0])

    size = finished_state.stat().st_size
    refused = httpx.post(
        f"{viewer}/runs/aime25/trials",
        content=json.dumps([{"model": "x", "question": "q", "trial": 0, "correct": 1}]),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert refused.status_code == 405
    assert "read-only" in refused.json()["detail"]
    assert finished_state.stat().st_size == size

    with chromium(tmp_path / "profile") as driver:
        page = Page(driver)

        async def check() -> None:
            await page.open(f"{viewer}/?run=aime25")
            await page.wait_for(f"state.trace.length === {len(history)}")
            await page.wait_for("document.querySelector('#trace polyline') !== null")
            vertices = await page.script(
                "return document.querySelector('#trace polyline[data-model=llm11]')"
                ".getAttribute('points').split(' ').length;"
            )
            assert vertices == len(history)
            assert await page.console_errors() == []

        asyncio.run(check())


@pytest.mark.slow
def test_a_viewed_state_file_has_stalled_while_written_and_is_finished_once_closed(
    viewer: str, finished_state: Path, tmp_path: Path
) -> None:
    rate = "document.querySelector('[data-field=rate]')"
    with chromium(tmp_path / "profile") as driver:
        page = Page(driver)

        async def check() -> None:
            # Its last trial is long past (the fixture's clock): quiet from the start.
            with Monitor(finished_state):  # a writer that sends nothing
                assert httpx.get(f"{viewer}/input", timeout=10).json() == {
                    "ended": False
                }
                await page.open(f"{viewer}/?run=aime25")
                await page.wait_for(f"{rate}.dataset.stalled === 'true'", timeout_s=15)
                eta = cast(str, await page.script(READ_ETA))
                assert re.fullmatch(r"stalled: no new trial for [\d,]+ days", eta), eta
            assert httpx.get(f"{viewer}/input", timeout=10).json() == {"ended": True}
            await page.wait_for(f"{rate}.textContent === 'finished'", timeout_s=15)
            eta = cast(str, await page.script(READ_ETA))
            assert eta.startswith("input ended"), eta
            assert await page.script(f"return {rate}.dataset.stalled;") == "false"
            await page.open("about:blank")

        asyncio.run(check())


@pytest.mark.slow
async def test_a_stalled_feed_looks_stalled_and_the_eta_counts_the_forecasts(
    tmp_path: Path,
) -> None:
    config = RunConfig(run="aime25", question_count=30, max_trials_per_question=80)
    events = example_trials()
    with chromium(tmp_path / "profile") as driver:
        async with dashboard(driver, config) as board:
            page = board.page
            await board.post("aime25", events[:2000])
            await page.open(board.base + "/?run=aime25")
            first = (await board.status("aime25"))["trials"]
            await page.wait_for(f"document.body.dataset.trials === '{first}'")
            await board.post("aime25", events[2000:2500])
            status = await board.status("aime25")
            await page.wait_for(
                f"document.body.dataset.trials === '{status['trials']}'"
            )
            await page.script("renderPace(state.status);")
            models = cast(list[dict[str, object]], status["models"])
            forecast = sum(
                cast(int, m["predicted_trials"]) for m in models if m["needs_trials"]
            )
            budget_left = 11 * 30 * 80 - cast(int, status["trials"])
            assert forecast < budget_left  # the ETA must not count the whole budget
            eta = cast(str, await page.script(READ_ETA))
            assert eta.startswith("ETA ~") and eta.endswith(
                f"min for ~{forecast:,} trials"
            ), eta

            # Two minutes later by the page's clock, with no new trial.
            await page.script(
                "const real = Date.now; Date.now = () => real() + 120000;"
            )
            await page.wait_for(
                "document.querySelector('[data-field=eta]').textContent"
                ".startsWith('stalled')",
                timeout_s=10,
            )
            eta = cast(str, await page.script(READ_ETA))
            assert re.fullmatch(r"stalled: no new trial for 2 min", eta), eta
            rate = cast(str, await page.script(READ_RATE))
            assert rate == "0/min", rate


READ_ETA = "return document.querySelector('[data-field=eta]').textContent;"
READ_RATE = "return document.querySelector('[data-field=rate]').textContent;"
