"""The suite's own rules (tests/conftest.py), checked on a small suite of its own.

A property test marked ``services`` that would shrink fails before it runs;
the summary names tests that took seconds without the ``slow`` marker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import tests.conftest as suite
from tests.conftest import pytest_runtest_setup, pytest_terminal_summary

suite.SLOW_S = 0.0  # every unmarked test counts as slow here
"""

TESTS = """
import pytest
from hypothesis import given, strategies as st

from tests.helpers import server_examples


@pytest.mark.services
@given(st.integers())
def test_shrinking_property(number):
    pass


@pytest.mark.services
@server_examples(2)
@given(st.integers())
def test_bounded_property(number):
    pass


@pytest.mark.slow
def test_marked():
    pass


def test_unmarked():
    pass
"""


INI = """
[pytest]
markers =
    services: as in pyproject.toml
    slow: as in pyproject.toml
asyncio_default_fixture_loop_scope = function
"""


@pytest.mark.slow
def test_a_services_property_that_shrinks_fails_and_unmarked_slow_tests_are_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_rules=TESTS)
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), path])))
    # In a process of its own: the rules' module is changed (SLOW_S) there.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_shrinking_property*",
            "*a property test that starts a server must not shrink*",
        ]
    )
    summary = result.stdout.str().split("slow tests without the slow marker")[1]
    assert "test_unmarked" in summary and "test_bounded_property" in summary
    assert "test_marked" not in summary
