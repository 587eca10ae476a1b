"""``serve`` and ``watch --http`` bind their port before they announce it;
a second ``serve`` worker on a busy port or under a taken MQTT client id
fails clearly."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import httpx
import pytest

from monitor.cli.common import listening_socket
from monitor.http.connections import AcceptErrorLog, connection_limit
from tests.helpers import eventually
from tests.monitor.test_cli_watch import poll_until
from tests.services import MosquittoBroker, free_port

ROOT = Path(__file__).resolve().parents[2]
MONITOR = [sys.executable, "-m", "monitor"]


def service_config(tmp_path: Path, port: int) -> Path:
    config = tmp_path / "service.toml"
    config.write_text(
        f'[store]\nkind = "sqlite"\npath = "{tmp_path / "state.db"}"\n'
        f'[http]\nlisten = "127.0.0.1:{port}"\n'
    )
    return config


def test_connections_to_the_bound_socket_send_without_waiting_for_acks() -> None:
    # Nagle left on made each request on a kept-alive connection wait ~40 ms
    # for the client's delayed ACK (asyncio turns it off only on sockets
    # that say they are TCP).
    async def accepted_nodelay() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                )
                transport.close()

        sock = listening_socket("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            port = sock.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_watch_http_reports_like_watch_when_stdout_is_not_a_terminal(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    port = free_port()
    config = str(ROOT / "examples" / "aime25.toml")
    process = subprocess.Popen(
        [*MONITOR, "watch", str(stream), "--http", str(port), "--config", config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status = httpx.get(
                    f"http://127.0.0.1:{port}/runs/aime25/status", timeout=1
                ).json()
            except httpx.HTTPError:
                status = {}
            if status.get("trials") == 6600:
                break
            time.sleep(0.2)
        assert status["trials"] == 6600
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert f"{stream}:701: rejected: invalid JSON" in stderr
    assert "6,600 trials" in stdout and "1 rejected" in stdout
    assert "events:" in stdout and "pair_unresolvable" in stdout


@pytest.mark.slow
def test_watch_http_traces_a_replayed_file_from_its_first_trials(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "aime25.jsonl"
    stream.write_bytes((ROOT / "examples" / "aime25.jsonl").read_bytes())
    port = free_port()
    config = str(ROOT / "examples" / "aime25.toml")
    process = subprocess.Popen(
        [*MONITOR, "watch", str(stream), "--http", str(port), "--config", config],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/runs/aime25"
    try:
        deadline = time.monotonic() + 60
        trace: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            try:
                trace = httpx.get(f"{base}/trace", timeout=1).json()
            except httpx.HTTPError:
                trace = []
            if trace and trace[-1]["trials"] == 6600:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    counts = [point["trials"] for point in trace]
    assert counts[-1] == 6600
    assert cast(int, counts[0]) <= 250 and len(counts) >= 20


def worker_config(
    tmp_path: Path, broker: MosquittoBroker, prefix: str, client_id: str
) -> Path:
    """Memory store, MQTT on one shared subscription, one HTTP port."""
    config = tmp_path / "worker.toml"
    config.write_text(
        '[store]\nkind = "memory"\n'
        f'[mqtt]\nurl = "{broker.url}"\ntopic_prefix = "{prefix}"\n'
        f'shared_group = "workers"\nclient_id = "{client_id}"\n'
        f'[http]\nlisten = "127.0.0.1:{free_port()}"\n'
    )
    return config


def start_serve(config: Path, listen: str | None = None) -> subprocess.Popen[str]:
    environ = dict(os.environ)
    if listen is not None:
        environ["SCORIO_MONITOR_HTTP_LISTEN"] = listen
    process = subprocess.Popen(
        [*MONITOR, "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    assert process.stderr is not None
    assert process.stderr.readline().startswith("scorio-monitor: serving http://")
    return process


def stop_all(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


@pytest.mark.slow
def test_a_second_worker_from_one_config_exits_on_the_busy_port_and_the_first_serves(
    tmp_path: Path, mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = worker_config(tmp_path, mosquitto, prefix, "{hostname}-{pid}")
    first = start_serve(config)
    try:
        second = subprocess.run(
            [*MONITOR, "serve", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert "cannot listen on 127.0.0.1:" in second.stderr
        assert "Address already in use" in second.stderr
        assert "serving" not in second.stderr
        assert first.poll() is None
    finally:
        stop_all([first])
    assert first.returncode == 0


@pytest.mark.slow
def test_two_workers_under_one_client_id_leave_one_running_and_one_explaining(
    tmp_path: Path, mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = worker_config(tmp_path, mosquitto, prefix, "one-id")
    first = start_serve(config)
    second = start_serve(config, listen=f"127.0.0.1:{free_port()}")
    workers = [first, second]
    try:
        deadline = time.monotonic() + 60
        while all(w.poll() is None for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        stopped = [w for w in workers if w.poll() is not None]
        assert len(stopped) == 1
        assert stopped[0].returncode == 2
        assert stopped[0].stderr is not None
        output = stopped[0].stderr.read()
        message = output.strip().splitlines()[-1]
        # The source's id or its publisher's ("one-id-publisher"): both clash.
        assert message.startswith(
            "scorio-monitor: error: another connection took MQTT client id 'one-id"
        )
        time.sleep(2.0)
        assert sum(w.poll() is None for w in workers) == 1
    finally:
        stop_all(workers)


@pytest.mark.slow
def test_workers_with_per_process_client_ids_run_side_by_side(
    tmp_path: Path, mosquitto: MosquittoBroker, prefix: str
) -> None:
    config = worker_config(tmp_path, mosquitto, prefix, "w-{pid}")
    first = start_serve(config)
    second = start_serve(config, listen=f"127.0.0.1:{free_port()}")
    try:
        time.sleep(8.0)  # longer than a takeover takes to be recognised
        assert first.poll() is None and second.poll() is None
    finally:
        stop_all([first, second])
    assert first.returncode == second.returncode == 0


def serve_with(
    tmp_path: Path, http: str, open_files: int | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``serve`` (memory store) with ``http`` lines in [http]; its base URL.

    ``open_files`` sets its open-file limit, soft and hard.
    """
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[store]\nkind = "memory"\n[http]\nlisten = "127.0.0.1:{port}"\n{http}\n'
    )

    def limit_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with (tmp_path / "serve.err").open("wb") as stderr:
        process = subprocess.Popen(
            [*MONITOR, "serve", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=limit_files,
            text=True,
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert process.poll() is None, (tmp_path / "serve.err").read_text()
        try:
            return httpx.get(f"{base}/healthz", timeout=5.0).is_success
        except httpx.HTTPError:
            return False

    poll_until(up)
    return process, base


def answer_then_close(sock: socket.socket) -> bytes:
    """All the server sends until it closes (the timeout only bounds a failure)."""
    sock.settimeout(60)
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.mark.slow
def test_a_request_head_or_body_that_does_not_come_is_cut_off(tmp_path: Path) -> None:
    process, base = serve_with(tmp_path, "header_timeout_s = 1\nbody_timeout_s = 1")
    port = int(base.rpartition(":")[2])
    try:
        for sent, reason in (
            (b"", b"head did not arrive"),  # opened, then nothing
            (b"GET /healthz HTTP/1.1\r\nHo", b"head did not arrive"),  # slowloris
            (
                b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b'application/json\r\nContent-Length: 100\r\n\r\n{"run"',
                b"body did not arrive",
            ),
        ):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(sent)
                answer = answer_then_close(sock)
            assert answer.startswith(b"HTTP/1.1 408") and reason in answer, sent
        assert httpx.get(f"{base}/runs", timeout=30).json() == []
    finally:
        stop_all([process])


@pytest.mark.slow
def test_idle_connections_past_the_open_file_limit_leave_healthz_answering(
    tmp_path: Path,
) -> None:
    # 256 open files at most and 400 connections that never send a byte: the
    # oldest idle ones are closed for newer ones, accept() never runs dry.
    process, base = serve_with(tmp_path, "", open_files=256)
    port = int(base.rpartition(":")[2])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(400)]
    try:
        for _ in range(3):
            answer = httpx.get(f"{base}/healthz", timeout=30)
            assert answer.json() == {"status": "ok"}
        closed = 0
        for sock in idle:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                closed += sock.recv(1) == b""
        assert closed >= 400 - 256
    finally:
        for sock in idle:
            sock.close()
        stop_all([process])
    log = (tmp_path / "serve.err").read_text()
    assert log.count("accept()") <= 2, log
    limit = connection_limit(1000, 256)
    assert f"at most {limit} open connections" in log


async def test_accept_errors_are_logged_once_per_burst(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(AcceptErrorLog(quiet_s=0.05))
    try:
        error = OSError(errno.EMFILE, "Too many open files")
        for _ in range(1000):
            loop.call_exception_handler(
                {
                    "message": "socket.accept() out of system resource",
                    "exception": error,
                }
            )

        async def summed_up() -> bool:
            return any("999 more" in r.getMessage() for r in caplog.records)

        await eventually(summed_up)
        lines = [r.getMessage() for r in caplog.records if "accept()" in r.getMessage()]
        assert len(lines) == 2 and "Too many open files" in lines[0]
    finally:
        loop.set_exception_handler(None)


@pytest.mark.slow
def test_a_flood_of_idle_connections_closes_its_own_not_a_busy_stream(
    tmp_path: Path,
) -> None:
    process, base = serve_with(tmp_path, "max_connections = 20")
    port = int(base.rpartition(":")[2])
    json_type = {"Content-Type": "application/json"}
    httpx.post(f"{base}/runs", json={"run": "r"}, headers=json_type, timeout=30)
    # A stream from one client (127.0.0.2), then 100 idle connections from
    # another (127.0.0.1): the flood closes its own oldest, never the stream.
    with (
        httpx.Client(
            base_url=base,
            timeout=30,
            transport=httpx.HTTPTransport(local_address="127.0.0.2"),
        ) as reader,
        reader.stream("GET", "/runs/r/events") as stream,
    ):
        lines = stream.iter_lines()
        assert next(lines).startswith("event: status")
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        try:
            assert httpx.get(f"{base}/healthz", timeout=30).is_success
            trial = {"model": "a", "question": 0, "trial": 0, "correct": True}
            response = httpx.post(
                f"{base}/runs/r/trials", json=trial, headers=json_type, timeout=30
            )
            assert response.json()["accepted"] == 1
            # The stream still delivers: the status after the trial.
            assert any('"trials":1' in line for line in lines)
        finally:
            for sock in idle:
                sock.close()
    stop_all([process])
