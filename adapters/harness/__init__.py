"""Harness integrations: a client for evaluation code, and Inspect AI's hooks.

One package per outside system; here the outside system is the harness, so
the client (:mod:`adapters.harness.client`, its buffer, retry policy and
circuit breaker, and :mod:`adapters.harness.sync_client` for synchronous
code, over the transports of :mod:`adapters.harness.transports`) and the
Inspect AI integration (:mod:`adapters.harness.inspect_ai`, which uses the
client) live together.
The Inspect AI module is not imported here: inspect-ai is an optional
dependency, so import ``adapters.harness.inspect_ai`` explicitly. Nor are
:class:`HttpTransport` and :class:`MqttTransport` until first used (PEP
562): httpx and aiomqtt come with extras, and an install with one and not
the other (``[inspect]`` has no aiomqtt) loads everything else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from adapters.harness.client import (
    AsyncMonitorClient,
    attempt_id,
    new_eval_id,
    transport_for,
)
from adapters.harness.retry import Retry
from adapters.harness.sync_client import MonitorClient
from adapters.harness.transports import (
    BatchRefusedError,
    EmbeddedTransport,
    MonitorUnavailableError,
    NotAMonitorError,
    RequestRejectedError,
    StateFileTransport,
    Transport,
)

if TYPE_CHECKING:
    from adapters.harness.transports import HttpTransport, MqttTransport

__all__ = [
    "AsyncMonitorClient",
    "BatchRefusedError",
    "EmbeddedTransport",
    "HttpTransport",
    "MonitorClient",
    "MonitorUnavailableError",
    "MqttTransport",
    "NotAMonitorError",
    "RequestRejectedError",
    "Retry",
    "StateFileTransport",
    "Transport",
    "attempt_id",
    "new_eval_id",
    "transport_for",
]


def __getattr__(name: str) -> object:
    if name in ("HttpTransport", "MqttTransport"):
        return getattr(importlib.import_module("adapters.harness.transports"), name)
    raise AttributeError(f"module 'adapters.harness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
