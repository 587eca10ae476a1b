"""Choosing a transport from a monitor's URL.

Each transport's module is imported here, when its scheme is chosen: its
library comes with an extra (httpx with ``[client]``, aiomqtt with
``[mqtt]``), and an install without one must still load the others.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from adapters.harness.transports.base import Transport

# The extra that brings each scheme's transport library.
EXTRA_OF_SCHEME: Final = {
    "http": "client",
    "https": "client",
    "mqtt": "mqtt",
    "mqtts": "mqtt",
}


def transport_for(
    url: str,
    *,
    token: str | None = None,
    topic_prefix: str = "scorio",
    timeout_s: float = 10.0,
    check_timeout_s: float = 1.0,
) -> Transport:
    """An HTTP transport for ``http(s)://``, an MQTT one for ``mqtt(s)://``.

    ``timeout_s`` and ``check_timeout_s`` bound an HTTP request and the
    first contact (see :class:`HttpTransport`).

    Raises:
        ValueError: for any other URL.
        ModuleNotFoundError: when the scheme's library is not installed
            (:data:`EXTRA_OF_SCHEME` names the extra that brings it).
    """
    scheme = urlsplit(url).scheme
    if scheme in ("http", "https"):
        from adapters.harness.transports.http import HttpTransport

        return HttpTransport(
            url, token=token, timeout_s=timeout_s, check_timeout_s=check_timeout_s
        )
    if scheme in ("mqtt", "mqtts"):
        from adapters.harness.transports.mqtt import MqttTransport

        return MqttTransport(url, topic_prefix=topic_prefix)
    raise ValueError(f"monitor url must be http(s):// or mqtt(s)://; got {url!r}")
