"""``GET /runs/{run}/history`` (and ``/trace``, its older, narrower shape).

Both read the run's look summaries from the store (see
:mod:`monitor.stores.history`), so the dashboard's ranking trace survives a
restart and a finished state file shows its whole run.
"""

from __future__ import annotations

import functools

from fastapi import FastAPI, Request
from pydantic import BaseModel

from monitor.service.service import Service
from monitor.stores.history import HistoryPoint


class ModelPointOut(BaseModel):
    model: str
    mu: float
    sigma: float
    group: int | None


class HistoryPointOut(BaseModel):
    """A run at one look: its trials and each model, best first."""

    ts: float
    trials: int
    models: list[ModelPointOut]


class TracePointOut(BaseModel):
    ts: float
    trials: int
    order: list[str]
    mu: dict[str, float]


async def _points(run: str, request: Request) -> list[HistoryPoint]:
    service = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    await service.config(run)  # 404 for an unknown run
    return await service.call(functools.partial(service.monitor.history, run))


def add_history_routes(app: FastAPI) -> None:
    """Register the two routes on ``app`` (as its own routes, so every
    listing of the app's routes shows them)."""
    app.get("/runs/{run}/history")(history)
    app.get("/runs/{run}/trace")(trace)


async def history(run: str, request: Request) -> list[HistoryPointOut]:
    """Every kept look of the run, oldest first (bounded and thinned)."""
    return [
        HistoryPointOut(
            ts=point.ts,
            trials=point.trials,
            models=[
                ModelPointOut(model=m.model, mu=m.mu, sigma=m.sigma, group=m.group)
                for m in point.models
            ],
        )
        for point in await _points(run, request)
    ]


async def trace(run: str, request: Request) -> list[TracePointOut]:
    """The history as (time, trials, order, mu per model) points."""
    return [
        TracePointOut(
            ts=point.ts,
            trials=point.trials,
            order=[m.model for m in point.models],
            mu={m.model: m.mu for m in point.models},
        )
        for point in await _points(run, request)
    ]
