"""The README is a newcomer's page and the docs site builds strictly.

The README stays short and its two commands stay the ones CI runs; the site
under ``docs/`` builds with ``mkdocs build --strict`` (every link and anchor
found); no page speaks of the project's own history; the HTTP API page
lists every route the app serves; the documented ``curl`` works against a
real ``serve``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import free_port, require_libraries

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300

# Words about the project's own history rather than about the software.
# (MQTT's "persistent session" and a network "round trip" are the software.)
HISTORY = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\bissues?\s*#?\d+",
        r"\brounds?\b(?![- ]trips?\b)",
        r"\b(this|earlier|previous|last|former|past|one|same|another)\s+sessions?\b",
        r"\bsessions?\s+(ago|before)\b",
        r"\b(before|after)\s+(the|this|that)\s+(fix|change)\b",
        r"\bthe\s+fix\b",
        r"\bfinal\s+(round|code)\b",
        r"\bthis\s+change\b",
        r"\bcommit\s+[0-9a-f]{7,40}\b",
    )
]


def documentation() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def history_words(text: str) -> list[str]:
    return [m.group(0) for pattern in HISTORY for m in pattern.finditer(text)]


def test_the_readme_is_a_page_of_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_gives_the_quick_start_and_the_command_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8").splitlines()
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("python3 -m venv")
    ]
    assert ci == [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' "
        "&& .venv/bin/python -m pytest"
    ]
    assert "    " + ci[0] in readme
    assert (
        "    python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/"
        "scorio-monitor watch examples/aime25.jsonl --config examples/aime25.toml"
    ) in readme


def test_the_history_check_catches_history() -> None:
    for sentence in (
        "issue 18's figures",
        "as in Issue #7",
        "the round before's machine",
        "measured in the final round",
        "two runs of the final code",
        "in an earlier session",
        "p99 before the fix",
        "the code before this change",
        "before (commit b3cfb11, same script)",
    ):
        assert history_words(sentence), sentence
    for sentence in (
        "a persistent session (clean start off, a session that never expires)",
        "a network round trip",
        "round-trip time",
    ):
        assert not history_words(sentence), sentence


def test_no_page_speaks_of_the_projects_history() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {word!r}"
        for path in documentation()
        for number, line in enumerate(
            path.read_text(encoding="utf-8").splitlines(), start=1
        )
        for word in history_words(line)
    ]
    assert not found, "\n".join(found)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    require_libraries("mkdocs")  # the test extra installs it; CI fails without
    site = str(tmp_path / "site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    # The home page is the README, its docs/ links made site-relative.
    assert "Know when to stop" in home and 'href="http-api/"' in home


def test_the_http_api_page_lists_every_route() -> None:
    # The HTTP stack is an extra: a partial install collects the rest (and
    # skips here, except under CI, where a missing library fails).
    require_libraries("fastapi")
    from starlette.routing import Mount, Route

    from monitor import Monitor
    from monitor.config import HttpSettings
    from monitor.http.app import create_app
    from monitor.service.service import Service

    app = create_app(Service(Monitor()), HttpSettings())
    page = (DOCS / "http-api.md").read_text(encoding="utf-8")
    routes = [
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route)
        for method in sorted(set(route.methods or ()) - {"HEAD"})
    ]
    mounts = [route.path for route in app.routes if isinstance(route, Mount)]
    assert ("GET", "/runs/{run}/questions") in routes
    assert ("GET", "/runs/{run}/rejected") in routes
    missing = [
        f"{method} {path}"
        for method, path in routes
        if not re.search(f"`{re.escape(f'{method} {path}')}[`?\\[]", page)
    ]
    missing += [path for path in mounts if f"`{path}/`" not in page]
    assert not missing, missing


def documented_curls() -> list[str]:
    commands = []
    for path in (README, DOCS / "http-api.md", ROOT / "examples" / "service.toml"):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip().removeprefix("#").strip()
            if line.startswith("curl "):
                commands.append(line)
    return commands


@pytest.mark.slow
def test_the_documented_curl_posts_a_trial_to_a_real_serve(tmp_path: Path) -> None:
    require_libraries("fastapi")  # skips without it, except under CI: fails
    commands = documented_curls()
    assert len(commands) == 3
    with serving_the_example(tmp_path) as (port, server):
        post_the_documented_curls(commands, port, tmp_path, server)


@pytest.mark.slow
def test_the_readme_curl_then_the_example_stream_through_watch_url(
    tmp_path: Path,
) -> None:
    require_libraries("fastapi", "httpx")  # skips without, except under CI
    readme_curl = documented_curls()[0]
    shutil.copy(ROOT / "examples" / "aime25.jsonl", tmp_path)
    with serving_the_example(tmp_path) as (port, server):
        wait_for_health(f"http://127.0.0.1:{port}", server)
        argv = shlex.split(readme_curl.replace("localhost:8000", f"127.0.0.1:{port}"))
        posted = subprocess.run(
            [*argv, "--silent", "--show-error", "--fail"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert posted.returncode == 0, posted.stderr
        url = f"http://127.0.0.1:{port}"
        watch = ["watch", "aime25.jsonl", "--url", url, "--json"]
        watched = subprocess.run(
            [sys.executable, "-m", "monitor", *watch],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert watched.returncode == 0, watched.stderr
        assert "refused" not in watched.stderr, watched.stderr
        (status,) = json.loads(watched.stdout)
        # The quick start's counts; the README's trial is one of the file's.
        assert (status["trials"], status["duplicates"]) == (6600, 41)


@contextlib.contextmanager
def serving_the_example(
    tmp_path: Path,
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``serve`` of examples/service.toml as documented, on a free port, its
    state in ``tmp_path``."""
    port = free_port()
    config = (ROOT / "examples" / "service.toml").read_text(encoding="utf-8")
    moved = config.replace(
        'listen = "127.0.0.1:8000"', f'listen = "127.0.0.1:{port}"'
    ).replace('path = "scorio-monitor.db"', f'path = "{tmp_path / "state.db"}"')
    assert moved.count(str(port)) == 1 and moved.count(str(tmp_path)) == 1
    (tmp_path / "service.toml").write_text(moved, encoding="utf-8")
    with subprocess.Popen(
        [sys.executable, "-m", "monitor", "serve", "--config", "service.toml"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as server:
        try:
            yield port, server
        finally:
            server.terminate()
            server.wait(timeout=30)


def post_the_documented_curls(
    commands: list[str], port: int, cwd: Path, server: subprocess.Popen[bytes]
) -> None:
    """Run each documented curl; the first counts, the others are duplicates."""
    wait_for_health(f"http://127.0.0.1:{port}", server)
    answers = []
    for command in commands:
        assert "localhost:8000" in command
        argv = shlex.split(command.replace("localhost:8000", f"127.0.0.1:{port}"))
        result = subprocess.run(
            [*argv, "--silent", "--show-error", "--write-out", "\n%{http_code}"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        body, code = result.stdout.rsplit("\n", 1)
        assert code == "200", (command, code, body)
        answers.append(json.loads(body))
    assert answers[0]["accepted"] == 1 and answers[0]["rejected_count"] == 0
    # The same trial again: counted once.
    assert all(answer["duplicates"] == 1 for answer in answers[1:])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/aime25/status") as r:
        status = json.load(r)
    assert status["trials"] == 1 and status["duplicates"] == len(commands) - 1
    # Without the header the same request is refused, as the docs say.
    bare = [a for a in argv if a not in ("-H", "Content-Type: application/json")]
    refused = subprocess.run(
        [*bare, "--silent", "--output", "/dev/null", "--write-out", "%{http_code}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert refused.stdout == "415"


def wait_for_health(base: str, server: subprocess.Popen[bytes]) -> None:
    """Wait until ``serve`` answers ``/healthz`` (fail if it exits first)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            stderr = server.stderr.read() if server.stderr else b""
            pytest.fail(f"serve exited {server.returncode}: {stderr.decode()}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:  # not listening yet (URLError is an OSError)
            time.sleep(0.05)
    pytest.fail("serve did not answer /healthz within 60 s")


# Internal notes that are not in the repository: nothing may cite them.
NOTES = re.compile(r"\b(?:DESIGN|STYLE)(?:\.md\b|\s+section\b)|\bdesign notes\b")


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=False,
        timeout=60,
    )
    if listed.returncode != 0:  # not a git checkout: every file under the root
        return [
            path
            for path in ROOT.rglob("*")
            if path.is_file() and not {".git", ".venv"} & set(path.parts)
        ]
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def test_no_file_cites_notes_the_repository_does_not_hold() -> None:
    found = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (an image, an .npz)
        for number, line in enumerate(text.splitlines(), start=1):
            if NOTES.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
