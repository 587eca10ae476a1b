"""pytest plugin: a test fails when the release gate shows the candidate worse.

Enable it with ``-p adapters.pytest_gate`` (or ``pytest_plugins =
["adapters.pytest_gate"]`` in a conftest; an installed package also
registers it as the ``scorio_gate`` pytest11 entry point). A test asks the
gate through the ``scorio_gate`` fixture::

    def test_new_model_may_ship(scorio_gate):
        scorio_gate(candidate="qwen3-4b-new", baseline="qwen3-4b")

The fixture reads the run from a state file (``--scorio-state``, the
``state=`` argument, or ``$SCORIO_MONITOR_STATE``) and its run
(``--scorio-run``, ``run=``, or ``$SCORIO_MONITOR_RUN``), and tests like
``scorio-monitor gate``: ``fail`` (exit 1, the candidate shown worse than
the baseline minus the margin) fails the test with the gate's reason;
``pass`` returns the verdict; ``inconclusive`` returns it too, unless
``require_pass=True`` (or ``--scorio-require-pass``), which fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    # Types only: an installed plugin loads in every pytest run, so it
    # imports the engine when a test asks the gate, not before.
    from monitor.plans.gate import GateVerdict


class Gate(Protocol):
    """The ``scorio_gate`` fixture's callable."""

    def __call__(
        self,
        candidate: str,
        baseline: str,
        *,
        run: str | None = None,
        state: str | Path | None = None,
        margin: float = 0.0,
        better: bool = False,
        require_pass: bool | None = None,
    ) -> GateVerdict: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scorio_gate", "scorio-monitor release gate")
    group.addoption("--scorio-state", default=None, help="the run's state file")
    group.addoption("--scorio-run", default=None, help="the run")
    group.addoption(
        "--scorio-require-pass",
        action="store_true",
        default=False,
        help="fail a gated test while the gate is inconclusive, too",
    )


@pytest.fixture
def scorio_gate(request: pytest.FixtureRequest) -> Gate:
    """Ask the release gate; a ``fail`` verdict fails the test."""
    options = request.config.option

    def ask(
        candidate: str,
        baseline: str,
        *,
        run: str | None = None,
        state: str | Path | None = None,
        margin: float = 0.0,
        better: bool = False,
        require_pass: bool | None = None,
    ) -> GateVerdict:
        # Imported here: a test run that never gates loads none of the engine.
        from monitor.engine.monitor import Monitor
        from monitor.plans.gate import gate
        from monitor.stores.sqlite import SqliteStore

        path = state or options.scorio_state or os.environ.get("SCORIO_MONITOR_STATE")
        name = run or options.scorio_run or os.environ.get("SCORIO_MONITOR_RUN")
        if path is None or name is None:
            pytest.fail(
                "scorio_gate needs a state file and a run: --scorio-state and "
                "--scorio-run (or state=/run=, or $SCORIO_MONITOR_STATE and "
                "$SCORIO_MONITOR_RUN)",
                pytrace=False,
            )
        if not Path(path).exists():
            pytest.fail(f"scorio_gate: no such state file: {path}", pytrace=False)
        with Monitor(SqliteStore(Path(path), read_only=True)) as monitor:
            verdict = gate(
                monitor, name, candidate, baseline, margin=margin, better=better
            )
        strict = options.scorio_require_pass if require_pass is None else require_pass
        if verdict.verdict == "fail" or (strict and verdict.verdict != "pass"):
            pytest.fail(
                f"scorio gate {verdict.verdict}: {verdict.reason}", pytrace=False
            )
        return verdict

    return ask
