"""Configuration files: run declarations and the service config.

A run file holds one run's keys at the top level, or a ``[[runs]]`` array of
such tables. A service file (``serve --config``) has optional sections
``[store]``, ``[mqtt]``, ``[redis_stream]``, ``[http]`` and ``[[runs]]``
(docs/service.md). Errors name the file and the problem.
"""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import unquote, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from monitor.errors import ConfigError
from monitor.inputs.reasons import describe_validation_error
from monitor.limits import (
    DEAD_LETTERS_MAX,
    DEAD_LETTERS_MAX_AGE_S,
    MAX_UNDECLARED_RUNS,
)
from monitor.schema import RunConfig


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML document at ``path``; ConfigError when missing or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"no config file at {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


def load_run_configs(path: Path) -> list[RunConfig]:
    """All run configs of a TOML file.

    Raises:
        ConfigError: when the file is missing, is not TOML, or a run is invalid.
    """
    document = _read_toml(path)
    tables = document.get("runs")
    if tables is None:
        tables = [document]
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{path}: runs must be an array of tables ([[runs]])")
    configs = []
    for index, table in enumerate(tables):
        try:
            configs.append(RunConfig.model_validate(table))
        except ValidationError as exc:
            where = f"{path} [[runs]] #{index + 1}" if "runs" in document else str(path)
            raise ConfigError(f"{where}: {describe_validation_error(exc)}") from exc
    return configs


class StoreSettings(BaseModel):
    """``[store]``: where counts live (``sqlite`` by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["sqlite", "memory", "redis"] = "sqlite"
    path: str = "scorio-monitor.db"
    url: str | None = None
    # Redis Cluster: ``url`` names any node (docs/redis.md).
    cluster: bool = False
    prefix: str = "scorio"
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # Dead-letter retention: the newest this many, none older than this.
    dead_letters_max: Annotated[int, Field(ge=1)] = DEAD_LETTERS_MAX
    dead_letters_max_age_s: Annotated[float, Field(gt=0.0)] = DEAD_LETTERS_MAX_AGE_S

    @model_validator(mode="after")
    def _redis_needs_url(self) -> Self:
        if self.kind == "redis" and not self.url:
            raise ValueError("store kind redis needs url = redis://host:port/db")
        if self.cluster and self.kind != "redis":
            raise ValueError(f"cluster = true needs kind redis; got {self.kind!r}")
        return self


class MqttSettings(BaseModel):
    """``[mqtt]``: the MQTT source of trials and publisher of status and events."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    topic_prefix: str = "scorio"
    shared_group: str | None = None
    # "{hostname}" and "{pid}" are filled in; see ``persistent``.
    client_id: str = "scorio-monitor-{hostname}"
    max_batch: Annotated[int, Field(ge=1, le=10_000)] = 500
    keepalive_s: Annotated[int, Field(ge=5)] = 30
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    @field_validator("url")
    @classmethod
    def _mqtt_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise ValueError(
                f"mqtt url must look like mqtt://user:pass@host:1883; got {url!r}"
            )
        return url

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (8883 if parts.scheme == "mqtts" else 1883)

    @property
    def username(self) -> str | None:
        name = urlsplit(self.url).username
        return unquote(name) if name else None

    @property
    def password(self) -> str | None:
        secret = urlsplit(self.url).password
        return unquote(secret) if secret else None

    @property
    def uses_tls(self) -> bool:
        return urlsplit(self.url).scheme == "mqtts" or self.tls_ca_file is not None

    @property
    def identifier(self) -> str:
        """The client id with ``{hostname}`` and ``{pid}`` filled in."""
        return self.client_id.replace("{hostname}", socket.gethostname()).replace(
            "{pid}", str(os.getpid())
        )

    @property
    def persistent(self) -> bool:
        """Whether the source's session outlives its connection.

        A stable id (no ``{pid}``) keeps a persistent session: what a worker
        received but had not acknowledged when it died is redelivered when
        it reconnects under the same id. A per-process id (``{pid}``) cannot
        resume a session, and with a shared subscription the broker would
        keep dealing trials to the dead process's session (mosquitto deals
        to offline members too), so that session is not persistent: the
        broker forgets it on disconnect, and trials in flight to a worker
        that dies are not redelivered.
        """
        return "{pid}" not in self.client_id


class RedisStreamSettings(BaseModel):
    """``[redis_stream]``: the Redis Streams source (a consumer group per stream)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    # Redis Cluster: ``url`` names any node; each run's stream is read alone.
    cluster: bool = False
    prefix: str = "scorio"
    group: str = "monitor"
    consumer: str = Field(
        default_factory=lambda: f"scorio-monitor-{socket.gethostname()}"
    )
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 500
    block_ms: Annotated[int, Field(ge=1)] = 500
    claim_idle_ms: Annotated[int, Field(ge=100)] = 30_000
    max_deliveries: Annotated[int, Field(ge=1)] = 5
    discover_interval_s: Annotated[float, Field(gt=0.0)] = 5.0


class HttpSettings(BaseModel):
    """``[http]``: the API, dashboard and ``/metrics``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    listen: str = "127.0.0.1:8000"
    token: str | None = None
    max_body_bytes: Annotated[int, Field(ge=1024)] = 1 << 20
    # Browser origins (``https://host:port``) allowed to call write routes
    # besides the monitor's own; any other cross-origin write is a 403.
    allowed_origins: list[str] = Field(default_factory=list)
    # Host names requests may name besides IP literals and ``localhost``
    # (``*.example.com`` for a domain's names, ``*`` for any): a name not
    # listed is a 400, so a DNS-rebound page cannot reach the API.
    allowed_hosts: list[str] = Field(default_factory=list)
    # A request's head (line and headers) must arrive within this long of
    # the connection opening or of its first byte; its body within
    # body_timeout_s. Idle kept-alive connections close after keep_alive_s.
    header_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 10.0
    body_timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 30.0
    keep_alive_s: Annotated[int, Field(ge=1, le=3600)] = 5
    # Open connections at most (also kept below the open-file limit): past
    # it, the oldest connection still waiting for its request's head goes.
    max_connections: Annotated[int, Field(ge=1)] = 1000

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0] or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @field_validator("allowed_origins", "allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        # From the environment (SCORIO_MONITOR_HTTP_ALLOWED_HOSTS=a,b).
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_patterns(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if "*" in host[1:] or (
                host.startswith("*") and host[:2] != "*." and host != "*"
            ):
                raise ValueError(
                    f"allowed_hosts takes names, '*.domain' or '*'; got {host!r}"
                )
        return [host.lower().rstrip(".") for host in hosts]

    @field_validator("listen")
    @classmethod
    def _host_port(cls, listen: str) -> str:
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"listen must be host:port; got {listen!r}")
        return listen


EventKind = Literal[
    "pair_resolved",
    "pair_unresolvable",
    "pair_equivalent",
    "model_reopened",
    "model_done",
    "budget_exhausted",
    "ranking_stable",
]
# What webhooks get unless told otherwise: the facts a team acts on.
ALERT_KINDS: tuple[EventKind, ...] = (
    "pair_resolved",
    "pair_unresolvable",
    "budget_exhausted",
    "ranking_stable",
)


class WebhookSettings(BaseModel):
    """``[[webhooks]]``: where alerts go (Slack-compatible JSON), for which runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: Annotated[str, Field(pattern=r"^https?://")]
    events: list[EventKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    runs: list[str] | None = None
    timeout_s: Annotated[float, Field(gt=0.0)] = 5.0
    max_attempts: Annotated[int, Field(ge=1)] = 12


class ServiceConfig(BaseModel):
    """A ``serve --config`` file; every section optional."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: StoreSettings = StoreSettings()
    mqtt: MqttSettings | None = None
    redis_stream: RedisStreamSettings | None = None
    http: HttpSettings = HttpSettings()
    webhooks: list[WebhookSettings] = Field(default_factory=list)
    runs: list[RunConfig] = Field(default_factory=list)
    look_interval_s: Annotated[float, Field(ge=0.0)] = 0.05
    status_interval_s: Annotated[float, Field(ge=0.0)] = 0.05
    # Without declared runs, each new run name creates state: at most this many.
    max_undeclared_runs: Annotated[int, Field(ge=1)] = MAX_UNDECLARED_RUNS


_SECTIONS: dict[str, type[BaseModel]] = {
    "store": StoreSettings,
    "mqtt": MqttSettings,
    "redis_stream": RedisStreamSettings,
    "http": HttpSettings,
}


def load_service_config(path: Path | None, environ: Mapping[str, str]) -> ServiceConfig:
    """A service config from TOML, overlaid by ``SCORIO_MONITOR_<SECTION>_<KEY>``.

    Environment values win over the file (keep secrets such as passwords
    out of it); setting one key of a section that the file lacks enables
    that section.

    Raises:
        ConfigError: for a missing or invalid file or value.
    """
    document = {} if path is None else _read_toml(path)
    _check_top_level(document, str(path))
    for section, model in _SECTIONS.items():
        for key in model.model_fields:
            value = environ.get(f"SCORIO_MONITOR_{section}_{key}".upper())
            if value is not None:
                table = document.setdefault(section, {})
                if not isinstance(table, dict):
                    raise ConfigError(f"[{section}] must be a table")
                table[key] = value
    try:
        return ServiceConfig.model_validate(document)
    except ValidationError as exc:
        where = str(path) if path is not None else "environment"
        raise ConfigError(f"{where}: {describe_validation_error(exc)}") from exc


def _check_top_level(document: Mapping[str, object], where: str) -> None:
    """Unknown top-level keys, named with where they belong."""
    unknown = [key for key in document if key not in ServiceConfig.model_fields]
    if not unknown:
        return
    run_settings = [key for key in unknown if key in RunConfig.model_fields]
    if run_settings:
        raise ConfigError(
            f"{where}: {', '.join(run_settings)} are run settings; a service "
            "config holds them in a [[runs]] table (one per run), as in "
            "examples/service.toml; a file of one run's settings is for "
            "`watch --config` and `ingest --config`"
        )
    sections = ", ".join(ServiceConfig.model_fields)
    raise ConfigError(
        f"{where}: unknown key(s) {', '.join(unknown)}; a service config has {sections}"
    )
