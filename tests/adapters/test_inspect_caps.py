"""Caps with undeclared models: real Inspect evals never pass max_trials_per_question.

Three models the run does not declare, run by one ``eval`` at Inspect's
default concurrency on ``scorio-latency`` (tests/adapters/inspect_models.py)
with the monitor's hook and early stopping over HTTP: every sample-epoch
runs on a reservation (the monitor plans a model before it is placed), so
no question of any model goes past the cap, whether the run lists its
questions, only counts them, or leaves them open.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from adapters.harness.early_stopping import MonitorEarlyStopping
from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.adapters.test_inspect_ai import INSPECT_OWN_WARNINGS
from tests.adapters.test_inspect_loop import QUESTIONS, evaluate, model, yes_no
from tests.helpers import serving

pytestmark = [
    pytest.mark.slow,  # each test runs real Inspect evals
    *(pytest.mark.filterwarnings(text) for text in INSPECT_OWN_WARNINGS),
]


@pytest.fixture(autouse=True)
def quiet_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    for name in ("SCORIO_MONITOR_URL", "SCORIO_MONITOR_STATE", "SCORIO_MONITOR_RUN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("declared", ["questions", "question_count", "open"])
async def test_undeclared_models_never_run_a_question_beyond_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: str
) -> None:
    cap, epochs = 10, 30
    # Three models that answer alike in pairs: the ranking needs the budget.
    models = [model("a", "10"), model("b", "01"), model("c", "1100")]
    config = RunConfig(
        run="yesno",
        questions=QUESTIONS if declared == "questions" else None,
        question_count=len(QUESTIONS) if declared == "question_count" else None,
        max_trials_per_question=cap,
    )
    monkeypatch.setenv("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.05")
    async with Service(Monitor()) as service:
        service.monitor.configure(config)
        async with serving(create_app(service, HttpSettings())) as base:
            monkeypatch.setenv("SCORIO_MONITOR_URL", base)
            # The service shares the eval's event loop here, so on a loaded
            # machine it may answer slower than the default wait budget,
            # past which sample-epochs run unreserved (docs/harness-hooks.md).
            stopping = MonitorEarlyStopping(refresh_s=0.2, wait_budget_s=30)
            logs = await evaluate(yes_no(epochs, stopping), models, tmp_path)
        counts = service.monitor.store.counts("yesno")

    assert len(logs) == 3
    over = {}
    for log in logs:
        ran = Counter(str(sample.id) for sample in log.samples or [])
        over.update({(log.eval.model, q): n for q, n in ran.items() if n > cap})
    assert over == {}
    assert len(counts) == 3
    for table in counts.values():
        assert max(sum(row) for row in table.observed) <= cap
