"""monitor: the streaming engine, its interfaces and the service around it.

``from monitor import Monitor, RunConfig`` is the synchronous Python API: a
notebook or a script can ingest trials and read statuses without a service.
The names load on first use (PEP 562), so ``scorio-monitor --help`` does not
import the engine and its numerics.

The map, one room a concern, lowest first (a room imports only rooms above
it in this list; import-linter's contracts in pyproject.toml hold it):

- ``errors``, ``limits``: the one error hierarchy, the shared bounds.
- ``rubrics/``: per-trial signals to categories (the paper's schemas).
- ``schema``, ``trial_event``: the contract's value types (the trial event,
  run configs, statuses, plans, rejections).
- ``inputs/``: the one way in: raw input (JSON bytes or Python objects)
  through the one decoder of the trial contract to validated trial columns.
- ``stores/``: where counts live (memory, SQLite; Redis through the factory's
  entry points) and the exactly-once ledger.
- ``config``, ``interfaces``: the config files; the Protocols of stores,
  sources and publishers.
- ``decisions/``: what counts mean: order, groups, pairs, events, plans.
- ``engine/``: :class:`Monitor`, the facade over runs, ingestion, looks,
  statuses and reservations.
- ``feeds/``: the loops that feed the engine (results files, ``watch``).
- ``service/``: the asyncio service around the engine.
- ``http/``: the HTTP API and the dashboard.
- ``cli/``: the command line, the one composition root that may import
  ``adapters``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor.engine.monitor import Monitor
    from monitor.errors import (
        ConfigError,
        MonitorError,
        PublishError,
        SourceError,
        StoreError,
        UnknownRunError,
    )
    from monitor.schema import (
        Cost,
        ModelStatus,
        NextItem,
        PairStatus,
        Plan,
        Rejection,
        RunConfig,
        Status,
        TrialEvent,
        Waiting,
    )
    from monitor.stores.records import IngestReport, StoredEvent

__all__ = [
    "ConfigError",
    "Cost",
    "IngestReport",
    "ModelStatus",
    "Monitor",
    "MonitorError",
    "NextItem",
    "PairStatus",
    "Plan",
    "PublishError",
    "Rejection",
    "RunConfig",
    "SourceError",
    "Status",
    "StoreError",
    "StoredEvent",
    "TrialEvent",
    "UnknownRunError",
    "Waiting",
]

_HOMES = {
    "ConfigError": "monitor.errors",
    "Cost": "monitor.schema",
    "IngestReport": "monitor.stores.records",
    "ModelStatus": "monitor.schema",
    "Monitor": "monitor.engine.monitor",
    "MonitorError": "monitor.errors",
    "NextItem": "monitor.schema",
    "PairStatus": "monitor.schema",
    "Plan": "monitor.schema",
    "PublishError": "monitor.errors",
    "Rejection": "monitor.schema",
    "RunConfig": "monitor.schema",
    "SourceError": "monitor.errors",
    "Status": "monitor.schema",
    "StoreError": "monitor.errors",
    "StoredEvent": "monitor.stores.records",
    "TrialEvent": "monitor.schema",
    "UnknownRunError": "monitor.errors",
    "Waiting": "monitor.schema",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'monitor' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
