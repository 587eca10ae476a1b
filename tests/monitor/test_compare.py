"""Runs side by side: ``GET /compare``, ``status --compare`` and the dashboard's
``/?compare=a,b`` view in a real headless Chromium.

Two rounds of one eval share three models; each round has one model the other
lacks. Every model gets a row with its rank, group, mu and interval in each
run (or "absent"), and a forest plot line per run it is in, in the run's
colour; the view is reachable from the run picker.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import cast
from urllib.parse import unquote

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from monitor import Monitor, RunConfig
from monitor.engine.comparison import compare
from tests.monitor.test_dashboard import chromium, dashboard, trials

ROUNDS = {
    "round1": {"alpha": 0.8, "beta": 0.5, "gamma": 0.3, "only-1": 0.6},
    "round2": {"alpha": 0.4, "beta": 0.7, "gamma": 0.3, "only-2": 0.9},
}


def round_trials(run: str) -> list[dict[str, object]]:
    return [{**t, "run": run} for t in trials(ROUNDS[run], 20, range(4))]


def configs() -> list[RunConfig]:
    return [RunConfig(run=run, question_count=20) for run in ROUNDS]


def test_compare_lines_models_up_and_marks_the_absent() -> None:
    monitor = Monitor()
    for config in configs():
        monitor.configure(config)
        monitor.ingest(round_trials(config.run))
    statuses = [monitor.status(run) for run in ROUNDS]
    comparison = compare(statuses)
    assert [r.run for r in comparison.runs] == ["round1", "round2"]
    rows = {m.model: m.runs for m in comparison.models}
    assert set(rows) == {"alpha", "beta", "gamma", "only-1", "only-2"}
    assert rows["only-1"]["round2"] is None and rows["only-2"]["round1"] is None
    # Models in every run first, then by mean rank.
    assert [m.model for m in comparison.models][3:] == ["only-2", "only-1"]
    for status in statuses:
        for row in status.models:
            cell = rows[row.model][status.run]
            assert cell is not None
            assert (cell.mu, cell.lo, cell.hi, cell.rank, cell.group) == (
                row.mu,
                row.lo,
                row.hi,
                row.rank,
                row.group,
            )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "rounds.db"
    with Monitor(path) as monitor:
        for config in configs():
            monitor.configure(config)
            monitor.ingest(round_trials(config.run))
    return path


def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "status", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_status_compare_prints_markdown_csv_and_json(state: Path) -> None:
    shown = cli("--state", str(state), "--compare", "round1,round2", "--json")
    assert shown.returncode == 0, shown.stderr
    comparison = json.loads(shown.stdout)
    models = {m["model"]: m["runs"] for m in comparison["models"]}

    markdown = cli(
        "--state", str(state), "--compare", "round1,round2", "--format", "markdown"
    )
    lines = markdown.stdout.splitlines()
    assert lines[0] == "### round1 vs round2"
    table = [line for line in lines if line.startswith("| ")][1:]
    assert len(table) == len(models)
    for line in table:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for index, run in enumerate(["round1", "round2"]):
            cell = models[cells[0]][run]
            shown_cells = cells[1 + 5 * index : 6 + 5 * index]
            if cell is None:
                assert shown_cells == ["absent", "", "", "", ""]
            else:
                assert shown_cells == [
                    str(cell["rank"]),
                    str(cell["group"]),
                    f"{cell['avg']:.4f}",
                    f"{cell['mu']:.4f} ± {cell['sigma']:.4f}",
                    f"[{cell['lo']:.4f}, {cell['hi']:.4f}]",
                ]

    table_csv = cli(
        "--state", str(state), "--compare", "round1,round2", "--format", "csv"
    )
    rows = list(csv.DictReader(io.StringIO(table_csv.stdout)))
    assert len(rows) == 2 * len(models)
    for row in rows:
        cell = models[row["model"]][row["run"]]
        assert row["present"] == str(cell is not None)
        assert row["mu"] == ("" if cell is None else repr(cell["mu"]))

    for wrong, message in [
        (["--compare", "round1"], "two or more runs"),
        (["--compare", "round1,round1"], "names a run twice"),
        (["--compare", "round1,nope"], "unknown run 'nope'"),
        (["--compare", "round1,round2", "--run", "round1"], "leave --run out"),
    ]:
        refused = cli("--state", str(state), *wrong)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr


READ_TABLE = """
return Array.from(document.querySelectorAll('#compare-table tbody tr'), (row) => ({
  model: row.dataset.model,
  cells: Array.from(row.querySelectorAll('td[data-run]'), (td) => ({
    run: td.dataset.run, state: td.dataset.state || null,
    field: td.dataset.field
      || (td.querySelector('[data-field]')?.dataset.field ?? null),
    text: td.textContent,
  })),
}));
"""
READ_FOREST = """
return Array.from(document.querySelectorAll('#compare-forest g[data-model]'), (g) => ({
  model: g.dataset.model, run: g.dataset.run,
  stroke: g.querySelector('line.interval').getAttribute('stroke'),
}));
"""


@pytest.mark.slow
async def test_the_compare_view_in_chromium(tmp_path: Path) -> None:
    with chromium(tmp_path / "profile") as driver:
        async with dashboard(driver, *configs()) as board:
            page = board.page
            for run in ROUNDS:
                await board.post(run, round_trials(run))
            expected = (await board.client.get("/compare?runs=round1,round2")).json()

            # From the run picker: "Compare with" round2 while round1 is shown.
            await page.open(board.base + "/?run=round1")
            await page.wait_for("document.body.dataset.run === 'round1'")
            await page.wait_for(
                "document.querySelector('#compare-picker option[value=round2]')"
            )
            picker = await asyncio.to_thread(
                driver.find_element, By.CSS_SELECTOR, "#compare-picker"
            )
            await asyncio.to_thread(Select(picker).select_by_value, "round2")
            await page.wait_for("document.body.dataset.compared === 'round1,round2'")
            assert await page.script("return location.search;") == (
                "?compare=round1%2Cround2"
            )

            rows = cast(list[dict[str, object]], await page.script(READ_TABLE))
            assert [r["model"] for r in rows] == [
                m["model"] for m in expected["models"]
            ]
            for row, model in zip(rows, expected["models"], strict=True):
                cells = cast(list[dict[str, str | None]], row["cells"])
                for run in ROUNDS:
                    mine = [c for c in cells if c["run"] == run]
                    cell = model["runs"][run]
                    if cell is None:
                        assert [(c["state"], c["text"]) for c in mine] == [
                            ("absent", "absent")
                        ]
                        continue
                    text = {c["field"]: c["text"] for c in mine}
                    assert text == {
                        "rank": str(cell["rank"]),
                        "group": str(cell["group"]),
                        "mu": f"{cell['mu']:.4f}",
                        "interval": f"{cell['lo']:.4f} \N{EN DASH} {cell['hi']:.4f}",
                    }

            forest = cast(list[dict[str, str]], await page.script(READ_FOREST))
            drawn = {(line["model"], line["run"]) for line in forest}
            assert drawn == {
                (model["model"], run)
                for model in expected["models"]
                for run in ROUNDS
                if model["runs"][run] is not None
            }
            colours = {line["run"]: line["stroke"] for line in forest}
            legend = await page.script(
                "return Array.from(document.querySelectorAll('#compare-legend "
                "[data-run] .swatch'), (s) => s.style.background);"
            )
            assert len(set(colours.values())) == 2  # one colour per run
            assert all(line["stroke"] == colours[line["run"]] for line in forest)
            assert len(cast(list[str], legend)) == 2

            # The CSV export: one row per model and run, as the CLI's.
            href = cast(
                str,
                await page.script(
                    "return document.querySelector('#export-csv').getAttribute('href');"
                ),
            )
            exported = list(csv.DictReader(io.StringIO(unquote(href.split(",", 1)[1]))))
            assert [(r["model"], r["run"], r["present"]) for r in exported] == [
                (m["model"], run, str(m["runs"][run] is not None))
                for m in expected["models"]
                for run in ROUNDS
            ]

            # A run that does not exist: the page says which, and draws nothing.
            await page.open(board.base + "/?compare=round1,nope")
            await page.wait_for(
                "document.querySelector('[data-field=compare-caption]')"
                ".textContent.includes('nope')"
            )
            assert await page.count("#compare-forest g[data-model]") == 0
            errors = await page.console_errors()
            # The refused fetch is the browser's one logged error: a 404.
            assert all("compare?runs=round1%2Cnope" in e for e in errors), errors
