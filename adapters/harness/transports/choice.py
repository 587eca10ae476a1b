"""Choosing a transport from a monitor's URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from adapters.harness.transports.base import Transport
from adapters.harness.transports.http import HttpTransport
from adapters.harness.transports.mqtt import MqttTransport


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
    """
    scheme = urlsplit(url).scheme
    if scheme in ("http", "https"):
        return HttpTransport(
            url, token=token, timeout_s=timeout_s, check_timeout_s=check_timeout_s
        )
    if scheme in ("mqtt", "mqtts"):
        return MqttTransport(url, topic_prefix=topic_prefix)
    raise ValueError(f"monitor url must be http(s):// or mqtt(s)://; got {url!r}")
