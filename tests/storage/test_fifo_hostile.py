"""A FIFO put where a session, its quarantine file, its lock info or a Codex rollout is
expected: every call returns (with a clear error, or by leaving it out), none waits for a
writer that never comes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.errors import ContextreeError, SessionLocked
from contextree.formats._codex import find_rollout

pytestmark = pytest.mark.timeout(30)


def _session(path: Path) -> Path:
    with Session.create(path) as s:
        s.append_message(Message.user("hello"))
    return path


def test_a_fifo_opened_as_a_session_is_refused_read_only_and_writable(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)
    for readonly in (True, False):
        with pytest.raises(ContextreeError, match=r"not a regular file|not a session file"):
            Session.open(fifo, readonly=readonly)


def test_health_with_a_fifo_at_the_quarantine_file(tmp_path: Path) -> None:
    path = _session(tmp_path / "s.jsonl")
    os.mkfifo(f"{path}.quarantine")
    with Session.open(path, readonly=True) as s:
        assert s.storage.health().quarantined_lines == 0


def test_a_torn_tail_with_a_fifo_at_the_quarantine_file(tmp_path: Path) -> None:
    path = _session(tmp_path / "s.jsonl")
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"x')  # a torn last line
    os.mkfifo(f"{path}.quarantine")
    before = path.read_bytes()
    with pytest.raises(ContextreeError, match="quarantine"):
        Session.open(path)
    assert path.read_bytes() == before  # nothing was cut without its quarantine copy


def test_a_second_writer_with_a_fifo_at_the_lock_info(tmp_path: Path) -> None:
    path = _session(tmp_path / "s.jsonl")
    lock_info = Path(f"{path}.lock")
    lock_info.unlink(missing_ok=True)
    os.mkfifo(lock_info)
    first = Session.open(path)
    try:
        pid = os.fork()
        if pid == 0:  # another process: the lock is held, the message names no holder
            try:
                Session.open(path)
            except SessionLocked as e:
                os._exit(0 if "open for writing by" in str(e) else 2)
            except BaseException:
                os._exit(3)
            os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        first.close()


def test_codex_fork_parent_search_skips_fifos(tmp_path: Path) -> None:
    sessions = tmp_path / "codex" / "sessions"
    sessions.mkdir(parents=True)
    os.mkfifo(sessions / "rollout-a-0199.jsonl")
    (sessions / "rollout-b.jsonl").write_text(
        '{"type":"session_meta","payload":{"id":"0199"}}\n')
    assert find_rollout("0199", home=tmp_path / "codex").name == "rollout-b.jsonl"
