"""Arrays in anonymous memory maps of their own, for the count storage.

Pages nobody wrote take no memory, a map's pages go back to the system when
the array is dropped, and a map can grow in place (mremap). Tests patch
:func:`resize` to stand in for a system without mremap.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np
from numpy.typing import NDArray


def zeros(shape: tuple[int, ...], kind: np.dtype[Any], mapped: bool) -> NDArray[Any]:
    """Zeros; ``mapped``: in an anonymous memory map of their own.

    Pages nobody wrote take no memory, a map's pages go back to the system
    when the array is dropped (malloc keeps freed blocks resident in its
    heap), and a map can grow in place (:func:`resize`).
    """
    size = math.prod(shape) * kind.itemsize
    private = getattr(mmap, "MAP_PRIVATE", None)  # None: not a POSIX system
    if not mapped or not size or private is None:
        return np.zeros(shape, dtype=kind)
    # Private: a shared anonymous map cannot grow in place (mremap).
    buffer = mmap.mmap(-1, size, flags=private)
    return np.frombuffer(buffer, dtype=kind).reshape(shape)


def resize(buffer: mmap.mmap, size: int) -> None:
    """Grow a map in place (mremap); raises where that cannot be done."""
    buffer.resize(size)


def map_of(array: NDArray[Any]) -> mmap.mmap | None:
    """The memory map an array of :func:`zeros` lies in, if it has one."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None
