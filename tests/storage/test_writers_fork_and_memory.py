"""A child of fork() holds nothing of its parent's writers, and a memory error while
decoding a session is a memory error, never a torn line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.errors import SessionLocked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(work: str, session: Session) -> tuple[int, str]:
    """Fork; run ``work`` (a statement using ``s``) in the child; its exit code and note."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        os.close(r)
        note = "ok"
        code = 0
        try:
            exec(work, {"s": session, "Message": Message, "Session": Session})
        except SessionLocked as e:
            note, code = f"SessionLocked: {e}", 3
        except BaseException as e:
            note, code = f"{type(e).__name__}: {e}", 4
        os.write(w, note.encode())
        os.close(w)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        note = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), note


def test_a_forked_child_cannot_write_through_its_parents_session(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s.jsonl")
    s.append_message(Message.user("parent"))
    code, note = _in_child("s.append_message(Message.user('child'))", s)
    assert code == 3, note
    assert "child of it (os.fork())" in note and "open the session again" in note
    s.append_message(Message.user("parent again"))
    s.close()
    again = Session.open(tmp_path / "s.jsonl", readonly=True)
    assert [str(e.message.content) for e in again.branch()] == ["parent", "parent again"]


def test_a_forked_child_does_not_keep_the_parents_lock(tmp_path: Path) -> None:
    """The parent closes and reopens at once, often before the child has been scheduled
    to close its inherited copy of the locked descriptor: the reopen waits for that
    instead of reporting the session locked (about 1 in 5 tries raced without the wait)."""
    for attempt in range(40):
        path = tmp_path / f"s{attempt}.jsonl"
        s = Session.create(path)
        s.append_message(Message.user("a"))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)  # wait until the parent has closed and reopened
            os._exit(0)
        os.close(r)
        try:
            s.close()
            reopened = Session.open(path)  # the child is alive, holding its inherited copy
            reopened.append_message(Message.user("b"))
            reopened.close()
        finally:
            os.write(w, b"x")
            os.close(w)
            os.waitpid(pid, 0)


def test_a_forked_childs_exit_never_writes_the_parents_batch(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = Session.create(path)
    with s.batch():
        for k in range(5):
            s.append_message(Message.user(f"m{k}"))
        # The child closes its copy and exits while the parent's batch is still buffered.
        code, note = _in_child("s.close(); del s", s)
        assert code == 0, note
    s.close()
    again = Session.open(path)  # no DuplicateId: the batch was written once
    assert [str(e.message.content) for e in again.branch()] == [f"m{k}" for k in range(5)]
    again.close()


def test_memory_exhaustion_while_opening_is_not_a_torn_line(tmp_path: Path) -> None:
    """A complete 40 MB last entry, opened under an address-space limit too small to
    decode it: the open fails with MemoryError and the file, with its last entry, stays."""
    path = tmp_path / "s.jsonl"
    s = Session.create(path)
    leaf = s.append_message(Message.user("small"))
    s.close()
    # An entry of a type from a newer version: the typed decoder leaves it to the lenient
    # path, which keeps unknown types.
    with open(path, "ab") as f:
        f.write(b'{"type":"x_future","id":"f1","parent_id":"' + leaf.encode()
                + b'","timestamp":"2026-01-01T00:00:00Z","blob":"' + b"x" * (40 << 20)
                + b'"}\n')
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import resource, sys
        import contextree
        from contextree import Session
        data = open({str(path)!r}, "rb").read()  # the file fits; decoding it does not
        limit = {{limit}}
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            Session.open({str(path)!r}).close()
        except MemoryError:
            print("memory"); sys.exit(0)
        print("opened"); sys.exit(0)
    """)
    outcomes = set()
    for limit_mb in (150, 200, 260, 400):
        run = subprocess.run([sys.executable, "-c", script.replace("{limit}",
                              str(limit_mb << 20))], capture_output=True, text=True,
                             timeout=120)
        outcomes.add(run.stdout.strip() or f"rc={run.returncode}")
        assert path.read_bytes() == before, f"the session changed at {limit_mb} MB"
        assert not (tmp_path / "s.jsonl.quarantine").exists()
    assert outcomes <= {"memory", "opened"}, outcomes


_OPEN_UNDER_LIMIT = """
import resource, sys
from contextree import Session
path, limit, readonly = sys.argv[1], int(sys.argv[2]) << 20, sys.argv[3] == "ro"
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    Session.open(path, readonly=readonly).close()
except MemoryError:
    print("memory")
else:
    print("opened")
"""


@pytest.mark.timeout(600)
def test_the_lenient_decoder_never_crashes_under_an_address_space_limit(
        tmp_path: Path) -> None:
    """orjson segfaulted decoding a 40 MB line of an unknown entry type at address-space
    limits of 650 MB to 1.1 GB (the band moves with what the process has mapped): at every
    limit from too small to ample, the open either works or fails with MemoryError, and the
    file is never touched."""
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        leaf = s.append_message(Message.user("small"))
    with open(path, "ab") as f:  # a type from a newer version: the lenient path reads it
        f.write(b'{"type":"x_future","id":"f1","parent_id":"' + leaf.encode()
                + b'","timestamp":"2026-01-01T00:00:00Z","blob":"' + b"x" * (40 << 20)
                + b'"}\n')
    before = path.stat()
    outcomes: dict[int, str] = {}
    for limit_mb in (150, 180, 300, 450, 560, 600, 625, 650, 700, 800, 950, 1100):
        mode = "ro" if limit_mb % 100 else "rw"  # the writer's open too
        run = subprocess.run([sys.executable, "-c", _OPEN_UNDER_LIMIT, str(path),
                              str(limit_mb), mode], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (limit_mb, run.returncode, run.stderr[-500:])
        outcomes[limit_mb] = run.stdout.strip()
        after = path.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        assert not (tmp_path / "s.jsonl.quarantine").exists()
    assert set(outcomes.values()) <= {"memory", "opened"}, outcomes
    assert outcomes[1100] == "opened"  # ample room: the 40 MB entry is read whole
    with Session.open(path, readonly=True) as s:
        assert s.leaf_id == "f1"
