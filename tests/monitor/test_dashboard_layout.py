"""The dashboard's layout on a phone (390 px) and a desktop (1400 px), measured.

The state is the one ``docs/make_screenshot.py`` photographs (the example run
in 20 batches, :func:`tests.monitor.dashboard_screens.example_board`): what
the screenshots in docs/ show is what these tests measure.
"""

from __future__ import annotations

import pytest
from selenium import webdriver

from tests.monitor.dashboard_screens import (
    DESKTOP,
    PHONE,
    example_board,
    overflow,
    visible_rows,
)
from tests.monitor.test_dashboard import browser

__all__ = ["browser"]  # the module's browser fixture, shared


pytestmark = pytest.mark.slow


async def test_on_a_phone_the_page_fits_the_screen_and_every_tile_holds_its_text(
    browser: webdriver.Chrome,
) -> None:
    async with example_board(browser, PHONE) as page:
        found = await overflow(page)
        assert found.inner == PHONE.width, found
        assert found.page <= PHONE.width, found
        assert found.tiles == []
        # Wide tables scroll in their own box, not the card with its heading.
        assert found.cards == []
        assert await page.console_errors() == []


async def test_on_a_phone_every_model_name_stays_in_view_as_the_leaderboard_scrolls(
    browser: webdriver.Chrome,
) -> None:
    async with example_board(browser, PHONE) as page:
        rows = await visible_rows(page)
        assert len(rows["left"]) == 11
        hidden = [row for row in rows["left"] if not (row["name"] and row["mu"])]
        assert hidden == []
        # Scrolled to its last column, the model column stays at the left.
        assert [row for row in rows["right"] if not row["name"]] == []


async def test_on_a_desktop_nothing_scrolls_sideways_and_the_whole_leaderboard_shows(
    browser: webdriver.Chrome,
) -> None:
    async with example_board(browser, DESKTOP) as page:
        found = await overflow(page)
        # Negative: a vertical scrollbar narrows the page; never wider.
        assert found.page <= DESKTOP.width and found.tiles == [] and found.cards == []
        boxes = await page.script(
            "return Array.from(document.querySelectorAll('.scroll'))"
            ".filter((box) => box.scrollWidth > box.clientWidth).length;"
        )
        assert boxes == 0
        rows = await visible_rows(page)
        assert all(row["name"] and row["mu"] for row in rows["left"] + rows["right"])
