"""The one way in: raw input to validated trial columns, and the loops that feed it.

``decode`` is the one decoder of the trial contract (JSON bytes and Python
objects alike), ``columns`` the trials it hands the engine, ``ids`` and
``reasons`` its id checks and its wording; ``files`` reads finished results
files; ``watch`` follows a stream of JSON lines.
"""
