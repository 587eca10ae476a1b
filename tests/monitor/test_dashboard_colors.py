"""A model's colour on the dashboard comes from its name: the same on every
load, in every run and in the compare view, whatever order models rank in."""

from __future__ import annotations

from typing import Final, cast

import pytest
from selenium import webdriver

from monitor import RunConfig
from tests.monitor.test_dashboard import Page, browser, dashboard, trials

__all__ = ["browser"]  # the module's browser fixture, shared

# Every place a model's colour shows, by model: the leaderboard's swatch, the
# forest plot's point, the trace's line.
READ_COLORS: Final = """
const colors = {};
const swatch = (row) =>
  row.querySelector('.swatch')?.getAttribute('style').replace('background:', '');
for (const row of document.querySelectorAll('#leaderboard tbody tr')) {
  const at = `[data-model="${CSS.escape(row.dataset.model)}"]`;
  const point = document.querySelector(`#forest g${at} circle`);
  const line = document.querySelector(`#trace polyline${at}`);
  colors[row.dataset.model] = [
    swatch(row), point?.getAttribute('fill'), line?.getAttribute('stroke')];
}
return colors;
"""
READ_COMPARE_COLORS: Final = """
const swatch = (row) =>
  row.querySelector('.swatch')?.getAttribute('style').replace('background:', '');
return Object.fromEntries(Array.from(
  document.querySelectorAll('#compare-table tbody tr'),
  (row) => [row.dataset.model, swatch(row)]));
"""
MODELS: Final = ("alpha-7b", "beta-13b", "gamma-70b", "delta-1b")


pytestmark = pytest.mark.slow


async def colors(page: Page, url: str, trials_shown: int) -> dict[str, str]:
    await page.open(url)
    await page.wait_for(
        f"document.body.dataset.trials === '{trials_shown}'"
        " && document.querySelectorAll('#trace polyline').length > 0"
    )
    found = cast(dict[str, list[str]], await page.script(READ_COLORS))
    for model, places in found.items():
        assert len(set(places)) == 1, (model, places)  # one colour everywhere
    return {model: places[0] for model, places in found.items()}


async def test_a_model_keeps_its_colour_across_loads_runs_and_the_compare_view(
    browser: webdriver.Chrome,
) -> None:
    runs = (RunConfig(run="first"), RunConfig(run="second"))
    async with dashboard(browser, *runs) as board:
        page = board.page
        # "first" ranks the models in MODELS order, "second" the other way
        # round, with a model of its own; each run gets its models in
        # another order.
        shares = dict(zip(MODELS, (0.9, 0.6, 0.4, 0.1), strict=True))
        await board.post("first", trials(shares, 4, range(3)))
        reversed_shares = dict(zip(MODELS[::-1], (0.9, 0.7, 0.4, 0.2), strict=True))
        await board.post(
            "second", trials({**reversed_shares, "epsilon": 0.5}, 4, range(3))
        )
        first = await colors(page, board.base + "/?run=first", 48)
        assert set(first) == set(MODELS)

        # New trials turn the first run's ranking around; a reload keeps
        # every model's colour.
        turned = dict(zip(MODELS, (0.0, 0.1, 0.9, 1.0), strict=True))
        await board.post("first", trials(turned, 4, range(3, 12)))
        models = cast(list[dict[str, object]], (await board.status("first"))["models"])
        assert models[0]["model"] == "delta-1b"
        assert await colors(page, board.base + "/?run=first", 192) == first

        second = await colors(page, board.base + "/?run=second", 60)
        assert {model: second[model] for model in MODELS} == first

        await page.open(board.base + "/?compare=first,second")
        await page.wait_for(
            "document.querySelectorAll('#compare-table tbody tr').length === 5"
        )
        compared = cast(dict[str, str], await page.script(READ_COMPARE_COLORS))
        assert compared == {**first, "epsilon": second["epsilon"]}
        assert await page.console_errors() == []


async def test_the_example_runs_eleven_models_get_eleven_colours(
    browser: webdriver.Chrome,
) -> None:
    async with dashboard(browser, RunConfig(run="aime25")) as board:
        await board.page.open(board.base + "/")
        await board.page.wait_for("document.body.dataset.run === 'aime25'")
        names = [f"llm{index:02d}" for index in range(1, 12)]
        shown = await board.page.script(
            "return arguments[0].map((name) => colorOf(name));", names
        )
        assert len(set(cast(list[str], shown))) == len(names)
