"""Transports: the ways a harness client reaches a monitor, behind one interface.

A transport does one attempt of each operation and says whether a failure is
worth another (:class:`MonitorUnavailableError`) or not (any other
:class:`~monitor.errors.MonitorError`); batching and retries belong to the
client (:mod:`adapters.harness.client`). The interface and the shared parts
are in :mod:`~adapters.harness.transports.base`; one module per transport:

- :class:`HttpTransport`: the service's HTTP API, through httpx;
- :class:`MqttTransport`: trials published at QoS 1 on
  ``{prefix}/{run}/trials``, statuses read from the retained
  ``{prefix}/{run}/status`` topics, through aiomqtt; it cannot plan or
  declare runs (those need HTTP or an embedded monitor);
- :class:`EmbeddedTransport`: a :class:`monitor.Monitor` in this process;
- :class:`StateFileTransport`: a state file several processes feed (the
  one holding its writer lock counts, the others spool beside it).

httpx and aiomqtt stop here: each has one place that turns its exceptions
into monitor errors. Each comes with an extra (``[client]``, ``[mqtt]``), so
:class:`HttpTransport` and :class:`MqttTransport` load on first use (PEP
562) and :func:`transport_for` imports only the one it chooses: an install
without aiomqtt (``[inspect]``, ``[client]``) loads every other part. ::

    MonitorError (monitor.errors)
    ├── UnknownRunError          the monitor does not know the run
    ├── ConfigError              a run declaration was refused
    ├── MonitorUnavailableError  no connection, a timeout, HTTP 408, 429 or 5xx
    └── RequestRejectedError     any other refusal, or an unreadable answer
        ├── BatchRefusedError    a whole batch of trials refused (dropped)
        └── NotAMonitorError     the first contact found no scorio monitor there
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from adapters.harness.transports.base import (
    RESERVED_IN_RUN,
    BatchRefusedError,
    MonitorUnavailableError,
    NotAMonitorError,
    RequestRejectedError,
    Transport,
    check_run,
    encode,
)
from adapters.harness.transports.choice import EXTRA_OF_SCHEME, transport_for
from adapters.harness.transports.embedded import EmbeddedTransport
from adapters.harness.transports.state_file import StateFileTransport, spool_of

if TYPE_CHECKING:
    from adapters.harness.transports.http import HttpTransport
    from adapters.harness.transports.mqtt import MqttTransport

__all__ = [
    "EXTRA_OF_SCHEME",
    "RESERVED_IN_RUN",
    "BatchRefusedError",
    "EmbeddedTransport",
    "HttpTransport",
    "MonitorUnavailableError",
    "MqttTransport",
    "NotAMonitorError",
    "RequestRejectedError",
    "StateFileTransport",
    "Transport",
    "check_run",
    "encode",
    "spool_of",
    "transport_for",
]

# The transports whose libraries come with an extra: imported on first use.
_HOMES = {
    "HttpTransport": "adapters.harness.transports.http",
    "MqttTransport": "adapters.harness.transports.mqtt",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(
            f"module 'adapters.harness.transports' has no attribute {name!r}"
        )
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
