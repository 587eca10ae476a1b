"""open_store: each kind of target, scheme lookup by entry point, clear errors."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from monitor import Monitor
from monitor.errors import ConfigError
from monitor.interfaces import Store
from monitor.stores import StoreOptions, open_store
from monitor.stores.factory import ENTRY_POINT_GROUP
from monitor.stores.memory import MemoryStore
from monitor.stores.sqlite import SqliteStore

OPENED: list[tuple[str, StoreOptions]] = []


def memory_opener(url: str, options: StoreOptions) -> Store:
    """A stand-in store plugin: records what it was asked to open."""
    OPENED.append((url, options))
    return MemoryStore()


def entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


@pytest.fixture
def opened() -> Iterator[list[tuple[str, StoreOptions]]]:
    OPENED.clear()
    yield OPENED
    OPENED.clear()


def test_nothing_and_memory_open_the_memory_store() -> None:
    assert isinstance(open_store(), MemoryStore)
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store("memory:"), MemoryStore)


@pytest.mark.parametrize("form", ["text", "path"])
def test_a_path_opens_the_sqlite_store_there(tmp_path: Path, form: str) -> None:
    path = tmp_path / "state.db"
    store = open_store(str(path) if form == "text" else path)
    try:
        assert isinstance(store, SqliteStore)
        assert path.exists()
    finally:
        store.close()


def test_a_sqlite_url_opens_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///relative.db")
    absolute = open_store(f"sqlite:///{tmp_path / 'absolute.db'}")
    try:
        assert isinstance(relative, SqliteStore)
        assert isinstance(absolute, SqliteStore)
        assert (tmp_path / "relative.db").exists()
        assert (tmp_path / "absolute.db").exists()
    finally:
        relative.close()
        absolute.close()


def test_a_store_is_returned_as_it_is() -> None:
    store = MemoryStore()
    assert open_store(store) is store


def test_another_scheme_is_opened_by_its_entry_point(
    opened: list[tuple[str, StoreOptions]],
) -> None:
    options = StoreOptions(prefix="p", cluster=True)
    plugins = [entry("fake", f"{__name__}:memory_opener")]
    store = open_store("FAKE://host:1/0", options, openers=plugins)
    assert isinstance(store, MemoryStore)
    assert opened == [("FAKE://host:1/0", options)]


def test_an_unknown_scheme_names_the_known_ones() -> None:
    plugins = [entry("fake", f"{__name__}:memory_opener")]
    with pytest.raises(ConfigError) as caught:
        open_store("nosuch://host", openers=plugins)
    assert str(caught.value) == (
        "no store for URL scheme 'nosuch'; known: fake, memory, sqlite"
    )


def test_no_entry_points_at_all_suggests_reinstalling() -> None:
    with pytest.raises(ConfigError, match="reinstall scorio-monitor"):
        open_store("redis://localhost:6379/0", openers=[])


def test_a_missing_extra_says_what_to_install_in_one_line() -> None:
    plugins = [entry("redis", "scorio_monitor_absent_library.opener:open [redis]")]
    with pytest.raises(ConfigError) as caught:
        open_store("redis://localhost:6379/0", openers=plugins)
    assert str(caught.value) == (
        "store redis:// needs the [redis] extra (scorio_monitor_absent_library is "
        "not installed): pip install '.[redis]' from a checkout of scorio-monitor"
    )


def test_entry_points_are_read_from_installed_metadata(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    opened: list[tuple[str, StoreOptions]],
) -> None:
    """Without ``openers``, schemes come from the installed distributions."""
    info = tmp_path / "fake_store_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-store-plugin\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nfake = {__name__}:memory_opener\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert isinstance(open_store("fake://somewhere"), MemoryStore)
    assert [url for url, _ in opened] == ["fake://somewhere"]


def test_the_monitor_opens_its_state_through_the_factory(tmp_path: Path) -> None:
    with Monitor("memory:") as monitor:
        assert isinstance(monitor.store, MemoryStore)
    with Monitor(tmp_path / "state.db") as monitor:
        assert isinstance(monitor.store, SqliteStore)
