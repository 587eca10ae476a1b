"""``view STATE``: a state file's dashboard, read-only, in one line.

As ``inspect view`` opens Inspect's logs: no TOML, nothing written. The file
may be finished or still written by ``watch``/``ingest``/a hook: the view
follows the writer (the read-only store re-reads what it appends).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from types import FrameType

from monitor.cli.common import listening_socket
from monitor.engine.monitor import Monitor
from monitor.stores.factory import missing_extra_message
from monitor.stores.lock import has_writer
from monitor.stores.sqlite import SqliteStore


def run_view(arguments: argparse.Namespace) -> int:
    state: Path = arguments.state
    if not state.is_file():
        raise ValueError(f"no state file at {state}")
    try:
        import uvicorn

        from adapters.prometheus import metrics_renderer
        from monitor.config import HttpSettings
        from monitor.http.app import create_app
        from monitor.http.connections import AcceptErrorLog, server_config
        from monitor.http.readonly import ReadOnly
        from monitor.service.service import Service
    except ImportError as exc:
        library = (exc.name or "").partition(".")[0] or None
        raise ValueError(missing_extra_message("view", "http", library)) from exc
    sock = listening_socket(arguments.host, arguments.port)
    port = sock.getsockname()[1]
    settings = HttpSettings(listen=f"{arguments.host}:{port}")

    async def serve() -> None:
        monitor = Monitor(SqliteStore(state, read_only=True))
        async with Service(monitor) as service:
            metrics = metrics_renderer(lambda: service.snapshot)
            app = ReadOnly(
                # The file's trials come from its writer: none once it closed.
                create_app(service, settings, metrics, lambda: not has_writer(state)),
                f"read-only: `scorio-monitor view` shows {state.name}; "
                "trials go to `watch`, `ingest` or `serve`",
            )
            # The same guards as serve: slow and idle clients cut off.
            asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
            server = uvicorn.Server(server_config(app, settings, arguments.host, port))

            def stop(signum: int, frame: FrameType | None) -> None:
                server.should_exit = True

            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
            runs = ", ".join(monitor.runs) or "none yet"
            print(
                f"scorio-monitor: viewing {state} (runs: {runs}) read-only at "
                f"http://{arguments.host}:{port}/ ; stop with Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
            await server.serve(sockets=[sock])

    with sock:
        asyncio.run(serve())
    return 0
