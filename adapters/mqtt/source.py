"""The MQTT source: trials in on ``{prefix}/{run}/trials``, acknowledged once committed.

At-least-once in, exactly-once counted: the source subscribes at QoS 1 with a
persistent session (MQTT 5, ``clean_start=False`` and a session that never
expires, as MQTT 3.1.1's ``clean_session=False``) under a stable client id,
and acknowledges a message only after the monitor committed it. aiomqtt 2.x
acknowledges QoS 1 on receipt and has no public switch for it, so the
source is built on paho-mqtt's public API (:mod:`adapters.mqtt.session`,
which says why and how). A crash before the ack leaves the message
unacknowledged; the broker redelivers it to the same client id, and the
store's exactly-once index makes the repeat a no-op.

With ``shared_group``, workers subscribe ``$share/<group>/...`` so the broker
splits messages between them; each worker needs its own client id. MQTT 5
is used because its broker says why it closed a connection: reason 142,
"session taken over", means another connection took this client id, and
the worker stops with that message (:class:`SourceConflictError`) instead of
taking it back and forth with the other one (brokers that only close the
socket are recognised by the pattern of losses, see :class:`Takeovers`).
A client id containing ``{pid}`` is per process, and its session is then
not persistent (see :attr:`MqttSettings.persistent`).

A broker keeps QoS 1 messages only for subscriptions it has: until the
source first subscribed (a worker's first start, when no session of its id
exists yet), trials published on the topic are dropped, not queued for it.
:attr:`MqttSource.is_subscribed` says when that first subscription is in
place; ``serve`` answers HTTP (``/healthz``) only after it (see
:mod:`monitor.cli.serving`).

Library errors stop at the session: a lost connection is a
:class:`SessionLost`, which becomes a logged reconnect with backoff; nothing
of paho leaves the package.

A bad event never fails a commit (the decoder refuses it, and the refusal
is committed and acknowledged like a trial). Should committing fail for
another reason (a bug), the source stops, is restarted by the service, and
the broker delivers the batch again: messages seen failing before are then
committed one at a time, so a message that fails alone is the only one held
back, and after ``MAX_ATTEMPTS`` failed attempts it is acknowledged without
being counted, with an error in the log naming its topic and size, so it is
not delivered for ever (nor does a shared subscription keep dealing it to
this worker).
"""

from __future__ import annotations

import collections
import hashlib
import logging
from collections.abc import Sequence
from typing import Final

from adapters.mqtt.session import Delivery, Session, SessionLost, Subscription
from adapters.mqtt.takeovers import Takeovers
from monitor.config import MqttSettings
from monitor.interfaces import IngestSink, Payload
from monitor.service.retry import Backoff, ingest_durably

log = logging.getLogger(__name__)

# Failed commits of one message before it is acknowledged uncounted.
MAX_ATTEMPTS: Final = 5


def trials_topic(settings: MqttSettings) -> str:
    """The subscription: ``[$share/<group>/]<prefix>/+/trials``."""
    topic = f"{settings.topic_prefix}/+/trials"
    if settings.shared_group:
        return f"$share/{settings.shared_group}/{topic}"
    return topic


def run_of(topic: str) -> str:
    """The run id in ``<prefix>/<run>/trials``."""
    return topic.rsplit("/", 2)[-2]


class MqttSource:
    """Trials from MQTT, acknowledged only once committed."""

    def __init__(self, settings: MqttSettings) -> None:
        self._settings = settings
        # Per message (topic and payload digest) that failed to commit, the
        # attempts so far; kept across the service's restarts of run().
        self._attempts: collections.Counter[bytes] = collections.Counter()
        self._subscribed = False

    @property
    def name(self) -> str:
        return "mqtt"

    @property
    def is_subscribed(self) -> bool:
        """Whether the broker acknowledged a subscription of this source yet.

        From then on the broker routes the topic's messages to the source's
        session (and, with a persistent session, keeps them while the
        source reconnects); before, it drops them.
        """
        return self._subscribed

    async def run(self, sink: IngestSink) -> None:
        backoff = Backoff()
        subscription = Subscription(
            self._settings,
            identifier=self._settings.identifier,
            topic=trials_topic(self._settings),
            persistent=self._settings.persistent,
        )
        takeovers = Takeovers(subscription.identifier)
        while True:
            # A new session per connection: messages of a lost one carry its
            # packet ids and must not be acknowledged on a later one.
            try:
                async with Session(subscription) as session:
                    self._subscribed = True
                    log.info(
                        "subscribed to %s as %s",
                        subscription.topic,
                        subscription.identifier,
                    )
                    backoff.reset()
                    takeovers.connected()
                    await self._consume(session, sink)
            except SessionLost as exc:
                conflict = takeovers.lost(exc.reason)
                if conflict is not None:
                    raise conflict from None
                await backoff.wait("MQTT source", exc)

    async def _consume(self, session: Session, sink: IngestSink) -> None:
        while True:
            batch = await session.receive(self._settings.max_batch)
            keys = [_key(delivery) for delivery in batch]
            if not any(key in self._attempts for key in keys):
                await self._commit(sink, batch, keys)
                log.debug("committed %d messages; acknowledging them", len(batch))
                # In receipt order, as MQTT 3.1.1 section 4.6 asks.
                session.acknowledge(batch)
                continue
            # Some failed before: one at a time, so only a failing one waits.
            for delivery, key in zip(batch, keys, strict=True):
                if self._attempts[key] >= MAX_ATTEMPTS:
                    log.error(
                        "message on %s (%d bytes) failed to commit %d times; "
                        "acknowledged without counting it",
                        delivery.topic,
                        len(delivery.payload),
                        self._attempts.pop(key),
                    )
                else:
                    await self._commit(sink, [delivery], [key])
                session.acknowledge([delivery])

    async def _commit(
        self, sink: IngestSink, batch: Sequence[Delivery], keys: list[bytes]
    ) -> None:
        """Commit the batch, noting an attempt of each message until it did."""
        self._attempts.update(keys)
        await _commit(sink, batch)
        for key in keys:
            self._attempts.pop(key, None)


async def _commit(sink: IngestSink, batch: Sequence[Delivery]) -> None:
    payloads = [
        Payload(
            data=delivery.payload,
            source=f"mqtt:{delivery.topic}",
            run=run_of(delivery.topic),
        )
        for delivery in batch
    ]
    # Not committed, so not acknowledged: offer the same batch until it is.
    await ingest_durably(sink, payloads)


def _key(delivery: Delivery) -> bytes:
    """A message's identity across deliveries: its topic and payload."""
    digest = hashlib.blake2b(delivery.topic.encode(), digest_size=16)
    digest.update(delivery.payload)
    return digest.digest()
