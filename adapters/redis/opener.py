"""The Redis entry point of ``scorio_monitor.stores``: a store from a URL.

``open_store("redis://host:6379/0")`` finds :func:`open_redis_store` by the
URL's scheme (``redis``, ``rediss``, ``unix`` for a socket, or ``redis+cluster``
for a node of a Redis Cluster), so ``monitor`` opens one without importing it.
"""

from __future__ import annotations

from typing import Final

from adapters.redis.store import RedisStore
from monitor.stores.factory import StoreOptions

CLUSTER_SCHEME: Final = "redis+cluster://"


def open_redis_store(url: str, options: StoreOptions) -> RedisStore:
    """A :class:`RedisStore` at ``url`` with the prefix and limits of ``options``.

    ``redis+cluster://host:port`` is ``redis://host:port`` with
    ``options.cluster`` set.
    """
    cluster = options.cluster
    if url.startswith(CLUSTER_SCHEME):
        url = "redis://" + url.removeprefix(CLUSTER_SCHEME)
        cluster = True
    return RedisStore(
        url,
        options.prefix,
        cluster=cluster,
        dead_letter_limit=options.dead_letters_max,
    )
