"""What every transport shares: the interface, the two transport errors, the wire.

A transport does one attempt of each operation and says whether a failure is
worth another (:class:`MonitorUnavailableError`) or not (any other
:class:`~monitor.errors.MonitorError`); batching and retries belong to the
client (:mod:`adapters.harness.client`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Final, Protocol

from monitor.errors import MonitorError
from monitor.schema import NextItem, RunConfig, Status, TrialEvent

# A run id becomes one URL path segment and one MQTT topic level.
RESERVED_IN_RUN: Final = frozenset("/+#")


class MonitorUnavailableError(MonitorError):
    """The monitor could not be reached, or answered "try again later".

    A transport raises it for one failed attempt; the client retries, and
    raises it itself once ``attempts`` attempts have failed.
    """

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class RequestRejectedError(MonitorError):
    """The monitor refused a request, or answered something unreadable.

    Not retried: sending the same request again gets the same answer.
    ``status`` is the HTTP status (``None`` off HTTP); ``detail`` is the
    monitor's reason.
    """

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail if status is None else f"HTTP {status}: {detail}")
        self.detail = detail
        self.status = status


class BatchRefusedError(RequestRejectedError):
    """The monitor refused a whole batch of a run's trials (they are dropped).

    ``run`` and ``trials`` say which and how many; ``detail`` is why.
    """

    def __init__(
        self, run: str, trials: int, detail: str, status: int | None = None
    ) -> None:
        super().__init__(detail, status)
        self.run = run
        self.trials = trials
        self.args = (f"the monitor refused {trials} trials of run {run!r}: {detail}",)


class NotAMonitorError(RequestRejectedError):
    """The address answers, but not as a scorio monitor (e.g. a wrong path).

    Raised by the first contact (:meth:`Transport.check`); nothing sent there
    would ever be counted, so the caller stops before it sends.
    """


class Transport(Protocol):
    """One way to reach a monitor; entered around its use by one client."""

    @property
    def name(self) -> str:
        """Where it goes, for log messages."""
        ...

    async def __aenter__(self) -> Transport: ...

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

    async def check(self) -> None:
        """The first contact: is a scorio monitor there?

        Raises:
            NotAMonitorError: something answers, but not a monitor.
            MonitorUnavailableError: nothing answers (yet).
        """
        ...

    async def config(self, run: str) -> RunConfig:
        """The run's config (UnknownRunError for a run it does not know)."""
        ...

    async def send(self, run: str, events: Sequence[TrialEvent]) -> None:
        """Deliver one batch of a run's trials (one request or message)."""
        ...

    async def status(self, run: str) -> Status:
        """The run's status."""
        ...

    async def next(
        self, run: str, budget: int, lease_s: float, model: str | None = None
    ) -> list[NextItem]:
        """Reserve ``budget`` trials for ``lease_s`` seconds (0: plan only)."""
        ...

    async def declare(self, config: RunConfig) -> RunConfig:
        """Declare (or update) a run."""
        ...

    async def release(self, run: str, items: Sequence[NextItem]) -> int:
        """Give back reserved trials that will not run."""
        ...


def check_run(run: str) -> str:
    """``run`` if a transport can carry it, else ValueError."""
    if RESERVED_IN_RUN.intersection(run):
        raise ValueError(f"run must not contain '/', '+' or '#'; got {run!r}")
    return run


def encode(events: Sequence[TrialEvent]) -> bytes:
    """A batch on the wire: a JSON array of trial events."""
    return b"[%b]" % b",".join(
        event.model_dump_json(exclude_none=True).encode() for event in events
    )
