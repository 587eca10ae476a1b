"""The HTTP API (FastAPI): runs, trials, status, next, events, metrics.

Routes reach the service through the app's lifespan state, never through
module globals. The Prometheus renderer is injected by the composition root
(monitor never imports adapters).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypedDict

from fastapi import FastAPI, HTTPException, Request, Response

from monitor.config import HttpSettings
from monitor.errors import UnknownRunError
from monitor.schema import Status
from monitor.service import Service

MetricsRenderer = Callable[[], tuple[bytes, str]]


class AppState(TypedDict):
    service: Service
    settings: HttpSettings
    metrics: MetricsRenderer | None


def create_app(
    service: Service, settings: HttpSettings, metrics: MetricsRenderer | None = None
) -> FastAPI:
    """The API for one service."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[AppState]:
        yield {"service": service, "settings": settings, "metrics": metrics}

    app = FastAPI(title="scorio-monitor", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        renderer: MetricsRenderer | None = request.state.metrics
        if renderer is None:
            raise HTTPException(404, "metrics are not enabled")
        body, content_type = renderer()
        return Response(body, media_type=content_type)

    @app.get("/runs")
    async def runs(request: Request) -> list[str]:
        return await _service(request).runs()

    @app.get("/runs/{run}/status")
    async def status(run: str, request: Request) -> Status:
        try:
            return await _service(request).status(run)
        except UnknownRunError as exc:
            raise HTTPException(404, str(exc)) from exc

    return app


def _service(request: Request) -> Service:
    service: Any = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    return service
