"""Inspect AI settings: where the monitor is, how scores become categories.

Read by :class:`~adapters.harness.inspect_ai.MonitorHook` and
:class:`~adapters.harness.early_stopping.MonitorEarlyStopping` from the
``SCORIO_MONITOR_*`` environment (see :mod:`adapters.harness.inspect_ai`),
with :func:`connect`, which opens a client for them, and the check of a
category mapping against the run it reports to (:func:`categories_refusal`),
made once per run before its samples run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    NOANSWER,
    PARTIAL,
    ValueToFloat,
    value_to_float,
)

from adapters.harness.client import AsyncMonitorClient, transport_for
from adapters.harness.retry import Retry
from adapters.harness.transports import (
    EXTRA_OF_SCHEME,
    EmbeddedTransport,
    StateFileTransport,
    Transport,
    check_run,
)
from monitor.engine.monitor import Monitor
from monitor.errors import ConfigError, MonitorError, UnknownRunError
from monitor.schema import RunConfig
from monitor.stores.factory import missing_extra_message
from monitor.stores.sqlite import SqliteStore

log = logging.getLogger(__name__)

URL: Final = "SCORIO_MONITOR_URL"
STATE: Final = "SCORIO_MONITOR_STATE"
DEFAULT_CATEGORIES: Final[Mapping[str, int]] = MappingProxyType(
    {"C": 1, "I": 0, "P": 0, "N": 0}
)
# What the eval waits for the monitor, at most, at the first contact and at
# the last flush: one that is there answers in milliseconds, and one that
# hangs must cost the eval under a second in all (benchmarks/monitor_away.py).
FIRST_CONTACT_S: Final = 0.2
LAST_TRY_S: Final = 0.1


def is_enabled(environ: Mapping[str, str]) -> bool:
    """Whether the environment names a monitor (a URL or a state file)."""
    return bool(environ.get(URL) or environ.get(STATE))


@dataclass(frozen=True, slots=True)
class InspectSettings:
    """Where the monitor is and how scores become trials (see the module doc)."""

    url: str | None = None
    state: str | None = None
    token: str | None = None
    topic_prefix: str = "scorio"
    run: str | None = None
    scorer: str | None = None
    categories: Mapping[str, int] = field(default_factory=lambda: DEFAULT_CATEGORIES)
    categories_given: bool = False
    batch_size: int = 50
    flush_interval_s: float = 0.5
    max_buffered: int = 100_000

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> InspectSettings:
        """Settings from ``SCORIO_MONITOR_*`` variables.

        Raises:
            ConfigError: for neither or both of the URL and the state file,
                or a value that does not parse.
        """
        url, state = environ.get(URL) or None, environ.get(STATE) or None
        if (url is None) == (state is None):
            raise ConfigError(f"set exactly one of {URL} and {STATE}")
        try:
            if url is not None:
                _transport(url)  # checks the URL, and that its library is here
            if environ.get("SCORIO_MONITOR_RUN"):
                check_run(environ["SCORIO_MONITOR_RUN"])
            settings = cls(
                url=url,
                state=state,
                token=environ.get("SCORIO_MONITOR_TOKEN") or None,
                topic_prefix=environ.get("SCORIO_MONITOR_TOPIC_PREFIX", "scorio"),
                run=environ.get("SCORIO_MONITOR_RUN") or None,
                scorer=environ.get("SCORIO_MONITOR_SCORER") or None,
                categories=_categories(environ.get("SCORIO_MONITOR_CATEGORIES")),
                categories_given=bool(environ.get("SCORIO_MONITOR_CATEGORIES")),
                batch_size=int(environ.get("SCORIO_MONITOR_BATCH_SIZE", "50")),
                flush_interval_s=float(
                    environ.get("SCORIO_MONITOR_FLUSH_INTERVAL_S", "0.5")
                ),
                max_buffered=int(environ.get("SCORIO_MONITOR_MAX_BUFFERED", "100000")),
            )
        except ValueError as exc:
            raise ConfigError(f"scorio-monitor settings: {exc}") from exc
        if (
            not 1 <= settings.batch_size <= settings.max_buffered
            or not settings.flush_interval_s > 0
        ):
            raise ConfigError(
                "need 1 <= SCORIO_MONITOR_BATCH_SIZE <= SCORIO_MONITOR_MAX_BUFFERED "
                "and SCORIO_MONITOR_FLUSH_INTERVAL_S > 0"
            )
        return settings


def _transport(
    url: str,
    *,
    token: str | None = None,
    topic_prefix: str = "scorio",
    timeout_s: float = 10.0,
    check_timeout_s: float = FIRST_CONTACT_S,
) -> Transport:
    """The URL's transport; a missing library becomes a ConfigError naming
    its extra (``[inspect]`` has no MQTT library), which the hook says once."""
    try:
        return transport_for(
            url,
            token=token,
            topic_prefix=topic_prefix,
            timeout_s=timeout_s,
            check_timeout_s=check_timeout_s,
        )
    except ModuleNotFoundError as exc:
        scheme = url.partition(":")[0].lower()
        library = (exc.name or "").partition(".")[0] or None
        raise ConfigError(
            missing_extra_message(
                f"{URL}={scheme}://...", EXTRA_OF_SCHEME[scheme], library
            )
        ) from exc


def _categories(text: str | None) -> Mapping[str, int]:
    if not text:
        return DEFAULT_CATEGORIES
    mapping = json.loads(text)
    if not isinstance(mapping, dict) or not all(
        isinstance(value, int) and not isinstance(value, bool) and value >= 0
        for value in mapping.values()
    ):
        raise ValueError(
            "SCORIO_MONITOR_CATEGORIES must be a JSON object of score -> "
            f"category (an integer >= 0); got {text!r}"
        )
    return MappingProxyType({str(key): value for key, value in mapping.items()})


@contextlib.asynccontextmanager
async def connect(
    settings: InspectSettings,
    *,
    flush_interval_s: float | None = None,
    read_only: bool = False,
    retry: Retry | None = None,
    run: str | None = None,
    timeout_s: float = 10.0,
    last_try_s: float | None = None,
) -> AsyncIterator[AsyncMonitorClient]:
    """A client for the settings' monitor; an embedded one opens the state file.

    ``read_only`` opens the state file for reading while another process
    (or the hook) writes it: the client follows the trials appended since
    (at each status or plan). ``run`` (read-only) reads that run only.
    ``timeout_s`` bounds one HTTP request; ``last_try_s`` the last flush
    while the monitor is away (see :class:`AsyncMonitorClient`). The first
    contact (:meth:`AsyncMonitorClient.check`) waits ``FIRST_CONTACT_S``.

    Raises:
        StoreError: when the state file cannot be opened.
        ConfigError: when the URL's transport library is not installed (it
            names the extra to install).
    """
    if settings.url is not None:
        transport = _transport(
            settings.url,
            token=settings.token,
            topic_prefix=settings.topic_prefix,
            timeout_s=timeout_s,
            check_timeout_s=FIRST_CONTACT_S,
        )
        async with AsyncMonitorClient(
            transport,
            batch_size=settings.batch_size,
            flush_interval_s=flush_interval_s,
            max_buffered=settings.max_buffered,
            retry=retry,
            last_try_s=last_try_s,
        ) as client:
            yield client
        return
    path = settings.state or "scorio-monitor.db"
    if read_only:
        monitor = await asyncio.to_thread(
            lambda: Monitor(
                SqliteStore(path, read_only=True, run=run), shared_refresh_s=0.0
            )
        )
        local: EmbeddedTransport | StateFileTransport = EmbeddedTransport(monitor)
    else:
        # Several evals may feed one state file: one writes, the others spool.
        local = StateFileTransport(path)
    try:
        async with AsyncMonitorClient(
            local,
            batch_size=settings.batch_size,
            flush_interval_s=flush_interval_s,
            max_buffered=settings.max_buffered,
            retry=retry,
        ) as client:
            yield client
    finally:
        if read_only:
            await asyncio.to_thread(monitor.close)


def run_name(task: str) -> str:
    """A task name as a run id: ``inspect_evals/gsm8k`` -> ``inspect_evals.gsm8k``."""
    return re.sub(r"[/+#]", ".", task)


def category_of(value: object, categories: Mapping[str, int]) -> int | None:
    """The outcome category of a score value, or ``None`` if it is not one."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return categories.get(value)
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def inspect_weights(categories: Mapping[str, int]) -> list[float] | None:
    """Weights under which a run's avg is Inspect's accuracy, or ``None``.

    Category ``k`` weighs Inspect's own value of the scores mapped to it
    (``value_to_float``: C 1, P 0.5, I and N 0). ``None`` when no weights
    can agree with Inspect: a category no score maps to, scores of
    different values in one category, or a score Inspect gives no value.

    Examples:
        >>> inspect_weights({"C": 2, "P": 1, "I": 0, "N": 0})
        [0.0, 0.5, 1.0]
        >>> inspect_weights({"C": 1, "P": 0, "I": 0}) is None
        True
    """
    to_float = value_to_float()
    values: dict[int, set[float]] = {}
    for score, category in categories.items():
        value = _inspect_value(score, to_float)
        if value is None:
            return None
        values.setdefault(category, set()).add(value)
    width = max(values, default=0) + 1
    if width < 2 or any(len(values.get(k, ())) != 1 for k in range(width)):
        return None
    return [values[k].pop() for k in range(width)]


def _inspect_value(score: str, to_float: ValueToFloat) -> float | None:
    if score in (CORRECT, INCORRECT, PARTIAL, NOANSWER) or score.lower() in (
        "yes",
        "no",
        "true",
        "false",
    ):
        return to_float(score)
    try:
        number = float(score)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


async def categories_refusal(
    client: AsyncMonitorClient, run: str, settings: InspectSettings
) -> str | None:
    """Why the run cannot take the settings' categories, or ``None``.

    Asked once per run before its samples run. A run the monitor knows must
    have a weight for every category the mapping names. A run it does not
    know is declared from an explicit ``SCORIO_MONITOR_CATEGORIES`` with
    :func:`inspect_weights` (so the status avg is Inspect's accuracy);
    without one, the monitor makes a binary run at the first trial, which
    the default mapping fits. When the monitor cannot say (away, MQTT), the
    trials go out unchecked.
    """
    try:
        config = await client.config(run)
    except UnknownRunError:
        return await _declare(client, run, settings)
    except (MonitorError, NotImplementedError) as exc:
        log.info("the categories of run %r are not checked: %s", run, exc)
        return None
    width = len(config.weights)
    outside = {score: k for score, k in settings.categories.items() if k >= width}
    if not outside:
        return None
    return (
        f"run {run!r} has {width} categories (weights {config.weights}), but "
        f"SCORIO_MONITOR_CATEGORIES maps {outside} outside 0..{width - 1}: every "
        "such trial would be refused; declare the run with a weight for each "
        "category, or change the mapping"
    )


async def _declare(
    client: AsyncMonitorClient, run: str, settings: InspectSettings
) -> str | None:
    weights = inspect_weights(settings.categories)
    width = max(settings.categories.values(), default=0) + 1
    if not settings.categories_given or (weights is None and width <= 2):
        return None  # the binary run the first trial makes fits
    if weights is None:
        return (
            f"run {run!r} is not declared and SCORIO_MONITOR_CATEGORIES "
            f"({dict(settings.categories)}) gives no weights Inspect agrees "
            "with (each category needs scores of one value): declare the run "
            f"with {width} weights first"
        )
    try:
        await client.declare(RunConfig(run=run, weights=weights))
    except UnknownRunError:
        return None
    except ConfigError:
        # Declared meanwhile (another eval of the run): check that one.
        return await categories_refusal(client, run, settings)
    except (MonitorError, NotImplementedError) as exc:
        log.info("run %r is not declared: %s", run, exc)
        return None
    log.info(
        "declared run %r with weights %s (Inspect's value of each score)",
        run,
        weights,
    )
    return None
