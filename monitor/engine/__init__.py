"""The engine: one run registry, ingestion, looks and events, statuses, plans.

``monitor`` (the :class:`Monitor` facade) composes the parts; ``runs`` holds one
run's live state; ``reservations`` the trials ``next`` handed out; ``scoring``,
``simulation`` and ``live_metrics`` what the CLI and statuses compute from counts.
"""
