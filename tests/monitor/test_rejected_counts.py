"""One rejected count everywhere: what the status says equals what was reported."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from monitor import Monitor, RunConfig
from monitor.cli import main
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.helpers import serving

ROOT = Path(__file__).resolve().parents[2]


def rejection_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": rejected: " in line]


def test_the_quick_start_counts_the_broken_line_it_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    config = str(ROOT / "examples" / "aime25.toml")
    assert main(["watch", str(stream), "--config", config, "--json"]) == 0
    captured = capsys.readouterr()
    reported = rejection_lines(captured.err)
    assert reported == [
        f"{stream}:701: rejected: invalid JSON: unexpected end at line 1 column 58"
    ]
    (status,) = json.loads(captured.out)
    assert status["rejected"] == len(reported)


def test_a_csv_counts_every_rejected_line_and_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "frac.csv"
    rows.write_text(
        "model,question,trial,category\n"
        "a,1,0,1\n"
        "a,1,1,2\n"  # category 2 in a binary run: refused by the engine
        "a,2,0,\n"  # no category: refused by the reader
        "a,2,1,0\n"
    )
    assert main(["ingest", str(rows), "--format", "csv", "--json"]) == 0
    captured = capsys.readouterr()
    reported = rejection_lines(captured.err)
    assert len(reported) == 2
    assert reported[0].startswith(f"{rows}:3: rejected: category 2")
    assert reported[1].startswith(f"{rows}:4: rejected: missing field")
    (status,) = json.loads(captured.out)
    assert (status["trials"], status["rejected"]) == (2, 2)


def test_watch_prints_the_first_fifty_rejections_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "run.jsonl"
    good = json.dumps(
        {"run": "r", "model": "a", "question": 1, "trial": 0, "category": 1}
    )
    stream.write_text(good + "\n" + "{broken\n" * 151)
    assert main(["watch", str(stream), "--json"]) == 0
    captured = capsys.readouterr()
    assert len(rejection_lines(captured.err)) == 50
    assert "101 more rejected" in captured.err
    (status,) = json.loads(captured.out)
    assert status["rejected"] == 151


async def test_every_bad_http_post_counts_once_against_its_run() -> None:
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=4))
    bodies = [
        b"{not json",
        b"[]",
        b"42",
        json.dumps({"run": "other", "model": "a", "question": 1, "trial": 0}).encode(),
        json.dumps({"model": "a", "question": 1, "trial": 0, "category": 7}).encode(),
    ]
    async with Service(monitor, status_interval_s=0.01) as service:
        app = create_app(service, HttpSettings(), None)
        async with serving(app) as base, httpx.AsyncClient(base_url=base) as client:
            for body in bodies:
                response = await client.post(
                    "/runs/r/trials",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                assert response.status_code == 422
            status = (await client.get("/runs/r/status")).json()
    assert status["rejected"] == len(bodies)
