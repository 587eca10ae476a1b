"""Test-wide settings: hypothesis profiles (derandomized under CI), the
``services``, ``install`` and ``slow`` markers, and collection with a
partial install.

``pytest -m "not services"`` runs everything that needs no redis-server,
mosquitto, Prometheus or Chromium: a test is marked ``services`` here when
it uses one of :data:`SERVICE_FIXTURES`, or by hand when it starts a binary
itself; :func:`tests.services.require_binary` fails a test that starts one
unmarked, so the split cannot drift. ``install`` marks the tests that build
and install the package into a fresh environment.

``pytest -m "not slow"`` is the inner loop (docs/development.md): ``slow``
marks, by hand, each test that takes seconds (a server, a browser, a
process, a real harness run, many examples), and here every ``install``
test. The run's summary names the tests that took seconds unmarked, so the
marker keeps up with new tests. A property test marked ``services`` must
not shrink (:func:`tests.helpers.server_examples`): hypothesis shrinks a
failure for up to five minutes of examples that each start a server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from tests import services
from tests.collection import called_names, missing_libraries
from tests.services import (
    MosquittoBroker,
    RedisClusterNodes,
    RedisServer,
    mosquitto_broker,
    redis_cluster,
    redis_server,
)

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Fixtures that start a server or a browser: a test using one (directly or
# through another fixture) is marked ``services``.
SERVICE_FIXTURES = frozenset(
    {
        "redis",
        "mosquitto",
        "redis_cluster_nodes",
        # tests/monitor/test_dashboard.py: headless Chromium.
        "browser",
        # tests/deploy: the deploy broker, and the whole compose stack.
        "broker",
        "stack",
    }
)
# Functions that start one (tests/services.py, tests/deploy/deployment.py):
# a test calling one in its own body is marked ``services`` too.
SERVICE_STARTERS = frozenset(
    {
        "redis_server",
        "redis_cluster",
        "mosquitto_broker",
        "deploy_broker",
        "deploy_redis",
        "prometheus_server",
        "require_binary",
        # tests/monitor/test_dashboard.py: a headless Chromium of the test's own.
        "chromium",
        "require_browser",
    }
)
# Fixtures that build the package and install it into a fresh venv.
INSTALL_FIXTURES = frozenset({"wheel", "base", "image_venv"})


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("CI"):
        # A package module importing a library this install lacks: its
        # doctests skip (pytest's --doctest-ignore-import-errors), as test
        # modules do below. Under CI they fail.
        config.option.doctest_ignore_import_errors = True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVICE_FIXTURES or (
            isinstance(item, pytest.Function)
            and called_names(item.function) & SERVICE_STARTERS
        ):
            item.add_marker(pytest.mark.services)
        if used & INSTALL_FIXTURES:
            item.add_marker(pytest.mark.install)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture starts: require_binary asks which test is running.
    services.running.test = item
    if item.get_closest_marker("services") is not None and _shrinks(item):
        pytest.fail(
            "a property test that starts a server must not shrink (for up to "
            "five minutes): use tests.helpers.server_examples",
            pytrace=False,
        )


def _shrinks(item: pytest.Item) -> bool:
    """Whether ``item`` is a hypothesis test whose settings shrink failures."""
    function = getattr(item, "obj", None)
    if not getattr(function, "is_hypothesis_test", False):
        return False
    # Where @given and @settings keep a test's settings (hypothesis' own
    # pytest plugin reads it too).
    chosen = function._hypothesis_internal_use_settings  # type: ignore[union-attr]
    return Phase.shrink in chosen.phases


# A test that took this long without the slow marker is named in the summary.
SLOW_S = 2.0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    unmarked = sorted(
        (report.duration, report.nodeid)
        for report in terminalreporter.getreports("passed")
        + terminalreporter.getreports("failed")
        if report.when == "call"
        and report.duration > SLOW_S
        and "slow" not in report.keywords
    )
    if unmarked:
        terminalreporter.section("slow tests without the slow marker")
        for duration, nodeid in reversed(unmarked):
            terminalreporter.line(f"{duration:6.1f}s {nodeid}")


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Collector | None:
    """A module that needs a library this install lacks: one skipped test.

    Under ``CI`` the module is collected as usual, so its import fails.
    """
    if os.environ.get("CI"):
        return None
    missing = missing_libraries(module_path)
    if not missing:
        return None
    return MissingLibraries.from_parent(parent, path=module_path, missing=missing)


class MissingLibraries(pytest.File):
    """A test module standing for one test that skips, naming what is missing."""

    def __init__(self, *, missing: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.missing = missing

    def collect(self) -> Iterator[pytest.Item]:
        yield SkippedForLibraries.from_parent(self, name=self.path.name)


class SkippedForLibraries(pytest.Item):
    def runtest(self) -> None:
        assert isinstance(self.parent, MissingLibraries)
        pytest.skip(  # never under CI: such modules are collected as usual there
            f"needs {', '.join(self.parent.missing)}, not installed here "
            "(pip install -e '.[test]' installs every test dependency; "
            "with CI=true this fails instead)"
        )


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A session-wide redis-server (persistence off); isolate by key prefix."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    """A session-wide mosquitto; isolate by topic prefix."""
    with mosquitto_broker(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A key or topic prefix unique to the test, from its name."""
    name = request.node.name.replace("[", "-").replace("]", "")
    return "t-" + "".join(c if c.isalnum() or c == "-" else "-" for c in name)[:60]


@pytest.fixture(scope="session")
def redis_cluster_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisClusterNodes]:
    """A session-wide Redis Cluster (3 masters, 3 replicas); isolate by prefix."""
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster
