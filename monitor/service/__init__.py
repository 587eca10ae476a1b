"""The asyncio service around the engine: sources in, statuses and events out.

``service`` owns the engine; ``worker`` its one thread; ``snapshot`` what
exporters read; ``subscriptions`` live readers; ``retry`` backoff for
sources and publishers; ``rejections`` the recent rejections and their log.
"""
