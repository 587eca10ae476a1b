"""ASGI middleware of the HTTP API: the request body limit.

A body over ``max_bytes`` is never buffered whole. Most routes answer 413
at once; the trial route (``POST /runs/{run}/trials``) is handed the
request with an empty body and the size it went over (see
:func:`scope_oversize`), so it refuses the input as every other source
refuses one too large to read: the same reason, a dead letter, the run's
rejected count.
"""

from __future__ import annotations

import json
import re
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Where the route finds the size of a trial body over the limit.
_OVERSIZE_KEY: Final = "scorio_oversize"
_TRIALS_PATH: Final = re.compile(r"/runs/[^/]+/trials")


def scope_oversize(scope: Scope) -> int:
    """Bytes of a trial body the limit refused (0 when it was within)."""
    return int(scope.get(_OVERSIZE_KEY, 0))


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` (413, or the trial route's own).

    Checks ``Content-Length`` first, then counts what actually arrives (a
    chunked upload has no length), buffering at most ``max_bytes``.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max_bytes = max_bytes

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
        while True:
            message = await receive()
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
    body = json.dumps({"detail": f"request body exceeds {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
