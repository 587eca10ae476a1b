"""Where counts live: the memory store, the SQLite store and their shared parts.

``records`` holds the value types every store hands out, ``batches`` the
trials a store applies, ``local`` the counting core the embedded stores
share, ``ledger`` their exactly-once index of trials; ``memory`` is the
in-process store, ``sqlite`` (with ``sqlite_schema`` and ``lock``) the
embedded durable default; ``factory`` opens any store, Redis included, from
a path or URL (:func:`open_store`).
"""

from monitor.stores.factory import StoreOptions, open_store

__all__ = ["StoreOptions", "open_store"]
