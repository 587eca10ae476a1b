"""``serve``: the asyncio service with the sources, store and outputs of a config.

With an MQTT source, HTTP (``/healthz`` included) is answered only once the
source first subscribed, or after ``SUBSCRIBE_AT_START_S`` without a broker:
until then the broker drops the trials published for this worker, so a
producer that waits for ``/healthz`` before publishing would lose them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Final

import uvicorn

from adapters.mqtt import MqttPublisher, MqttSource
from adapters.prometheus import metrics_renderer
from adapters.redis import RedisStore, RedisStreamSource
from adapters.webhooks import Target, WebhookPublisher
from monitor.cli.common import configure_runs, listening_socket
from monitor.config import (
    ServiceConfig,
    StoreSettings,
    load_service_config,
)
from monitor.engine.monitor import Monitor
from monitor.http.app import create_app
from monitor.http.connections import (
    AcceptErrorLog,
    deepen_listen_queue,
    server_config,
)
from monitor.interfaces import Publisher, Store, TrialSource
from monitor.service.service import Service
from monitor.stores.factory import MEMORY, StoreOptions, open_store

log = logging.getLogger(__name__)

# How long serve waits at start for its MQTT source's first subscription
# before it answers HTTP anyway (a broker that is down or slow).
SUBSCRIBE_AT_START_S: Final = 10.0
_POLL_S: Final = 0.01


def run_serve(arguments: argparse.Namespace) -> int:
    config = load_service_config(arguments.config, os.environ)
    # Bound before anything starts: a busy port fails here, in one line.
    sock = listening_socket(config.http.host, config.http.port)
    logging.basicConfig(
        level=os.environ.get("SCORIO_MONITOR_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The event loop, the engine thread and the parse thread share the GIL;
    # a thread that wants it waits up to this long for a busy one to let go
    # (5 ms by default), several times per request under load.
    sys.setswitchinterval(0.001)
    with sock:
        asyncio.run(_serve(config, sock))
    return 0


async def _serve(config: ServiceConfig, sock: socket.socket) -> None:
    monitor = Monitor(
        _store(config.store), max_undeclared_runs=config.max_undeclared_runs
    )
    try:
        configure_runs(
            monitor,
            config.runs,
            "point [store] at a new state (another path or key prefix), or "
            "declare the run under another id",
        )
    except BaseException:
        monitor.close()
        raise
    sources: list[TrialSource] = []
    publishers: list[Publisher] = []
    mqtt_source: MqttSource | None = None
    if config.mqtt is not None:
        mqtt_source = MqttSource(config.mqtt)
        sources.append(mqtt_source)
        publishers.append(MqttPublisher(config.mqtt))
    if config.redis_stream is not None:
        sources.append(RedisStreamSource(config.redis_stream))
    publishers.append(
        WebhookPublisher(
            [Target.from_settings(settings) for settings in config.webhooks],
            lambda run: monitor.config(run).webhooks if run in monitor.runs else (),
        )
    )
    store = monitor.store
    service = Service(
        monitor,
        sources,
        publishers,
        status_interval_s=config.status_interval_s,
        look_interval_s=config.look_interval_s,
        # Workers on one Redis take turns: statuses as often as one worker's.
        status_turn=store.status_turn if isinstance(store, RedisStore) else None,
    )
    async with service:
        app = create_app(
            service, config.http, metrics_renderer(lambda: service.snapshot)
        )
        # Announced first, then what the server config may log (a lowered
        # connection cap); the bound socket already queues connections.
        print(
            f"scorio-monitor: serving http://{config.http.listen} "
            f"(store {config.store.kind}"
            + (f", mqtt {config.mqtt.host}:{config.mqtt.port}" if config.mqtt else "")
            + (", redis streams" if config.redis_stream else "")
            + ")",
            file=sys.stderr,
            flush=True,
        )
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        server = uvicorn.Server(
            server_config(app, config.http, config.http.host, config.http.port)
        )
        # What exists now (modules, classes, functions: 100,000+ objects) lives
        # as long as the process: frozen, a full garbage collection no longer
        # walks it. Unfrozen, each full collection stopped every thread for
        # 130-240 ms under hostile load (gc.callbacks), the tail of the
        # requests' latency.
        gc.collect()
        gc.freeze()

        def stop(signum: int, frame: FrameType | None) -> None:
            server.should_exit = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

        async def stop_on_failure() -> None:
            await service.failed()
            server.should_exit = True

        watcher = asyncio.create_task(stop_on_failure())
        deepen = asyncio.create_task(deepen_listen_queue(server, sock))
        try:
            if mqtt_source is not None:
                await _until_subscribed(mqtt_source, server)
            await server.serve(sockets=[sock])
        finally:
            watcher.cancel()
            deepen.cancel()
    if service.failure is not None:
        raise service.failure


async def _until_subscribed(source: MqttSource, server: uvicorn.Server) -> None:
    """Wait until ``source`` first subscribed or ``server`` should exit.

    Gives up with a warning after ``SUBSCRIBE_AT_START_S`` (a broker down
    or slow at start). Meanwhile the listening socket queues clients.
    """
    try:
        async with asyncio.timeout(SUBSCRIBE_AT_START_S):
            while not (source.is_subscribed or server.should_exit):
                await asyncio.sleep(_POLL_S)
    except TimeoutError:
        log.warning(
            "the MQTT source has not subscribed after %.0f s (is the broker "
            "up?); serving HTTP anyway, but the broker drops the trials "
            "published before the source first subscribes",
            SUBSCRIBE_AT_START_S,
        )


def _store(settings: StoreSettings) -> Store:
    options = StoreOptions(
        prefix=settings.prefix,
        cluster=settings.cluster,
        synchronous=settings.synchronous,
        dead_letters_max=settings.dead_letters_max,
        dead_letters_max_age_s=settings.dead_letters_max_age_s,
    )
    if settings.kind == "memory":
        return open_store(MEMORY, options)
    if settings.kind == "redis" and settings.url is not None:
        return open_store(settings.url, options)
    return open_store(Path(settings.path), options)
