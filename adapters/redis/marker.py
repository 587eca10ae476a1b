"""Telling that Redis lost the store: the store's marker key.

A Redis that restarts without persistence (or is flushed) comes back empty,
and a worker writing on would go on as if nothing happened: the trials it
acknowledged before are gone from the counts, its events from the log.
The store therefore keeps one key, ``{prefix}:store`` (see
:mod:`adapters.redis.keys`), holding a random id: the first worker to open
the store sets it, every later one reads it. Each apply and each look at
other workers' changes reads it in the same round trip; when it is gone or
holds another id, the store was reset under this worker.

What the worker does then: it says so once, loudly (an error in the log
naming the server and what was lost), and refuses every write and look
from then on with a short :class:`~monitor.errors.StoreError` (HTTP 503;
sources keep their messages and retry), so it acknowledges nothing into a
store that lost its history and shows no count it can no longer back.
A restarted worker starts from what Redis holds (setting a new marker if
none is left): restart the workers to go on from the reset store, or
restore Redis from a backup first. Run Redis with ``appendonly yes``.
"""

from __future__ import annotations

import logging
import uuid

import redis
from redis.cluster import RedisCluster

from adapters.redis import keys
from adapters.redis.records import Reply, as_text, translated
from monitor.errors import StoreError

log = logging.getLogger(__name__)


class StoreMarker:
    """The store's marker: claimed at load, checked at every write and look.

    Args:
        prefix: The store's key prefix.
        server: How to name the server in the message (its URL, no password).
    """

    def __init__(self, prefix: str, server: str) -> None:
        self.key = keys.store_marker(prefix)
        self._server = server
        self._expected: str | None = None
        self._reset = False

    def claim(self, client: redis.Redis | RedisCluster) -> None:
        """Read the marker, setting it first if the store has none."""
        with translated("read the store's marker"):
            client.set(self.key, uuid.uuid4().hex, nx=True)
            found = client.get(self.key)
        self._expected = None if found is None else as_text(found)
        self._reset = False

    def check(self, found: Reply | None) -> None:
        """Compare the marker as just read with the one claimed.

        Raises:
            StoreError: when the store was reset since it was claimed (said
                in the log the first time).
        """
        if self._expected is None:
            return
        if found is not None and as_text(found) == self._expected:
            return
        if not self._reset:
            self._reset = True
            log.error(
                "REDIS LOST THIS STORE'S DATA: the marker key %s of %s, set "
                "when this worker opened the store, is %s. Redis restarted "
                "without persistence or was flushed: every trial, count and "
                "event written before is gone from it. This worker now "
                "refuses writes and reads of it, so it acknowledges nothing "
                "into a store that lost its history. Restore Redis from a "
                "backup, or restart the workers to start over from what it "
                "holds now; run Redis with appendonly yes.",
                self.key,
                self._server,
                "gone" if found is None else "another store's",
            )
        raise StoreError(
            f"redis store at {self._server} was reset since this worker opened "
            "it (its data is lost); restart the worker (see the log)"
        )
