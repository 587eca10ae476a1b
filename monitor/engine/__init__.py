"""The engine: one run registry, ingestion, looks and events, statuses, plans.

``monitor`` (the :class:`Monitor` facade) composes the parts: ``registry``
(the runs), ``ingest`` (trials in), ``looks`` (decisions and events),
``status`` and ``planning`` (what ``next`` hands out; its leases in
``reservations``). ``runs`` holds one run's live state and ``admission`` what
it takes; ``scoring``, ``simulation`` and ``live_metrics`` what the CLI and
statuses compute from counts.
"""
