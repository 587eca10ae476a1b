"""``GET /runs/{run}/gate``: the release gate (``scorio-monitor gate``) over HTTP."""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import FastAPI, HTTPException, Query, Request

from monitor.plans.gate import GateVerdict, gate
from monitor.service.service import Service


async def release_gate(
    run: str,
    request: Request,
    candidate: Annotated[str, Query(min_length=1, max_length=256)],
    baseline: Annotated[str, Query(min_length=1, max_length=256)],
    margin: Annotated[float, Query(ge=0.0, le=1e6)] = 0.0,
    better: bool = False,
) -> GateVerdict:
    """The release gate: ``verdict`` pass, fail or inconclusive; 422 for a
    model the run does not have."""
    service = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    await service.config(run)  # 404 for an unknown run
    try:
        return await service.call(
            functools.partial(
                gate,
                service.monitor,
                run,
                candidate,
                baseline,
                margin=margin,
                better=better,
            )
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc


def add_gate_routes(app: FastAPI) -> None:
    """Register the route on ``app`` itself (every route listing shows it)."""
    app.get("/runs/{run}/gate")(release_gate)
