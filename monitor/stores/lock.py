"""The lock that keeps a state file to one writing process.

A writer holds an exclusive lock on ``<state file>.lock`` while the store
is open and removes the file when it closes; readers take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from monitor.errors import StoreError


class WriterLock:
    """The exclusive lock of one state file's writer.

    Args:
        path: The state file; its lock is ``<path>.lock``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock_path = f"{path}.lock"
        self._handle: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError when another process holds it."""
        path = self._lock_path
        while True:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                os.close(handle)
                raise StoreError(
                    f"state file {self._path} is being written by another process"
                ) from exc
            # The holder before us removes the file on close: a lock on a
            # file no longer at the path guards nothing, so take the new one.
            try:
                if os.stat(path).st_ino == os.fstat(handle).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(handle)
        self._handle = handle

    def release(self) -> None:
        """Give the lock up (if held) and remove its file."""
        if self._handle is not None:
            # Removed while still held, so no one can lock the old file after.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path)
            os.close(self._handle)
            self._handle = None
