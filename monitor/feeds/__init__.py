"""The loops that feed the engine: finished results files and streams of lines.

``files`` turns the items harness readers produce into engine batches (the
``ingest`` command); ``watch`` follows a stream of JSON lines (the ``watch``
command). Both decode through :mod:`monitor.inputs` and count through
:class:`~monitor.engine.monitor.Monitor`, so they sit above the engine.
"""
