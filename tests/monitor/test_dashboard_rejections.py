"""The dashboard lists the selected run's rejected inputs, newest first, as text."""

from __future__ import annotations

from typing import cast

import pytest
from selenium import webdriver

from monitor import RunConfig
from tests.monitor.test_dashboard import browser, dashboard

# Every test here takes seconds (the inner loop is -m "not slow").
pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the module's browser fixture, shared


async def test_rejected_inputs_show_up_on_the_dashboard(
    browser: webdriver.Chrome,
) -> None:
    config = RunConfig(run="bench", questions=["q0", "q1"])
    async with dashboard(browser, config) as board:
        page = board.page
        await page.open(board.base + "/")
        await page.wait_for("document.body.dataset.run === 'bench'")
        good = {"model": "a", "question": "q0", "trial": 0, "correct": True}
        await board.post("bench", [good])
        hostile = '<b id="injected">q</b>'
        for question in ("q7", hostile):
            response = await board.client.post(
                "/runs/bench/trials", json=[{**good, "question": question}]
            )
            assert response.status_code == 422

        await page.wait_for(
            "document.querySelectorAll('#rejected li').length === 2", timeout_s=15
        )
        shown = cast(
            list[str],
            await page.script(
                "return Array.from(document.querySelectorAll('#rejected li'),"
                " (li) => li.textContent);"
            ),
        )
        assert hostile in shown[0] and "q7" in shown[1]  # newest first, as text
        assert await page.script("return document.getElementById('injected') === null;")
        assert await page.console_errors() == []
