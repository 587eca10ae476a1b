"""One connection of the MQTT source, on paho-mqtt's public API, seen from asyncio.

The source acknowledges QoS 1 messages only once the monitor committed them,
which aiomqtt 2.x cannot do through its public API (aiomqtt issue #345), so
the source speaks to paho-mqtt directly: a paho ``Client`` with manual
acknowledgement set before it connects (a persistent session starts
redelivering right after CONNACK), and ``ack(mid, qos)`` once committed.

paho's network loop runs in paho's own thread (``loop_start``), not on the
asyncio loop through its external-loop hooks: that loop is the one paho
documents for calls from other threads (``ack``, ``subscribe`` and
``disconnect`` only queue a packet and wake it), and it alone also reads the
bytes a TLS connection has already decrypted and buffered, which a
readiness callback on the socket never reports. Its callbacks hand what
they see to asyncio with ``loop.call_soon_threadsafe``: messages into a
bounded inbox, and the end of the connection. The blocking TCP and TLS
connect runs in a worker thread before the loop starts, so its error
reaches the source as it is. A :class:`Session` is one connection: paho
never reconnects it (``reconnect_on_failure`` off), so packet ids of a lost
connection are never acknowledged on a later one, and the session ends only
one way: paho calls ``on_disconnect`` from its thread, whose loop returns
right after; :meth:`Session.close` joins that thread. Nothing of paho
leaves this module: its failures become :class:`SessionLost`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from paho.mqtt.client import (
    Client,
    ConnectFlags,
    DisconnectFlags,
    MQTTMessage,
    MQTTv5,
)
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from monitor.config import MqttSettings
from monitor.errors import SourceError

log = logging.getLogger(__name__)

Result = TypeVar("Result")

_NEVER_EXPIRES = 0xFFFFFFFF
# MQTT 5's largest Receive Maximum (the default when a client sends none).
_RECEIVE_MAXIMUM_LIMIT = 0xFFFF
# How long the broker may take to accept the connection and subscription
# (aiomqtt's default timeout, which the source had before).
HANDSHAKE_S = 10.0
# How long closing waits for paho's loop to send DISCONNECT and end before
# stopping it (a broker that stopped reading).
CLOSE_S = 5.0


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message as received: its topic, payload and what acknowledges it."""

    topic: str
    payload: bytes
    mid: int
    qos: int


class SessionLost(SourceError):
    """The connection could not be made or ended.

    Attributes:
        reason: The MQTT reason code the broker gave (e.g. 142, "session
            taken over"), if it gave one.
    """

    def __init__(self, message: str, reason: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a session connects as and subscribes to."""

    settings: MqttSettings
    identifier: str
    topic: str
    persistent: bool

    @property
    def receive_maximum(self) -> int:
        """Unacknowledged QoS 1 messages the broker may send: two batches."""
        return min(_RECEIVE_MAXIMUM_LIMIT, 2 * self.settings.max_batch)


class Session:
    """One connection: connected and subscribed on entry, closed on exit.

    Messages wait in an inbox that the receive maximum bounds: the broker
    sends no more QoS 1 messages than that unacknowledged, and a message
    leaves the inbox before it is acknowledged. A broker may still exceed
    it (mosquitto 2.0.11 now and then did, draining 20,000 queued trials);
    the inbox then keeps them and logs a warning: dropping them or
    disconnecting would only have them sent again (disconnecting on it
    stalled the source in a loop of reconnects).
    """

    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._loop = asyncio.get_running_loop()
        self._paho = _configured_paho(subscription.settings, subscription.identifier)
        self._paho.on_connect = self._on_connect
        self._paho.on_subscribe = self._on_subscribe
        self._paho.on_message = self._on_message
        self._paho.on_disconnect = self._on_disconnect
        self._bound = subscription.receive_maximum
        # Read and written on the asyncio loop only.
        self._inbox: collections.deque[Delivery] = collections.deque()
        self._subscribed = False
        self._end: SessionLost | None = None
        self._wake = asyncio.Event()
        # Set before paho's thread starts, which only reads it.
        self._looping = False
        # paho's thread, set by itself before it sets ``_disconnected``.
        self._network: threading.Thread | None = None
        self._disconnected = threading.Event()

    async def __aenter__(self) -> Session:
        await self._connect()
        try:
            async with asyncio.timeout(HANDSHAKE_S):
                await self._until(lambda: self._subscribed or self._end is not None)
        except TimeoutError:
            await self.close()
            raise SessionLost(
                f"the broker did not accept the connection and subscription "
                f"within {HANDSHAKE_S:g} s"
            ) from None
        except BaseException:
            await self.close()
            raise
        if self._end is not None:
            await self.close()
            raise self._end
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def receive(self, limit: int) -> list[Delivery]:
        """The next messages in receipt order: at least one, at most ``limit``.

        Never waits to fill a batch: the broker stops sending once its
        window of unacknowledged messages is full.

        Raises:
            SessionLost: The connection ended; what it delivered but did not
                acknowledge is delivered again on the next one.
        """
        await self._until(lambda: bool(self._inbox) or self._end is not None)
        if self._end is not None:
            raise self._end
        return [self._inbox.popleft() for _ in range(min(limit, len(self._inbox)))]

    def acknowledge(self, deliveries: Sequence[Delivery]) -> None:
        """Acknowledge committed messages, in the order given."""
        if self._end is not None:
            return  # the broker redelivers them; their packet ids are void
        for delivery in deliveries:
            self._paho.ack(delivery.mid, delivery.qos)

    async def close(self) -> None:
        """Disconnect and wait until paho's thread and socket are gone.

        Waits through cancellation (at most about ``CLOSE_S``), then raises it.
        """
        if not self._looping:
            return
        self._paho.disconnect()
        await _despite_cancellation(asyncio.to_thread(self._join))

    async def _connect(self) -> None:
        settings = self._subscription.settings
        failure = await _despite_cancellation(
            asyncio.to_thread(self._connect_blocking), on_cancel=self._abandon
        )
        if failure is not None:
            raise SessionLost(
                f"cannot connect to {settings.host}:{settings.port}: {failure}"
            ) from failure
        if self._end is not None:
            raise self._end
        self._looping = True
        self._paho.loop_start()

    def _connect_blocking(self) -> Exception | None:
        """paho's blocking connect, in a worker thread: its error, if any."""
        settings = self._subscription.settings
        connect = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        # A persistent session outlives the connection, as in MQTT 3.1.1.
        persistent = self._subscription.persistent
        connect.SessionExpiryInterval = _NEVER_EXPIRES if persistent else 0
        connect.ReceiveMaximum = self._subscription.receive_maximum
        try:
            code = self._paho.connect(
                settings.host,
                settings.port,
                keepalive=settings.keepalive_s,
                clean_start=not persistent,
                properties=connect,
            )
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
            return error
        if code != MQTTErrorCode.MQTT_ERR_SUCCESS:
            return OSError(f"sending CONNECT failed ({code.name})")
        return None

    def _abandon(self, failure: Exception | None) -> None:
        """Cancelled while connecting: close what the connect opened."""
        if failure is None:
            # No loop yet, so paho writes DISCONNECT and closes right here.
            self._paho.disconnect()

    def _join(self) -> None:
        """In a worker thread: wait for paho's thread to end, or stop it."""
        if self._disconnected.wait(CLOSE_S) and self._network is not None:
            self._network.join(CLOSE_S)
            if not self._network.is_alive():
                return
        log.warning("MQTT connection did not end on DISCONNECT; stopping it")
        self._paho.loop_stop()
        socket = self._paho.socket()
        if socket is not None:
            socket.close()

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._wake.clear()
            await self._wake.wait()

    # -- on the asyncio loop, posted by paho's callbacks ----------------------

    def _now_subscribed(self, mid: int) -> None:
        self._subscribed = True
        self._wake.set()

    def _received(self, delivery: Delivery) -> None:
        if self._end is not None:
            return
        if len(self._inbox) == self._bound:
            log.warning(
                "the MQTT broker sent more than the receive maximum (%d) "
                "unacknowledged messages",
                self._bound,
            )
        self._inbox.append(delivery)
        self._wake.set()

    def _lost(self, error: SessionLost) -> None:
        if self._end is None:
            self._end = error
        self._wake.set()

    # -- in paho's thread ------------------------------------------------------

    def _post(self, callback: Callable[[Result], None], argument: Result) -> None:
        # The loop is closed only if the source was abandoned mid-close.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback, argument)

    def _failed(self, client: Client, error: Exception) -> None:
        """A callback failed: the session ends (paho would end its thread
        silently if the error reached it)."""
        self._post(self._lost, SessionLost(f"MQTT client failed: {error!r}"))
        client.disconnect()

    def _on_connect(
        self,
        client: Client,
        userdata: object,
        flags: ConnectFlags,
        reason: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if reason.is_failure:
            refused = f"the broker refused the connection: {reason}"
            self._post(self._lost, SessionLost(refused, reason.value))
            return
        try:
            client.subscribe(self._subscription.topic, qos=1)
        except ValueError as error:  # e.g. a shared group with a wildcard
            self._failed(client, error)

    def _on_subscribe(
        self,
        client: Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        properties: Properties | None,
    ) -> None:
        refused = [reason for reason in reasons if reason.is_failure]
        if refused:
            message = (
                f"the broker refused the subscription to "
                f"{self._subscription.topic}: {refused[0]}"
            )
            self._post(self._lost, SessionLost(message, refused[0].value))
            client.disconnect()
            return
        self._post(self._now_subscribed, mid)

    def _on_message(
        self, client: Client, userdata: object, message: MQTTMessage
    ) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError as error:  # brokers check topics are UTF-8
            self._failed(client, error)
            return
        payload = bytes(message.payload)
        delivery = Delivery(topic, payload, message.mid, message.qos)
        self._post(self._received, delivery)

    def _on_disconnect(
        self,
        client: Client,
        userdata: object,
        flags: DisconnectFlags,
        reason: ReasonCode,
        properties: Properties | None,
    ) -> None:
        lost = f"MQTT connection lost: {reason} (reason {reason.value})"
        self._post(self._lost, SessionLost(lost, reason.value))
        if self._looping:
            # paho's loop returns right after this callback (no reconnect).
            self._network = threading.current_thread()
            self._disconnected.set()


def _configured_paho(settings: MqttSettings, identifier: str) -> Client:
    client = Client(
        CallbackAPIVersion.VERSION2,
        client_id=identifier,
        protocol=MQTTv5,
        reconnect_on_failure=False,
    )
    client.manual_ack_set(True)
    if settings.username is not None:
        client.username_pw_set(settings.username, settings.password)
    if settings.uses_tls:
        client.tls_set(
            ca_certs=settings.tls_ca_file,
            certfile=settings.tls_cert_file,
            keyfile=settings.tls_key_file,
            cert_reqs=ssl.CERT_REQUIRED,
        )
    return client


async def _despite_cancellation(
    work: Coroutine[object, object, Result],
    on_cancel: Callable[[Result], None] | None = None,
) -> Result:
    """Await ``work`` to its end even if cancelled meanwhile, then re-raise.

    For work in a thread, which a cancellation cannot stop: ``on_cancel``
    gets its result (to close what it opened) before the cancellation goes on.
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as error:
            cancelled = error
    result = task.result()
    if cancelled is not None:
        if on_cancel is not None:
            on_cancel(result)
        raise cancelled
    return result
