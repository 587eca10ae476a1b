"""Harness integrations: a client for evaluation code, and Inspect AI's hooks.

One package per outside system; here the outside system is the harness, so
the client (:mod:`adapters.harness.client`, its buffer, retry policy and
circuit breaker, and :mod:`adapters.harness.sync_client` for synchronous
code, over the transports of :mod:`adapters.harness.transports`) and the
Inspect AI integration (:mod:`adapters.harness.inspect_ai`, which uses the
client) live together.
The Inspect AI module is not imported here: inspect-ai is an optional
dependency, so import ``adapters.harness.inspect_ai`` explicitly.
"""

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
    HttpTransport,
    MonitorUnavailableError,
    MqttTransport,
    NotAMonitorError,
    RequestRejectedError,
    StateFileTransport,
    Transport,
)

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
