"""A monitor that hangs: a server that accepts connections and never answers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def hung_server() -> Iterator[str]:
    """A server that accepts every connection and never answers; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = listener.accept()
                held.append(connection)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, name="hung-monitor", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        listener.close()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
