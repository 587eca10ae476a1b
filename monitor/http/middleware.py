"""ASGI middleware of the HTTP API: the Host check and the request body limit.

:class:`HostCheck` answers 400 to a request whose ``Host`` is not a name of
this monitor, before any route runs: a page whose DNS name was rebound to
this machine's address still names its own host, and is refused.

A body over ``max_bytes`` is never buffered whole. Most routes answer 413
at once; the trial route (``POST /runs/{run}/trials``) is handed the
request with an empty body and the size it went over (see
:func:`scope_oversize`), so it refuses the input as every other source
refuses one too large to read: the same reason, a dead letter, the run's
rejected count. A body that does not arrive within ``timeout_s`` is a 408.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Where the route finds the size of a trial body over the limit.
_OVERSIZE_KEY: Final = "scorio_oversize"
_TRIALS_PATH: Final = re.compile(r"/runs/[^/]+/trials")


LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(netloc: str) -> str | None:
    """The host of ``host[:port]`` (lower case, no brackets), None if malformed."""
    try:
        parts = urlsplit("//" + netloc)
        parts.port  # noqa: B018 (a malformed port raises ValueError)
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return (parts.hostname or "").rstrip(".") or None


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(host: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether ``host`` (as :func:`host_name` gives it) names this monitor.

    IP literals and ``localhost`` always do: DNS rebinding needs a name the
    attacker controls. Other names must be in ``allowed_hosts`` (exact, or
    under a ``*.domain`` pattern, or ``*`` for any).
    """
    if host in LOOPBACK_NAMES or is_ip_literal(host):
        return True
    return any(
        pattern == "*"
        or host == pattern
        or (pattern.startswith("*.") and host.endswith(pattern[1:]))
        for pattern in allowed_hosts
    )


class HostCheck:
    """400 for a request whose ``Host`` header does not name this monitor."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self._app = app
        self._allowed = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or "*" in self._allowed:
            await self._app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        host = host_name(header)
        if host is None or not host_allowed(host, self._allowed):
            shown = header if len(header) <= 80 else header[:80] + "..."
            await _refuse(
                400,
                f"Host {shown!r} is not a name of this monitor: add it to "
                "[http] allowed_hosts (IP addresses and localhost need not be)",
                send,
            )
            return
        await self._app(scope, receive, send)


def scope_oversize(scope: Scope) -> int:
    """Bytes of a trial body the limit refused (0 when it was within)."""
    return int(scope.get(_OVERSIZE_KEY, 0))


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` (413, or the trial route's own).

    Checks ``Content-Length`` first, then counts what actually arrives (a
    chunked upload has no length), buffering at most ``max_bytes``.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self._app = app
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if (
            declared is not None
            and declared.isdigit()
            and int(declared) > self._max_bytes
        ):
            await self._refuse(int(declared), scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        deadline = asyncio.get_running_loop().time() + self._timeout_s
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                # The server closes the connection after this answer: the
                # rest of the body was never read.
                await _refuse(
                    408,
                    f"the request body did not arrive within {self._timeout_s:g} s",
                    send,
                )
                return
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_bytes:
                # A chunked upload's full size is unknown: what arrived says
                # at least how far over the limit it went.
                await self._refuse(size, scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self._app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(
        self, size: int, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if _TRIALS_PATH.fullmatch(scope["path"]):
            await self._app({**scope, _OVERSIZE_KEY: size}, _replay(b"", receive), send)
        else:
            await _too_large(self._max_bytes, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _too_large(limit: int, send: Send) -> None:
    await _refuse(413, f"request body exceeds {limit} bytes", send)


async def _refuse(status: int, detail: str, send: Send) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
