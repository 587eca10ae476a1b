"""Redis: the shared state store and the Redis Streams trial source.

One package per outside system; its modules share the key templates in
:mod:`adapters.redis.keys` and never import another adapter.
"""

from adapters.redis.store import RedisStore
from adapters.redis.streams import RedisStreamSource

__all__ = ["RedisStore", "RedisStreamSource"]
