"""Hostile input through parsing, ``watch`` and the HTTP routes (issue 15).

Poison payloads sit between good trial events: each poison is rejected alone
with a reason, nothing answers 5xx or crashes, and the counts equal those of
the good events alone.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given
from hypothesis import strategies as st

from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.inputs.columns import Parsed, Trial
from monitor.inputs.decode import decode_events as parse_payload
from monitor.schema import Rejection, Status, TrialEvent
from monitor.service.service import Service
from tests.helpers import server_examples, serving
from tests.hostile import DEEP, REPRODUCERS, RUN, good_stream, interleave, poison

COMMAND = [sys.executable, "-m", "monitor.cli"]
JSON_TYPE = {"Content-Type": "application/json"}


def assert_counts_match(status: Status, results: np.ndarray) -> None:
    assert status.trials == results.size
    for row in status.models:
        mu, sigma = oracle.bayes(results[int(row.model[1:])])
        assert (row.mu, row.sigma) == pytest.approx((mu, sigma), abs=1e-12)


def test_deeply_nested_json_is_rejected_with_a_reason() -> None:
    for payload in (b"[" * DEEP, b'{"a":' * DEEP + b"1" + b"}" * DEEP):
        (rejection,) = parse_payload(payload, "test", 7)
        assert isinstance(rejection, Rejection)
        assert rejection.kind == "invalid_json" and rejection.position == 7
        assert "nested too deeply" in rejection.reason
    event = {"run": "r", "model": "m", "question": 1, "trial": 1, "signals": {}}
    for levels, reason in ((100, "nests deeper than"), (900, "nested too deeply")):
        nested: object = 1
        for _ in range(levels):
            nested = [nested]
        event["signals"] = {"a": nested}
        (rejection,) = parse_payload(json.dumps(event))
        assert isinstance(rejection, Rejection) and reason in rejection.reason


def test_how_deep_input_is_refused_does_not_depend_on_the_callers_stack() -> None:
    """~1,000 levels either parse or exhaust the stack, by the caller's depth;
    past MAX_PARSE_DEPTH a payload is refused before it is decoded."""

    def deep_call(levels: int, payload: bytes) -> list[Parsed]:
        if levels:
            return deep_call(levels - 1, payload)
        return parse_payload(payload, "test")

    for payload in (
        b"[" * 1987,
        b"[" * 600 + b"]" * 600,
        b'[{"a":' * 300 + b"1" + b"}]" * 300,
    ):
        shallow = parse_payload(payload, "test")
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 5000)  # as hypothesis does for its tests
        try:
            deep = deep_call(400, payload)
            roomy = parse_payload(payload, "test")
        finally:
            sys.setrecursionlimit(limit)
        assert shallow == deep == roomy
        assert isinstance(shallow[0], Rejection)
        assert shallow[0].reason == "invalid JSON: nested too deeply to parse"


@given(st.lists(poison, max_size=8), st.integers(0, 2**16))
def test_parse_payload_never_raises_and_poison_never_counts(
    bad: list[bytes], seed: int
) -> None:
    good, results = good_stream(seed % 5)
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    for payload in interleave(good, bad, seed):
        items = parse_payload(payload, "fuzz", run=RUN)
        assert items and all(
            isinstance(item, Trial | TrialEvent | Rejection) for item in items
        )
        report = monitor.ingest_parsed(items, source="fuzz")
        if payload in good:
            assert not report.rejected
        else:
            assert len(report.rejected) == len(items)
            assert all(rejection.reason for rejection in report.rejected)
    assert_counts_match(monitor.status(RUN), results)


@server_examples(4)
@given(st.lists(poison, min_size=1, max_size=6), st.integers(0, 2**16))
def test_watch_of_a_file_rejects_each_poison_line_alone(
    tmp_path_factory: pytest.TempPathFactory, bad: list[bytes], seed: int
) -> None:
    folder = tmp_path_factory.mktemp("watch")
    good, results = good_stream(seed % 7)
    lines = [line.replace(b"\n", b" ") for line in interleave(good, bad, seed)]
    path = folder / "run.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    main(["watch", str(path), "--json", "--state", str(folder / "state.db")])
    with Monitor(folder / "state.db") as monitor:
        assert_counts_match(monitor.status(RUN), results)


def test_watch_of_stdin_counts_good_lines_around_a_poison_line(tmp_path: Path) -> None:
    good, results = good_stream(3)
    lines = interleave(good, [b"[" * DEEP, REPRODUCERS[2]], seed=1)
    done = subprocess.run(
        [*COMMAND, "watch", "-", "--json", "--state", str(tmp_path / "s.db")],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert b"nested too deeply" in done.stderr
    (status,) = [Status.model_validate(item) for item in json.loads(done.stdout)]
    assert_counts_match(status, results)
    assert done.stderr.count(b": rejected: ") == 2


@pytest.mark.slow
@server_examples(5)
@given(st.lists(poison, min_size=1, max_size=12), st.integers(0, 2**16))
def test_http_trials_route_fuzzed_with_poison_between_good_events(
    bad: list[bytes], seed: int
) -> None:
    good, results = good_stream(seed % 5)
    bodies = interleave(good, [*REPRODUCERS, *bad], seed)
    status = asyncio.run(post_all(bodies, good))
    assert_counts_match(status, results)


async def post_all(bodies: list[bytes], good: list[bytes]) -> Status:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            for body in bodies:
                response = await client.post(
                    f"/runs/{RUN}/trials",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                assert response.status_code < 500, (body[:80], response.text)
                if body not in good:
                    assert response.status_code == 422, (body[:80], response.text)
                    assert response.json()["detail"]
        return await service.status(RUN)


def legal_header(value: bytes) -> bool:
    """What an HTTP client may send at all (h11 refuses control bytes, and
    white space around a value)."""
    return value == value.strip(b" \t") and all(
        (byte >= 0x20 and byte != 0x7F) or byte == 0x09 for byte in value
    )


BAD_EVENT_IDS = [b"\xb2", "²".encode(), b"1" * 4400, str(2**63).encode(), b"-1", b"1.5"]


@pytest.mark.slow
@server_examples(5)
@given(
    st.lists(
        st.binary(max_size=30).filter(legal_header)
        | st.integers(-(2**70), 2**70).map(lambda n: str(n).encode()),
        max_size=8,
    )
)
def test_events_route_answers_400_to_bad_ids_and_never_5xx(ids: list[bytes]) -> None:
    asyncio.run(ask_events([*BAD_EVENT_IDS, *ids]))


async def ask_events(ids: list[bytes]) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            for value in ids:
                text = value.decode("latin-1").strip(" \t\n\x0b\x0c")
                valid = (text.isascii() and text.isdigit() and len(text) < 20) and int(
                    text
                ) < 2**63
                for request in (
                    client.build_request(
                        "GET", f"/runs/{RUN}/events", headers={b"Last-Event-ID": value}
                    ),
                    client.build_request(
                        "GET", f"/runs/{RUN}/events", params={"since": text}
                    ),
                ):
                    response = await client.send(request, stream=True)
                    await response.aclose()
                    if not text and "since" not in str(request.url):
                        assert response.status_code == 200
                    elif valid:
                        assert response.status_code == 200, value
                    else:
                        assert response.status_code == 400, (value, response)


run_configs = st.fixed_dictionaries(
    {"run": st.just(RUN)},
    optional={
        "question_count": st.one_of(st.none(), st.integers(-5, 2**64)),
        "questions": st.one_of(
            st.none(), st.lists(st.sampled_from(["0", "1", "2", "3", "9"]), max_size=6)
        ),
        "models": st.one_of(st.none(), st.lists(st.sampled_from(["m0", "m1", "x"]))),
        "weights": st.lists(st.floats(), max_size=4),
        "confidence": st.floats(),
        "webhooks": st.lists(st.text(max_size=30), max_size=2),
        "min_trials_per_question": st.integers(-1, 10),
    },
)


@pytest.mark.slow
@server_examples(5)
@given(
    st.lists(run_configs.map(lambda c: json.dumps(c).encode()) | poison, max_size=10)
)
def test_runs_route_fuzzed_never_5xx_and_counted_trials_keep_their_meaning(
    bodies: list[bytes],
) -> None:
    good, results = good_stream(2)
    asyncio.run(configure_all(good, results, bodies))


async def configure_all(
    good: list[bytes], results: np.ndarray, bodies: list[bytes]
) -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run=RUN, question_count=4))
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            for body in good:
                await client.post(
                    f"/runs/{RUN}/trials", content=body, headers=JSON_TYPE
                )
            before = await service.status(RUN)
            for body in bodies:
                response = await client.post("/runs", content=body, headers=JSON_TYPE)
                assert response.status_code in (201, 400, 409, 422), response.text[:200]
                assert (await client.get(f"/runs/{RUN}/config")).status_code == 200
            after = await service.status(RUN)
    assert after.trials == before.trials == results.size
    assert [(m.model, m.mu) for m in after.models] == [
        (m.model, m.mu) for m in before.models
    ]
