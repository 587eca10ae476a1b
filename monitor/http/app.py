"""The HTTP API (FastAPI) and the live dashboard.

Routes reach the service through the app's lifespan state, never module
globals; the Prometheus renderer is injected by the composition root (monitor
never imports adapters). Every route that changes state is a ``POST`` (a
reservation too: ``POST /runs/{run}/next``; its ``GET`` only previews) and
needs ``Authorization: Bearer <token>`` when a token is configured (401
without one, 403 with a wrong one), takes only ``application/json`` (415)
and refuses other origins' browsers (403). A ``Host`` that does not name the
monitor is a 400 (:class:`~monitor.http.middleware.HostCheck`). Bodies are
capped at ``max_body_bytes`` (413). Invalid input is a 422 whose ``detail``
says what is wrong; inputs are parsed as JSON, never evaluated. Without a
token, requests naming unknown runs are dead-lettered only within the
client's allowance (429 past it; see :mod:`monitor.http.allowance`).

Server-sent events at ``/runs/{run}/events``: stored events first (after the
client's ``Last-Event-ID`` or ``?since=``), then live ones, each with its
sequence number as the SSE id, and ``status`` messages (no id) whenever the
run's status refreshes.
"""

from __future__ import annotations

import functools
import json
import math
import re
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Any, TypedDict
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from sse_starlette import EventSourceResponse, ServerSentEvent

from monitor.config import HttpSettings
from monitor.errors import ConfigError, StoreError, UnknownRunError
from monitor.http.allowance import ByteAllowance
from monitor.http.compare import add_compare_routes
from monitor.http.gate import add_gate_routes
from monitor.http.history import add_history_routes
from monitor.http.middleware import (
    LOOPBACK_NAMES,
    BodyLimit,
    HostCheck,
    host_name,
    is_ip_literal,
    scope_oversize,
)
from monitor.http.trials import add_trials_routes
from monitor.http.views import (
    QuestionRow,
    RejectedRecord,
    question_rows,
    rejected_inputs,
)
from monitor.interfaces import Payload
from monitor.limits import (
    DEFAULT_LEASE_S,
    MAX_EVENT_NUMBER,
    MAX_LEASE_S,
    MAX_NEXT_BUDGET,
    MAX_REPORTED_REJECTIONS,
    UNKNOWN_RUN_BYTES_BURST,
    UNKNOWN_RUN_BYTES_PER_S,
    UNKNOWN_RUN_CLIENTS,
    UNKNOWN_RUN_ROW_BYTES,
)
from monitor.schema import NextItem, RunConfig, Status, plan_headers
from monitor.service.rejections import RecentRejection
from monitor.service.service import Service
from monitor.stores.records import IngestReport, StoredEvent

MetricsRenderer = Callable[[], tuple[bytes, str]]
_EVENT_NUMBER = re.compile(r"[0-9]{1,19}")
_NEXT_ITEMS = TypeAdapter(list[NextItem])
DASHBOARD = resources.files("monitor") / "dashboard"


class AppState(TypedDict):
    service: Service
    settings: HttpSettings
    metrics: MetricsRenderer | None


class RejectedInput(BaseModel):
    """One input that was not counted."""

    reason: str
    kind: str
    position: int | None


class IngestAnswer(BaseModel):
    """What ``POST /runs/{run}/trials`` did.

    ``rejected`` lists the first ``MAX_REPORTED_REJECTIONS`` rejections;
    ``rejected_count`` counts them all.
    """

    accepted: int
    duplicates: int
    corrections: int
    rejected: list[RejectedInput]
    rejected_count: int


class NextAsk(BaseModel):
    """The body of ``POST /runs/{run}/next``: how many trials, for how long."""

    model_config = ConfigDict(extra="forbid")

    budget: Annotated[int, Field(ge=0, le=MAX_NEXT_BUDGET)]
    lease_s: Annotated[float, Field(ge=0, le=MAX_LEASE_S)] = DEFAULT_LEASE_S
    model: Annotated[str | None, Field(max_length=256)] = None


def create_app(
    service: Service,
    settings: HttpSettings,
    metrics: MetricsRenderer | None = None,
    input_ended: Callable[[], bool] | None = None,
) -> FastAPI:
    """The API and dashboard for one service.

    ``input_ended`` says whether more trials can still come (``GET /input``,
    the dashboard's Pace tile); by default, whether the service's sources
    have all read their input to the end.
    """
    ended = input_ended or (lambda: service.input_ended)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[AppState]:
        yield {"service": service, "settings": settings, "metrics": metrics}

    app = FastAPI(
        title="scorio-monitor",
        summary="Streaming Bayes@N evaluation monitor with adaptive stopping.",
        lifespan=lifespan,
    )
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )
    # Added last, so it runs first: a foreign Host gets nothing else.
    app.add_middleware(HostCheck, allowed_hosts=settings.allowed_hosts)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(UnknownRunError, _unknown_run)
    app.add_exception_handler(StoreError, _store_unavailable)
    app.add_exception_handler(ConfigError, _config_conflict)
    app.mount("/dashboard", StaticFiles(directory=str(DASHBOARD)), name="dashboard")
    add_history_routes(app)
    add_compare_routes(app)
    add_trials_routes(app)
    add_gate_routes(app)
    writer = [Depends(_same_origin_json), Depends(_authorized)]
    unknown_runs = ByteAllowance(
        UNKNOWN_RUN_BYTES_BURST, UNKNOWN_RUN_BYTES_PER_S, UNKNOWN_RUN_CLIENTS
    )

    @app.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(str(DASHBOARD / "index.html"))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/input")
    async def input_state() -> dict[str, bool]:
        return {"ended": ended()}

    @app.get("/metrics", response_class=Response)
    async def prometheus(request: Request) -> Response:
        renderer: MetricsRenderer | None = request.state.metrics
        if renderer is None:
            raise HTTPException(404, "metrics are not enabled")
        body, content_type = renderer()
        return Response(body, media_type=content_type)

    @app.get("/runs")
    async def runs(request: Request) -> list[str]:
        return await _service(request).runs()

    @app.post("/runs", status_code=201, dependencies=writer)
    async def configure(config: RunConfig, request: Request) -> RunConfig:
        return (await _service(request).configure(config)).redacted()

    @app.get("/runs/{run}/config")
    async def run_config(run: str, request: Request) -> RunConfig:
        return (await _service(request).config(run)).redacted()

    @app.post("/runs/{run}/trials", dependencies=writer, response_model=IngestAnswer)
    async def trials(run: str, request: Request) -> JSONResponse:
        oversize = scope_oversize(request.scope)
        if oversize:
            # Refused through the pipe as any source's oversize input is:
            # the same reason, a dead letter, the run's rejected count.
            payload = Payload(
                b"", "http", run=run, oversize=oversize, limit=settings.max_body_bytes
            )
        else:
            payload = Payload(data=await request.body(), source="http", run=run)
        service = _service(request)
        # Without a token anyone may post: the dead letters of runs the
        # monitor refuses are paid for from the client's allowance.
        client = request.client.host if request.client else ""
        limited = settings.token is None
        if (
            limited
            and unknown_runs.left(client) <= 0
            and run not in await service.runs()
        ):
            wait_s = math.ceil(unknown_runs.wait_s(client))
            raise HTTPException(
                429,
                f"unknown run {run!r}: not recorded; this client's allowance for "
                f"requests naming unknown runs ({UNKNOWN_RUN_BYTES_BURST} bytes, "
                f"refilled hourly) is spent; retry in {wait_s} s (a run declared "
                "meanwhile is taken at once)",
                {"Retry-After": str(wait_s)},
            )
        report = await service.ingest_payloads([payload])
        unknown = sum(item.kind == "unknown_run" for item in report.rejected)
        if limited and unknown:
            unknown_runs.charge(
                client, len(payload.data) + unknown * UNKNOWN_RUN_ROW_BYTES
            )
        answer = _answer(report)
        if oversize:
            detail = "; ".join(item.reason for item in answer.rejected)
            return JSONResponse(
                {"detail": detail, **answer.model_dump()}, status_code=413
            )
        valid = report.accepted + report.duplicates + report.corrections
        if report.rejected and valid == 0:
            detail = "; ".join(item.reason for item in answer.rejected)
            return JSONResponse(
                {"detail": detail, **answer.model_dump()}, status_code=422
            )
        return JSONResponse(answer.model_dump())

    @app.get("/runs/{run}/status")
    async def status(run: str, request: Request) -> Status:
        return await _service(request).status(run)

    @app.post("/runs/{run}/next", dependencies=writer, response_model=list[NextItem])
    async def reserve(run: str, request: Request, ask: NextAsk) -> Response:
        """Reserve trials to run next: a write (the token, JSON, same origin)."""
        items = await _service(request).next(run, ask.budget, ask.lease_s, ask.model)
        # Serialised in one pydantic-core call: FastAPI's per-item path holds
        # the event loop (and every other request) for tens of ms.
        return Response(
            _NEXT_ITEMS.dump_json(items),
            media_type="application/json",
            headers=plan_headers(items),
        )

    @app.get("/runs/{run}/next", response_model=list[NextItem])
    async def preview(
        run: str,
        request: Request,
        budget: Annotated[int, Query(ge=0, le=MAX_NEXT_BUDGET)],
        model: Annotated[str | None, Query(max_length=256)] = None,
    ) -> Response:
        """What ``POST`` would hand out now, reserving nothing (a read)."""
        if "lease_s" in request.query_params:
            raise HTTPException(
                405,
                "GET /runs/{run}/next only previews and reserves nothing; reserve "
                'with POST /runs/{run}/next and a JSON body {"budget": B, '
                '"lease_s": S}',
                {"Allow": "GET, POST"},
            )
        items = await _service(request).next(run, budget, 0.0, model)
        return Response(
            _NEXT_ITEMS.dump_json(items),
            media_type="application/json",
            headers=plan_headers(items),
        )

    @app.post("/runs/{run}/release", dependencies=writer)
    async def release(
        run: str, request: Request, items: list[NextItem]
    ) -> dict[str, int]:
        """Give back reserved trials that will not run (items as ``next`` gave)."""
        if len(items) > 100_000:
            raise HTTPException(status_code=413, detail="at most 100000 items")
        return {"released": await _service(request).release(run, items)}

    @app.get("/runs/{run}/rejections")
    async def rejections(
        run: str,
        request: Request,
        limit: Annotated[int, Query(ge=1, le=100)] = 100,
    ) -> list[RecentRejection]:
        # Also for a run the service does not know: "unknown run" is itself
        # a rejection worth listing.
        return _service(request).rejections(run, limit)

    @app.get("/runs/{run}/questions")
    async def questions(run: str, request: Request) -> list[QuestionRow]:
        service = _service(request)
        return await service.call(
            functools.partial(question_rows, service.monitor, run)
        )

    @app.get("/runs/{run}/rejected")
    async def rejected(run: str, request: Request) -> list[RejectedRecord]:
        service = _service(request)
        return await service.call(
            functools.partial(rejected_inputs, service.monitor, run)
        )

    @app.get("/runs/{run}/events")
    async def events(
        run: str,
        request: Request,
        since: Annotated[
            str | None, Query(description="resume after this event number")
        ] = None,
    ) -> EventSourceResponse:
        service = _service(request)
        last = _resume_point(request, since)  # 400 before any engine call
        await service.config(run)  # 404 before the stream starts
        return EventSourceResponse(_event_stream(service, run, last), ping=15)

    return app


async def _event_stream(
    service: Service, run: str, last: int
) -> AsyncIterator[ServerSentEvent]:
    queue = service.subscribe()
    try:
        # Subscribe first, then replay: nothing fired in between is missed,
        # and live events already replayed are skipped by their number.
        for event in await service.events_after(run, last):
            last = event.seq
            yield _sse(event)
        yield ServerSentEvent(
            (await service.status(run)).model_dump_json(), event="status"
        )
        while True:
            item = await queue.get()
            if item is None:
                return  # the service is closing, or this stream fell behind
            if isinstance(item, Status):
                if item.run == run:
                    yield ServerSentEvent(item.model_dump_json(), event="status")
            elif item.run == run and item.seq > last:
                last = item.seq
                yield _sse(item)
    finally:
        service.unsubscribe(queue)


def _sse(event: StoredEvent) -> ServerSentEvent:
    return ServerSentEvent(
        json.dumps(event.document()), event=event.kind, id=str(event.seq)
    )


def _resume_point(request: Request, since: str | None) -> int:
    if since is not None:
        return _event_number(since, "since")
    header = request.headers.get("last-event-id", "")
    return _event_number(header, "Last-Event-ID") if header else 0


def _event_number(text: str, name: str) -> int:
    """An event sequence number from a client: ASCII digits, within SQLite's int.

    ``str.isdigit`` would accept superscripts and other scripts' digits, and
    ``int`` of a 5,000-digit string raises; both were 500s.
    """
    if not _EVENT_NUMBER.fullmatch(text) or int(text) > MAX_EVENT_NUMBER:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise HTTPException(
            400,
            f"{name} must be an event number from 0 to {MAX_EVENT_NUMBER}; "
            f"got {shown!r}",
        )
    return int(text)


def _answer(report: IngestReport) -> IngestAnswer:
    return IngestAnswer(
        accepted=report.accepted,
        duplicates=report.duplicates,
        corrections=report.corrections,
        rejected=[
            RejectedInput(reason=r.reason, kind=r.kind, position=r.position)
            for r in report.rejected[:MAX_REPORTED_REJECTIONS]
        ],
        rejected_count=len(report.rejected),
    )


def _service(request: Request) -> Service:
    service: Any = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    return service


async def _same_origin_json(request: Request) -> None:
    """Refuse what a web page on another site can make a browser send.

    A page may post ``text/plain`` or a form to any URL without a CORS
    preflight, so a write route takes only ``application/json`` (415
    otherwise), and a request a browser marks as coming from another origin
    (``Origin``, or ``Sec-Fetch-Site: cross-site``) is a 403 unless that
    origin is in ``allowed_origins``. Clients that are not browsers send
    neither header.
    """
    media_type = request.headers.get("content-type", "").partition(";")[0]
    if media_type.strip().lower() != "application/json":
        raise HTTPException(
            415, f"write routes take Content-Type application/json; got {media_type!r}"
        )
    settings: HttpSettings = request.state.settings
    origin = request.headers.get("origin")
    if origin is not None:
        if origin not in settings.allowed_origins and not _own_origin(
            origin, request, settings
        ):
            raise HTTPException(
                403, f"cross-origin write from {origin!r} refused (allowed_origins)"
            )
    elif request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(403, "cross-site write refused")


def _own_origin(origin: str, request: Request, settings: HttpSettings) -> bool:
    """Whether ``origin`` is one of this monitor's own pages.

    Its own names (loopback names, the address it listens on, the exact
    names of ``allowed_hosts``) on the port it listens on; never what the
    request's ``Host`` says, which the client chooses.
    """
    scheme, _, netloc = origin.partition("://")
    host = host_name(netloc) if scheme in ("http", "https") else None
    if host is None:
        return False
    try:
        port = urlsplit(origin).port or (443 if scheme == "https" else 80)
    except ValueError:
        return False
    server = request.scope.get("server")
    own_port = server[1] if server else settings.port
    bound = settings.host.strip("[]").lower()
    names = LOOPBACK_NAMES | {n for n in settings.allowed_hosts if "*" not in n}
    if is_ip_literal(bound) and bound not in ("0.0.0.0", "::"):
        names |= {bound}
    return scheme == request.url.scheme and port == own_port and host in names


async def _authorized(request: Request) -> None:
    settings: HttpSettings = request.state.settings
    if settings.token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(
            401,
            "this route needs Authorization: Bearer <token>",
            {"WWW-Authenticate": "Bearer"},
        )
    if not secrets.compare_digest(token.encode(), settings.token.encode()):
        raise HTTPException(403, "the bearer token is not valid")


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    problems = []
    for item in error.errors() if isinstance(error, RequestValidationError) else []:
        where = ".".join(
            str(part) for part in item["loc"] if part not in ("body", "query")
        )
        message = str(item["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return JSONResponse({"detail": "; ".join(problems) or str(error)}, status_code=422)


async def _unknown_run(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=404)


async def _store_unavailable(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"state store unavailable: {error}"}, status_code=503
    )


async def _config_conflict(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=409)
