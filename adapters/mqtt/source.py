"""The MQTT source: trials in on ``{prefix}/{run}/trials``.

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

import json
import logging
from collections.abc import Sequence

import aiomqtt

from adapters.mqtt.clients import aiomqtt_client
from adapters.mqtt.takeovers import Takeovers
from monitor.config import MqttSettings
from monitor.interfaces import IngestSink, Payload
from monitor.service.retry import Backoff, ingest_durably

log = logging.getLogger(__name__)


def trials_topic(settings: MqttSettings) -> str:
    """The subscription: ``[$share/<group>/]<prefix>/+/trials``."""
    topic = f"{settings.topic_prefix}/+/trials"
    if settings.shared_group:
        return f"$share/{settings.shared_group}/{topic}"
    return topic


def run_of(topic: str) -> str:
    """The run id in ``<prefix>/<run>/trials``."""
    return topic.rsplit("/", 2)[-2]


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
            client = aiomqtt_client(
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


def _payload_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload).encode()
