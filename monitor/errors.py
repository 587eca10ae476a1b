"""Errors of the monitor service, one base class with data attributes.

    MonitorError
    ├── ConfigError         a run or service configuration is invalid
    ├── UnknownRunError     a run id that is not configured (attribute: run)
    ├── StoreError          the state store failed (wraps the backend's error)
    ├── SourceError         an event source failed (wraps the library's error)
    │   └── SourceConflictError  another process took the source's identity
    └── PublishError        an output failed (wraps the library's error)

Bad *input* (a malformed trial) is not an exception: it becomes a
:class:`monitor.schema.Rejection` with a reason, is dead-lettered, and never
stops ingestion. Adapters translate their libraries' exceptions into these
classes at their edge with ``raise ... from exc``.
"""

from __future__ import annotations


class MonitorError(Exception):
    """Base class of every error the monitor raises on purpose."""


class ConfigError(MonitorError):
    """A run or service configuration is invalid."""


class UnknownRunError(MonitorError):
    """A run id that is not configured."""

    def __init__(self, run: str) -> None:
        super().__init__(f"unknown run {run!r}")
        self.run = run


class StoreError(MonitorError):
    """The state store failed; the operation was not applied."""


class SourceError(MonitorError):
    """An event source failed (connection lost, protocol error)."""


class SourceConflictError(SourceError):
    """Another process took over this worker's identity at a source (e.g. its
    MQTT client id). Fatal: retrying would take it back and forth; the
    service stops with this message."""


class PublishError(MonitorError):
    """An output (publisher, webhook) failed."""
