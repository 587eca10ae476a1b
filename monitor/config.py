"""Reading run configurations from TOML files.

A run file holds one run's keys at the top level, or a ``[[runs]]`` array of
such tables (DESIGN.md section 4). Errors name the file and the problem.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from monitor.errors import ConfigError
from monitor.parsing import describe_validation_error
from monitor.schema import RunConfig


def load_run_configs(path: Path) -> list[RunConfig]:
    """All run configs of a TOML file.

    Raises:
        ConfigError: when the file is missing, is not TOML, or a run is invalid.
    """
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"no config file at {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    tables = document.get("runs")
    if tables is None:
        tables = [document]
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{path}: runs must be an array of tables ([[runs]])")
    configs = []
    for index, table in enumerate(tables):
        try:
            configs.append(RunConfig.model_validate(table))
        except ValidationError as exc:
            where = f"{path} [[runs]] #{index + 1}" if "runs" in document else str(path)
            raise ConfigError(f"{where}: {describe_validation_error(exc)}") from exc
    return configs
