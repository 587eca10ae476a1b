"""What several commands share: the default state file, printing statuses and
refusing inputs a command cannot read."""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

if TYPE_CHECKING:
    # Types only: the parser imports this module and must stay light.
    from monitor.engine.monitor import Monitor
    from monitor.schema import Rejection, RunConfig, Status

DEFAULT_STATE = Path("scorio-monitor.db")

InputKind: TypeAlias = Literal["lines", "csv", "jsonl", "npz", "lm-eval"]
ArchiveKind: TypeAlias = Literal["npz", "inspect", "zip", "damaged"]

_ZIP_MAGIC: Final = b"PK\x03\x04"
_PRINTED_REJECTIONS: Final = 50
_SNIFFED_BYTES: Final = 64 * 1024
_SNIFFED_LINES: Final = 5
_STATE_PATTERNS: Final = ("*.monitor.db", "*/*.monitor.db")

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def print_statuses(statuses: list[Status]) -> None:
    """The one ``--json`` shape: an array with one status per run, always."""
    print(json.dumps([status.model_dump(mode="json") for status in statuses], indent=2))


def configure_runs(
    monitor: Monitor, configs: Sequence[RunConfig], way_out: str
) -> None:
    """Declare each run; a change its counted trials cannot take says the way out.

    Args:
        way_out: How to start over under the new config, e.g. ``give a new
            --state FILE``.

    Raises:
        ValueError: when a run that is in the state refuses its new config.
    """
    from monitor.errors import ConfigError

    for config in configs:
        existing = config.run in monitor.runs
        try:
            monitor.configure(config)
        except ConfigError as exc:
            if not existing:
                raise
            raise ValueError(
                f"{exc}; to start over under this config, {way_out}"
            ) from exc


def new_state_way_out(state: Path) -> str:
    """The way out of a config a state file's counted trials refuse."""
    return f"give a new --state FILE (or delete {state})"


def state_next_to(path: Path) -> Path:
    """The state file ``watch`` and ``ingest`` keep beside their input.

    Named from the whole file name, suffix included, so ``results.csv`` and
    ``results.jsonl`` keep apart states: ``results.csv.monitor.db``.
    """
    return path.with_name(path.name + ".monitor.db")


def find_state(given: Path | None) -> Path:
    """The state file a reading command opens: ``--state``, or the one here.

    ``watch`` and ``ingest`` write ``<input>.monitor.db`` next to their input,
    so without ``--state`` the file is looked for: ``scorio-monitor.db``, else
    the only ``*.monitor.db`` in this directory or one below.

    Raises:
        ValueError: when there is none, or several to choose from.
    """
    if given is not None:
        return checked_state(given)
    if DEFAULT_STATE.exists():
        return DEFAULT_STATE
    found = sorted(path for pattern in _STATE_PATTERNS for path in Path().glob(pattern))
    if len(found) == 1:
        print(f"scorio-monitor: reading {found[0]}", file=sys.stderr)
        return found[0]
    if not found:
        raise ValueError(
            f"no state file: no {DEFAULT_STATE} and no *.monitor.db here or one "
            "directory down; give --state (watch and ingest write "
            "<input>.monitor.db next to their input)"
        )
    names = ", ".join(str(path) for path in found)
    raise ValueError(f"several state files ({names}); choose one with --state")


def require_run(monitor: Monitor, run: str, state: Path) -> None:
    """Refuse, naming the state file and its runs, a run it does not hold.

    Raises:
        ValueError: when ``run`` is not one of the state's runs.
    """
    runs = monitor.runs
    if run in runs:
        return
    held = f"its runs: {', '.join(runs)}" if runs else "it holds no run yet"
    raise ValueError(f"{state} holds no run {run!r}; {held}")


def checked_state(path: Path, option: str = "--state") -> Path:
    """``path`` as a state file (``option``), refused in one line if it is a
    directory.

    Raises:
        ValueError: when ``path`` is a directory (naming the state files in it).
    """
    if not path.is_dir():
        return path
    inside = sorted(path.glob("*.monitor.db")) + sorted(path.glob("*/*.monitor.db"))
    hint = (
        f"; the state files in it: {', '.join(map(str, inside[:5]))}"
        if inside
        else f"; {option} takes a file (e.g. a .monitor.db)"
    )
    raise ValueError(f"{path} is a directory, not a state file{hint}")


def archive_kind(path: Path) -> ArchiveKind | None:
    """What a zip archive holds: numpy arrays (an ``.npz``), an Inspect AI
    log (``.eval``: ``header.json`` or a ``_journal/``), something else, or
    nothing readable (``damaged``); None when the file is no zip archive."""
    with path.open("rb") as handle:
        if handle.read(4) != _ZIP_MAGIC:
            return None
    # Imported here: only a zip needs it, and the parser imports this module.
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return "damaged"
    if any(name == "header.json" or name.startswith("_journal/") for name in names):
        return "inspect"
    if names and all(name.endswith(".npy") for name in names):
        return "npz"
    return "zip"


def check_input(path: Path, expected: InputKind, command: str) -> None:
    """Refuse, in one line, an input the command cannot read.

    Raises:
        ValueError: when ``path`` is missing, a directory, an archive where
            text lines are expected, or not an ``.npz`` where one is.
    """
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if path.is_dir():
        if expected == "lm-eval":
            return
        raise ValueError(
            f"{path} is a directory; {command} reads a file (an lm-eval output "
            "directory goes through `scorio-monitor ingest DIR --format lm-eval`)"
        )
    archive = archive_kind(path)
    if archive == "inspect":
        then = ", then `scorio-monitor status`" if command == "score" else ""
        raise ValueError(
            f"{path} is an Inspect AI log, not {_READS[expected]}; read it with "
            f"`scorio-monitor ingest {path} --format inspect`{then}"
        )
    if archive == "damaged":
        raise ValueError(
            f"{path}: not a readable .npz archive (it starts as a zip archive "
            "but is not a complete one)"
        )
    if expected == "npz" and archive != "npz":
        rows = (
            "score reads an .npz, or CSV or JSONL trial rows"
            if command == "score"
            else "for trial rows use --format csv or jsonl"
        )
        raise ValueError(
            f"{path} is not an .npz archive (a zip of numpy arrays); {rows}"
        )
    if expected == "lines" and looks_like_csv(path):
        raise ValueError(
            f"{path} holds CSV rows, not JSON lines; read it with "
            f"`scorio-monitor ingest {path} --format csv`"
        )
    if expected != "npz" and archive == "npz":
        usage = (
            "`scorio-monitor score FILE` or `scorio-monitor ingest FILE --format npz`"
            if expected == "lines"
            else "--format npz"
        )
        raise ValueError(
            f"{path} is an .npz archive, not {_READS[expected]}; use {usage}"
        )
    if expected != "npz" and archive == "zip":
        raise ValueError(
            f"{path} is a zip archive, neither an .npz of numpy arrays nor an "
            f"Inspect AI log; {command} reads {_READS[expected]}"
        )


def looks_like_csv(path: Path) -> bool:
    """Whether the file's first lines are CSV rows rather than JSON lines.

    True when its first few non-blank lines (at most ``_SNIFFED_LINES``)
    all split into the same number of comma-separated fields, at least two,
    and none opens a JSON object or array: a header and its rows. One
    broken line among JSON lines is no CSV.
    """
    with path.open("rb") as handle:
        head = handle.read(_SNIFFED_BYTES)
    lines = head.splitlines()
    if len(head) == _SNIFFED_BYTES:
        lines = lines[:-1]  # cut mid-line
    lines = [line for line in lines if line.strip()][:_SNIFFED_LINES]
    if not lines or any(line.lstrip()[:1] in (b"{", b"[") for line in lines):
        return False
    text = [line.decode("utf-8", errors="replace") for line in lines]
    widths = {len(row) for row in csv.reader(text)}
    return len(widths) == 1 and widths.pop() >= 2


_READS: Final = {
    "npz": "an .npz archive",
    "lines": "JSON lines",
    "csv": "CSV rows",
    "jsonl": "JSON lines",
    "lm-eval": "an lm-eval samples file",
}


class RejectionPrinter:
    """Rejections on stderr as ``file:line: rejected: reason``, the first few.

    Args:
        path: The input file, named for a rejection that has no source.
        limit: How many to print; the rest are only counted.
    """

    def __init__(self, path: Path | None, limit: int = _PRINTED_REJECTIONS) -> None:
        self._path = "stdin" if path is None else str(path)
        self._limit = limit
        self.count = 0
        self.without_run = 0

    def show(self, rejections: Sequence[Rejection]) -> None:
        for rejection in rejections:
            self.count += 1
            if rejection.run is None:
                self.without_run += 1
            if self.count > self._limit:
                continue
            where = rejection.source.removeprefix("file:") or self._path
            reason = rejection.reason
            if rejection.source == "columns":
                # A cell of a results tensor: its fields say where it is.
                where, reason = self._path, f"{reason}: {rejection.raw}"
            elif rejection.position is not None:
                where = f"{where}:{rejection.position}"
            print(f"{where}: rejected: {reason}", file=sys.stderr)

    def summarise(self, kept: bool = True) -> None:
        """Say how many were left unprinted and how many no run counts.

        ``kept``: whether the state file (their dead letters) is kept.
        """
        if self.count > self._limit:
            where = " (kept as dead letters in the state file)" if kept else ""
            print(
                f"scorio-monitor: {self.count - self._limit} more rejected{where}",
                file=sys.stderr,
            )
        if self.without_run:
            print(
                f"scorio-monitor: {self.without_run} of {self.count} rejected "
                "inputs named no run; no run's count includes them",
                file=sys.stderr,
            )


def remove_state_file(state: Path) -> None:
    """Delete a state file this command made (and its SQLite side files)."""
    for path in (state, *(state.with_name(state.name + end) for end in _SIDE_FILES)):
        path.unlink(missing_ok=True)


_SIDE_FILES: Final = ("-wal", "-shm", ".lock")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, so a server announces only once it can.

    Raises:
        ValueError: when the address cannot be bound (e.g. the port is busy).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY)
    # only on sockets that say they are TCP. With it on, every request on a
    # kept-alive connection waited ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ValueError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from exc
    # Listening at once: a client that connects after the announcement waits
    # in the backlog until the server accepts, instead of being refused.
    sock.listen(2048)
    return sock


def add_url_arguments(parser: argparse.ArgumentParser, token: bool = True) -> None:
    """``--url`` and ``--token``: send to a running service instead of a file.

    ``token=False`` when the command has a ``--token`` of its own already
    (``watch``, whose ``--http`` takes one too); ``--url`` then uses it.
    """
    parser.add_argument(
        "--url",
        help="send the trials to a running service's HTTP API (e.g. "
        "http://127.0.0.1:8000) instead of a state file",
    )
    if token:
        parser.add_argument(
            "--token",
            help="bearer token for --url (default: $SCORIO_MONITOR_TOKEN)",
        )


def url_token(arguments: argparse.Namespace) -> str | None:
    """The token for ``--url``: the option, else ``SCORIO_MONITOR_TOKEN``."""
    token: str | None = arguments.token or os.environ.get("SCORIO_MONITOR_TOKEN")
    return token or None
