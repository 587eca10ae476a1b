"""Live metrics end to end: engine, HTTP, Prometheus, the dashboard in Chromium
and `score`, each showing the numbers scorio's batch functions give on the
same counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Final, cast

import httpx
import numpy as np
import pytest
import scorio.eval as oracle
from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver

from adapters.prometheus import metrics_renderer
from monitor import ConfigError, Monitor, RunConfig
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving
from tests.monitor.test_dashboard import Page, browser, chromium

__all__ = ["browser", "chromium"]  # the module-scoped Chromium fixture

TOLERANCE: Final = 1e-12
METRICS: Final = ["pass@4", "maj@5", "max@2", "g_pass@4:0.5", "auc@3"]
Interval = tuple[float, float, float, float]
BATCH: Final[dict[str, Callable[[np.ndarray, float], Interval]]] = {
    "avg": lambda r, c: oracle.avg_ci(r, None, c, (0.0, 1.0)),
    "pass@4": lambda r, c: oracle.pass_at_k_ci(r, 4, c),
    "maj@5": lambda r, c: oracle.maj_at_k_ci(r, 5, c),
    "max@2": lambda r, c: oracle.max_at_k_ci(r, 2, None, None, c, (0.0, 1.0)),
    "g_pass@4:0.5": lambda r, c: oracle.g_pass_at_k_tau_ci(r, 4, 0.5, c),
    "auc@3": lambda r, c: oracle.auc_at_k_ci(r, 3, c),
}
MODELS: Final = ("alpha", "beta", "gamma")
QUESTIONS, TRIALS = 8, 6


def results() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(17)
    rates = {"alpha": 0.8, "beta": 0.5, "gamma": 0.3}
    return {
        model: (rng.random((QUESTIONS, TRIALS)) < rate).astype(np.int64)
        for model, rate in rates.items()
    }


def events(matrices: dict[str, np.ndarray]) -> list[dict[str, object]]:
    return [
        {
            "run": "live",
            "model": model,
            "question": q,
            "trial": t,
            "category": int(matrix[q, t]),
        }
        for model, matrix in matrices.items()
        for q in range(QUESTIONS)
        for t in range(TRIALS)
    ]


def config(confidence: float = 0.9) -> RunConfig:
    return RunConfig(
        run="live", question_count=QUESTIONS, confidence=confidence, metrics=METRICS
    )


def assert_batch(
    metrics: dict[str, dict[str, float]], matrix: np.ndarray, confidence: float
) -> None:
    assert set(metrics) == set(BATCH)
    for name, batch in BATCH.items():
        value = metrics[name]
        shown = (value["mu"], value["sigma"], value["lo"], value["hi"])
        assert shown == pytest.approx(batch(matrix, confidence), abs=TOLERANCE), name


def test_the_engine_status_carries_every_metric_as_the_batch_functions() -> None:
    matrices = results()
    monitor = Monitor()
    monitor.configure(config())
    monitor.ingest(events(matrices))
    status = monitor.status("live")
    for row in status.models:
        dumped = {k: v.model_dump() for k, v in row.metrics.items()}
        assert_batch(dumped, matrices[row.model], 0.9)
        assert row.avg == pytest.approx(oracle.avg(matrices[row.model])[0], abs=1e-15)
        assert row.avg == row.metrics["avg"].mu
    assert (
        status.models[0].metrics["pass@4"].mu
        == status.models[0].model_dump()["metrics"]["pass@4"]["mu"]
    )


def test_avg_is_always_there_even_without_metrics() -> None:
    matrices = results()
    monitor = Monitor()
    monitor.configure(RunConfig(run="live", question_count=QUESTIONS))
    monitor.ingest(events(matrices))
    for row in monitor.status("live").models:
        assert list(row.metrics) == ["avg"]
        assert row.avg == pytest.approx(oracle.avg(matrices[row.model])[0])


def test_uneven_counts_are_counted_per_question() -> None:
    """One question with more trials: pass@4 is each question's own posterior."""
    matrices = results()
    extra = [
        {
            "run": "live",
            "model": "alpha",
            "question": 0,
            "trial": 100 + t,
            "category": 1,
        }
        for t in range(5)
    ]
    monitor = Monitor()
    monitor.configure(config())
    monitor.ingest(events(matrices) + extra)
    row = next(r for r in monitor.status("live").models if r.model == "alpha")
    first = np.concatenate([matrices["alpha"][0], np.ones(5, dtype=np.int64)])
    parts = [oracle.pass_at_k_ci(first[None, :], 4, 0.9)] + [
        oracle.pass_at_k_ci(matrices["alpha"][q][None, :], 4, 0.9)
        for q in range(1, QUESTIONS)
    ]
    assert row.metrics["pass@4"].mu == pytest.approx(
        np.mean([p[0] for p in parts]), abs=TOLERANCE
    )
    assert row.metrics["pass@4"].sigma == pytest.approx(
        np.sqrt(sum(p[1] ** 2 for p in parts)) / QUESTIONS, abs=TOLERANCE
    )


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"metrics": ["pass@"]}, "unknown metric"),
        ({"metrics": ["pass@2"], "weights": [0, 0.5, 1]}, "needs binary outcomes"),
        ({"metrics": ["maj@3", "maj@3"]}, "distinct"),
    ],
)
def test_a_bad_metrics_list_is_a_config_error(
    settings: dict[str, object], reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        Monitor().configure({"run": "live", **settings})


def prometheus_metric(text: str) -> dict[tuple[str, str], float]:
    return {
        (sample.labels["model"], sample.labels["metric"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "scorio_model_metric" and sample.labels["run"] == "live"
    }


async def test_http_status_and_prometheus_show_the_batch_numbers() -> None:
    matrices = results()
    async with Service(Monitor(), status_interval_s=0.01) as service:
        app = create_app(
            service, HttpSettings(), metrics_renderer(lambda: service.snapshot)
        )
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            declared = await client.post("/runs", json=config().model_dump())
            assert declared.status_code in (200, 201), declared.text
            posted = await client.post("/runs/live/trials", json=events(matrices))
            assert posted.status_code == 200, posted.text
            status = (await client.get("/runs/live/status")).json()
            for row in status["models"]:
                assert_batch(row["metrics"], matrices[row["model"]], 0.9)
                assert row["avg"] == row["metrics"]["avg"]["mu"]
            expected = {
                (row["model"], name): value["mu"]
                for row in status["models"]
                for name, value in row["metrics"].items()
            }
            async with asyncio.timeout(10):
                while True:
                    scraped = prometheus_metric((await client.get("/metrics")).text)
                    if scraped == expected:
                        break
                    await asyncio.sleep(0.05)
            for (model, name), mu in scraped.items():
                batch = BATCH[name](matrices[model], 0.9)[0]
                assert mu == pytest.approx(batch, abs=TOLERANCE)


READ_METRICS: Final = """
const table = document.querySelector('#metrics');
const names = Array.from(table.querySelectorAll('thead th[data-metric]'),
                         (th) => th.dataset.metric);
const rows = Array.from(table.querySelectorAll('tbody tr'), (tr) => [
  tr.dataset.model,
  Object.fromEntries(Array.from(tr.querySelectorAll('td[data-metric]'),
                                (td) => [td.dataset.metric, td.textContent]))]);
const avg = Array.from(document.querySelectorAll('#leaderboard tbody tr'),
  (tr) => [tr.dataset.model, tr.querySelector('[data-field="avg"]').textContent]);
return {hidden: table.hidden, names, rows: Object.fromEntries(rows),
        avg: Object.fromEntries(avg)};
"""


async def test_the_dashboard_shows_every_metric_and_avg_next_to_mu(
    browser: webdriver.Chrome,
) -> None:
    matrices = results()
    monitor = Monitor()
    monitor.configure(config())
    async with (
        Service(monitor, status_interval_s=0.01) as service,
        serving(create_app(service, HttpSettings())) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        page = Page(browser)
        await page.console_errors()
        try:
            posted = await client.post("/runs/live/trials", json=events(matrices))
            assert posted.status_code == 200
            await page.open(base + "/")
            total = len(MODELS) * QUESTIONS * TRIALS
            await page.wait_for(f"document.body.dataset.trials === '{total}'")
            await page.wait_for("!document.querySelector('#metrics').hidden")
            shown = cast(dict[str, object], await page.script(READ_METRICS))
            assert shown["names"] == ["avg", *METRICS]
            rows = cast(dict[str, dict[str, str]], shown["rows"])
            averages = cast(dict[str, str], shown["avg"])
            for model, matrix in matrices.items():
                for name in ["avg", *METRICS]:
                    mu, sigma, _, _ = BATCH[name](matrix, 0.9)
                    text_mu, _, text_sigma = rows[model][name].partition(" ± ")
                    assert abs(float(text_mu) - mu) <= 0.5e-4 + 1e-12, (model, name)
                    assert abs(float(text_sigma) - sigma) <= 0.5e-4 + 1e-12
                assert abs(float(averages[model]) - oracle.avg(matrix)[0]) <= 0.5e-4
            assert await page.console_errors() == []
        finally:
            await page.open("about:blank")


def test_score_prints_the_metrics_of_a_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrices = results()
    path = tmp_path / "live.npz"
    np.savez(
        path,
        live=np.stack([matrices[m] for m in MODELS]).astype(np.int8),
        models=np.array(MODELS),
    )
    assert (
        main(
            [
                "score",
                str(path),
                "--json",
                "--confidence",
                "0.9",
                "--metrics",
                ",".join(METRICS),
            ]
        )
        == 0
    )
    (board,) = json.loads(capsys.readouterr().out)
    for row in board["models"]:
        assert_batch(row["metrics"], matrices[row["model"]], 0.9)
    assert main(["score", str(path), "--metrics", "pass@4"]) == 0
    table = capsys.readouterr().out
    assert "pass@4" in table and "avg" in table
