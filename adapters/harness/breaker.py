"""A circuit breaker: stop calling a monitor that is away, try again later.

Retrying every call against a monitor that is down costs the caller each
call's timeouts and backoff, and fills its log. After a call gives up, the
breaker *opens*: calls fail at once, without touching the network, until a
wait has passed (doubling from ``first_wait_s`` up to ``max_wait_s``). Then
one call is let through as a probe (*half-open*): if it succeeds the breaker
closes, else it opens again for a longer wait. It says so once per outage:
one warning when it opens, one line when the monitor is back.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """Waits of a :class:`CircuitBreaker`."""

    first_wait_s: float = 1.0
    max_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if not 0.0 < self.first_wait_s <= self.max_wait_s:
            raise ValueError(
                "waits must satisfy 0 < first_wait_s <= max_wait_s; got "
                f"{self.first_wait_s} and {self.max_wait_s}"
            )


class CircuitBreaker:
    """Whether to call the monitor now; see the module docstring.

    Args:
        settings: The waits.
        what: Names the monitor in the log lines.
        clock: Monotonic seconds.

    Examples:
        >>> logging.disable(logging.WARNING)  # keep the doctest's output plain
        >>> now = [0.0]
        >>> breaker = CircuitBreaker(clock=lambda: now[0])
        >>> breaker.allows()
        True
        >>> breaker.failed("connection refused")
        >>> breaker.allows(), breaker.is_open
        (False, True)
        >>> now[0] = 1.0
        >>> breaker.allows()  # the probe
        True
        >>> breaker.succeeded()
        >>> breaker.is_open
        False
        >>> logging.disable(logging.NOTSET)
    """

    def __init__(
        self,
        settings: BreakerSettings | None = None,
        *,
        what: str = "the monitor",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings or BreakerSettings()
        self._what = what
        self._clock = clock
        self._wait_s = self._settings.first_wait_s
        self._open_until = -math.inf
        self._is_open = False
        self._outages = 0

    @property
    def is_open(self) -> bool:
        """Whether the last call failed and the monitor was not seen since."""
        return self._is_open

    @property
    def retry_in_s(self) -> float:
        """Seconds until the next probe (0 when calls go through)."""
        return max(0.0, self._open_until - self._clock())

    def allows(self) -> bool:
        """Whether a call may go to the network now."""
        return self._clock() >= self._open_until

    def probe_now(self) -> None:
        """Let the next call through (a last try, e.g. before closing)."""
        self._open_until = -math.inf

    def failed(self, reason: object) -> None:
        """A call gave up: open (again), for a longer wait each time."""
        if not self._is_open:
            self._is_open = True
            self._outages += 1
            self._wait_s = self._settings.first_wait_s
            log.warning(
                "%s is unreachable (%s); going on without it, trying again "
                "every %.0f-%.0f s",
                self._what,
                reason,
                self._settings.first_wait_s,
                self._settings.max_wait_s,
            )
        else:
            self._wait_s = min(2.0 * self._wait_s, self._settings.max_wait_s)
        self._open_until = self._clock() + self._wait_s

    def succeeded(self) -> None:
        """A call went through: close."""
        if self._is_open:
            log.warning("%s is reachable again", self._what)
        self._is_open = False
        self._open_until = -math.inf
        self._wait_s = self._settings.first_wait_s
