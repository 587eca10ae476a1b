"""The live dashboard in a real headless Chromium: what it shows and how it updates.

The browser is Debian's ``chromium`` driven through ``chromium-driver``
(chromedriver) by Selenium; both binaries are found on the PATH. A missing
one skips these tests on a developer machine but fails them when ``CI`` is
set. Selenium's calls block, so they run in worker threads while the event
loop serves the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from monitor.stores.records import StoredEvent
from tests.helpers import eventually, serving
from tests.services import require_binary

ROOT = Path(__file__).resolve().parents[2]

# Flags known to work in containers: no sandbox (root), no GPU, and nothing
# that reaches out to the network on its own.
CHROMIUM_FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
FOUR_DECIMALS: Final = re.compile(r"^-?\d+\.\d{4}$")

READ_ROWS: Final = """
return Array.from(document.querySelectorAll('#leaderboard tbody tr'), (row) => {
  const text = (name) => row.querySelector(`[data-field="${name}"]`).textContent;
  return {model: row.dataset.model, rank: text('rank'), group: text('group'),
          mu: text('mu'), sigma: text('sigma'), trials: text('trials'),
          name: text('model')};
});
"""


def require_browser() -> tuple[str, str]:
    """Paths of chromium and chromedriver (CI fails without them)."""
    return (
        require_binary("chromium"),
        require_binary("chromedriver", "chromium-driver"),
    )


@contextlib.contextmanager
def chromium(
    profile: Path, width: int = 1440, height: int = 1000
) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile in ``profile``; quit on exit."""
    browser, driver = require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path keeps Selenium Manager from looking online.
    chrome = webdriver.Chrome(
        options=options, service=ChromeService(executable_path=driver)
    )
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    with chromium(tmp_path_factory.mktemp("chromium")) as chrome:
        yield chrome


@dataclass
class Page:
    """The browser's calls, run in a thread so the served app keeps answering."""

    driver: webdriver.Chrome

    async def open(self, url: str) -> None:
        await asyncio.to_thread(self.driver.get, url)

    async def script(self, source: str, *args: object) -> object:
        return await asyncio.to_thread(self.driver.execute_script, source, *args)

    async def rows(self) -> list[dict[str, str]]:
        return cast(list[dict[str, str]], await self.script(READ_ROWS))

    async def count(self, selector: str) -> int:
        found = await self.script(
            "return document.querySelectorAll(arguments[0]).length;", selector
        )
        return cast(int, found)

    async def wait_for(self, condition: str, timeout_s: float = 10.0) -> None:
        """Poll a JavaScript expression until it is truthy."""
        async with asyncio.timeout(timeout_s):
            while not await self.script(f"return Boolean({condition});"):
                await asyncio.sleep(0.05)

    async def console_errors(self) -> list[str]:
        entries = await asyncio.to_thread(self.driver.get_log, "browser")
        return [e["message"] for e in entries if e["level"] == "SEVERE"]


@dataclass
class Dashboard:
    base: str
    client: httpx.AsyncClient
    service: Service
    page: Page

    async def post(self, run: str, trials: Sequence[dict[str, object]]) -> None:
        response = await self.client.post(f"/runs/{run}/trials", json=list(trials))
        assert response.status_code == 200, response.text

    async def status(self, run: str) -> dict[str, object]:
        response = await self.client.get(f"/runs/{run}/status")
        assert response.status_code == 200
        return cast(dict[str, object], response.json())

    async def events(self, run: str) -> list[StoredEvent]:
        return await self.service.events_after(run, 0)


@contextlib.asynccontextmanager
async def dashboard(
    browser: webdriver.Chrome, *configs: RunConfig
) -> AsyncIterator[Dashboard]:
    monitor = Monitor()
    for config in configs:
        monitor.configure(config)
    async with (
        Service(monitor, status_interval_s=0.01) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        page = Page(browser)
        await page.console_errors()  # start with an empty console log
        try:
            yield Dashboard(base, client, service, page)
        finally:
            # Close the page's event stream, or the server waits for it on exit.
            await page.open("about:blank")


def trials(
    models: dict[str, float], questions: int, epochs: range
) -> list[dict[str, object]]:
    """Deterministic outcomes: a model with ``share`` 0.3 is right 3 times in 10."""
    return [
        {
            "model": model,
            "question": q,
            "trial": t,
            "correct": (3 * q + t) % 10 < round(10 * share),
        }
        for model, share in models.items()
        for q in range(questions)
        for t in epochs
    ]


def assert_rows_match(rows: list[dict[str, str]], status: dict[str, object]) -> None:
    models = cast(list[dict[str, object]], status["models"])
    assert [row["model"] for row in rows] == [m["model"] for m in models]
    for row, model in zip(rows, models, strict=True):
        assert row["name"] == model["model"]
        for name in ("mu", "sigma"):
            shown, value = row[name], cast(float, model[name])
            # Compared as numbers: JavaScript and Python round exact halves
            # differently, and only the four shown decimals matter.
            assert FOUR_DECIMALS.match(shown), (model["model"], name, shown)
            assert abs(float(shown) - value) <= 0.5e-4 + 1e-12, (
                model["model"],
                name,
                shown,
                value,
            )
        assert row["group"] == str(model["group"])
        assert row["rank"] == str(model["rank"])
        assert row["trials"] == str(model["trials"])


SPREAD: Final = {"llm01": 0.2, "llm02": 0.5, "llm03": 0.6, "llm04": 0.9}


async def test_dashboard_shows_the_status_and_updates_without_reload(
    browser: webdriver.Chrome,
) -> None:
    config = RunConfig(run="bench", question_count=6, max_trials_per_question=40)
    async with dashboard(browser, config) as board:
        page = board.page
        first = trials(SPREAD, 6, range(2))
        await board.post("bench", first)
        await page.open(board.base + "/")
        await page.wait_for(f"document.body.dataset.trials === '{len(first)}'")
        assert_rows_match(await page.rows(), await board.status("bench"))
        budget = await page.script(
            "return document.querySelector('[data-field=budget]').textContent;"
        )
        assert budget == f"{100 * len(first) / (40 * 6 * len(SPREAD)):.1f}%"
        assert await page.count("#forest g[data-model]") == len(SPREAD)
        assert await page.count("#pairs tbody tr[data-pair]") == len(SPREAD) - 1
        before = {row["model"]: row for row in await page.rows()}
        origin = await page.script(
            "window.__sameDocument = true; return performance.timeOrigin;"
        )

        second = trials(SPREAD, 6, range(2, 24))
        await board.post("bench", second)
        total = len(first) + len(second)
        await page.wait_for(f"document.body.dataset.trials === '{total}'")
        status = await board.status("bench")
        after = await page.rows()
        assert_rows_match(after, status)
        assert all(row["trials"] != before[row["model"]]["trials"] for row in after)
        assert any(row["mu"] != before[row["model"]]["mu"] for row in after)
        assert await page.script("return window.__sameDocument === true;")
        assert await page.script("return performance.timeOrigin;") == origin
        # The trace gained a point per update, one line per model.
        assert await page.count("#trace polyline[data-model]") == len(SPREAD)
        assert await page.console_errors() == []


async def test_the_event_log_lists_every_event_newest_first(
    browser: webdriver.Chrome,
) -> None:
    config = RunConfig(run="bench", question_count=6, max_trials_per_question=40)
    async with dashboard(browser, config) as board:
        page = board.page
        await page.open(board.base + "/")
        await page.wait_for("document.body.dataset.run === 'bench'")
        await board.post("bench", trials(SPREAD, 6, range(24)))

        async def log_matches_store() -> bool:
            stored = [event.seq for event in await board.events("bench")]
            shown = await page.script(
                "return Array.from(document.querySelectorAll('#event-log li'),"
                " (li) => Number(li.dataset.seq));"
            )
            return bool(stored) and shown == stored[::-1]

        await eventually(log_matches_store, timeout_s=10.0)
        kinds = await page.script(
            "return Array.from(document.querySelectorAll('#event-log li'),"
            " (li) => li.dataset.kind);"
        )
        assert "pair_resolved" in cast(list[str], kinds)
        assert await page.console_errors() == []


async def test_model_names_are_shown_as_text_never_run_as_markup(
    browser: webdriver.Chrome,
) -> None:
    hostile = '<img src=x onerror="window.__ran = 1"><b id="injected">b</b>'
    async with dashboard(browser, RunConfig(run="r")) as board:
        page = board.page
        await board.post(
            "r",
            [
                {"model": hostile, "question": 1, "trial": 0, "correct": True},
                {"model": "plain", "question": 1, "trial": 0, "correct": False},
            ],
        )
        await page.open(board.base + "/")
        await page.wait_for("document.body.dataset.trials === '2'")
        names = {row["name"] for row in await page.rows()}
        assert names == {hostile, "plain"}
        assert await page.script(
            "return document.getElementById('injected') === null"
            " && window.__ran === undefined"
            " && document.querySelectorAll('img').length === 0;"
        )
        assert await page.console_errors() == []


async def test_the_run_picker_switches_runs_without_reload(
    browser: webdriver.Chrome,
) -> None:
    runs = (RunConfig(run="alpha"), RunConfig(run="beta"))
    async with dashboard(browser, *runs) as board:
        page = board.page
        await board.post("alpha", trials({"a1": 0.3, "a2": 0.7}, 3, range(2)))
        await board.post("beta", trials({"b1": 0.4, "b2": 0.6, "b3": 0.8}, 3, range(1)))
        await page.open(board.base + "/")
        await page.wait_for("document.body.dataset.trials === '12'")
        assert await page.script("return document.body.dataset.run;") == "alpha"
        await page.script("window.__sameDocument = true;")

        picker = await asyncio.to_thread(page.driver.find_element, By.ID, "run-picker")
        await asyncio.to_thread(Select(picker).select_by_value, "beta")
        beta = "document.body.dataset.run === 'beta'"
        await page.wait_for(f"{beta} && document.body.dataset.trials === '9'")
        assert_rows_match(await page.rows(), await board.status("beta"))
        assert await page.script("return window.__sameDocument === true;")
        url = await page.script("return location.search;")
        assert url == "?run=beta"
        assert await page.console_errors() == []


def example_trials() -> list[dict[str, object]]:
    """The quick start's stream as HTTP batches would carry it (run from the URL)."""
    lines = (ROOT / "examples" / "aime25.jsonl").read_text().splitlines()
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # the example's one broken line
        event.pop("run")
        events.append(event)
    return events


@pytest.mark.slow
async def test_at_1400_px_nothing_scrolls_sideways_and_the_new_panels_show_data(
    tmp_path: Path,
) -> None:
    config = RunConfig(run="aime25", question_count=30, max_trials_per_question=80)
    # Each trial reports 2 s of inference: the pace shows cost per minute.
    events = [{**event, "cost": {"seconds": 2.0}} for event in example_trials()]
    with chromium(tmp_path / "profile", width=1400, height=1000) as driver:
        async with dashboard(driver, config) as board:
            page = board.page
            await board.post("aime25", events[:3000])
            await page.open(board.base + "/?run=aime25")
            first = (await board.status("aime25"))["trials"]
            await page.wait_for(f"document.body.dataset.trials === '{first}'")
            await asyncio.sleep(1.5)  # a second point in time for the pace
            await board.post("aime25", events[3000:])
            status = await board.status("aime25")
            total = cast(int, status["trials"])
            await page.wait_for(f"document.body.dataset.trials === '{total}'")
            await asyncio.sleep(0.3)

            overflow = cast(
                dict[str, object],
                await page.script(
                    "const cards = Array.from("
                    "document.querySelectorAll('.card, .stat'));"
                    "return {page: document.documentElement.scrollWidth - innerWidth,"
                    " cards: cards.filter((c) => c.scrollWidth > c.clientWidth)"
                    "  .map((c) => c.className)};"
                ),
            )
            # Negative: a vertical scrollbar narrows the page; never wider.
            assert cast(int, overflow["page"]) <= 0 and overflow["cards"] == []

            models = cast(list[dict[str, object]], status["models"])
            shown_avg = await page.script(
                "return Array.from(document.querySelectorAll("
                "'#leaderboard tbody [data-field=avg]'), (td) => td.textContent);"
            )
            assert shown_avg == [f"{cast(float, m['avg']):.4f}" for m in models]
            pairs = cast(list[dict[str, object]], status["pairs"])
            shown_needed = await page.script(
                "return Array.from(document.querySelectorAll("
                "'#pairs tbody [data-field=threshold]'), (td) => td.textContent);"
            )
            assert shown_needed == [
                f"{cast(float, pair['threshold']):.2f}" for pair in pairs
            ]

            rate = cast(
                str,
                await page.script(
                    "return document.querySelector('[data-field=rate]').textContent;"
                ),
            )
            assert re.fullmatch(r"[\d,]+/min", rate), rate
            eta = cast(
                str,
                await page.script(
                    "return document.querySelector('[data-field=eta]').textContent;"
                ),
            )
            assert eta.startswith("ETA ~") and "min for ~" in eta, eta
            spent = cast(
                str,
                await page.script(
                    "return document.querySelector('[data-field=cost-rate]')"
                    ".textContent;"
                ),
            )
            assert re.fullmatch(r"[\d,]+ s of inference/min", spent), spent
            assert sum(cast(float, m["cost_seconds"]) for m in models) == 2.0 * total

            exported = cast(
                dict[str, str],
                await page.script(
                    "const read = (id) => decodeURIComponent("
                    "document.getElementById(id).getAttribute('href')"
                    ".split(',').slice(1).join(','));"
                    "return {csv: read('export-csv'), json: read('export-json')};"
                ),
            )
            document = json.loads(exported["json"])
            assert document["run"] == "aime25" and document["trials"] == total
            rows = list(csv.DictReader(io.StringIO(exported["csv"])))
            assert [row["model"] for row in rows] == [m["model"] for m in models]
            assert [float(row["mu"]) for row in rows] == [m["mu"] for m in models]
            assert [float(row["avg"]) for row in rows] == [m["avg"] for m in models]

            async def questions_shown() -> bool:
                served = (await board.client.get("/runs/aime25/questions")).json()
                shown = await page.script(
                    "return Array.from(document.querySelectorAll("
                    "'#questions tbody tr'), (tr) => [tr.dataset.question,"
                    " tr.querySelector('[data-field=spread]').textContent]);"
                )
                expected = [[q["question"], f"{q['spread']:.3f}"] for q in served]
                return len(served) == 30 and shown == expected

            # The table refreshes at most every 2 s, after a status.
            await eventually(questions_shown, timeout_s=15)

            broken = await board.client.post(
                "/runs/aime25/trials",
                content=b"{oops",
                headers={"content-type": "application/json"},
            )
            assert broken.status_code == 422
            await page.wait_for(
                "document.querySelectorAll('#rejected li').length === 1", timeout_s=15
            )
            listed = await page.script(
                "return document.querySelector('#rejected li').textContent;"
            )
            assert "invalid JSON" in cast(str, listed) and "{oops" in cast(str, listed)
            assert await page.console_errors() == []
