"""A monitor service that starts when a test says so (a monitor that comes back)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from monitor import Monitor
from monitor.config import HttpSettings
from monitor.http.app import create_app
from monitor.service.service import Service
from tests.services import free_port


class Later:
    """A service that starts on a chosen port when asked."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.service = Service(Monitor())
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.service.__aenter__()
        self._server = uvicorn.Server(
            uvicorn.Config(
                create_app(self.service, HttpSettings()),
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
            )
        )
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            await self.service.__aexit__(None, None, None)


@contextlib.asynccontextmanager
async def late_service() -> AsyncIterator[Later]:
    """A :class:`Later` on a free port, stopped on exit if it was started."""
    service = Later(free_port())
    try:
        yield service
    finally:
        await service.stop()
