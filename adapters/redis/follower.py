"""Following other workers: what they changed in a run's counts since a look.

Each apply that changes counts bumps the run's version and logs its deltas
under that version in the run's change log (:mod:`adapters.redis.changes`
reads an entry); versions this worker produced itself, one after the
other, need no read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import redis
from numpy.typing import NDArray
from redis.cluster import RedisCluster

from adapters.redis import keys
from adapters.redis.changes import CellTable, Versions, add_costs, read_entry
from adapters.redis.marker import StoreMarker
from adapters.redis.records import as_texts, entry_version, translated
from adapters.redis.scripts import Scripts
from monitor.stores.records import CountChanges, ModelCounts

# Change-log entries read per round trip when catching up with other writers.
CHANGES_PER_READ: Final = 1000


class ChangeFollower:
    """Reads the change log of the runs a store looks at.

    Args:
        client: The store's client.
        prefix: The store's key prefix.
        writer: The store's mark in the change log (its own entries skipped).
        scripts: The store's scripts (``read_cells``).
        versions: The versions the store has seen, shared with its applies.
        read_whole: Reads a run's counts whole (and notes their version).
        marker: The store's marker, read with the version (a reset store
            is refused, never read as the truth).
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        prefix: str,
        writer: str,
        scripts: Scripts,
        versions: Versions,
        read_whole: Callable[[str], dict[str, ModelCounts]],
        marker: StoreMarker,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._writer = writer
        self._scripts = scripts
        self._versions = versions
        self._read_whole = read_whole
        self._marker = marker
        # Per run, the numbered counts cells read so far (the change log
        # names cells by number).
        self._cells: dict[str, CellTable] = {}

    def changes(self, run: str) -> dict[str, ModelCounts] | CountChanges | None:
        """What other processes changed in the run's counts since we last saw them.

        One round trip (the version and the store's marker) when nothing
        changed; otherwise the other writers'
        deltas from the change log (and the fields of cells numbered since
        the last read), or the whole counts when the log no longer holds
        every version since ours.
        """
        known = self._versions.get(run)
        with translated(f"read the changes of run {run!r}"):
            pipe = self._client.pipeline(transaction=False)
            pipe.hget(keys.totals(self._prefix, run), "version")
            pipe.get(self._marker.key)
            version, marker = pipe.execute()
            self._marker.check(marker)
            current = int(version or 0)
            if current == known:
                return None
            if known < 0 or current < known:
                # Unsure what was applied, or the run's keys were replaced.
                self._cells.pop(run, None)
                return self._read_whole(run)
            entries: list[tuple[int, dict[str, str]]] = []
            while known + len(entries) < current:
                start = known + len(entries) + 1
                found = [
                    (entry_version(entry_id), as_texts(fields))
                    for entry_id, fields in self._client.xrange(
                        keys.changes(self._prefix, run),
                        min=f"{start}-0",
                        max=f"{current}-0",
                        count=CHANGES_PER_READ,
                    )
                    or []
                    if entry_id is not None and fields is not None
                ]
                versions = [version for version, _ in found]
                if versions != list(range(start, start + len(found))) or not found:
                    # Trimmed away, or written before the log: read them whole.
                    return self._read_whole(run)
                entries.extend(found)
            changes = self._summed(run, entries)
            if changes is None:
                return self._read_whole(run)
        self._versions.set(run, current)
        return changes

    def _summed(
        self, run: str, entries: list[tuple[int, dict[str, str]]]
    ) -> CountChanges | None:
        """The other writers' entries summed, or None to read the counts whole."""
        numbers: list[NDArray[np.int64]] = []
        deltas: list[NDArray[np.int64]] = []
        costs: dict[str, tuple[int, int, float]] = {}
        try:
            for _, fields in entries:
                if fields["w"] != self._writer:
                    entry_numbers, entry_deltas = read_entry(fields)
                    numbers.append(entry_numbers)
                    deltas.append(entry_deltas)
                    add_costs(costs, fields)
        except ValueError:  # an entry in an older layout, or malformed
            return None
        named = np.concatenate(numbers) if numbers else np.zeros(0, np.int64)
        cells = self._cells.setdefault(run, CellTable())
        wanted = int(named.max()) + 1 if named.size else 0
        if wanted > len(cells):
            # Cells numbered since the last read: their fields, once.
            numbered = self._scripts.read_cells(run, len(cells), wanted - 1)
            if not cells.extend(numbered, wanted - len(cells)):
                return None
        return cells.changes(named, np.concatenate(deltas) if deltas else named, costs)
