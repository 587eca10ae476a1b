"""`ingest --url` and `watch --url`: files into a running service, exactly once."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from monitor import Monitor, RunConfig
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "tests" / "fixtures" / "lm_eval" / "output"
TOKEN = "s3cret"


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
async def service() -> AsyncIterator[tuple[str, Service]]:
    running = Service(Monitor())
    async with running, serving(create_app(running, HttpSettings(token=TOKEN))) as base:
        yield base, running


class Ran:
    def __init__(self) -> None:
        self.out = ""
        self.err = ""


async def cli(ran: Ran, *arguments: str) -> int:
    """The real command in its own process, against the running service."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "monitor.cli",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    ran.out, ran.err = out.decode(), err.decode()
    assert process.returncode is not None
    return process.returncode


def lines(path: Path, events: list[dict[str, object]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")


def events(start: int, stop: int) -> list[dict[str, object]]:
    return [
        {"run": "w", "model": m, "question": q, "trial": t, "correct": (q + t) % 2 == 0}
        for m in ("a", "b")
        for q in range(4)
        for t in range(start, stop)
    ]


@pytest.mark.slow
async def test_ingest_sends_lm_eval_output_to_a_running_service_exactly_once(
    service: tuple[str, Service], ran: Ran
) -> None:
    base, running = service
    url = ["--url", base, "--token", TOKEN]
    assert await cli(ran, "ingest", str(OUTPUT), "--format", "lm-eval", *url) == 0
    assert (
        await cli(ran, "ingest", str(OUTPUT), "--format", "lm-eval", *url, "--json")
        == 0
    )

    printed = {s["run"]: s["trials"] for s in json.loads(ran.out)}
    monitor = running.monitor
    trials = {run: monitor.status(run).trials for run in monitor.runs}
    assert trials == printed
    assert trials == {"scorio_arith_gen": 6, "scorio_arith_r4": 6, "scorio_mc": 4}
    # The second ingest was a re-delivery: every trial a duplicate.
    assert sum(monitor.status(run).duplicates for run in monitor.runs) == 16


@pytest.mark.slow
async def test_watch_follows_a_file_into_the_service_and_resumes(
    service: tuple[str, Service], tmp_path: Path, ran: Ran
) -> None:
    base, running = service
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 3))
    url = ["--url", base, "--token", TOKEN]

    assert await cli(ran, "watch", str(path), *url, "--json") == 0
    assert json.loads(ran.out)[0]["trials"] == 2 * 4 * 3
    lines(path, events(3, 5))
    lines(path, [{"run": "w", "model": "a", "question": 0}])  # no trial: rejected
    assert await cli(ran, "watch", str(path), *url, "--json") == 0
    assert json.loads(ran.out)[0]["trials"] == 2 * 4 * 5
    assert "trials.jsonl:41: rejected:" in ran.err and "trial" in ran.err
    status = running.monitor.status("w")
    # The second watch resumed after the lines the service acknowledged.
    assert (status.trials, status.duplicates) == (40, 0)

    # Without its cursor file a watch sends everything again: counted once.
    path.with_name(path.name + ".url-cursor").unlink()
    assert await cli(ran, "watch", str(path), *url) == 0
    status = running.monitor.status("w")
    assert (status.trials, status.duplicates) == (40, 40)


@pytest.mark.slow
async def test_a_wrong_token_is_refused_with_a_clear_error(
    service: tuple[str, Service], tmp_path: Path, ran: Ran
) -> None:
    base, running = service
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 1))
    assert await cli(ran, "watch", str(path), "--url", base, "--token", "wrong") == 2
    assert "scorio-monitor: error:" in ran.err
    assert running.monitor.runs == []
    assert await cli(ran, "ingest", str(path), "--format", "npz", "--url", base) == 2
    assert "--url takes --format lm-eval, jsonl or csv" in ran.err


@pytest.mark.slow
async def test_ingest_sends_jsonl_and_csv_rows_as_watch_does(
    service: tuple[str, Service], tmp_path: Path, ran: Ran
) -> None:
    base, running = service
    url = ["--url", base, "--token", TOKEN]
    jsonl = tmp_path / "rows.jsonl"
    lines(jsonl, events(0, 2))
    assert await cli(ran, "ingest", str(jsonl), "--format", "jsonl", *url) == 0, ran.err
    assert running.monitor.status("w").trials == 2 * 4 * 2
    table = tmp_path / "rows.csv"
    rows = ["run,model,question,trial,correct"] + [
        f"c,{e['model']},{e['question']},{e['trial']},{str(e['correct']).lower()}"
        for e in events(0, 2)
    ]
    table.write_text("\n".join(rows) + "\nc,a,0,9,maybe\n", encoding="utf-8")
    assert await cli(ran, "ingest", str(table), "--format", "csv", *url) == 0, ran.err
    assert running.monitor.status("c").trials == 2 * 4 * 2
    assert "rows.csv:18: rejected:" in ran.err


@pytest.mark.slow
async def test_ingest_goes_on_past_runs_the_service_does_not_know_and_says_so_once(
    service: tuple[str, Service], ran: Ran
) -> None:
    base, running = service
    # Declared runs only: the other two tasks of the output are unknown.
    running.monitor.configure(RunConfig(run="scorio_mc"))
    url = ["--url", base, "--token", TOKEN]

    code = await cli(ran, "ingest", str(OUTPUT), "--format", "lm-eval", *url, "--json")

    assert code == 1, ran.err
    assert running.monitor.status("scorio_mc").trials == 4  # sent past the refusals
    assert running.monitor.runs == ["scorio_mc"]
    refused = [line for line in ran.err.splitlines() if "refused" in line]
    assert sorted(refused) == [
        "scorio-monitor: the service refused 6 trials of run 'scorio_arith_gen': "
        "unknown run 'scorio_arith_gen'; declared runs: scorio_mc (6 trials)",
        "scorio-monitor: the service refused 6 trials of run 'scorio_arith_r4': "
        "unknown run 'scorio_arith_r4'; declared runs: scorio_mc (6 trials)",
    ], ran.err
    assert ran.err.count("unknown run") == 2  # each reason once, not per trial
    assert [status["run"] for status in json.loads(ran.out)] == ["scorio_mc"]


async def test_ingest_to_a_url_that_is_not_a_monitor_fails_once(
    service: tuple[str, Service], ran: Ran
) -> None:
    base, running = service
    url = ["--url", f"{base}/wrong", "--token", TOKEN]

    code = await cli(ran, "ingest", str(OUTPUT), "--format", "lm-eval", *url)

    assert code == 2
    assert ran.err.count(f"{base}/wrong is not a scorio monitor") == 1, ran.err
    assert running.monitor.runs == []


async def test_watch_says_once_what_the_service_refused_and_exits_1(
    service: tuple[str, Service], tmp_path: Path, ran: Ran
) -> None:
    base, running = service
    running.monitor.configure(RunConfig(run="w", question_count=3))
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 3))  # questions 0-3: the fourth is one too many

    code = await cli(ran, "watch", str(path), "--url", base, "--token", TOKEN)

    assert code == 1, ran.err
    status = running.monitor.status("w")
    assert status.trials == 2 * 3 * 3
    refused = [line for line in ran.err.splitlines() if "refused" in line]
    assert refused == [
        "scorio-monitor: the service refused 6 trials of run 'w': question '3' "
        "would be distinct question 4 of question_count=3"
    ], ran.err


async def test_a_following_watch_says_the_first_refusal_at_once(
    service: tuple[str, Service], tmp_path: Path
) -> None:
    base, running = service
    running.monitor.configure(RunConfig(run="w", question_count=3))
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 3))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "monitor.cli",
        "watch",
        str(path),
        "--follow",
        "--url",
        base,
        "--token",
        TOKEN,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    first = await asyncio.wait_for(process.stderr.readline(), timeout=60)
    assert first.decode().startswith(
        "scorio-monitor: the service refuses trials of run 'w': question '3' "
        "would be distinct question 4"
    ), first
    process.terminate()
    rest = await asyncio.wait_for(process.stderr.read(), timeout=60)
    assert await process.wait() == 1
    assert "the service refused 6 trials of run 'w'" in rest.decode()


@pytest.mark.slow
async def test_watch_into_another_service_sends_the_file_from_the_start(
    service: tuple[str, Service], tmp_path: Path, ran: Ran
) -> None:
    base, running = service
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 3))
    assert await cli(ran, "watch", str(path), "--url", base, "--token", TOKEN) == 0
    other = Service(Monitor())
    async with other, serving(create_app(other, HttpSettings())) as other_base:
        assert await cli(ran, "watch", str(path), "--url", other_base) == 0, ran.err
        assert other.monitor.status("w").trials == 2 * 4 * 3
        assert f"was sent to {base}, not yet to {other_base}" in ran.err
        # Each URL keeps its own place: the first service is not sent again.
        lines(path, events(3, 4))
        assert await cli(ran, "watch", str(path), "--url", base, "--token", TOKEN) == 0
        assert await cli(ran, "watch", str(path), "--url", other_base) == 0
    for monitor in (running.monitor, other.monitor):
        status = monitor.status("w")
        assert (status.trials, status.duplicates) == (2 * 4 * 4, 0)


@pytest.mark.slow
async def test_watch_into_a_service_restarted_empty_at_the_same_url_starts_over(
    tmp_path: Path, ran: Ran
) -> None:
    path = tmp_path / "trials.jsonl"
    lines(path, events(0, 3))
    port = free_port()
    for _ in range(2):
        running = Service(Monitor())  # a new, empty service at the same URL
        async with running, serving(create_app(running, HttpSettings()), port) as base:
            assert await cli(ran, "watch", str(path), "--url", base) == 0, ran.err
            assert running.monitor.status("w").trials == 2 * 4 * 3
    assert f"{base} holds no trials of run 'w'" in ran.err
    assert "sending the file from the start" in ran.err


def test_git_ignores_the_files_watch_writes_beside_its_input() -> None:
    for name in ("aime25.jsonl.url-cursor", "aime25.jsonl.monitor.db"):
        ignored = subprocess.run(
            ["git", "check-ignore", "--quiet", f"examples/{name}"],
            cwd=ROOT,
            check=False,
            timeout=60,
        )
        assert ignored.returncode == 0, f"{name} is not in .gitignore"


async def test_next_url_prints_when_the_lease_expires_as_a_utc_time(
    service: tuple[str, Service], ran: Ran
) -> None:
    base, running = service
    running.monitor.configure(RunConfig(run="w", question_count=4))
    running.monitor.ingest(events(0, 1))
    url = ["--url", base, "--token", TOKEN]
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    code = await cli(
        ran, "next", *url, "--run", "w", "--budget", "4", "--lease-s", "600"
    )

    assert code == 0, ran.err
    header, *rows = ran.out.splitlines()
    assert header.split("\t") == ["model", "question", "trials", "lease", "expires"]
    assert rows
    for row in rows:
        expires = row.split("\t")[4]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", expires), row
        moment = datetime.datetime.fromisoformat(expires)
        assert before + datetime.timedelta(seconds=599) <= moment
        assert moment <= before + datetime.timedelta(seconds=601 + 60)
