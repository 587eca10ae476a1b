"""The aiomqtt client for the settings: TLS, credentials, MQTT 5 session."""

from __future__ import annotations

import ssl

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from monitor.config import MqttSettings

_NEVER_EXPIRES = 0xFFFFFFFF


def _tls(settings: MqttSettings) -> aiomqtt.TLSParameters | None:
    if not settings.uses_tls:
        return None
    return aiomqtt.TLSParameters(
        ca_certs=settings.tls_ca_file,
        certfile=settings.tls_cert_file,
        keyfile=settings.tls_key_file,
        cert_reqs=ssl.CERT_REQUIRED,
    )


def aiomqtt_client(
    settings: MqttSettings, identifier: str, persistent: bool
) -> aiomqtt.Client:
    connect = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    # A persistent session outlives the connection, as in MQTT 3.1.1.
    connect.SessionExpiryInterval = _NEVER_EXPIRES if persistent else 0
    return aiomqtt.Client(
        settings.host,
        settings.port,
        username=settings.username,
        password=settings.password,
        identifier=identifier,
        protocol=aiomqtt.ProtocolVersion.V5,
        clean_start=not persistent,
        properties=connect,
        keepalive=settings.keepalive_s,
        tls_params=_tls(settings),
    )
