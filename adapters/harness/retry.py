"""Retrying a transient failure: the backoff policy of the harness client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Retry:
    """Exponential backoff: ``attempts`` in all, the wait doubling each time.

    The default tries 8 times over about 11 s.
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
        """The waits between attempts (one fewer than the attempts)."""
        delay = self.first_delay_s
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(2.0 * delay, self.max_delay_s)
