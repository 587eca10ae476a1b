"""monitor: the streaming engine, its interfaces and the service around it.

``from monitor import Monitor, RunConfig`` is the synchronous Python API: a
notebook or a script can ingest trials and read statuses without a service.
"""

from monitor.engine import Monitor
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
    Rejection,
    RunConfig,
    Status,
    TrialEvent,
)
from monitor.store import IngestReport, StoredEvent

__all__ = [
    "ConfigError",
    "Cost",
    "IngestReport",
    "ModelStatus",
    "Monitor",
    "MonitorError",
    "NextItem",
    "PairStatus",
    "PublishError",
    "Rejection",
    "RunConfig",
    "SourceError",
    "Status",
    "StoreError",
    "StoredEvent",
    "TrialEvent",
    "UnknownRunError",
]
