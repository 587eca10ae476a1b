"""From a question to its trials: each store's answer, the route, and the
dashboard's drill-down in a real headless Chromium.

Every store answers with the trials its exactly-once index counts (the last
delivery of a corrected trial, a duplicate once); the SQLite store adds each
trial's cost and time from its log. The route labels and weighs the
categories and names an Inspect trial's eval, sample and epoch; a click on a
row of the Questions table shows the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import httpx
import pytest
from selenium.webdriver.common.by import By

from adapters.redis.store import RedisStore
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.interfaces import Store
from monitor.service.service import Service
from monitor.stores.memory import MemoryStore
from monitor.stores.question_trials import (
    KEPT_BY_SQLITE,
    NOT_KEPT,
    QuestionTrials,
    read_question_trials,
)
from monitor.stores.sqlite import SqliteStore
from tests.helpers import serving
from tests.monitor.test_dashboard import Page, chromium
from tests.services import RedisServer

EVAL_ID = "Xk3fPqLm9RtW2vBn8cDe4h"  # 22 base-57 characters, as Inspect's
ODD = 'q/7 <img src=x onerror="document.title=1">'
CONFIG = RunConfig(
    run="gsm", question_count=4, weights=[0.0, 0.5, 1.0], labels=["I", "P", "C"]
)


def deliveries() -> list[dict[str, object]]:
    """Two models, four questions, three Inspect epochs; then a correction
    and a duplicate of one trial."""
    questions = ["q1", "q2", "q3", ODD]
    trials: list[dict[str, object]] = [
        {
            "run": "gsm",
            "model": model,
            "question": question,
            "trial": f"{EVAL_ID}:{epoch}",
            "category": (index + epoch + shift) % 3,
            "ts": 1_700_000_000.0 + 10 * epoch + index,
            "cost": {"tokens": 100 + epoch, "seconds": 1.5},
        }
        for shift, model in enumerate(["openai/gpt-4o", "anthropic/claude"])
        for index, question in enumerate(questions)
        for epoch in range(3)
    ]
    correction = {**trials[0], "category": 2, "ts": 1_700_000_100.0}
    return [*trials, correction, dict(correction)]


def expected(question: str) -> set[tuple[str, str, bool, int]]:
    """(model, trial, prior, category) the run counts for ``question``."""
    last: dict[tuple[str, str], int] = {}
    for trial in deliveries():
        if trial["question"] == question:
            key = (cast(str, trial["model"]), cast(str, trial["trial"]))
            last[key] = cast(int, trial["category"])
    return {
        (model, trial, False, category) for (model, trial), category in last.items()
    }


def seen(answer: QuestionTrials) -> set[tuple[str, str, bool, int]]:
    return {(t.model, t.trial, t.prior, t.category) for t in answer.trials}


def filled(store: Store) -> Store:
    monitor = Monitor(store)
    monitor.configure(CONFIG)
    report = monitor.ingest(deliveries())
    assert (report.accepted, report.corrections, report.duplicates) == (24, 1, 1)
    return store


@pytest.mark.parametrize("question", ["q1", ODD])
def test_every_store_lists_the_trials_it_counts(
    question: str, tmp_path: Path, redis: RedisServer, prefix: str
) -> None:
    stores: dict[str, Callable[[], Store]] = {
        "memory": MemoryStore,
        "sqlite": lambda: SqliteStore(tmp_path / f"{len(question)}.db"),
        "redis": lambda: RedisStore(redis.url, prefix=prefix),
    }
    for name, make in stores.items():
        store = filled(make())
        answer = read_question_trials(store, "gsm", question)
        assert seen(answer) == expected(question), name
        assert read_question_trials(store, "gsm", "absent").trials == [], name
        store.close()

    # The state file read again, read-only: the log's costs and times too.
    path = tmp_path / f"{len(question)}.db"
    with contextlib.closing(SqliteStore(path, read_only=True)) as reader:
        reader.load()
        answer = read_question_trials(reader, "gsm", question)
    assert answer.kept == KEPT_BY_SQLITE
    assert seen(answer) == expected(question)
    by_id = {(t.model, t.trial): t for t in answer.trials}
    first = by_id[("openai/gpt-4o", f"{EVAL_ID}:0")]
    if question == "q1":  # the corrected trial: its last delivery's time
        assert (first.category, first.ts) == (2, 1_700_000_100.0)
    assert first.tokens == 100 and first.seconds == 1.5


def test_a_store_without_trial_records_says_so() -> None:
    answer = read_question_trials(object(), "gsm", "q1")
    assert (answer.trials, answer.kept) == ([], NOT_KEPT)


@contextlib.asynccontextmanager
async def served(state: Path) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    monitor = Monitor(state)
    monitor.configure(CONFIG)
    monitor.ingest(deliveries())
    async with (
        Service(monitor, status_interval_s=0.01) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        yield base, client


def trials_path(question: str, run: str = "gsm") -> str:
    return f"/runs/{run}/questions/{httpx.URL(path=question).raw_path.decode()}/trials"


async def test_the_route_labels_weighs_and_names_the_inspect_sample(
    tmp_path: Path,
) -> None:
    async with served(tmp_path / "state.db") as (_, client):
        answer = (await client.get(trials_path(ODD))).json()
        assert answer["question"] == ODD
        assert [m["model"] for m in answer["models"]] == [
            "anthropic/claude",
            "openai/gpt-4o",
        ]
        gpt = answer["models"][1]
        assert gpt["total"] == 3
        epochs = [t["ref"] for t in gpt["trials"]]
        assert epochs == [
            f"Inspect eval {EVAL_ID}, sample {ODD}, epoch {n}" for n in (1, 2, 3)
        ]
        for trial in gpt["trials"]:
            assert trial["label"] == "IPC"[trial["category"]]
            assert trial["weight"] == [0.0, 0.5, 1.0][trial["category"]]
        assert gpt["mean"] == sum(t["weight"] for t in gpt["trials"]) / 3

        limited = (await client.get(trials_path("q1"), params={"limit": 2})).json()
        assert [(m["total"], len(m["trials"])) for m in limited["models"]] == [
            (3, 2),
            (3, 2),
        ]
        missing = await client.get(trials_path("nope"))
        assert missing.status_code == 404
        assert "no trials of question 'nope'" in missing.json()["detail"]
        unknown = await client.get(trials_path("q1", run="other"))
        assert unknown.status_code == 404


READ_DIALOG = """
const dialog = document.querySelector('#trials-dialog');
return {
  open: dialog.open,
  title: dialog.querySelector('[data-field=trials-title]').textContent,
  hint: dialog.querySelector('[data-field=trials-hint]').textContent,
  models: Array.from(dialog.querySelectorAll('section[data-model]'), (section) => ({
    model: section.dataset.model,
    rows: Array.from(section.querySelectorAll('tbody tr'), (row) => {
      const text = (name) => row.querySelector(`[data-field="${name}"]`).textContent;
      return {trial: text('trial'), label: text('label'), cost: text('cost'),
              ref: text('ref')};
    }),
  })),
  images: dialog.querySelectorAll('img').length,
};
"""


@pytest.mark.slow
async def test_a_click_on_a_question_opens_its_trials_per_model(
    tmp_path: Path,
) -> None:
    async with served(tmp_path / "state.db") as (base, client):
        answer = (await client.get(trials_path(ODD))).json()
        with chromium(tmp_path / "profile") as driver:
            page = Page(driver)
            await page.open(f"{base}/?run=gsm")
            await page.wait_for(
                "document.querySelectorAll('#questions tbody tr').length === 4"
            )
            row = await asyncio.to_thread(
                driver.find_element,
                By.CSS_SELECTOR,
                f"#questions tr[data-question={json.dumps(ODD)}]",
            )
            await asyncio.to_thread(row.click)
            await page.wait_for(
                "document.querySelector('#trials-dialog')?.dataset.loaded === 'true'"
            )
            shown = cast(dict[str, object], await page.script(READ_DIALOG))
            assert shown["open"] is True
            assert shown["images"] == 0  # the question's markup is text
            assert ODD in cast(str, shown["title"])
            assert "inspect view" in cast(str, shown["hint"])
            models = cast(list[dict[str, object]], shown["models"])
            assert [m["model"] for m in models] == [
                m["model"] for m in answer["models"]
            ]
            for drawn, served_model in zip(models, answer["models"], strict=True):
                rows = cast(list[dict[str, str]], drawn["rows"])
                assert [r["trial"] for r in rows] == [
                    t["trial"] for t in served_model["trials"]
                ]
                for row_shown, trial in zip(rows, served_model["trials"], strict=True):
                    assert row_shown["ref"] == trial["ref"]
                    assert row_shown["label"].startswith(trial["label"])
                    assert row_shown["cost"] == f"{trial['tokens']} tokens, 1.5 s"
            assert await page.script("return document.title;") == "scorio-monitor"
            assert await page.console_errors() == []
            await page.open("about:blank")


LM_EVAL_OUTPUT = Path(__file__).parents[1] / "fixtures" / "lm_eval" / "output"


@pytest.mark.slow
async def test_an_lm_eval_trial_names_its_samples_file_doc_id_and_repeat(
    tmp_path: Path,
) -> None:
    """Trials of a real lm-eval run's samples file, ingested by the CLI."""
    state = tmp_path / "lm.db"
    ingest = subprocess.run(
        [
            *(sys.executable, "-m", "monitor.cli", "ingest", str(LM_EVAL_OUTPUT)),
            *("--format", "lm-eval", "--state", str(state)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ingest.returncode == 0, ingest.stderr
    [samples] = LM_EVAL_OUTPUT.glob("*/samples_scorio_arith_r4_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    doc = str(records[0]["doc_id"])
    async with (
        Service(Monitor(state), status_interval_s=0.01) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        answer = (await client.get(trials_path(doc, run="scorio_arith_r4"))).json()
    [model] = answer["models"]
    assert model["trials"]
    for trial in model["trials"]:
        repeat = trial["trial"].rpartition(":")[2]
        assert trial["ref"] == f"lm-eval {samples.name}, doc_id {doc}, repeat {repeat}"
