"""The life of a JSONL session's file: handles that share it, locks that go with the last
handle (or its collection), writers that never lock a replaced file, sidecars that never
follow links, temp files that crashes leave behind."""

from __future__ import annotations

import fcntl
import gc
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from helpers import open_fds, user_session

OPEN_FOR_WRITING = textwrap.dedent("""
    import sys
    import contextree as ct
    try:
        ct.Session.open(sys.argv[1]).close()
    except ct.errors.SessionLocked as e:
        print(e)
        sys.exit(3)
""")


def other_process_can_write(path: Path) -> bool:
    """Whether a separate process can open ``path`` for writing now (3: locked)."""
    proc = subprocess.run([sys.executable, "-c", OPEN_FOR_WRITING, str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 3), proc.stderr
    return proc.returncode == 0


# -- handles and locks ---------------------------------------------------------------------------

def test_a_collected_session_releases_its_fd_and_lock_with_a_resource_warning(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    before = open_fds()
    s = ct.Session.open(path)
    s.append_message(ct.Message.user("more"))
    assert not other_process_can_write(path)
    with pytest.warns(ResourceWarning, match="unclosed session"):
        del s
        gc.collect()
    assert open_fds() == before
    assert other_process_can_write(path)
    with ct.Session.open(path) as again:  # and in this process, of course
        assert len(again) == 3


def test_a_discarded_fork_does_not_keep_the_new_file_locked(tmp_path: Path) -> None:
    path, dst = tmp_path / "s.jsonl", tmp_path / "fork.jsonl"
    user_session(path, 2)
    with ct.Session.open(path) as s, pytest.warns(ResourceWarning):
        s.fork(dst)  # the returned session is dropped at once
        gc.collect()
    assert other_process_can_write(dst)
    with ct.Session.open(dst) as f:
        assert len(f) == 2


def test_a_second_open_in_the_process_shares_the_file_and_sees_every_append(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    a, b = user_session(path, 2)
    first = ct.Session.open(path)
    second = ct.Session.open(path)
    assert second.leaf_id == b
    c = second.append_message(ct.Message.user("from the second"))
    assert first.leaf_id == c and first.get_entry(c) is not None
    d = first.append_message(ct.Message.user("from the first"))
    assert second.leaf_id == d
    assert [e.id for e in second.branch()] == [a, b, c, d]
    with second.batch():  # a batch in one handle, a plain append in the other: in order
        e = second.append_message(ct.Message.user("batched"))
        f = first.append_message(ct.Message.user("direct"))
    assert [x.id for x in first.branch()][-2:] == [e, f]
    first.close()
    assert not other_process_can_write(path)  # the second handle still holds the lock
    g = second.append_message(ct.Message.user("still writable"))
    second.close()
    assert other_process_can_write(path)
    with ct.Session.open(path, readonly=True) as r:
        assert [x.id for x in r.branch()] == [a, b, c, d, e, f, g]
    with pytest.raises(ct.errors.ReadOnlySession, match="closed"):
        first.append_message(ct.Message.user("after close"))


def test_a_lock_held_by_this_process_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    with ct.Session.open(path):
        with pytest.raises(ct.errors.SessionLocked, match=f"this process \\(pid {os.getpid()}"):
            ct.repair(path)
        with pytest.raises(ct.errors.SessionLocked, match="other Session object"):
            ct.Session.delete(path)
        assert ct.repair(path, dry_run=True).changed is False  # reading needs no lock
    assert path.exists()


def test_a_lock_held_by_another_process_names_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, contextree as ct\n"
         "s = ct.Session.open(sys.argv[1]); print('ready', flush=True); sys.stdin.read()",
         str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        for attempt in (lambda: ct.Session.open(path), lambda: ct.repair(path),
                        lambda: ct.Session.delete(path)):
            with pytest.raises(ct.errors.SessionLocked, match=f"pid {holder.pid} on "):
                attempt()
    finally:
        holder.kill()
        holder.wait()
    assert path.exists()


def test_failed_opens_and_creates_leak_no_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not a session\n")
    before = open_fds()
    for _ in range(20):
        with pytest.raises(ct.errors.InvalidHeader):
            ct.Session.open(bad)
        with pytest.raises(ct.errors.SessionExists):
            ct.Session.create(path)
        with pytest.raises(ct.errors.SessionNotFound):
            ct.Session.open(tmp_path / "missing.jsonl")
        ct.Session.open(path).close()
        ct.Session.open(path, readonly=True).close()
    assert open_fds() == before


# -- a file replaced or removed between a writer's open and its lock ---------------------------

def between_open_and_lock(monkeypatch: pytest.MonkeyPatch, path: Path,
                          action: Callable[[], object]) -> list[bool]:
    """Run ``action`` once, the first time a writer is about to lock ``path``'s file."""
    real = fcntl.flock
    done: list[bool] = []

    def flock(fd: int, op: int) -> None:
        if not done and op & fcntl.LOCK_EX and os.path.exists(path) and (
                os.fstat(fd).st_ino == os.stat(path).st_ino):
            done.append(True)
            action()
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    return done


def test_a_writer_never_locks_a_file_that_repair_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path, 2)
    with open(path, "ab") as f:  # something for repair to do, so it replaces the file
        f.write(b'{"type":"message","id":"dup"}\n')
        f.write(ct.entries.encode_line(ct.entries.CustomEntry(
            "late", ids[-1], "2026-01-01T00:00:00.000Z", custom_type="c")))
    done = between_open_and_lock(monkeypatch, path, lambda: ct.repair(path))
    with ct.Session.open(path) as s:
        new = s.append_message(ct.Message.user("acknowledged"))
    assert done
    with ct.Session.open(path, readonly=True) as r:  # the append is in the file at the path
        assert new in r and [e.id for e in r.branch()][-2:] == ["late", new]


def test_a_writer_never_locks_a_file_that_delete_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    done = between_open_and_lock(monkeypatch, path, lambda: ct.Session.delete(
        path, store=ct.OverflowStore(tmp_path / "spill")))
    with pytest.raises(ct.errors.SessionNotFound, match="deleted"):
        ct.Session.open(path)
    assert done and not path.exists()


# -- sidecars never follow links --------------------------------------------------------------

def test_a_link_planted_as_the_lock_file_is_replaced_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    Path(f"{path}.lock").symlink_to(victim)
    with ct.Session.open(path) as s:
        s.append_message(ct.Message.user("x"))
        lock = Path(f"{path}.lock")
        assert not lock.is_symlink() and str(os.getpid()) in lock.read_text()
        assert lock.stat().st_mode & 0o777 == 0o600
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_link_planted_as_the_quarantine_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path, 2)
    with open(path, "ab") as f:
        f.write(b'{"type":"mess')  # a torn tail, to be quarantined
    torn = path.read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    quarantine = Path(f"{path}.quarantine")
    if kind == "symlink":
        quarantine.symlink_to(victim)
    else:
        os.link(victim, quarantine)
    with pytest.raises(ct.errors.StorageFailure, match="quarantine file") as info:
        ct.Session.open(path)
    assert "link" in str(info.value)
    assert victim.read_text() == "precious" and path.read_bytes() == torn
    for args in ({}, {"dry_run": False}):
        with pytest.raises(ct.errors.StorageFailure, match="quarantine file"):
            ct.repair(path, **args)
    assert victim.read_text() == "precious" and path.read_bytes() == torn
    quarantine.unlink()
    with pytest.warns(ct.storage.TornLineWarning):
        s = ct.Session.open(path)
    with s:
        assert [e.id for e in s.branch()] == ids
    assert quarantine.stat().st_mode & 0o777 == 0o600


# -- temp files left by crashes ------------------------------------------------------------------

def test_stale_temp_files_are_removed_on_open_and_live_ones_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)  # created before the leftovers: this process swept the directory already
    stale = [tmp_path / ".s.jsonl.0123456789ab.tmp", tmp_path / ".fork.jsonl.a1b2c3d4e5f6.tmp",
             tmp_path / ".s.jsonl.bak-20260101T000000-00ff00ff.ba98765432dc.tmp"]
    for p in stale:
        p.write_bytes(b"half a copy")
    live = tmp_path / ".other.jsonl.fedcba987654.tmp"
    live.write_bytes(b"being written")
    kept = [tmp_path / ".notes.txt.tmp", tmp_path / "s.jsonl.0123456789ab.tmp"]
    for p in kept:
        p.write_bytes(b"not ours")
    link = tmp_path / ".link.jsonl.00112233aabb.tmp"
    link.symlink_to(tmp_path / "notes-target")
    (tmp_path / "notes-target").write_text("keep me")
    code = textwrap.dedent("""
        import sys, fcntl, os
        import contextree as ct
        fd = os.open(sys.argv[2], os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a writer in progress holds its temp file locked
        ct.Session.open(sys.argv[1]).close()
    """)
    subprocess.run([sys.executable, "-c", code, str(path), str(live)], check=True, timeout=60)
    assert not any(p.exists() for p in stale)
    assert live.exists() and all(p.exists() for p in kept)
    assert link.is_symlink() and (tmp_path / "notes-target").read_text() == "keep me"


@pytest.mark.slow
def test_killed_forks_leave_no_temp_files_after_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s, s.batch():
        for _ in range(40):
            s.append_message(ct.Message.user("x" * 200_000))
    forker = textwrap.dedent("""
        import sys, itertools
        import contextree as ct
        s = ct.Session.open(sys.argv[1], readonly=True)
        print("ready", flush=True)
        for i in itertools.count():
            s.fork(f"{sys.argv[1]}.fork{sys.argv[2]}-{i}.jsonl").close()
    """)
    leftovers = 0
    for run, delay in enumerate((0.05, 0.1, 0.15, 0.2, 0.3)):
        proc = subprocess.Popen([sys.executable, "-c", forker, str(path), str(run)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        try:
            proc.wait(delay)
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.wait()
        leftovers += len(list(tmp_path.glob(".*.tmp")))
        subprocess.run([sys.executable, "-c", OPEN_FOR_WRITING, str(path)], check=True,
                       timeout=60)
        assert list(tmp_path.glob(".*.tmp")) == []
    for fork in tmp_path.glob("*.fork*.jsonl"):  # every fork that appeared is whole
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with ct.Session.open(fork, readonly=True) as f:
                assert len(f) == 40
    print(f"temp files left by 5 killed fork loops: {leftovers}, after reopening: 0")


def _child_opens(path: str, out: Any) -> None:
    try:
        ct.Session.open(path).close()
        out.put("opened")
    except ct.errors.SessionLocked as e:
        out.put(str(e))


def test_a_forked_child_does_not_share_its_parents_writer(tmp_path: Path) -> None:
    import multiprocessing

    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    ctx = multiprocessing.get_context("fork")
    with ct.Session.open(path):
        out = ctx.Queue()
        child = ctx.Process(target=_child_opens, args=(str(path), out))
        child.start()
        child.join(60)
        said = out.get(timeout=10)
    assert said != "opened" and f"pid {os.getpid()} on " in said


def test_clean_temp_files_on_demand(tmp_path: Path) -> None:
    stale = tmp_path / ".s.jsonl.00aa11bb22cc.tmp"
    stale.write_bytes(b"x")
    assert ct.storage.clean_temp_files(tmp_path) == [stale]
    assert not stale.exists()
