"""A full disk: create, fork, repair and the open of a torn file raise ``StorageFailure``
naming the path and the cause, leak no descriptor and leave no partial file.

Most tests simulate ENOSPC by patching ``os.write`` or ``os.fsync``. Set
``CONTEXTREE_TMPFS_TESTS=1`` (as root) to also run them on a real, tiny tmpfs.
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from helpers import open_fds, user_session


def no_space(*_: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture(params=["write", "fsync"])
def full_disk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        Any]:
    """``with full_disk():`` makes every ``os.write`` (or ``os.fsync``) fail with ENOSPC."""
    import contextlib

    @contextlib.contextmanager
    def full() -> Iterator[None]:
        with monkeypatch.context() as m:
            m.setattr(os, request.param, no_space)
            yield

    yield full


def test_create_on_a_full_disk(tmp_path: Path, full_disk: Any) -> None:
    path = tmp_path / "new.jsonl"
    before = open_fds()
    with full_disk(), pytest.raises(ct.errors.StorageFailure) as info:
        ct.Session.create(path, cwd="/")
    assert info.value.path == str(path) and "no space left on device" in str(info.value)
    assert open_fds() == before and files(tmp_path) == []


def test_fork_on_a_full_disk(tmp_path: Path, full_disk: Any) -> None:
    path, dst = tmp_path / "s.jsonl", tmp_path / "fork.jsonl"
    ids = user_session(path, repeat=100)
    with ct.Session.open(path) as s:
        before = open_fds()
        with full_disk(), pytest.raises(ct.errors.StorageFailure) as info:
            s.fork(dst)
        assert info.value.path == str(dst) and "no space left on device" in str(info.value)
        assert open_fds() == before
        assert [e.id for e in s.branch()] == ids
    assert files(tmp_path) == ["s.jsonl"]


def test_repair_on_a_full_disk(tmp_path: Path, full_disk: Any) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, repeat=100)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"bad"}\n')
    original = path.read_bytes()
    before = open_fds()
    with full_disk(), pytest.raises(ct.errors.StorageFailure) as info:
        ct.repair(path)
    assert info.value.path == str(path) and "no space left on device" in str(info.value)
    assert "nothing was changed" in str(info.value) or "unchanged" in str(info.value)
    assert open_fds() == before
    assert path.read_bytes() == original and files(tmp_path) == ["s.jsonl"]
    assert ct.repair(path).changed  # with room again, it works


def test_repair_when_the_disk_fills_after_the_backup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, repeat=100)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"bad"}\n')
    original = path.read_bytes()
    real_fsync, synced = os.fsync, []

    def fsync(fd: int) -> None:
        synced.append(fd)
        if len(synced) > 2:  # the backup and its directory fit; the repaired file does not
            no_space()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(ct.errors.StorageFailure, match="unchanged"):
        ct.repair(path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    names = files(tmp_path)
    assert len(names) == 2 and names[0] == "s.jsonl" and names[1].startswith("s.jsonl.bak-")
    assert (tmp_path / names[1]).read_bytes() == original  # the backup is whole


def test_open_of_a_torn_file_on_a_full_disk(tmp_path: Path, full_disk: Any) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path, repeat=100)
    with open(path, "ab") as f:
        f.write(b'{"type":"mess')
    torn = path.read_bytes()
    before = open_fds()
    with full_disk(), pytest.raises(ct.errors.StorageFailure) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct.Session.open(path)
    assert info.value.path == str(path) and "no space left on device" in str(info.value)
    assert open_fds() == before
    assert path.read_bytes() == torn and files(tmp_path) == ["s.jsonl"]  # no partial record
    with pytest.warns(ct.storage.TornLineWarning), ct.Session.open(path) as s:  # lock freed
        assert [e.id for e in s.branch()] == ids


def test_a_quarantine_write_cut_short_leaves_no_partial_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, repeat=100)
    quarantine = Path(f"{path}.quarantine")
    quarantine.write_bytes(b'{"reason": "earlier"}\n')
    with open(path, "ab") as f:
        f.write(b'{"type":"mess')
    real_write = os.write

    def half(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        no_space()
        return 0

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(ct.errors.StorageFailure), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct.Session.open(path)
    monkeypatch.undo()
    assert quarantine.read_bytes() == b'{"reason": "earlier"}\n'


# -- a real full disk ------------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.environ.get("CONTEXTREE_TMPFS_TESTS") != "1":
        pytest.skip("set CONTEXTREE_TMPFS_TESTS=1 (as root) to test on a real full tmpfs")
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_real_full_disk(tiny_tmpfs: Path) -> None:
    path = tiny_tmpfs / "s.jsonl"
    acked = []
    with ct.Session.create(path, cwd="/") as s:
        with pytest.raises(ct.errors.StorageFailure, match="no space left on device"):
            while True:
                acked.append(s.append_message(ct.Message.user("x" * 3000)))
        with pytest.raises(ct.errors.StorageFailure, match="no space left on device"):
            s.fork(tiny_tmpfs / "fork.jsonl")
    with pytest.raises(ct.errors.StorageFailure, match="no space left on device"):
        ct.Session.create(tiny_tmpfs / "other.jsonl", metadata={"pad": "y" * 100_000})
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"bad"}\n')  # fits in the page already allocated
    with pytest.raises(ct.errors.StorageFailure, match="no space left on device"):
        ct.repair(path)
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["s.jsonl"]
    lines = path.read_bytes().splitlines()
    assert lines[-1] == b'{"type":"message","id":"bad"}'
    path.write_bytes(b"".join(x + b"\n" for x in lines[:-1]))
    with ct.Session.open(path, readonly=True) as again:  # nothing acknowledged was lost
        assert [e.id for e in again.entries()] == acked
