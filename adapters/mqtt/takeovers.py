"""Telling a client id taken by another connection from a lost connection.

Two workers under one MQTT client id take it from each other in turn; the
source and the publisher stop with :class:`SourceConflictError` instead.
"""

from __future__ import annotations

import time

from monitor.errors import SourceConflictError

# MQTT 5 DISCONNECT reason: another connection took this client id.
SESSION_TAKEN_OVER = 142


class Takeovers:
    """Tells a client id taken by another connection from a lost connection.

    An MQTT 5 broker may say so (DISCONNECT reason 142, "session taken
    over"); mosquitto 2.0.11 does not, it closes the socket. Two processes
    under one id then take it from each other in turn, each connection
    ending within moments of its CONNACK, so ``QUICK_LOSSES`` connections in
    a row lost within ``QUICK_S`` of connecting count as a takeover too.
    """

    QUICK_S = 5.0
    QUICK_LOSSES = 3

    def __init__(self, identifier: str) -> None:
        self._identifier = identifier
        self._since: float | None = None
        self._quick = 0

    def connected(self) -> None:
        self._since = time.monotonic()

    def lost(self, reason: int | None) -> SourceConflictError | None:
        """The conflict to stop with, if a loss (with the broker's MQTT
        ``reason`` code, if any) shows one."""
        since, self._since = self._since, None
        if reason == SESSION_TAKEN_OVER:
            return self._conflict("the broker said: reason 142, session taken over")
        if since is not None and time.monotonic() - since < self.QUICK_S:
            self._quick += 1
        else:
            self._quick = 0
        if self._quick >= self.QUICK_LOSSES:
            return self._conflict(
                f"the broker closed {self._quick} connections in a row within "
                f"{self.QUICK_S:g} s of accepting them, as it does when another "
                "client connects under the same id"
            )
        return None

    def _conflict(self, evidence: str) -> SourceConflictError:
        return SourceConflictError(
            f"another connection took MQTT client id {self._identifier!r} "
            f"({evidence}): two workers use one client id. Give each worker "
            "its own [mqtt] client_id (e.g. SCORIO_MONITOR_MQTT_CLIENT_ID), or "
            "put {pid} in it for a per-process id without a persistent session"
        )
