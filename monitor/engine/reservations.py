"""Reservations: trials that ``next`` handed out and nobody has reported yet.

A plan is a promise of work. Until its trials are reported, a second plan
(another worker's, the same scheduler's next round) must not hand out the
same room again, or a question overshoots ``max_trials_per_question``. So
every plan is a *lease*: an id, an expiry and, per (model, question), the
trials reserved. Reserved trials that are not yet reported are *in flight*:
every later plan counts them as if they were observed.

Reports release them. Trials carry no lease id (a harness reports what it
ran), so release goes by counts: when a (model, question) has more reported
trials than when it was last looked at, that many reserved trials of it are
released, oldest lease first. An expired lease returns what it still holds.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.schema import NextItem

Key = tuple[str, str]


@dataclass(slots=True)
class Lease:
    """Trials one plan reserved, per (model, question), until ``expires``."""

    id: str
    expires: float
    held: dict[Key, int] = field(default_factory=dict)


@dataclass(slots=True)
class _RunReservations:
    leases: list[Lease] = field(default_factory=list)
    # Reported trials per (model, question) when last settled.
    seen: dict[Key, int] = field(default_factory=dict)
    # The leases' held trials summed, kept up to date (summing every lease
    # on each plan grew with the leases: 40 ms after a few hundred plans).
    flying: dict[Key, int] = field(default_factory=dict)


class Reservations:
    """The leases of every run (in memory: a lease lives as long as its monitor).

    Args:
        new_id: Makes lease ids.

    Examples:
        >>> book = Reservations()
        >>> lease = book.reserve("r", [("a", "q", 2)], {("a", "q"): 0},
        ...                      now=0.0, lease_s=60.0)
        >>> book.in_flight("r", {("a", "q"): 1}, now=1.0)
        {('a', 'q'): 1}
        >>> book.in_flight("r", {("a", "q"): 1}, now=61.0)
        {}
    """

    def __init__(self, new_id: Callable[[], str] | None = None) -> None:
        self._new_id = new_id or (lambda: secrets.token_hex(8))
        self._runs: dict[str, _RunReservations] = {}

    def holds(self, run: str) -> bool:
        """Whether any lease of the run holds trials."""
        return run in self._runs

    def in_flight(
        self, run: str, reported: Mapping[Key, int], now: float
    ) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question).

        Args:
            run: The run.
            reported: Trials reported so far, of at least every reserved
                (model, question) whose count changed since the last call
                (a reserved pair left out is taken as unchanged).
            now: The time, to drop expired leases.
        """
        book = self._runs.get(run)
        if book is None:
            return {}
        flying = book.flying
        for lease in book.leases:
            if lease.expires <= now:
                _subtract(flying, lease.held)
        book.leases = [lease for lease in book.leases if lease.expires > now]
        seen = book.seen
        for key, count in reported.items():
            before = seen.get(key)
            if before is None or count == before:
                continue
            seen[key] = count
            released = count - before
            for lease in book.leases:
                if released <= 0:
                    break
                held = lease.held.get(key, 0)
                take = min(held, released)
                if take:
                    released -= take
                    _take(lease.held, key, held, take)
                    _take(flying, key, flying[key], take)
        book.leases = [lease for lease in book.leases if lease.held]
        if not book.leases:
            del self._runs[run]
            return {}
        if len(seen) > 2 * len(flying):
            book.seen = {key: count for key, count in seen.items() if key in flying}
        return dict(flying)

    def release(self, run: str, items: list[NextItem]) -> int:
        """Give back reserved trials that will not run; the number given back.

        Each item returns up to ``trials`` of its (model, question) from its
        ``lease`` (any lease when ``None``, newest first: the oldest are the
        likeliest to be running).
        """
        book = self._runs.get(run)
        if book is None:
            return 0
        returned = 0
        for item in items:
            key = (item.model, item.question)
            wanted = item.trials
            for lease in reversed(book.leases):
                if wanted <= 0:
                    break
                if item.lease is not None and lease.id != item.lease:
                    continue
                held = lease.held.get(key, 0)
                take = min(held, wanted)
                if take:
                    wanted -= take
                    returned += take
                    _take(lease.held, key, held, take)
                    _take(book.flying, key, book.flying[key], take)
        book.leases = [lease for lease in book.leases if lease.held]
        if not book.leases:
            del self._runs[run]
        return returned

    def reserve(
        self,
        run: str,
        items: Sequence[tuple[str, str, int]],
        reported: Mapping[Key, int],
        now: float,
        lease_s: float,
    ) -> Lease | None:
        """Hold a plan's trials for ``lease_s`` seconds; ``None`` for an empty plan.

        Args:
            run: The run.
            items: The plan: (model, question, trials).
            reported: Trials reported so far of every planned (model, question).
            now: The time.
            lease_s: How long the lease lasts.
        """
        if not items:
            return None
        lease = Lease(self._new_id(), now + lease_s)
        book = self._runs.setdefault(run, _RunReservations())
        for model, question, trials in items:
            key = (model, question)
            if key not in book.flying:  # else seen since its first lease
                book.seen[key] = reported.get(key, 0)
            lease.held[key] = lease.held.get(key, 0) + trials
            book.flying[key] = book.flying.get(key, 0) + trials
        book.leases.append(lease)
        return lease


def _take(counts: dict[Key, int], key: Key, held: int, take: int) -> None:
    if held == take:
        del counts[key]
    else:
        counts[key] = held - take


def _subtract(counts: dict[Key, int], held: Mapping[Key, int]) -> None:
    for key, trials in held.items():
        _take(counts, key, counts[key], trials)
