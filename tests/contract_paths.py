"""The ways into the monitor, each fed the poison corpus and watched case by case.

Every path takes the corpus in order, one payload at a time, and notes for
each case it carried what became of it (an :class:`Outcome`): accepted,
rejected (with the ``reason`` and ``kind`` the path shows), crashed, or
lost (neither counted nor rejected in time). At the end it notes the run's
status and the dead letters the store kept. A path that breaks says so in
its ``failure`` and goes on where it can, so one bad case hides no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aiomqtt
import httpx
import redis as redis_client
from redis.typing import EncodableT, FieldT

from adapters.mqtt import MqttSource
from adapters.redis import keys
from adapters.redis.streams import RedisStreamSource
from monitor import IngestReport, Monitor, Rejection, RunConfig, Status
from monitor.config import HttpSettings, MqttSettings, RedisStreamSettings
from monitor.http.app import create_app
from monitor.interfaces import TrialSource
from monitor.service.service import Service
from tests.helpers import serving
from tests.poison_corpus import OTHER_RUN, RUN, Case
from tests.services import MosquittoBroker, RedisServer
from tests.stream_entries import finite_float, not_json, stream_fields

# More dead letters than the corpus can make.
LETTERS: int = 10_000
# How long a message source may take over one case before it counts as lost.
CASE_TIMEOUT_S = 5.0
# Where a service keeps a rejection: its run, or none ("").
KEPT_RUNS = (RUN, "", OTHER_RUN)


class DeadLetter(Protocol):
    """What the paths read of a store's dead letter (wherever it is defined)."""

    @property
    def reason(self) -> str: ...

    @property
    def position(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one path did with one case.

    ``verdict``: accepted, rejected, crashed or lost.
    ``kind`` is None where the path cannot show one. ``letters``: the
    reasons of the dead letters the case left.
    """

    verdict: str
    reason: str = ""
    kind: str | None = None
    letters: tuple[str, ...] = ()


@dataclass
class PathResult:
    """One path's outcomes per case name, and the run as it ended."""

    name: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    status: Status | None = None
    letters: int = 0
    failure: str = ""


def refused(rejections: Iterable[Rejection], letters: Sequence[DeadLetter]) -> Outcome:
    listed = list(rejections)
    return Outcome(
        "rejected",
        " | ".join(r.reason for r in listed),
        " | ".join(r.kind for r in listed),
        tuple(letter.reason for letter in letters),
    )


def from_report(report: IngestReport, letters: Sequence[DeadLetter]) -> Outcome:
    if report.rejected:
        return refused(report.rejected, letters)
    if report.accepted + report.duplicates + report.corrections:
        return Outcome("accepted", letters=tuple(d.reason for d in letters))
    return Outcome("lost", "neither counted nor rejected")


def crash(exc: BaseException) -> Outcome:
    return Outcome("crashed", f"{type(exc).__name__}: {exc}"[:300])


def configured(monitor: Monitor) -> Monitor:
    monitor.configure(RunConfig(run=RUN, weights=[0.0, 1.0]))
    return monitor


def python_path(
    name: str, cases: list[Case], send: Callable[[Monitor, Case], IngestReport | None]
) -> PathResult:
    """The Python API: ``send`` returns None for a case the path cannot carry."""
    result = PathResult(name)
    monitor = configured(Monitor())
    for case in cases:
        before = len(monitor.store.dead_letters(LETTERS))
        try:
            report = send(monitor, case)
        except Exception as exc:  # the contract says never; note it and go on
            result.outcomes[case.name] = crash(exc)
            continue
        if report is not None:
            letters = monitor.store.dead_letters(LETTERS)[before:]
            result.outcomes[case.name] = from_report(report, letters)
    result.status = monitor.status(RUN)
    result.letters = len(monitor.store.dead_letters(LETTERS))
    return result


def as_dict(monitor: Monitor, case: Case) -> IngestReport | None:
    """``Monitor.ingest`` of the payload's object, if it is strict JSON.

    What a caller of the Python API holds is a dict; the wire paths read
    the same dict from the payload only when it is strict JSON (RFC 8259:
    UTF-8 text without lone surrogates, no NaN or Infinity, numbers within
    a double). Anything else, or JSON that is not an object, has no dict to
    send: this path skips it, and the wire paths alone judge it.
    """
    if case.channel_only or case.bytes_only:
        return None
    try:
        value = json.loads(
            case.payload, parse_constant=not_json, parse_float=finite_float
        )
        json.dumps(value, ensure_ascii=False).encode()  # lone surrogates fail
    except (ValueError, RecursionError):  # includes the Unicode errors
        return None
    if not isinstance(value, dict):
        return None
    return monitor.ingest(value, source="python")


def as_bytes(monitor: Monitor, case: Case) -> IngestReport | None:
    if case.channel_only:
        return None
    return monitor.ingest_payload(case.payload, source="python")


async def http_path(cases: list[Case]) -> PathResult:
    """``POST /runs/{run}/trials`` on the real app, served by uvicorn."""
    result = PathResult("http")
    monitor = configured(Monitor())
    async with Service(monitor) as service:
        app = create_app(service, HttpSettings())
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            new_letters = NewLetters(service)
            for case in cases:
                try:
                    response = await client.post(
                        f"/runs/{RUN}/trials",
                        content=case.payload,
                        headers={"Content-Type": "application/json"},
                    )
                except httpx.HTTPError as exc:
                    result.outcomes[case.name] = crash(exc)
                    continue
                letters = await new_letters.read()
                result.outcomes[case.name] = _answered(response, letters)
        result.status = await service.status(RUN)
    result.letters = len(monitor.store.dead_letters(LETTERS))
    return result


def _answered(response: httpx.Response, letters: Sequence[DeadLetter]) -> Outcome:
    reasons = tuple(letter.reason for letter in letters)
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 500 or not isinstance(body, dict):
        return Outcome("crashed", f"HTTP {response.status_code}: {response.text[:200]}")
    rejected = body.get("rejected")
    if isinstance(rejected, list) and rejected:
        return Outcome(
            "rejected",
            " | ".join(str(item["reason"]) for item in rejected),
            " | ".join(str(item["kind"]) for item in rejected),
            reasons,
        )
    if response.status_code == 200 and body.get("accepted") == 1:
        return Outcome("accepted", letters=reasons)
    # Refused before the engine (e.g. the body limit): no kind in the answer.
    return Outcome("rejected", str(body.get("detail")), "(none)", reasons)


class NewLetters:
    """The dead letters a service's store kept since the last read."""

    def __init__(self, service: Service) -> None:
        self._service = service
        # Read on the caller's thread before the service counts anything.
        self._seen = len(service.monitor.store.dead_letters(LETTERS))

    async def read(self) -> Sequence[DeadLetter]:
        store = self._service.monitor.store
        letters: Sequence[DeadLetter] = await self._service.call(
            lambda: store.dead_letters(LETTERS)
        )
        fresh, self._seen = letters[self._seen :], len(letters)
        return fresh


Send = Callable[[Case], Awaitable[None]]
# A message source and how to send it a case, one per session (numbered).
Session = Callable[[int], AbstractAsyncContextManager[tuple[TrialSource, Send]]]


async def message_path(name: str, cases: list[Case], session: Session) -> PathResult:
    """A message source in a service: ``send`` each case, wait for its outcome.

    A case's outcome shows as the service's counters move: an accepted
    trial, or a rejection (kept, with its kind, per run); a case that moves
    neither within ``CASE_TIMEOUT_S`` is lost. A lost case has stuck the
    source: the path notes it and goes on with a new service and source on
    fresh channels (the same engine), so one stuck case hides no other.
    """
    result = PathResult(name)
    monitor = configured(Monitor())
    remaining = list(cases)
    number = 0
    while remaining:
        async with (
            session(number) as (source, send),
            Service(monitor, [source]) as service,
        ):
            new_letters = NewLetters(service)
            # A case redelivered shows while the cases after it are fed (the
            # corpus ends with a good one), and in the dead letters' count.
            remaining = await _feed(service, send, new_letters, remaining, result)
        number += 1
    if number > 1:
        stuck = [case for case, o in result.outcomes.items() if o.verdict == "lost"]
        result.failure = f"the source stuck at {', '.join(stuck)}"
    result.status = monitor.status(RUN)
    result.letters = len(monitor.store.dead_letters(LETTERS))
    return result


async def _feed(
    service: Service,
    send: Send,
    new_letters: NewLetters,
    cases: list[Case],
    result: PathResult,
) -> list[Case]:
    """Send the cases in turn; returns those after one the source stuck at."""
    for index, case in enumerate(cases):
        before = _moved(service)
        kept = _kept(service)
        await send(case)
        deadline = time.monotonic() + CASE_TIMEOUT_S
        while _moved(service) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        if _moved(service) == before:
            result.outcomes[case.name] = Outcome("lost", "no count, no rejection")
            return cases[index + 1 :]
        letters = tuple(d.reason for d in await new_letters.read())
        if _moved(service)[1] > before[1]:
            fresh = _fresh(service, kept)
            result.outcomes[case.name] = Outcome(
                "rejected",
                " | ".join(r.reason for r in fresh),
                " | ".join(r.kind for r in fresh),
                letters,
            )
        else:
            result.outcomes[case.name] = Outcome("accepted", letters=letters)
    return []


def _moved(service: Service) -> tuple[int, int]:
    snapshot = service.snapshot
    counted = snapshot.ingested + snapshot.duplicates + snapshot.corrections
    return counted, sum(snapshot.rejected.values())


def _kept(service: Service) -> dict[str, int]:
    """How many rejections the service keeps per run (or none)."""
    return {run: len(service.rejections(run, LETTERS)) for run in KEPT_RUNS}


def _fresh(service: Service, kept: dict[str, int]) -> list[Rejection]:
    """The rejections kept since ``kept`` was taken."""
    fresh: list[Rejection] = []
    for run in KEPT_RUNS:
        newest_first = service.rejections(run, LETTERS)
        count = len(newest_first) - kept[run]
        fresh.extend(
            Rejection(reason=entry.reason, kind=entry.kind)
            for entry in reversed(newest_first[:count])
        )
    return fresh


async def mqtt_path(
    cases: list[Case], broker: MosquittoBroker, prefix: str
) -> PathResult:
    """Messages on ``{prefix}/{run}/trials`` through a real mosquitto."""

    @contextlib.asynccontextmanager
    async def session(number: int) -> AsyncIterator[tuple[TrialSource, Send]]:
        topic_prefix = f"{prefix}-{number}"
        worker = f"{topic_prefix}-worker"
        settings = MqttSettings.model_validate(
            {"url": broker.url, "topic_prefix": topic_prefix, "client_id": worker}
        )
        # The worker's persistent session, subscribed before it connects: the
        # broker keeps what is sent meanwhile, as for a restarted worker, so
        # no case goes out before the subscription exists.
        async with aiomqtt.Client(
            "127.0.0.1", broker.port, identifier=worker, clean_session=False
        ) as early:
            await early.subscribe(f"{topic_prefix}/+/trials", qos=1)
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:

            async def send(case: Case) -> None:
                topic = f"{topic_prefix}/{RUN}/trials"
                await client.publish(topic, case.payload, qos=1)

            yield MqttSource(settings), send

    return await message_path("mqtt", cases, session)


async def redis_path(
    cases: list[Case], server: RedisServer, prefix: str, form: str = "data"
) -> PathResult:
    """Entries of the run's trial stream through a real redis-server, each
    written in ``form`` (see :func:`stream_fields`); cases the form cannot
    carry are left out."""
    client = redis_client.Redis(port=server.port)
    left: list[str] = []
    carried = [case for case in cases if stream_fields(case, form) is not None]

    @contextlib.asynccontextmanager
    async def session(number: int) -> AsyncIterator[tuple[TrialSource, Send]]:
        key_prefix = f"{prefix}-{form}-{number}"
        settings = RedisStreamSettings.model_validate(
            {
                "url": server.url,
                "prefix": key_prefix,
                "consumer": f"{key_prefix}-worker",
                "discover_interval_s": 0.05,
                "block_ms": 20,
            }
        )
        stream = keys.trial_stream(key_prefix, RUN)

        async def send(case: Case) -> None:
            fields = stream_fields(case, form)
            if fields is None:
                raise ValueError(f"the {form} form cannot carry {case.name}")
            entry: dict[FieldT, EncodableT] = {
                name: value for name, value in fields.items()
            }
            client.xadd(stream, entry)

        yield RedisStreamSource(settings), send
        if client.exists(stream):
            pending = int(client.xpending(stream, "monitor")["pending"])
            if pending:
                left.append(f"{pending} entries left pending on {stream}")
        poisoned = client.xlen(keys.poison_trials(key_prefix))
        if poisoned:
            left.append(f"{poisoned} entries moved to the poison stream")

    name = "redis" if form == "data" else f"redis-{form}"
    try:
        result = await message_path(name, carried, session)
    finally:
        client.close()
    result.failure = "; ".join([result.failure, *left]).strip("; ")
    return result


def start_watch(
    cases: list[Case], folder: Path, stdin: bool
) -> subprocess.Popen[bytes]:
    """``scorio-monitor watch FILE|- --json`` of the cases as JSON lines."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = folder / "corpus.jsonl"
    lines.write_bytes(b"".join(case.payload + b"\n" for case in cases))
    config = folder / "run.toml"
    config.write_text(f'run = "{RUN}"\nweights = [0.0, 1.0]\n')
    command = [sys.executable, "-m", "monitor.cli", "watch"]
    command += ["-" if stdin else str(lines), "--json", "--config", str(config)]
    command += ["--state", str(folder / "state.monitor.db")]
    with lines.open("rb") as corpus:
        return subprocess.Popen(
            command,
            stdin=corpus if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )


def watch_path(
    name: str, cases: list[Case], folder: Path, process: subprocess.Popen[bytes]
) -> PathResult:
    """The outcome of each line: its dead letters, or its trial counted."""
    result = PathResult(name)
    out, err = process.communicate(timeout=60)
    if process.returncode != 0:
        result.failure = f"exit {process.returncode}: {err.decode()[-500:]}"
    with Monitor(folder / "state.monitor.db") as monitor:
        letters = monitor.store.dead_letters(LETTERS)
        counted = {
            question
            for counts in monitor.store.counts(RUN).values()
            for question, row in zip(counts.questions, counts.observed, strict=False)
            if sum(row)
        }
        if RUN in monitor.runs:
            result.status = monitor.status(RUN)
    result.letters = len(letters)
    by_line: dict[int | None, list[DeadLetter]] = {}
    for letter in letters:
        by_line.setdefault(letter.position, []).append(letter)
    for line, case in enumerate(cases, start=1):
        mine = by_line.get(line, [])
        reasons = tuple(letter.reason for letter in mine)
        # Dead letters carry no kind today; if they come to, compare it too.
        kinds = [getattr(letter, "kind", None) for letter in mine]
        kind = None if None in kinds else " | ".join(map(str, kinds))
        if mine:
            result.outcomes[case.name] = Outcome(
                "rejected", " | ".join(reasons), kind, reasons
            )
        elif case.question in counted:
            result.outcomes[case.name] = Outcome("accepted")
        else:
            result.outcomes[case.name] = Outcome("lost", "no count, no dead letter")
    if out.strip():
        try:
            json.loads(out)
        except ValueError:
            result.failure += f"; the --json output is not JSON: {out[:200]!r}"
    return result
