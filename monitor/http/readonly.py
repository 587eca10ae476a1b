"""An ASGI guard that refuses every write: the API of ``scorio-monitor view``."""

from __future__ import annotations

import json
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


class ReadOnly:
    """Answers any request but a read with 405 and why, before the app sees it."""

    def __init__(self, app: ASGIApp, reason: str) -> None:
        self._app = app
        self._body = json.dumps({"detail": reason}).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READS:
            await self._app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 405,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(self._body)).encode()),
                    (b"allow", b"GET, HEAD, OPTIONS"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self._body})
