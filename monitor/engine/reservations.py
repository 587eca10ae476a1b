"""Reservations: trials that ``next`` handed out and nobody has reported yet.

A plan is a promise of work. Until its trials are reported, a second plan
(another worker's, the same scheduler's next round) must not hand out the
same room again, or a question overshoots ``max_trials_per_question``. So
every plan is a *lease*: an id, an expiry and, per (model, question), the
trials reserved. Reserved trials that are not yet reported are *in flight*:
every later plan counts them as if they were observed.

Reports release them. Trials carry no lease id (a harness reports what it
ran), so release goes by counts: the reports of a (model, question) since
the last settling (new trials, and duplicates and corrections alike: a
harness rerun with the ids it used before still ran what it was handed)
release as many reserved trials, oldest lease first: of the same (model,
question) first, then, for trials beyond what that cell held, of the same
model on other questions, and only then the lent trials of the same cell
(see below). A scheduler that takes from ``next`` how many trials each
model gets but runs them on questions of its own choosing so never leaves
leases behind that starve later plans.

A trial released that way from another question may still run (a
scheduler that follows the plan holds it): it is *lent*, no longer in
flight for the model's share of the budget, but still counted against its
question's ``max_trials_per_question`` until that question reports it, it
is given back, or its lease expires. An expired lease returns what it
still holds.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.schema import NextItem

Key = tuple[str, str]
# Per model, per question: trials.
Cells = dict[str, dict[str, int]]


@dataclass(slots=True)
class Lease:
    """Trials one plan reserved, per model and question, until ``expires``.

    ``held``: reserved and not yet reported; ``lent``: released by another
    question's report but possibly still running (counted against the cap).
    """

    id: str
    expires: float
    held: Cells = field(default_factory=dict)
    lent: Cells = field(default_factory=dict)


@dataclass(slots=True)
class _RunReservations:
    leases: list[Lease] = field(default_factory=list)
    # The leases' held and lent trials summed, kept up to date (summing
    # every lease on each plan grew with the leases: 40 ms after a few
    # hundred plans).
    flying: dict[Key, int] = field(default_factory=dict)
    lent: dict[Key, int] = field(default_factory=dict)


class Reservations:
    """The leases of every run (in memory: a lease lives as long as its monitor).

    Args:
        new_id: Makes lease ids.

    Examples:
        >>> book = Reservations()
        >>> lease = book.reserve("r", [("a", "q", 2)], now=0.0, lease_s=60.0)
        >>> book.in_flight("r", {("a", "q"): 1}, now=1.0)
        {('a', 'q'): 1}
        >>> book.in_flight("r", {("a", "q"): 1}, now=61.0)
        {}
    """

    def __init__(self, new_id: Callable[[], str] | None = None) -> None:
        self._new_id = new_id or (lambda: secrets.token_hex(8))
        self._runs: dict[str, _RunReservations] = {}

    def holds(self, run: str) -> bool:
        """Whether any lease of the run holds trials (held or lent)."""
        return run in self._runs

    def in_flight(
        self, run: str, new_trials: Mapping[Key, int], now: float
    ) -> dict[Key, int]:
        """Reserved trials not yet reported, per (model, question).

        Args:
            run: The run.
            new_trials: Trials reported since the last call, per (model,
                question) (those left out had none).
            now: The time, to drop expired leases.
        """
        book = self._runs.get(run)
        if book is None:
            return {}
        for lease in book.leases:
            if lease.expires <= now:
                _subtract(book.flying, lease.held)
                _subtract(book.lent, lease.lent)
        book.leases = [lease for lease in book.leases if lease.expires > now]
        beyond: dict[str, list[tuple[Key, int]]] = {}
        for key, count in new_trials.items():
            left = count - self._take_all(book, _held, book.flying, key, count)
            if left > 0:
                beyond.setdefault(key[0], []).append((key, left))
        for model, cells in beyond.items():
            left = sum(count for _, count in cells)
            left -= self._lend(book, model, left)
            for key, count in cells:
                if left <= 0:
                    break
                left -= self._take_all(book, _lent, book.lent, key, min(count, left))
        return self._tidy(run, book)

    def lent(self, run: str) -> dict[Key, int]:
        """Trials released by other questions' reports that may still run.

        Read after :meth:`in_flight` (which settles); they count against
        their question's cap.
        """
        book = self._runs.get(run)
        return {} if book is None else dict(book.lent)

    def first_expiry(self, run: str) -> dict[str, float]:
        """Per model, when its earliest lease holding trials expires."""
        book = self._runs.get(run)
        expiry: dict[str, float] = {}
        for lease in book.leases if book is not None else []:
            for model in (*lease.held, *lease.lent):
                expiry[model] = min(expiry.get(model, lease.expires), lease.expires)
        return expiry

    def release(self, run: str, items: list[NextItem]) -> int:
        """Give back reserved trials that will not run; the number given back.

        Each item returns up to ``trials`` of its (model, question) from its
        ``lease`` (any lease when ``None``, newest first: the oldest are the
        likeliest to be running), held trials first, then lent ones.
        """
        book = self._runs.get(run)
        if book is None:
            return 0
        returned = 0
        for item in items:
            key = (item.model, item.question)
            wanted = item.trials
            for part, sums in ((_held, book.flying), (_lent, book.lent)):
                for lease in reversed(book.leases):
                    if wanted <= 0:
                        break
                    if item.lease is not None and lease.id != item.lease:
                        continue
                    take = _take(part(lease), key, wanted)
                    if take:
                        wanted -= take
                        returned += take
                        _drop(sums, key, take)
        self._tidy(run, book)
        return returned

    def reserve(
        self,
        run: str,
        items: Sequence[tuple[str, str, int]],
        now: float,
        lease_s: float,
    ) -> Lease | None:
        """Hold a plan's trials for ``lease_s`` seconds; ``None`` for an empty plan.

        Args:
            run: The run.
            items: The plan: (model, question, trials).
            now: The time.
            lease_s: How long the lease lasts.
        """
        if not items:
            return None
        lease = Lease(self._new_id(), now + lease_s)
        book = self._runs.setdefault(run, _RunReservations())
        for model, question, trials in items:
            key = (model, question)
            cells = lease.held.setdefault(model, {})
            cells[question] = cells.get(question, 0) + trials
            book.flying[key] = book.flying.get(key, 0) + trials
        book.leases.append(lease)
        return lease

    def _take_all(
        self,
        book: _RunReservations,
        part: Callable[[Lease], Cells],
        sums: dict[Key, int],
        key: Key,
        wanted: int,
    ) -> int:
        """Take up to ``wanted`` of ``key`` from the leases' ``part``, oldest
        lease first; how many were taken."""
        taken = 0
        for lease in book.leases:
            if taken >= wanted:
                break
            take = _take(part(lease), key, wanted - taken)
            if take:
                taken += take
                _drop(sums, key, take)
        return taken

    def _lend(self, book: _RunReservations, model: str, wanted: int) -> int:
        """Release up to ``wanted`` held trials of ``model`` on any question
        (oldest lease first) as lent; how many."""
        lent_now = 0
        for lease in book.leases:
            cells = lease.held.get(model)
            while lent_now < wanted and cells:
                question, held = next(iter(cells.items()))
                take = min(held, wanted - lent_now)
                lent_now += take
                key = (model, question)
                _take(lease.held, key, take)
                _drop(book.flying, key, take)
                lent = lease.lent.setdefault(model, {})
                lent[question] = lent.get(question, 0) + take
                book.lent[key] = book.lent.get(key, 0) + take
                cells = lease.held.get(model)
            if lent_now >= wanted:
                break
        return lent_now

    def _tidy(self, run: str, book: _RunReservations) -> dict[Key, int]:
        """Drop empty leases (and the run's book when none is left)."""
        book.leases = [lease for lease in book.leases if lease.held or lease.lent]
        if not book.leases:
            del self._runs[run]
            return {}
        return dict(book.flying)


def _held(lease: Lease) -> Cells:
    return lease.held


def _lent(lease: Lease) -> Cells:
    return lease.lent


def _take(cells: Cells, key: Key, wanted: int) -> int:
    """Take up to ``wanted`` trials of ``key`` from ``cells``; how many."""
    model, question = key
    row = cells.get(model)
    held = 0 if row is None else row.get(question, 0)
    take = min(held, wanted)
    if take <= 0 or row is None:
        return 0
    if take == held:
        del row[question]
        if not row:
            del cells[model]
    else:
        row[question] = held - take
    return take


def _drop(sums: dict[Key, int], key: Key, take: int) -> None:
    left = sums[key] - take
    if left:
        sums[key] = left
    else:
        del sums[key]


def _subtract(sums: dict[Key, int], cells: Cells) -> None:
    for model, row in cells.items():
        for question, trials in row.items():
            _drop(sums, (model, question), trials)
