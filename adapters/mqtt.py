"""MQTT with aiomqtt: trials in on ``{prefix}/{run}/trials``, status and events out.

At-least-once in, exactly-once counted: the source subscribes at QoS 1 with a
persistent session (MQTT 5, ``clean_start=False`` and a session that never
expires, as MQTT 3.1.1's ``clean_session=False``) under a stable client id,
and acknowledges a message only after the monitor committed it. aiomqtt 2.x
acknowledges QoS 1 on receipt and has no public switch for it, so the
source turns on manual acknowledgement in the paho client aiomqtt wraps,
*before* connecting (a persistent session starts redelivering right after
CONNACK), through :class:`ManualAcks`, the one place that reaches into
aiomqtt (why: the comment at aiomqtt in pyproject.toml). A crash before
the ack leaves the message unacknowledged; the broker redelivers it to the
same client id, and the store's exactly-once index makes the repeat a no-op.

With ``shared_group``, workers subscribe ``$share/<group>/...`` so the broker
splits messages between them; each worker needs its own client id. MQTT 5
is used because its broker says why it closed a connection: reason 142,
"session taken over", means another connection took this client id, and
the worker stops with that message (:class:`SourceConflictError`) instead of
taking it back and forth with the other one (brokers that only close the
socket are recognised by the pattern of losses, see :class:`Takeovers`).
A client id containing ``{pid}`` is per process, and its session is then
not persistent (see :attr:`MqttSettings.persistent`).

Library errors stop here: aiomqtt's ``MqttError`` becomes a logged reconnect
with backoff; nothing of aiomqtt or paho leaves this module.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import ssl
import time
from collections.abc import Sequence

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from monitor.config import MqttSettings
from monitor.errors import SourceConflictError
from monitor.interfaces import IngestSink, Payload
from monitor.schema import Status
from monitor.service.retry import Backoff, ingest_durably
from monitor.stores.records import StoredEvent

log = logging.getLogger(__name__)

# MQTT 5 DISCONNECT reason: another connection took this client id.
SESSION_TAKEN_OVER = 142
_NEVER_EXPIRES = 0xFFFFFFFF


def trials_topic(settings: MqttSettings) -> str:
    """The subscription: ``[$share/<group>/]<prefix>/+/trials``."""
    topic = f"{settings.topic_prefix}/+/trials"
    if settings.shared_group:
        return f"$share/{settings.shared_group}/{topic}"
    return topic


def run_of(topic: str) -> str:
    """The run id in ``<prefix>/<run>/trials``."""
    return topic.rsplit("/", 2)[-2]


def _tls(settings: MqttSettings) -> aiomqtt.TLSParameters | None:
    if not settings.uses_tls:
        return None
    return aiomqtt.TLSParameters(
        ca_certs=settings.tls_ca_file,
        certfile=settings.tls_cert_file,
        keyfile=settings.tls_key_file,
        cert_reqs=ssl.CERT_REQUIRED,
    )


def _client(
    settings: MqttSettings, identifier: str, persistent: bool
) -> aiomqtt.Client:
    connect = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    # A persistent session outlives the connection, as in MQTT 3.1.1.
    connect.SessionExpiryInterval = _NEVER_EXPIRES if persistent else 0
    return aiomqtt.Client(
        settings.host,
        settings.port,
        username=settings.username,
        password=settings.password,
        identifier=identifier,
        protocol=aiomqtt.ProtocolVersion.V5,
        clean_start=not persistent,
        properties=connect,
        keepalive=settings.keepalive_s,
        tls_params=_tls(settings),
    )


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

    def lost(self, error: BaseException) -> SourceConflictError | None:
        """The conflict to stop with, if ``error`` shows one."""
        since, self._since = self._since, None
        if _reason(error) == SESSION_TAKEN_OVER:
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


def _reason(error: BaseException) -> object:
    """The MQTT reason code in ``error`` or what caused it, if any."""
    seen: BaseException | None = error
    while seen is not None:
        code = getattr(seen, "rc", None)
        if code is not None:
            return getattr(code, "value", code)
        seen = seen.__cause__ or seen.__context__
    return None


class ManualAcks:
    """QoS 1 acknowledgement left to the source, in the paho client aiomqtt wraps.

    aiomqtt 2.x (2.5.1, the newest) has no public manual acknowledgement
    (aiomqtt issue #345); paho's public ``manual_ack_set`` and ``ack`` do it
    and are reached through ``Client._client``. This is the only place that
    reads it; the pin and the argument are in pyproject.toml, and
    tests/adapters/test_mqtt.py checks the behaviour (what was not committed
    is delivered again after a crash). Made before connecting.
    """

    def __init__(self, client: aiomqtt.Client) -> None:
        self._paho = client._client
        self._paho.manual_ack_set(True)

    def acknowledge(self, messages: Sequence[aiomqtt.Message]) -> None:
        """Acknowledge committed messages, in the order given."""
        for message in messages:
            self._paho.ack(message.mid, message.qos)


class MqttSource:
    """Trials from MQTT, acknowledged only once committed."""

    def __init__(self, settings: MqttSettings) -> None:
        self._settings = settings

    @property
    def name(self) -> str:
        return "mqtt"

    async def run(self, sink: IngestSink) -> None:
        backoff = Backoff()
        identifier = self._settings.identifier
        takeovers = Takeovers(identifier)
        while True:
            # A new client per connection: messages queued in a dead client
            # carry that connection's packet ids and must not be acked later.
            client = _client(
                self._settings, identifier, persistent=self._settings.persistent
            )
            acks = ManualAcks(client)
            try:
                async with client:
                    await client.subscribe(trials_topic(self._settings), qos=1)
                    log.info(
                        "subscribed to %s as %s",
                        trials_topic(self._settings),
                        identifier,
                    )
                    backoff.reset()
                    takeovers.connected()
                    await self._consume(client, acks, sink)
            except aiomqtt.MqttError as exc:
                conflict = takeovers.lost(exc)
                if conflict is not None:
                    raise conflict from None
                await backoff.wait("MQTT source", exc)

    async def _consume(
        self, client: aiomqtt.Client, acks: ManualAcks, sink: IngestSink
    ) -> None:
        messages = client.messages
        async for first in messages:
            batch = [first]
            # Take what is already queued, never wait to fill a batch: the
            # broker stops sending once its in-flight window is unacked.
            while len(batch) < self._settings.max_batch and len(messages) > 0:
                batch.append(await anext(messages))
            await self._commit(sink, batch)
            log.debug("committed %d messages; acknowledging them", len(batch))
            # In receipt order, as MQTT 3.1.1 section 4.6 asks.
            acks.acknowledge(batch)

    @staticmethod
    async def _commit(sink: IngestSink, batch: Sequence[aiomqtt.Message]) -> None:
        payloads = [
            Payload(
                data=_payload_bytes(message.payload),
                source=f"mqtt:{message.topic.value}",
                run=run_of(message.topic.value),
            )
            for message in batch
        ]
        # Not committed, so not acknowledged: offer the same batch until it is.
        await ingest_durably(sink, payloads)


class MqttPublisher:
    """Statuses (retained, newest wins) and events on ``{prefix}/{run}/...``."""

    def __init__(self, settings: MqttSettings) -> None:
        self._settings = settings
        self._statuses: dict[str, Status] = {}
        self._events: collections.deque[StoredEvent] = collections.deque()
        self._wake = asyncio.Event()

    @property
    def name(self) -> str:
        return "mqtt-publisher"

    def publish_status(self, status: Status) -> None:
        self._statuses[status.run] = status
        self._wake.set()

    def publish_event(self, event: StoredEvent) -> None:
        self._events.append(event)
        self._wake.set()

    async def run(self) -> None:
        backoff = Backoff()
        identifier = f"{self._settings.identifier}-publisher"
        takeovers = Takeovers(identifier)
        while True:
            client = _client(self._settings, identifier, persistent=False)
            try:
                async with client:
                    backoff.reset()
                    takeovers.connected()
                    await self._send_forever(client)
            except aiomqtt.MqttError as exc:
                conflict = takeovers.lost(exc)
                if conflict is not None:
                    raise conflict from None
                await backoff.wait("MQTT publisher", exc)

    async def _send_forever(self, client: aiomqtt.Client) -> None:
        # The publisher subscribes to nothing, so its message iterator ends
        # only when the connection does (with aiomqtt's error): watched while
        # idle, so a lost (or taken over) connection is noticed before the
        # next publish, and its error is always retrieved.
        lost = asyncio.ensure_future(anext(client.messages))
        try:
            while True:
                wake = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait(
                        (wake, lost), return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    wake.cancel()
                if lost.done():
                    raise aiomqtt.MqttError("connection lost") from lost.exception()
                self._wake.clear()
                await self._send_pending(client)
        finally:
            lost.cancel()

    async def _send_pending(self, client: aiomqtt.Client) -> None:
        prefix = self._settings.topic_prefix
        while self._events:
            event = self._events[0]
            await client.publish(
                f"{prefix}/{event.run}/events", event_json(event), qos=1
            )
            self._events.popleft()  # only once the broker confirmed it
        statuses, self._statuses = self._statuses, {}
        for run, status in statuses.items():
            try:
                await client.publish(
                    f"{prefix}/{run}/status",
                    status.model_dump_json(),
                    qos=1,
                    retain=True,
                )
            except aiomqtt.MqttError:
                self._statuses.setdefault(run, status)
                raise


def event_json(event: StoredEvent) -> str:
    """The wire form of an event."""
    return json.dumps(event.document())


def _payload_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload).encode()
