"""Opening a store from what a user wrote: the one place that picks its class.

:func:`open_store` takes nothing or ``"memory:"`` (the in-process store), a
path or ``"sqlite:///path"`` (the embedded SQLite store), a URL of another
scheme, or a store already built. Stores that live outside ``monitor``
(Redis, in ``adapters``) are found by their URL scheme in the entry-point
group ``scorio_monitor.stores``, so ``monitor`` never imports them; one whose
libraries are not installed fails with one line naming the extra to install
(:func:`missing_extra_message`, the one wording of that hint everywhere).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Final, Literal, Protocol, cast

from monitor.errors import ConfigError
from monitor.limits import DEAD_LETTERS_MAX, DEAD_LETTERS_MAX_AGE_S
from monitor.stores.memory import MemoryStore
from monitor.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    # Annotations only: monitor.interfaces imports the store value types
    # from this package, so importing it here would be circular.
    from monitor.interfaces import Store

ENTRY_POINT_GROUP: Final = "scorio_monitor.stores"
MEMORY: Final = "memory:"
# SQLAlchemy's form: three slashes then the path, so an absolute path has
# four (sqlite:////var/lib/scorio.db) and sqlite:///scorio.db is relative.
SQLITE_PREFIX: Final = "sqlite:///"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def missing_extra_message(what: str, extra: str, library: str | None = None) -> str:
    """The one-line hint for an extra that is not installed.

    ``what`` needs ``extra`` (``library``, one of its libraries, is
    missing). scorio-monitor is installed from a checkout (it is not on a
    package index), so the hint gives the command that works there:
    ``view needs the [http] extra (uvicorn is not installed): pip install
    '.[http]' from a checkout of scorio-monitor``.
    """
    missing = "" if library is None else f" ({library} is not installed)"
    return (
        f"{what} needs the [{extra}] extra{missing}: "
        f"pip install '.[{extra}]' from a checkout of scorio-monitor"
    )


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """How to open a store; each kind reads the options that apply to it.

    Args:
        prefix: Key prefix of a shared store (Redis).
        cluster: The URL names a node of a Redis Cluster.
        synchronous: SQLite's durability setting.
        dead_letters_max: Dead letters kept (the newest).
        dead_letters_max_age_s: Dead letters older than this are dropped.
    """

    prefix: str = "scorio"
    cluster: bool = False
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    dead_letters_max: int = DEAD_LETTERS_MAX
    dead_letters_max_age_s: float = DEAD_LETTERS_MAX_AGE_S


class StoreOpener(Protocol):
    """What an entry point of ``scorio_monitor.stores`` names."""

    def __call__(self, url: str, options: StoreOptions) -> Store: ...


def open_store(
    target: Store | str | os.PathLike[str] | None = None,
    options: StoreOptions | None = None,
    *,
    openers: Iterable[EntryPoint] | None = None,
) -> Store:
    """The store ``target`` names, opened with ``options``.

    Args:
        target: ``None`` or ``"memory:"``; a path or ``"sqlite:///path"``; a
            URL whose scheme an entry point of ``scorio_monitor.stores``
            names (``redis://host:6379/0``); or a store, returned as is.
        options: How to open it (defaults: :class:`StoreOptions`).
        openers: The entry points to look schemes up in; by default the
            installed ones (tests pass their own).

    Raises:
        ConfigError: for a scheme no entry point names, or one whose
            libraries are not installed (the message names the extra).

    Examples:
        >>> type(open_store("memory:")).__name__
        'MemoryStore'
    """
    settings = options if options is not None else StoreOptions()
    if target is None or target == MEMORY:
        return MemoryStore(settings.dead_letters_max, settings.dead_letters_max_age_s)
    if isinstance(target, os.PathLike):
        return _sqlite(target, settings)
    if not isinstance(target, str):
        return target
    if target.startswith(SQLITE_PREFIX):
        return _sqlite(target.removeprefix(SQLITE_PREFIX), settings)
    scheme = _SCHEME.match(target)
    if scheme is None:
        return _sqlite(target, settings)
    return _open_url(scheme.group(1).lower(), target, settings, openers)


def _sqlite(path: str | os.PathLike[str], options: StoreOptions) -> Store:
    return SqliteStore(
        path,
        synchronous=options.synchronous,
        dead_letters_max=options.dead_letters_max,
        dead_letters_max_age_s=options.dead_letters_max_age_s,
    )


def _open_url(
    scheme: str,
    url: str,
    options: StoreOptions,
    openers: Iterable[EntryPoint] | None,
) -> Store:
    found = list(entry_points(group=ENTRY_POINT_GROUP) if openers is None else openers)
    entry = next((entry for entry in found if entry.name == scheme), None)
    if entry is None:
        known = ", ".join(sorted({"memory", "sqlite", *(e.name for e in found)}))
        # No entry point at all: an install older than the entry points.
        hint = "" if found else " (reinstall scorio-monitor to register the others)"
        raise ConfigError(f"no store for URL scheme {scheme!r}; known: {known}{hint}")
    try:
        opener = cast(StoreOpener, entry.load())
        return opener(url, options)
    except ImportError as error:
        extra = entry.extras[0] if entry.extras else (error.name or scheme)
        library = (error.name or "").partition(".")[0] or None
        raise ConfigError(
            missing_extra_message(f"store {scheme}://", extra, library)
        ) from error
