"""What several commands share: the default state file and printing statuses."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TypeAlias

from monitor.schema import Status

DEFAULT_STATE = Path("scorio-monitor.db")

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def print_statuses(statuses: list[Status]) -> None:
    """One status as a JSON object, several as an array."""
    if len(statuses) == 1:
        print(statuses[0].model_dump_json(indent=2))
    else:
        print(
            json.dumps(
                [status.model_dump(mode="json") for status in statuses], indent=2
            )
        )


def add_url_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``: send to a running service instead of a file."""
    parser.add_argument(
        "--url",
        help="send the trials to a running service's HTTP API (e.g. "
        "http://127.0.0.1:8000) instead of a state file",
    )
    parser.add_argument(
        "--token",
        help="bearer token for --url (default: $SCORIO_MONITOR_TOKEN)",
    )


def url_token(arguments: argparse.Namespace) -> str | None:
    """The token for ``--url``: the option, else ``SCORIO_MONITOR_TOKEN``."""
    token: str | None = arguments.token or os.environ.get("SCORIO_MONITOR_TOKEN")
    return token or None
