"""The MQTT transport: trials published at QoS 1, statuses from retained topics.

Trials go to ``{prefix}/{run}/trials`` and statuses are read from the
retained ``{prefix}/{run}/status`` topics, through aiomqtt; it cannot plan or
declare runs (those need HTTP or an embedded monitor). aiomqtt stops here:
:meth:`MqttTransport._translated` is the one place its errors become monitor
errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from types import TracebackType

import aiomqtt
from pydantic import ValidationError

from adapters.harness.transports.base import (
    MonitorUnavailableError,
    check_run,
    encode,
)
from monitor.config import MqttSettings
from monitor.errors import UnknownRunError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent

log = logging.getLogger(__name__)


class MqttTransport:
    """Trials to MQTT at QoS 1; statuses from the retained status topics.

    Connects on first use, and again after the connection dropped (the
    client's retries drive that). A publish returns once the broker
    acknowledged it. ``status`` subscribes to the run's retained status
    topic once and then answers with the newest status received.

    Args:
        url: ``mqtt://[user:password@]host[:port]`` (or ``mqtts://``).
        topic_prefix: The service's ``[mqtt] topic_prefix``.
        status_timeout_s: How long ``status`` waits for a run's first status
            before it calls the run unknown (the service publishes one,
            retained, for every run it knows).
        identifier: The MQTT client id; a random one by default.
        tls_ca_file: A CA bundle for ``mqtts://`` brokers.

    Raises:
        ValueError: for a URL that is not ``mqtt(s)://host[:port]``.
    """

    def __init__(
        self,
        url: str,
        *,
        topic_prefix: str = "scorio",
        status_timeout_s: float = 5.0,
        identifier: str | None = None,
        tls_ca_file: str | None = None,
    ) -> None:
        try:
            self._settings = MqttSettings(
                url=url, topic_prefix=topic_prefix, tls_ca_file=tls_ca_file
            )
        except ValidationError as exc:
            raise ValueError(str(exc)) from exc
        self._status_timeout_s = status_timeout_s
        self._identifier = identifier
        self._client: aiomqtt.Client | None = None
        self._reader: asyncio.Task[None] | None = None
        self._group: asyncio.TaskGroup | None = None
        self._statuses: dict[str, Status] = {}
        self._arrived: dict[str, asyncio.Event] = {}

    @property
    def name(self) -> str:
        return f"mqtt://{self._settings.host}:{self._settings.port}"

    async def __aenter__(self) -> MqttTransport:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._disconnect()
        if self._group is not None:
            await self._group.__aexit__(None, None, None)
            self._group = None

    async def check(self) -> None:
        # A broker cannot say whether a monitor reads its topics: connect only.
        async with self._translated("connecting"):
            await self._connected()

    async def config(self, run: str) -> RunConfig:
        raise NotImplementedError(
            "reading a run's config needs the HTTP API or an embedded monitor"
        )

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        topic = self._topic(run, "trials")
        async with self._translated(f"publishing to {topic}"):
            client = await self._connected()
            await client.publish(topic, encode(events), qos=1)

    async def status(self, run: str) -> Status:
        topic = self._topic(run, "status")
        async with self._translated(f"subscribing to {topic}"):
            client = await self._connected()
            if run not in self._arrived:
                self._arrived[run] = asyncio.Event()
                await client.subscribe(topic, qos=1)
        try:
            async with asyncio.timeout(self._status_timeout_s):
                await self._arrived[run].wait()
        except TimeoutError:
            if self._reader is None or self._reader.done():
                await self._disconnect()
                raise MonitorUnavailableError(
                    f"{self.name}: the connection dropped while waiting for {topic}"
                ) from None
            raise UnknownRunError(run) from None
        return self._statuses[run]

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        raise NotImplementedError(
            "next needs the HTTP API or an embedded monitor; MQTT carries trials "
            "and statuses only"
        )

    async def declare(self, config: RunConfig) -> RunConfig:
        raise NotImplementedError(
            "declaring a run needs the HTTP API or an embedded monitor"
        )

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        raise NotImplementedError(
            "releasing reservations needs the HTTP API or an embedded monitor"
        )

    def _topic(self, run: str, kind: str) -> str:
        return f"{self._settings.topic_prefix}/{check_run(run)}/{kind}"

    @contextlib.asynccontextmanager
    async def _translated(self, action: str) -> AsyncIterator[None]:
        """The one place aiomqtt's errors become monitor errors."""
        try:
            yield
        except aiomqtt.MqttError as exc:
            await self._disconnect()
            raise MonitorUnavailableError(
                f"{self.name}: {action} failed: {exc}"
            ) from exc

    async def _connected(self) -> aiomqtt.Client:
        if self._client is not None:
            return self._client
        if self._group is None:
            raise RuntimeError("enter the transport (async with) before using it")
        settings = self._settings
        client = aiomqtt.Client(
            settings.host,
            settings.port,
            username=settings.username,
            password=settings.password,
            identifier=self._identifier,
            tls_params=(
                aiomqtt.TLSParameters(
                    ca_certs=settings.tls_ca_file, cert_reqs=ssl.CERT_REQUIRED
                )
                if settings.uses_tls
                else None
            ),
        )
        await client.__aenter__()
        self._client = client
        for run in self._arrived:
            await client.subscribe(self._topic(run, "status"), qos=1)
        self._reader = self._group.create_task(
            self._read_statuses(client), name="mqtt-status-reader"
        )
        return client

    async def _read_statuses(self, client: aiomqtt.Client) -> None:
        try:
            async for message in client.messages:
                self._keep_status(message.topic.value, message.payload)
        except aiomqtt.MqttError as exc:
            # The next operation notices the loss and reconnects.
            log.info("%s: status subscription ended: %s", self.name, exc)

    def _keep_status(self, topic: str, payload: object) -> None:
        run = topic.rsplit("/", 2)[-2]
        data = payload if isinstance(payload, bytes | bytearray | str) else b""
        try:
            status = Status.model_validate_json(data)
        except ValidationError as exc:
            log.warning("%s: unreadable status on %s: %s", self.name, topic, exc)
            return
        self._statuses[run] = status
        self._arrived.setdefault(run, asyncio.Event()).set()

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if client is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(None, None, None)
