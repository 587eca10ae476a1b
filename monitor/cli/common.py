"""What several commands share: the default state file and printing statuses."""

from __future__ import annotations

import argparse
import json
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
