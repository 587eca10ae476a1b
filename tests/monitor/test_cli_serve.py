"""``serve`` and ``watch --http`` bind their port before they announce it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.services import free_port


def service_config(tmp_path: Path, port: int) -> Path:
    config = tmp_path / "service.toml"
    config.write_text(
        f'[store]\nkind = "sqlite"\npath = "{tmp_path / "state.db"}"\n'
        f'[http]\nlisten = "127.0.0.1:{port}"\n'
    )
    return config


def test_serve_on_a_busy_port_fails_in_one_line_without_announcing(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (
            ["serve", "--config", str(service_config(tmp_path, port))],
            ["watch", "-", "--http", str(port), "--state", str(tmp_path / "w.db")],
        ):
            result = subprocess.run(
                [sys.executable, "-m", "monitor", *command],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )
            assert result.returncode == 2
            assert result.stderr.strip() == (
                f"scorio-monitor: error: cannot listen on 127.0.0.1:{port}: "
                "Address already in use"
            )
    assert not (tmp_path / "state.db").exists()
    assert not (tmp_path / "w.db").exists()


def test_serve_answers_as_soon_as_it_announces(tmp_path: Path) -> None:
    port = free_port()
    config = str(service_config(tmp_path, port))
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor", "serve", "--config", config],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith(f"scorio-monitor: serving http://127.0.0.1:{port}")
        # No retry: the announcement means the port already takes connections.
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json() == {
            "status": "ok"
        }
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        if process.stderr is not None:
            process.stderr.close()
