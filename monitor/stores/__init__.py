"""Where counts live: the memory store, the SQLite store and their shared parts.

``memory`` holds the store value types and the in-process store; ``ledger``
the exactly-once index of trials; ``sqlite`` the embedded durable default.
"""
