"""The HTTP transport: the service's HTTP API through httpx.

httpx stops here: :meth:`HttpTransport._request` is the one place its
exceptions and the HTTP statuses become monitor errors.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Final, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from pydantic import TypeAdapter, ValidationError

from adapters.harness.transports.base import (
    MonitorUnavailableError,
    NotAMonitorError,
    RequestRejectedError,
    check_run,
    encode,
)
from monitor.errors import ConfigError, UnknownRunError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent, plan_from

log = logging.getLogger(__name__)
Result = TypeVar("Result")

_NEXT_ITEMS: Final = TypeAdapter(list[NextItem])


class HttpTransport:
    """The service's HTTP API (``scorio-monitor serve``), through httpx.

    Args:
        url: The service's base URL, e.g. ``http://127.0.0.1:8000``.
        token: Bearer token for the write routes, if the service has one.
        timeout_s: Time limit of one request.
        check_timeout_s: Time limit of the first contact (:meth:`check`):
            a monitor that is there answers it in milliseconds, so one that
            takes longer is taken for away rather than waited for.
        on_refused: Told the run, the count and the distinct reasons when
            the service takes a batch but refuses some of its trials, instead
            of a warning logged per batch (a caller that totals them up).

    Raises:
        ValueError: for a URL that is not ``http(s)://host[:port]``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        check_timeout_s: float = 1.0,
        on_refused: Callable[[str, int, list[str]], None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must look like http://host:port; got {url!r}")
        self._url = url.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        self._check_timeout_s = min(check_timeout_s, timeout_s)
        self._on_refused = on_refused
        self._http: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return self._url

    async def __aenter__(self) -> HttpTransport:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        make = functools.partial(
            httpx.AsyncClient,
            base_url=self._url,
            headers=headers,
            # A monitor that is away must not hold the harness up: connecting
            # to one that is there takes milliseconds.
            timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 1.0)),
        )
        if urlsplit(self._url).scheme == "http":
            # No TLS here: skip loading the CA bundle, which costs the event
            # loop 50 ms or more per client.
            self._http = make(verify=False)
        else:
            self._http = await asyncio.to_thread(make)
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

    async def check(self) -> None:
        where = f"GET {self._url}/healthz"
        try:
            response = await self._request(
                "GET", "/healthz", None, timeout_s=self._check_timeout_s
            )
        except RequestRejectedError as exc:
            raise NotAMonitorError(
                self._not_a_monitor(f"{where} answered {exc}")
            ) from exc
        answer = _json(response)
        if not isinstance(answer, dict) or answer.get("status") != "ok":
            raise NotAMonitorError(
                self._not_a_monitor(f"{where} answered {response.text[:100]!r}")
            )

    def _not_a_monitor(self, what: str) -> str:
        return (
            f"{self._url} is not a scorio monitor ({what}); give the service's "
            "base URL, e.g. http://127.0.0.1:8000, without a path"
        )

    async def config(self, run: str) -> RunConfig:
        response = await self._request("GET", f"{_run_path(run)}/config", run)
        return _parsed(RunConfig.model_validate_json, response)

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        response = await self._request(
            "POST", f"{_run_path(run)}/trials", run, content=encode(events)
        )
        answer = _json(response)
        rejected = answer.get("rejected") if isinstance(answer, dict) else None
        if isinstance(rejected, list) and rejected:
            # One line per batch, each reason once: not one per trial.
            count = answer.get("rejected_count") if isinstance(answer, dict) else None
            refused = count if isinstance(count, int) else len(rejected)
            reasons = list(
                dict.fromkeys(
                    str(item.get("reason")) if isinstance(item, dict) else str(item)
                    for item in rejected
                )
            )
            if self._on_refused is not None:
                self._on_refused(run, refused, reasons)
                return
            log.warning(
                "%s refused %d trials of run %r: %s",
                self._url,
                refused,
                run,
                "; ".join(reasons),
            )

    async def status(self, run: str) -> Status:
        response = await self._request("GET", f"{_run_path(run)}/status", run)
        return _parsed(Status.model_validate_json, response)

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        # A reservation is a write: POST with a JSON body (GET only previews).
        ask: dict[str, int | float | str] = {"budget": budget, "lease_s": lease_s}
        if model is not None:
            ask["model"] = model
        response = await self._request(
            "POST", f"{_run_path(run)}/next", run, content=json.dumps(ask).encode()
        )
        items = _parsed(_NEXT_ITEMS.validate_json, response)
        # Why not more (waiting_for, stable) rides in headers; a monitor
        # that sends none gives a plan without reasons.
        return _parsed(lambda _: plan_from(items, response.headers), response)

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
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """The one place httpx's errors and HTTP statuses become monitor errors."""
        if self._http is None:
            raise RuntimeError("enter the transport (async with) before using it")
        headers = {"Content-Type": "application/json"} if content is not None else {}
        try:
            response = await self._http.request(
                method,
                path,
                content=content,
                params=params,
                headers=headers,
                timeout=(
                    httpx.USE_CLIENT_DEFAULT
                    if timeout_s is None
                    else httpx.Timeout(timeout_s)
                ),
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
    if not isinstance(answer, dict):
        return response.text[:300] or response.reason_phrase
    rejected = answer.get("rejected")
    if isinstance(rejected, list) and rejected:
        # A refused batch lists a reason per trial, mostly the same one.
        reasons = [
            str(item.get("reason")) if isinstance(item, dict) else str(item)
            for item in rejected
        ]
        count = answer.get("rejected_count")
        total = count if isinstance(count, int) else len(reasons)
        return "; ".join(dict.fromkeys(reasons)) + f" ({total} trials)"
    if isinstance(answer.get("detail"), str):
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
