"""One poison corpus through every way in: one verdict, one reason, one kind (issue 24).

The corpus (:mod:`tests.poison_corpus`) goes in order through the Python
API (dicts and bytes), HTTP on a real server, MQTT through a real
mosquitto, Redis Streams through a real redis-server (in each documented
entry form: ``data``, ``event``, the event's fields), and ``watch`` of a
file and of stdin. Each path must count exactly the good events, reject
every poison one with a dead letter of its own, never crash or stop, and
give each case the same verdict, reason and kind as every other path that
carried it. A path skips only what it cannot carry: the stream fields form an event
that is not a flat strict JSON object with string ids, the Python API's dict
path a payload that is not a strict JSON object (no dict to send) or is
judged by its size (a dict has none), the
paths without a channel the run-mismatch case, ``watch`` a payload with a
raw newline (not one line). A failure prints a table of case by path.

The harness client (:mod:`adapters.harness`) is not a path here: it takes
typed ``TrialEvent`` values only, so poison never reaches it as input.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract_paths import (
    Outcome,
    PathResult,
    as_bytes,
    as_dict,
    http_path,
    mqtt_path,
    python_path,
    redis_path,
    start_watch,
    watch_path,
)
from tests.poison_corpus import Case, corpus, good_counts
from tests.services import MosquittoBroker, RedisServer

CASES = corpus()
LINES = [case for case in CASES if not case.channel_only and not case.has_raw_newline]
PREFIX = f"t-one-contract-{os.getpid()}"
Watching = dict[str, tuple[Path, subprocess.Popen[bytes]]]


@pytest.fixture(scope="module", autouse=True)
def watching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watching]:
    """Both ``watch`` processes, started first so they run beside the rest."""
    folder = tmp_path_factory.mktemp("one-contract")
    started = {
        name: (folder / name, start_watch(LINES, folder / name, stdin=name == "stdin"))
        for name in ("file", "stdin")
    }
    yield started
    for _, process in started.values():
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def python_results() -> list[PathResult]:
    return [python_path("dict", CASES, as_dict), python_path("bytes", CASES, as_bytes)]


@pytest.fixture(scope="module")
def service_results(
    mosquitto: MosquittoBroker, redis: RedisServer
) -> dict[str, PathResult]:
    """HTTP, MQTT and Redis Streams, fed side by side (each its own service)."""

    async def feed_all() -> list[PathResult]:
        return list(
            await asyncio.gather(
                http_path(CASES),
                mqtt_path(CASES, mosquitto, PREFIX),
                redis_path(CASES, redis, PREFIX),
                redis_path(CASES, redis, PREFIX, "event"),
                redis_path(CASES, redis, PREFIX, "fields"),
            )
        )

    return {result.name: result for result in asyncio.run(feed_all())}


@pytest.fixture(scope="module")
def watch_results(watching: Watching) -> list[PathResult]:
    return [
        watch_path(name, LINES, folder, process)
        for name, (folder, process) in watching.items()
    ]


def test_the_python_api_keeps_the_contract(python_results: list[PathResult]) -> None:
    for result in python_results:
        assert_keeps_the_contract(result)


@pytest.mark.slow  # the services' paths (service_results)
def test_http_keeps_the_contract(service_results: dict[str, PathResult]) -> None:
    assert_keeps_the_contract(service_results["http"])


@pytest.mark.slow  # the services' paths (service_results)
def test_mqtt_keeps_the_contract(service_results: dict[str, PathResult]) -> None:
    assert_keeps_the_contract(service_results["mqtt"])


@pytest.mark.slow  # the services' paths (service_results)
def test_redis_streams_keep_the_contract(
    service_results: dict[str, PathResult],
) -> None:
    assert_keeps_the_contract(service_results["redis"])


@pytest.mark.slow  # the services' paths (service_results)
def test_redis_streams_keep_the_contract_in_every_documented_form(
    service_results: dict[str, PathResult],
) -> None:
    """``event '<json>'`` as ``data '<json>'``, and the event's fields as
    stream fields (string numbers read as numbers)."""
    assert_keeps_the_contract(service_results["redis-event"])
    fields = service_results["redis-fields"]
    assert_keeps_the_contract(fields)
    # The form carries good events, and invalid UTF-8 in a value and a name.
    carried = set(fields.outcomes)
    assert {"good_1", "utf8_in_string", "utf8_in_field_name"} <= carried


def test_watch_of_a_file_and_of_stdin_keeps_the_contract(
    watch_results: list[PathResult],
) -> None:
    for result in watch_results:
        assert_keeps_the_contract(result)


@pytest.mark.slow  # the services' paths (service_results)
def test_every_path_gives_each_case_one_verdict_one_reason_one_kind(
    python_results: list[PathResult],
    service_results: dict[str, PathResult],
    watch_results: list[PathResult],
) -> None:
    results = [*python_results, *service_results.values(), *watch_results]
    parted = [case for case in CASES if not agree(case, results)]
    assert not parted, (
        "cases where a path breaks the contract's verdict, or paths part on the "
        "reason or kind:\n" + table(parted, results)
    )


def agree(case: Case, results: list[PathResult]) -> bool:
    outcomes = [r.outcomes[case.name] for r in results if case.name in r.outcomes]
    kinds = {o.kind for o in outcomes if o.kind is not None}
    expected = "accepted" if case.good else "rejected"
    return (
        {o.verdict for o in outcomes} == {expected}
        and len({o.reason for o in outcomes}) == 1
        and len(kinds) <= 1
    )


def assert_keeps_the_contract(result: PathResult) -> None:
    """Good counted exactly, poison rejected once each, nothing crashed."""
    carried = [case for case in CASES if case.name in result.outcomes]
    wrong = [
        case
        for case in carried
        if problem(case, result.outcomes[case.name]) is not None
    ]
    problems = [f"{result.name}: {result.failure}"] if result.failure else []
    problems += [
        f"{case.name}: {problem(case, result.outcomes[case.name])}"[:300]
        for case in wrong
    ]
    good = good_counts(carried)
    status = result.status
    if status is None:
        problems.append("no status of the run at the end")
    else:
        counted = Counter({row.model: row.trials for row in status.models})
        if status.trials != good.total() or counted != good:
            problems.append(
                f"counted {status.trials} trials {dict(counted)}; the good events "
                f"are {good.total()} {dict(good)}"
            )
    rejected = sum(o.verdict == "rejected" for o in result.outcomes.values())
    if result.letters != rejected:
        problems.append(f"{result.letters} dead letters for {rejected} rejections")
    assert not problems, f"path {result.name} breaks the contract:\n  " + "\n  ".join(
        problems
    )


def problem(case: Case, outcome: Outcome) -> str | None:
    expected = "accepted" if case.good else "rejected"
    if outcome.verdict != expected:
        return f"{outcome.verdict}, not {expected}"
    if case.good and outcome.letters:
        return f"accepted but dead-lettered: {outcome.letters}"
    if not case.good and outcome.letters != (outcome.reason,):
        return (
            f"rejected ({outcome.reason!r}) with dead letters {outcome.letters}, "
            "not one with that reason"
        )
    return None


def table(cases: list[Case], results: list[PathResult]) -> str:
    """Case by path: ``ok`` (accepted), ``-`` (not carried) or a code whose
    line below gives the verdict, [kind] and reason."""
    codes: dict[Outcome, str] = {}
    width = max([len(case.name) for case in cases] + [4]) + 2
    lines = [
        " " * width + "".join(f"{result.name:<8}" for result in results),
    ]
    for case in cases:
        cells = []
        for result in results:
            outcome = result.outcomes.get(case.name)
            if outcome is None:
                cells.append("-")
            elif outcome.verdict == "accepted" and not outcome.letters:
                cells.append("ok")
            else:
                key = Outcome(outcome.verdict, outcome.reason, outcome.kind)
                if key not in codes:
                    codes[key] = f"{outcome.verdict[0].upper()}{len(codes) + 1}"
                cells.append(codes[key])
        name = case.name if not case.good else f"{case.name} (good)"
        lines.append(f"{name:<{width}}" + "".join(f"{cell:<8}" for cell in cells))
    for outcome, code in codes.items():
        kind = "" if outcome.kind is None else f" [{outcome.kind}]"
        text = f"{code:>4} {outcome.verdict}{kind} {outcome.reason}"
        lines.append(text if len(text) <= 200 else text[:197] + "...")
    return "\n".join(lines)
