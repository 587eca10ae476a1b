"""``GET /compare?runs=a,b``: runs side by side, models aligned (the dashboard's
``/?compare=a,b`` view reads it).

See :mod:`monitor.engine.comparison`. An unknown run is a 404 naming it; fewer
than two runs, a repeated one or too many are a 422 saying so.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, HTTPException, Query, Request

from monitor.engine.comparison import Comparison, compare, compared_runs
from monitor.service.service import Service


async def comparison(
    request: Request,
    runs: Annotated[str, Query(max_length=4096, description="runs, comma-separated")],
) -> Comparison:
    """Each model's mu, interval, rank and group in every run (None: absent)."""
    service = request.state.service
    if not isinstance(service, Service):
        raise RuntimeError("the app was started without a service")
    try:
        names = compared_runs(runs)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return compare([await service.status(run) for run in names])


def add_compare_routes(app: FastAPI) -> None:
    """Register the route on ``app`` itself (every route listing shows it)."""
    app.get("/compare")(comparison)
