"""The MQTT publisher: statuses (retained) and events on ``{prefix}/{run}/...``.

It stays on aiomqtt's public API (it needs no manual acknowledgement): a
client per connection, without a persistent session, under the source's id
with ``-publisher`` appended, and the same takeover detection as the source.
aiomqtt's ``MqttError`` becomes a logged reconnect with backoff here.
"""

from __future__ import annotations

import asyncio
import collections
import json
import ssl

import aiomqtt

from adapters.mqtt.takeovers import Takeovers
from monitor.config import MqttSettings
from monitor.schema import Status
from monitor.service.retry import Backoff
from monitor.stores.records import StoredEvent


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
            client = _connection(self._settings, identifier)
            try:
                async with client:
                    backoff.reset()
                    takeovers.connected()
                    await self._send_forever(client)
            except aiomqtt.MqttError as exc:
                conflict = takeovers.lost(_reason(exc))
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


def _connection(settings: MqttSettings, identifier: str) -> aiomqtt.Client:
    # MQTT 5 so that the broker says why it closed the connection; a session
    # that ends with it (clean start, no session expiry interval).
    return aiomqtt.Client(
        settings.host,
        settings.port,
        username=settings.username,
        password=settings.password,
        identifier=identifier,
        protocol=aiomqtt.ProtocolVersion.V5,
        clean_start=True,
        keepalive=settings.keepalive_s,
        tls_params=_tls(settings),
    )


def _tls(settings: MqttSettings) -> aiomqtt.TLSParameters | None:
    if not settings.uses_tls:
        return None
    return aiomqtt.TLSParameters(
        ca_certs=settings.tls_ca_file,
        certfile=settings.tls_cert_file,
        keyfile=settings.tls_key_file,
        cert_reqs=ssl.CERT_REQUIRED,
    )


def _reason(error: BaseException) -> int | None:
    """The MQTT reason code in aiomqtt's ``error`` or what caused it, if any."""
    seen: BaseException | None = error
    while seen is not None:
        code = getattr(seen, "rc", None)
        if code is not None:
            value = getattr(code, "value", code)
            return value if isinstance(value, int) else None
        seen = seen.__cause__ or seen.__context__
    return None
