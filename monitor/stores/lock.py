"""The lock that keeps a state file to one writing process.

A writer holds an exclusive lock on ``<state file>.lock`` while the store
is open and removes the file when it closes; readers take no lock. The
lock is the operating system's (``flock`` on POSIX, ``LockFileEx`` on
Windows, both through ``filelock``), so a writer that dies leaves a file
any later writer can lock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from filelock import lock_descriptor

from monitor.errors import StoreError


class StateFileBusyError(StoreError):
    """Another process holds the state file's writer lock.

    A caller that can wait (or set its work aside) catches this one rather
    than any StoreError: the file itself is fine.
    """


def has_writer(path: Path) -> bool:
    """Whether a writer has the state file open: its lock file exists.

    A writer removes the file when it closes; one that died leaves it. So a
    no is certain, a yes may name a writer that is gone.
    """
    return Path(f"{path}.lock").exists()


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
        """Take the lock, or raise StateFileBusyError when another process holds it."""
        path = self._lock_path
        while True:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                locked = lock_descriptor(handle, blocking=False)
            except OSError:
                os.close(handle)
                raise
            if not locked:
                os.close(handle)
                raise StateFileBusyError(
                    f"state file {self._path} is being written by another process"
                )
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
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            # Removed while still held, so no one can lock the old file after.
            os.unlink(self._lock_path)
        except FileNotFoundError:
            pass
        except PermissionError:
            # Windows removes no open file: close (which unlocks) first, then
            # remove it unless the next writer already holds it open.
            os.close(handle)
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path)
            return
        os.close(handle)
