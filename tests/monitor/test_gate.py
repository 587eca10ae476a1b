"""The release gate: each exit code, its JSON, over HTTP, and as a pytest fixture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.plans.gate import gate
from monitor.service.service import Service
from monitor.stores.sqlite import SqliteStore
from tests.helpers import serving

ROOT = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]
QUESTIONS = 30


def config(run: str = "r") -> RunConfig:
    return RunConfig(
        run=run,
        questions=[str(q) for q in range(QUESTIONS)],
        max_trials_per_question=80,
        confidence=0.95,
    )


def fill(monitor: Monitor, rates: dict[str, float], trials: int, seed: int = 0) -> None:
    """``trials`` per question for each model, a share ``rate`` of them right."""
    rng = np.random.default_rng(seed)
    for model, rate in rates.items():
        models, questions, ids, outcomes = [], [], [], []
        for q in range(QUESTIONS):
            right = rng.random(trials) < rate
            for t in range(trials):
                models.append(model)
                questions.append(str(q))
                ids.append(t)
                outcomes.append(int(right[t]))
        monitor.ingest_columns("r", models, questions, ids, np.array(outcomes))


def state(path: Path, rates: dict[str, float], trials: int) -> Path:
    with Monitor(SqliteStore(path)) as monitor:
        monitor.configure(config())
        fill(monitor, rates, trials)
    return path


def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *arguments],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture(scope="module")
def clear_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``a`` at 0.8 and ``b`` at 0.5, ``c`` at 0.52, 40 trials per question."""
    path = tmp_path_factory.mktemp("gate") / "clear.db"
    return state(path, {"a": 0.8, "b": 0.5, "c": 0.52}, 40)


@pytest.mark.slow
def test_a_candidate_shown_no_worse_passes_with_exit_0(clear_state: Path) -> None:
    result = cli(
        "gate", "--state", str(clear_state), "--run", "r",
        "--candidate", "a", "--baseline", "b", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] == "pass"
    assert verdict["z"] >= verdict["threshold"] > 0
    assert verdict["trials"] == {"a": 1200, "b": 1200}
    assert verdict["information"] == pytest.approx(40.0, rel=1e-6)


@pytest.mark.slow
def test_a_candidate_shown_worse_fails_with_exit_1(clear_state: Path) -> None:
    result = cli(
        "gate", "--state", str(clear_state), "--run", "r",
        "--candidate", "b", "--baseline", "a",
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout.startswith("fail: b is shown worse than a (z ")
    with_margin = cli(
        "gate", "--state", str(clear_state), "--run", "r",
        "--candidate", "b", "--baseline", "a", "--margin", "0.02",
    )  # fmt: skip
    assert with_margin.stdout.startswith("fail: b is shown worse than a minus 0.02 (z")


@pytest.mark.slow
def test_close_models_are_inconclusive_with_exit_2(clear_state: Path) -> None:
    result = cli(
        "gate", "--state", str(clear_state), "--run", "r",
        "--candidate", "c", "--baseline", "b", "--json",
    )  # fmt: skip
    assert result.returncode == 2
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] == "inconclusive"
    assert abs(verdict["z"]) < verdict["threshold"]


def test_better_asks_for_more_than_no_worse(clear_state: Path) -> None:
    with Monitor(SqliteStore(clear_state, read_only=True)) as monitor:
        plain = gate(monitor, "r", "a", "b", margin=0.25)
        better = gate(monitor, "r", "a", "b", margin=0.25, better=True)
    # 0.8 against 0.5: well above 0.5 - 0.25, and not above 0.5 + 0.25 by much.
    assert plain.verdict == "pass"
    assert better.verdict != "pass"
    assert better.z is not None and plain.z is not None and better.z < plain.z


def test_a_margin_lets_a_slightly_worse_candidate_pass(clear_state: Path) -> None:
    with Monitor(SqliteStore(clear_state, read_only=True)) as monitor:
        strict = gate(monitor, "r", "c", "b")
        lenient = gate(monitor, "r", "b", "c", margin=0.2)
    assert strict.verdict == "inconclusive"
    assert lenient.verdict == "pass" and lenient.exit_code == 0


@pytest.mark.slow
def test_an_unknown_model_is_an_error_not_a_verdict(clear_state: Path) -> None:
    result = cli(
        "gate", "--state", str(clear_state), "--run", "r",
        "--candidate", "zz", "--baseline", "a",
    )  # fmt: skip
    assert result.returncode == 2
    assert "run 'r' has no model 'zz'; models: a, b, c" in result.stderr
    assert result.stdout == ""


def test_a_declared_model_without_trials_is_inconclusive(tmp_path: Path) -> None:
    with Monitor(SqliteStore(tmp_path / "s.db")) as monitor:
        monitor.configure(config().model_copy(update={"models": ["a", "b"]}))
        fill(monitor, {"a": 0.9}, 5)
        verdict = gate(monitor, "r", "a", "b")
    assert verdict.verdict == "inconclusive"
    assert verdict.reason == "b has no trials yet"


def test_a_negative_margin_is_refused(clear_state: Path) -> None:
    with (
        Monitor(SqliteStore(clear_state, read_only=True)) as monitor,
        pytest.raises(ValueError, match="margin must be a finite number >= 0"),
    ):
        gate(monitor, "r", "a", "b", margin=-0.1)


async def test_the_gate_route_answers_the_same_verdict() -> None:
    monitor = Monitor()
    monitor.configure(config())
    fill(monitor, {"a": 0.8, "b": 0.5}, 40)
    expected = gate(monitor, "r", "a", "b").model_dump(mode="json")
    async with Service(monitor, status_interval_s=0.01) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            answer = await client.get(
                "/runs/r/gate", params={"candidate": "a", "baseline": "b"}
            )
            assert answer.status_code == 200
            assert answer.json() == expected
            worse = await client.get(
                "/runs/r/gate", params={"candidate": "b", "baseline": "a"}
            )
            assert worse.json()["verdict"] == "fail"
            unknown = await client.get(
                "/runs/r/gate", params={"candidate": "x", "baseline": "a"}
            )
            assert unknown.status_code == 422
            assert "has no model 'x'" in unknown.json()["detail"]
            missing = await client.get(
                "/runs/nope/gate", params={"candidate": "a", "baseline": "b"}
            )
            assert missing.status_code == 404


GATED_TESTS = """
def test_a_over_b(scorio_gate):
    verdict = scorio_gate("a", "b")
    assert verdict.verdict == "pass"

def test_b_over_a(scorio_gate):
    scorio_gate("b", "a")

def test_c_over_b(scorio_gate):
    assert scorio_gate("c", "b").verdict == "inconclusive"
"""


@pytest.mark.slow
def test_the_pytest_fixture_fails_a_test_only_on_a_fail_verdict(
    pytester: pytest.Pytester, clear_state: Path
) -> None:
    pytester.makepyfile(test_gated=GATED_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:scorio_gate", "-p", "adapters.pytest_gate", "-p", "no:cacheprovider",
        "--scorio-state", str(clear_state), "--scorio-run", "r",
    )  # fmt: skip
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*scorio gate fail: b is shown worse than a*"])


@pytest.mark.slow
def test_require_pass_also_fails_an_inconclusive_gate(
    pytester: pytest.Pytester, clear_state: Path
) -> None:
    pytester.makepyfile(test_gated=GATED_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:scorio_gate", "-p", "adapters.pytest_gate", "-p", "no:cacheprovider",
        "--scorio-state", str(clear_state), "--scorio-run", "r",
        "--scorio-require-pass",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*scorio gate inconclusive*"])


@pytest.mark.slow
def test_the_fixture_says_what_it_needs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gated=GATED_TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "no:scorio_gate", "-p", "adapters.pytest_gate"
    )  # fmt: skip
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*scorio_gate needs a state file and a run*"])


def steady(monitor: Monitor, rates: dict[str, float], start: int, stop: int) -> None:
    """Trials ``start`` to ``stop`` of each question, a share ``rate`` of every
    ten right: the difference holds exactly as trials are added."""
    models, questions, ids, outcomes = [], [], [], []
    for model, rate in rates.items():
        for q in range(QUESTIONS):
            for t in range(start, stop):
                models.append(model)
                questions.append(str(q))
                ids.append(t)
                outcomes.append(int((t + q) % 10 < rate * 10))
    monitor.ingest_columns("r", models, questions, ids, np.array(outcomes))


def test_an_inconclusive_gate_says_how_many_trials_would_decide_it(
    tmp_path: Path,
) -> None:
    rates = {"c": 0.6, "b": 0.5}
    path = tmp_path / "close.db"
    with Monitor(SqliteStore(path)) as monitor:
        monitor.configure(config())
        steady(monitor, rates, 0, 10)
    result = cli(
        "gate",
        "--state",
        str(path),
        "--run",
        "r",
        "--candidate",
        "c",
        "--baseline",
        "b",
    )
    assert result.returncode == 2
    with Monitor(SqliteStore(path, read_only=True)) as monitor:
        verdict = gate(monitor, "r", "c", "b")
    assert verdict.more_trials is not None and verdict.more_trials % QUESTIONS == 0
    per_question = verdict.more_trials // QUESTIONS
    assert result.stdout.startswith("inconclusive: |z| ")
    assert (
        f"about {verdict.more_trials} more trials per model ({per_question} per "
        "question) would decide it"
    ) in result.stdout
    # The difference holding, that many decide it; half as many do not.
    for extra, decided in ((per_question, "pass"), (per_question // 2, "inconclusive")):
        more = Monitor()
        more.configure(config())
        steady(more, rates, 0, 10 + extra)
        assert gate(more, "r", "c", "b").verdict == decided, extra
