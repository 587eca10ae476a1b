"""The HTTP server's connections: slow and idle clients cannot crowd others out.

uvicorn bounds the size of a request's head (``h11_max_incomplete_event_size``)
and closes idle kept-alive connections (``timeout_keep_alive``), but has no
limit on the time a request's head takes: its keep-alive timer stops at the
first byte, and nothing times a connection that sends nothing. Its
``limit_concurrency`` answers 503 only once a request arrives, while the idle
connections that filled the server stay open. So the protocol here adds, to
uvicorn's own h11 protocol:

- a deadline for each request's head: ``header_timeout_s`` from the
  connection opening, or from the first byte of a later request on it; then
  a 408 and the connection closes;
- a cap on open connections, kept below the open-file limit: past it, a
  connection of the client (address) holding the most is closed to admit
  the new one, the one of them that has waited longest for a request's head
  (or sat idle longest between requests); when all of that client's
  connections are busy with requests, the new one gets a 503. One client
  opening connections without end so only ever closes its own.

A request's body has its own deadline (``BodyLimit``, 408). Also here: the
soft open-file limit raised to the hard one at start, and accept() errors
logged once per burst instead of once per attempt.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from monitor.config import HttpSettings

log = logging.getLogger(__name__)

# File descriptors kept free of connections: the store, logs, webhooks'
# and brokers' sockets.
RESERVED_FILES: Final = 64
MIN_CONNECTIONS: Final = 16
# The largest request head (line and headers) a client may send.
MAX_HEAD_BYTES: Final = 16 * 1024
_HEAD_END: Final = b"\r\n\r\n"
LISTEN_QUEUE: Final = 4096
# What asyncio reports when accept() fails for want of file descriptors: the
# failure, once per connection it tried to accept in that turn, and each
# retry it scheduled for them that fails in turn.
_ACCEPT_MESSAGES: Final = (
    "socket.accept()",
    "Exception in callback BaseSelectorEventLoop._start_serving",
)


def raise_open_file_limit() -> int:
    """Raise the soft limit on open files to the hard one; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and wanted > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def accept_backlog(open_files: int) -> int:
    """The listen backlog, which is also how many connections asyncio accepts
    in one go before any of them runs (and before one can be closed for it)."""
    return max(16, min(2048, open_files // 16))


def connection_limit(configured: int, open_files: int) -> int:
    """``configured``, lowered to leave ``RESERVED_FILES`` of ``open_files``
    and room for the batches of accepted connections that come in before the
    connections they replace are closed (a few loop turns: four batches)."""
    room = open_files - RESERVED_FILES - 4 * accept_backlog(open_files)
    return max(MIN_CONNECTIONS, min(configured, room))


def server_config(
    app: Any, settings: HttpSettings, host: str, port: int
) -> uvicorn.Config:
    """uvicorn's config for ``app`` with the connection limits of ``settings``.

    Raises the open-file limit first (see :func:`raise_open_file_limit`).
    """
    open_files = raise_open_file_limit()
    limit = connection_limit(settings.max_connections, open_files)
    if limit < settings.max_connections:
        log.warning(
            "at most %d open connections (max_connections %d): the open-file "
            "limit leaves no more",
            limit,
            settings.max_connections,
        )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=guarded_protocol(settings.header_timeout_s, limit),
        timeout_keep_alive=settings.keep_alive_s,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        backlog=accept_backlog(open_files),
        # A client is the address it connects from: X-Forwarded-For would let
        # any local client pick its own (and so a fresh allowance).
        proxy_headers=False,
    )


async def deepen_listen_queue(server: uvicorn.Server, sock: socket.socket) -> None:
    """Once ``server`` serves ``sock``, give the kernel's queue of connections
    not yet accepted its full depth again.

    asyncio listens with the backlog it was given, which is also how many
    connections it accepts in one go (kept small, see :func:`accept_backlog`);
    a shallow kernel queue drops new connections' SYNs under a flood, and
    their clients wait a second or more to try again.
    """
    while not server.started:
        if server.should_exit:
            return
        await asyncio.sleep(0.01)
    sock.listen(LISTEN_QUEUE)


class _Connections:
    """The open connections of one server: how many each client holds, and
    those awaiting a head (or idle), oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.per_client: collections.Counter[str] = collections.Counter()
        self.waiting: dict[str, OrderedDict[GuardedH11, None]] = {}

    def wait(self, connection: GuardedH11, client: str) -> None:
        waiting = self.waiting.setdefault(client, OrderedDict())
        waiting.pop(connection, None)
        waiting[connection] = None

    def done_waiting(self, connection: GuardedH11, client: str) -> None:
        waiting = self.waiting.get(client)
        if waiting is not None:
            waiting.pop(connection, None)
            if not waiting:
                del self.waiting[client]

    def to_close(self) -> GuardedH11 | None:
        """The waiting connection of the client holding the most, oldest first."""
        heaviest = max(self.per_client, key=self.per_client.__getitem__)
        waiting = self.waiting.get(heaviest)
        return next(iter(waiting)) if waiting else None


def guarded_protocol(header_timeout_s: float, limit: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a head deadline and a connection cap."""
    connections = _Connections(limit)

    class Guarded(GuardedH11):
        _timeout_s = header_timeout_s
        _connections = connections

    return Guarded


class GuardedH11(H11Protocol):
    """See the module docstring; made per server by :func:`guarded_protocol`."""

    _timeout_s: float
    _connections: _Connections

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._guard_transport = transport
        self._guard_timer: asyncio.TimerHandle | None = None
        self._guard_tail = b""
        self._guard_state = "head"
        peer = transport.get_extra_info("peername")
        self._guard_client = str(peer[0]) if isinstance(peer, tuple) else ""
        connections = self._connections
        connections.count += 1
        connections.per_client[self._guard_client] += 1
        self._guard_refused = False
        if connections.count > connections.limit:
            victim = connections.to_close()
            if victim is not None:
                victim._guard_close(None)
            else:
                self._guard_refused = True
                self._guard_close(
                    "503 Service Unavailable",
                    "every connection is busy with a request (max_connections)",
                )
                return
        super().connection_made(transport)
        self._guard_await_head()

    def data_received(self, data: bytes) -> None:
        if self._guard_refused:
            return
        if self._guard_state == "idle":
            self._guard_await_head()
        if self._guard_state == "head":
            seen = self._guard_tail + data
            if _HEAD_END in seen:
                self._guard_stop_waiting()
                self._guard_state = "request"
            else:
                self._guard_tail = seen[-(len(_HEAD_END) - 1) :]
        super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Idle until the next request's first byte: uvicorn's keep-alive
        # timer runs meanwhile, and this connection may be closed for a
        # newer one.
        self._guard_state = "idle"
        self._connections.wait(self, self._guard_client)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard_stop_waiting()
        connections = self._connections
        connections.count -= 1
        connections.per_client[self._guard_client] -= 1
        if connections.per_client[self._guard_client] <= 0:
            del connections.per_client[self._guard_client]
        if not self._guard_refused:
            super().connection_lost(exc)

    def _guard_await_head(self) -> None:
        self._guard_state = "head"
        self._guard_tail = b""
        self._connections.wait(self, self._guard_client)
        if self._guard_timer is not None:
            self._guard_timer.cancel()
        self._guard_timer = asyncio.get_running_loop().call_later(
            self._timeout_s,
            self._guard_close,
            "408 Request Timeout",
            f"the request's head did not arrive within {self._timeout_s:g} s",
        )

    def _guard_stop_waiting(self) -> None:
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None
        self._connections.done_waiting(self, self._guard_client)

    def _guard_close(self, status: str | None, detail: str = "") -> None:
        """Close the connection, after a short answer when ``status`` is given."""
        self._guard_stop_waiting()
        transport = self._guard_transport
        if transport.is_closing():
            return
        if status is not None:
            body = json.dumps({"detail": detail}).encode()
            transport.write(
                f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
        transport.close()


class AcceptErrorLog:
    """An event-loop exception handler: accept() errors once per burst.

    Out of file descriptors, asyncio's server reports each failed accept();
    under a flood of connections that is thousands of tracebacks a second.
    The first of a burst is logged; the rest are counted and summed up in one
    line once ``quiet_s`` pass without one. Other errors go to the loop's
    default handler.
    """

    def __init__(
        self,
        quiet_s: float = 10.0,
        logger: logging.Logger = log,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._quiet_s = quiet_s
        self._log = logger
        self._clock = clock
        self._last = 0.0
        self._repeats = 0
        self._in_burst = False

    def __call__(
        self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]
    ) -> None:
        message = str(context.get("message", ""))
        if not message.startswith(_ACCEPT_MESSAGES):
            loop.default_exception_handler(context)
            return
        self._last = self._clock()
        if self._in_burst:
            self._repeats += 1
            return
        self._in_burst = True
        self._repeats = 0
        self._log.error(
            "%s: %r; further accept() errors are counted until %g s pass without one",
            message,
            context.get("exception"),
            self._quiet_s,
        )
        loop.call_later(self._quiet_s, self._summarize, loop)

    def _summarize(self, loop: asyncio.AbstractEventLoop) -> None:
        quiet_for = self._clock() - self._last
        if quiet_for < self._quiet_s:
            loop.call_later(self._quiet_s - quiet_for, self._summarize, loop)
            return
        self._in_burst = False
        if self._repeats:
            self._log.error("%d more accept() errors in that burst", self._repeats)
