"""Where counts live: the memory store, the SQLite store and their shared parts.

``memory`` holds the store value types and the in-process store; ``ledger``
the exactly-once index of trials; ``sqlite`` the embedded durable default;
``factory`` opens any store, Redis included, from a path or URL
(:func:`open_store`).
"""

from monitor.stores.factory import StoreOptions, open_store

__all__ = ["StoreOptions", "open_store"]
