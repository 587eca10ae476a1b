"""Transports: the ways a harness client reaches a monitor, behind one interface.

A transport does one attempt of each operation and says whether a failure is
worth another (:class:`MonitorUnavailableError`) or not (any other
:class:`~monitor.errors.MonitorError`); batching and retries belong to the
client (:mod:`adapters.harness.client`). Three transports:

- :class:`HttpTransport`: the service's HTTP API, through httpx;
- :class:`MqttTransport`: trials published at QoS 1 on
  ``{prefix}/{run}/trials``, statuses read from the retained
  ``{prefix}/{run}/status`` topics, through aiomqtt; it cannot plan or
  declare runs (those need HTTP or an embedded monitor);
- :class:`EmbeddedTransport`: a :class:`monitor.Monitor` in this process.

httpx and aiomqtt stop here: each has one place that turns its exceptions
into monitor errors::

    MonitorError (monitor.errors)
    ├── UnknownRunError          the monitor does not know the run
    ├── ConfigError              a run declaration was refused
    ├── MonitorUnavailableError  no connection, a timeout, HTTP 408, 429 or 5xx
    └── RequestRejectedError     any other refusal, or an unreadable answer
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Final, Protocol, TypeVar
from urllib.parse import quote, urlsplit

import aiomqtt
import httpx
from pydantic import TypeAdapter, ValidationError

from monitor.config import MqttSettings
from monitor.engine.monitor import Monitor
from monitor.errors import ConfigError, MonitorError, StoreError, UnknownRunError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent
from monitor.stores.records import IngestReport

log = logging.getLogger(__name__)
Result = TypeVar("Result")

_NEXT_ITEMS: Final = TypeAdapter(list[NextItem])
# A run id becomes one URL path segment and one MQTT topic level.
RESERVED_IN_RUN: Final = frozenset("/+#")


class MonitorUnavailableError(MonitorError):
    """The monitor could not be reached, or answered "try again later".

    A transport raises it for one failed attempt; the client retries, and
    raises it itself once ``attempts`` attempts have failed.
    """

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class RequestRejectedError(MonitorError):
    """The monitor refused a request, or answered something unreadable.

    Not retried: sending the same request again gets the same answer.
    ``status`` is the HTTP status (``None`` off HTTP); ``detail`` is the
    monitor's reason.
    """

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail if status is None else f"HTTP {status}: {detail}")
        self.detail = detail
        self.status = status


class Transport(Protocol):
    """One way to reach a monitor; entered around its use by one client."""

    @property
    def name(self) -> str:
        """Where it goes, for log messages."""
        ...

    async def __aenter__(self) -> Transport: ...

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        """Deliver one batch of a run's trials (one request or message)."""
        ...

    async def status(self, run: str) -> Status:
        """The run's status."""
        ...

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        """Reserve ``budget`` trials for ``lease_s`` seconds (0: plan only)."""
        ...

    async def declare(self, config: RunConfig) -> RunConfig:
        """Declare (or update) a run."""
        ...

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        """Give back reserved trials that will not run."""
        ...


def check_run(run: str) -> str:
    """``run`` if a transport can carry it, else ValueError."""
    if RESERVED_IN_RUN.intersection(run):
        raise ValueError(f"run must not contain '/', '+' or '#'; got {run!r}")
    return run


def encode(events: Sequence[TrialEvent]) -> bytes:
    """A batch on the wire: a JSON array of trial events."""
    return b"[%b]" % b",".join(
        event.model_dump_json(exclude_none=True).encode() for event in events
    )


# -- HTTP ------------------------------------------------------------------


class HttpTransport:
    """The service's HTTP API (``scorio-monitor serve``), through httpx.

    Args:
        url: The service's base URL, e.g. ``http://127.0.0.1:8000``.
        token: Bearer token for the write routes, if the service has one.
        timeout_s: Time limit of one request.

    Raises:
        ValueError: for a URL that is not ``http(s)://host[:port]``.
    """

    def __init__(
        self, url: str, *, token: str | None = None, timeout_s: float = 10.0
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must look like http://host:port; got {url!r}")
        self._url = url.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        self._http: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return self._url

    async def __aenter__(self) -> HttpTransport:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        self._http = httpx.AsyncClient(
            base_url=self._url,
            headers=headers,
            # A monitor that is away must not hold the harness up: connecting
            # to one that is there takes milliseconds.
            timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 1.0)),
        )
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        response = await self._request(
            "POST", f"{_run_path(run)}/trials", run, content=encode(events)
        )
        answer = _json(response)
        rejected = answer.get("rejected") if isinstance(answer, dict) else None
        for item in rejected if isinstance(rejected, list) else []:
            reason = item.get("reason") if isinstance(item, dict) else item
            log.warning("%s refused a trial of run %r: %s", self._url, run, reason)

    async def status(self, run: str) -> Status:
        response = await self._request("GET", f"{_run_path(run)}/status", run)
        return _parsed(Status.model_validate_json, response)

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        params: dict[str, int | float | str] = {"budget": budget, "lease_s": lease_s}
        if model is not None:
            params["model"] = model
        response = await self._request(
            "GET", f"{_run_path(run)}/next", run, params=params
        )
        return _parsed(_NEXT_ITEMS.validate_json, response)

    async def declare(self, config: RunConfig) -> RunConfig:
        response = await self._request(
            "POST", "/runs", None, content=config.model_dump_json().encode()
        )
        return _parsed(RunConfig.model_validate_json, response)

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        body = _NEXT_ITEMS.dump_json(list(items))
        response = await self._request(
            "POST", f"{_run_path(run)}/release", run, content=body
        )
        answer = _json(response)
        released = answer.get("released") if isinstance(answer, dict) else None
        return released if isinstance(released, int) else 0

    async def _request(
        self,
        method: str,
        path: str,
        run: str | None,
        *,
        content: bytes | None = None,
        params: dict[str, int | float | str] | None = None,
    ) -> httpx.Response:
        """The one place httpx's errors and HTTP statuses become monitor errors."""
        if self._http is None:
            raise RuntimeError("enter the transport (async with) before using it")
        headers = {"Content-Type": "application/json"} if content is not None else {}
        try:
            response = await self._http.request(
                method, path, content=content, params=params, headers=headers
            )
        except httpx.HTTPError as exc:
            raise MonitorUnavailableError(
                f"{method} {self._url}{path} failed: {exc!r}"
            ) from exc
        code = response.status_code
        if response.is_success:
            return response
        detail = _detail(response)
        if code == 404 and run is not None and detail.startswith("unknown run"):
            raise UnknownRunError(run)
        if code in (408, 429) or code >= 500:
            raise MonitorUnavailableError(f"{self._url} answered {code}: {detail}")
        if code in (409, 422) and run is None:
            raise ConfigError(detail)
        raise RequestRejectedError(detail, code)


def _run_path(run: str) -> str:
    return f"/runs/{quote(check_run(run), safe='')}"


def _json(response: httpx.Response) -> object:
    try:
        answer: object = response.json()
    except ValueError:
        return None
    return answer


def _detail(response: httpx.Response) -> str:
    answer = _json(response)
    if isinstance(answer, dict) and isinstance(answer.get("detail"), str):
        return str(answer["detail"])
    return response.text[:300] or response.reason_phrase


def _parsed(parse: Callable[[bytes], Result], response: httpx.Response) -> Result:
    try:
        return parse(response.content)
    except ValidationError as exc:
        raise RequestRejectedError(
            f"unexpected answer from {response.request.url}: {exc}",
            response.status_code,
        ) from exc


# -- MQTT ------------------------------------------------------------------


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


# -- embedded --------------------------------------------------------------


class EmbeddedTransport:
    """A :class:`monitor.Monitor` in this process (tests, single-machine runs).

    Engine calls run on a worker thread, one at a time, so a slow store
    does not stall the event loop. The caller keeps owning the monitor: it
    closes it, and does not use it from another thread meanwhile.
    """

    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return "embedded"

    async def __aenter__(self) -> EmbeddedTransport:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        check_run(run)
        report = await self._call(
            functools.partial(self._monitor.ingest, list(events), source="client")
        )
        _check_report(report, run)

    async def status(self, run: str) -> Status:
        return await self._call(functools.partial(self._monitor.status, run))

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        return await self._call(
            functools.partial(
                self._monitor.next, run, budget, lease_s=lease_s, model=model
            )
        )

    async def declare(self, config: RunConfig) -> RunConfig:
        return await self._call(functools.partial(self._monitor.configure, config))

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        return await self._call(
            functools.partial(self._monitor.release, run, list(items))
        )

    async def _call(self, function: Callable[[], Result]) -> Result:
        async with self._lock:
            try:
                return await asyncio.to_thread(function)
            except StoreError as exc:
                raise MonitorUnavailableError(f"the state store failed: {exc}") from exc


def _check_report(report: IngestReport, run: str) -> None:
    """Log refused trials; raise when the whole batch was refused (as HTTP does)."""
    for rejection in report.rejected:
        log.warning("the monitor refused a trial of run %r: %s", run, rejection.reason)
    if report.rejected and not (
        report.accepted or report.duplicates or report.corrections
    ):
        raise RequestRejectedError(
            "; ".join(rejection.reason for rejection in report.rejected)
        )
