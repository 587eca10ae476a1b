"""Retrying a transient failure: the client's backoff policy and the loop around it.

:class:`Retry` is the policy a harness chooses; :func:`retrying` runs one
operation under it, behind the circuit breaker (:mod:`adapters.harness.breaker`).
Only :class:`MonitorUnavailableError` is retried: a refusal would be refused
again. The loop is tenacity's; its types stop here.

The waits have jitter: a run's workers that lost the monitor together (a
restart, a network blip) would otherwise come back in lockstep and hit it
all at once, wave after wave.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from adapters.harness.breaker import CircuitBreaker
from adapters.harness.transports import MonitorUnavailableError

log = logging.getLogger(__name__)
Result = TypeVar("Result")


@dataclass(frozen=True, slots=True)
class Retry:
    """Exponential backoff with jitter: ``attempts`` in all.

    The ``k``-th wait (from 0) is drawn uniformly between half and all of
    ``min(first_delay_s * 2**k, max_delay_s)`` ("equal jitter"): it still
    doubles, so a monitor that is away is not hammered, and two clients
    that failed together spread apart. The default tries 8 times over 5.7 to
    11.3 s.
    """

    attempts: int = 8
    first_delay_s: float = 0.1
    max_delay_s: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1; got {self.attempts}")
        if not 0.0 < self.first_delay_s <= self.max_delay_s:
            raise ValueError(
                "delays must satisfy 0 < first_delay_s <= max_delay_s; got "
                f"{self.first_delay_s} and {self.max_delay_s}"
            )

    def delays(self) -> Iterator[float]:
        """The longest waits between attempts (one fewer than the attempts).

        Each actual wait is drawn between half of its bound and the bound.
        """
        delay = self.first_delay_s
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(2.0 * delay, self.max_delay_s)


async def retrying(
    action: str,
    operation: Callable[[], Awaitable[Result]],
    policy: Retry,
    breaker: CircuitBreaker,
) -> Result:
    """``operation()``, tried again on :class:`MonitorUnavailableError`.

    Args:
        action: What the operation does, for messages ("sending 5 trials").
        operation: One attempt.
        policy: How often and how long to wait between attempts.
        breaker: Asked first, told of the outcome.

    Raises:
        MonitorUnavailableError: at once while the breaker is open
            (``attempts`` 0), or when the attempts ran out (``attempts``
            says how many were made).
        MonitorError: any other failure of the operation, not retried.
    """
    if not breaker.allows():
        raise MonitorUnavailableError(
            f"{action}: the monitor is unreachable; next try in "
            f"{breaker.retry_in_s:.1f} s",
            attempts=0,
        )
    half_first, half_max = policy.first_delay_s / 2, policy.max_delay_s / 2
    attempts = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        # A fixed half plus a random half of the doubling wait.
        wait=tenacity.wait_exponential(multiplier=half_first, max=half_max)
        + tenacity.wait_random_exponential(multiplier=half_first, max=half_max),
        retry=tenacity.retry_if_exception_type(MonitorUnavailableError),
        before_sleep=_logger(action),
        sleep=asyncio.sleep,
    )
    try:
        async for attempt in attempts:
            with attempt:
                result = await operation()
                breaker.succeeded()
                return result
    except tenacity.RetryError as gave_up:
        last = gave_up.last_attempt
        error = last.exception()
        if not isinstance(error, MonitorUnavailableError):
            raise  # only that error is retried, so only it runs out
        breaker.failed(error)
        raise MonitorUnavailableError(
            f"{action}: gave up after {last.attempt_number} attempts: {error}",
            attempts=last.attempt_number,
        ) from error
    raise RuntimeError("tenacity stopped without a result or an error")


def _logger(action: str) -> Callable[[tenacity.RetryCallState], None]:
    def log_retry(state: tenacity.RetryCallState) -> None:
        error = None if state.outcome is None else state.outcome.exception()
        log.info(
            "%s failed (%s); retrying in %.2f s", action, error, state.upcoming_sleep
        )

    return log_retry
