"""The ``scorio-monitor`` command line: the composition root.

This is the one part of ``monitor`` allowed to import ``adapters``: it
parses arguments, builds the adapters a command needs and hands them to the
engine. :mod:`monitor.cli.commands` defines every command; the chosen
command's module is imported only once parsed, and the service's libraries
only by the commands and options that use them: a command whose extra is not
installed says, in one line, which to install (:mod:`monitor.cli.extras`).
Exit status: 0 on success, 1 when nothing valid was read, 2 for usage errors
and a missing extra.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib import metadata

from monitor.cli import commands

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    # Imported only now, and only the chosen command's module (see commands).
    from monitor.cli.extras import missing_extra
    from monitor.errors import MonitorError

    module, function = arguments.handler.split(":")
    try:
        handler = getattr(importlib.import_module(f"monitor.cli.{module}"), function)
        code: int = handler(arguments)
    except ModuleNotFoundError as exc:
        message = missing_extra(exc, arguments)
        if message is None:
            raise
        print(f"scorio-monitor: error: {message}", file=sys.stderr)
        return 2
    except (ValueError, MonitorError) as exc:
        print(f"scorio-monitor: error: {_message(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); that is not an error of ours.
        sys.stderr.close()
        return 0
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scorio-monitor",
        description="Streaming Bayes@N evaluation monitor with adaptive stopping.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subcommands = parser.add_subparsers(dest="command", required=True)
    commands.add_commands(subcommands)
    return parser


def _version() -> str:
    try:
        return metadata.version("scorio-monitor")
    except metadata.PackageNotFoundError:
        # Run from a source tree that was never installed.
        return "unknown (not installed)"


def _message(error: Exception) -> str:
    """One line for an error: a pydantic dump becomes ``field: problem``."""
    # Imported here: pydantic is only needed once something failed.
    from pydantic import ValidationError

    from monitor.inputs.reasons import describe_validation_error

    if isinstance(error, ValidationError):
        return describe_validation_error(error)
    return " ".join(str(error).split())
