"""The one way in: raw input to validated trial columns.

``decode`` is the one decoder of the trial contract (JSON bytes and Python
objects alike), ``shapes`` the narrow array shapes it tries first,
``columns`` the trials it hands the engine, ``ids`` and
``factors`` its id checks and id columns, ``reasons`` the one wording of
every refusal. The loops that feed the engine live in :mod:`monitor.feeds`.
"""
