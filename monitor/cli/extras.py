"""Which extra a command needs, said in one line when its libraries are missing.

The base install carries what ``watch``, ``score``, ``status``, ``next``,
``ingest``, ``simulate`` and the Python API need; the service's libraries
come with extras (``pip install '.[http]'`` from a checkout). A command imports
them only when it uses them, so a missing one shows up as a
:class:`ModuleNotFoundError` naming the library; this module turns that into
the extra to install.
"""

from __future__ import annotations

import argparse
from typing import Final

from monitor.stores.factory import missing_extra_message

__all__ = ["EXTRA_OF_LIBRARY", "missing_extra"]

# Each optional library (its import name) and the extra that installs it.
EXTRA_OF_LIBRARY: Final = {
    "fastapi": "http",
    "starlette": "http",
    "uvicorn": "http",
    "sse_starlette": "http",
    "prometheus_client": "http",
    "redis": "redis",
    "hiredis": "redis",
    "aiomqtt": "mqtt",
    "paho": "mqtt",
    "httpx": "client",
    "tenacity": "client",
    "inspect_ai": "inspect",
}

# Commands that need one extra whatever they are asked: ``serve`` imports
# every source and output it may be configured with.
_EXTRA_OF_COMMAND: Final = {"serve": "service"}


def missing_extra(
    error: ModuleNotFoundError, arguments: argparse.Namespace
) -> str | None:
    """The one-line message for a library of an extra that is not installed.

    Returns:
        ``"serve needs the [service] extra (fastapi is not installed): pip
        install '.[service]' from a checkout of scorio-monitor"``, or None
        when the missing module is not an optional library (a broken
        install, not a missing extra).
    """
    library = (error.name or "").partition(".")[0]
    extra = EXTRA_OF_LIBRARY.get(library)
    if extra is None:
        return None
    command: str = arguments.command
    extra = _EXTRA_OF_COMMAND.get(command, extra)
    options = [
        option
        for option in ("http", "url")
        if getattr(arguments, option, None) is not None
    ]
    what = " ".join([command, *(f"--{option}" for option in options)])
    return missing_extra_message(what, extra, library)
