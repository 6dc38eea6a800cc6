"""Overflow store: private files, safe names, sessions, retention."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from contextree import OverflowStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def test_save_str_and_bytes(store: OverflowStore) -> None:
    p1 = store.save("héllo\n")
    p2 = store.save(b"\xff\x00raw")
    assert p1.read_bytes() == "héllo\n".encode()
    assert store.read(p2) == b"\xff\x00raw"
    assert p1 != p2 and p1.is_absolute()
    assert p1.parent == store.directory


def test_private_modes(store: OverflowStore) -> None:
    old = os.umask(0)
    try:
        path = store.save("secret", session_id="s1")
    finally:
        os.umask(old)
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(store.directory) == 0o700


def test_unique_names(store: OverflowStore) -> None:
    paths = {store.save("x", label="bash") for _ in range(200)}
    assert len(paths) == 200
    assert all(p.name.endswith("-bash.txt") for p in paths)


def test_no_temp_files_left(store: OverflowStore) -> None:
    store.save("data", session_id="s")
    leftovers = [p for p in store.directory.rglob(".tmp-*")]
    assert leftovers == []


@pytest.mark.parametrize(
    "hostile",
    [
        "../../etc/passwd",
        "/",
        "/etc/shadow",
        "a\x00b",
        "..",
        ".",
        "x" * 10_000,
        "",
        "ü/ñ",
        "a\\..\\b",
    ],
)
def test_hostile_labels_and_sessions_stay_inside(store: OverflowStore, hostile: str) -> None:
    for path in (
        store.save("x", label=hostile),
        store.save("x", session_id=hostile),
        store.save("x", session_id=hostile, label=hostile),
    ):
        assert path.resolve().is_relative_to(store.directory.resolve())
        assert path.parent in (store.directory, *store.directory.iterdir())
        assert len(path.name) < 120 and len(path.parent.name) < 120
        assert store.read(path) == b"x"


def test_sessions_do_not_collide(store: OverflowStore) -> None:
    a = store.save("a", session_id="a/b")
    b = store.save("b", session_id="ab")
    assert a.parent != b.parent


def test_delete_session(store: OverflowStore) -> None:
    mine = [store.save(str(i), session_id="mine") for i in range(3)]
    other = store.save("o", session_id="other")
    loose = store.save("l")
    assert store.delete_session("mine") == 3
    assert not any(p.exists() for p in mine)
    assert other.exists() and loose.exists()
    assert store.delete_session("mine") == 0
    assert store.delete_session("never") == 0


def test_paths_outside_the_store_are_refused(store: OverflowStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    inside = store.save("x")
    for bad in (outside, store.directory / ".." / "outside.txt", store.directory, "/etc/passwd"):
        with pytest.raises(ValueError, match="not inside the overflow store"):
            store.read(bad)
        with pytest.raises(ValueError, match="not inside the overflow store"):
            store.delete(bad)
    assert outside.read_text() == "keep me"
    assert store.delete(inside) is True
    assert store.delete(inside) is False


def test_symlink_out_of_the_store_is_refused(store: OverflowStore, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    store.save("x")
    link = store.directory / "link.txt"
    link.symlink_to(secret)
    with pytest.raises(ValueError):
        store.read(link)
    assert link not in store.files()


def test_gc_by_age(store: OverflowStore) -> None:
    old = store.save("old" * 10, session_id="s")
    new = store.save("new")
    age(old, 8 * 86400)
    dry = store.gc(dry_run=True)
    assert (dry.removed, dry.bytes_freed, dry.paths) == (1, 30, (str(old),))
    assert old.exists()
    report = store.gc()
    assert (report.removed, report.bytes_freed, report.kept, report.kept_bytes) == (1, 30, 1, 3)
    assert not old.exists() and new.exists()
    assert not old.parent.exists()  # the emptied session folder went too


def test_gc_by_size_removes_oldest_first(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "s", max_total_bytes=250, gc_interval=None)
    paths = [store.save(b"x" * 100, session_id=f"s{i % 2}") for i in range(5)]
    for i, p in enumerate(paths):
        age(p, 1000 - i)  # paths[0] is the oldest
    report = store.gc()
    assert report.removed == 3 and report.bytes_freed == 300 and report.kept_bytes == 200
    assert [p.exists() for p in paths] == [False, False, False, True, True]
    assert store.files() == paths[3:]


@pytest.mark.parametrize(("stale_name", "fresh_name"), [
    (".tmp-deadbeef", ".tmp-inprogress"),  # an older version's temp names
    (".20250101T000000000-abc-out.txt.0123456789ab.tmp",  # atomic_write's
     ".20250101T000000000-def-out.txt.ba9876543210.tmp"),
])
def test_gc_removes_stale_temp_files(store: OverflowStore, stale_name: str,
                                     fresh_name: str) -> None:
    store.save("x")
    stale = store.directory / stale_name
    stale.write_bytes(b"partial")
    fresh = store.directory / fresh_name
    fresh.write_bytes(b"partial")
    age(stale, 2 * 3600)
    store.gc()
    assert not stale.exists() and fresh.exists()


def test_save_runs_gc_automatically_but_keeps_the_new_file(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "auto", max_total_bytes=10, gc_interval=0)
    old = store.save(b"o" * 8)
    age(old, 100)
    big = store.save(b"b" * 50)  # over the cap alone: still kept, it was just promised
    assert not old.exists() and big.exists()


def test_auto_gc_is_throttled(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "throttled", max_age=0, gc_interval=3600)
    first = store.save("a")
    age(first, 10)
    second = store.save("b")  # gc ran on the first save; not again within the hour
    assert first.exists() and second.exists()


def test_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "ct"))
    assert OverflowStore.default().directory == tmp_path / "ct" / "tool-output"
    monkeypatch.delenv("CONTEXTREE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert OverflowStore.default().directory.name == "tool-output"
    assert "contextree" in str(OverflowStore.default().directory)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_age": -1}, "max_age must be >= 0"),
        ({"max_total_bytes": -5}, "max_total_bytes must be >= 0"),
        ({"gc_interval": -1}, "gc_interval must be >= 0"),
    ],
)
def test_bad_settings(tmp_path: Path, kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OverflowStore(tmp_path, **kwargs)  # type: ignore[arg-type]
