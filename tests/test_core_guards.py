"""Guards added after review: failed writes, newer formats, leaf-move targets, model in force."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

import contextree as ct
from contextree.storage import _jsonl as jsonl


def test_a_failed_sync_refuses_further_appends_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    session = ct.Session.create(path)
    session.append_message(ct.Message.user("kept"))

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(jsonl.os, "fdatasync", broken)
    with pytest.raises(ct.SessionError) as first:
        session.append_message(ct.Message.user("maybe written"))
    assert first.value.code == "storage"
    monkeypatch.undo()
    with pytest.raises(ct.SessionError, match="close it and open it again") as second:
        session.append_message(ct.Message.user("refused"))
    assert second.value.code == "storage"
    session.close()
    with ct.Session.open(path) as again:  # reopening reads what is really on disk
        texts = [e.message.text for e in again.branch() if isinstance(e, ct.entries.MessageEntry)]
        assert texts[0] == "kept" and "refused" not in texts
        again.append_message(ct.Message.user("writable again"))


def test_a_failed_batch_flush_refuses_further_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = ct.Session.create(tmp_path / "s.jsonl")

    def full(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    with pytest.raises(ct.SessionError), session.batch():
        session.append_message(ct.Message.user("buffered"))
        monkeypatch.setattr(jsonl.os, "write", full)
    monkeypatch.undo()
    with pytest.raises(ct.SessionError, match="earlier write failed"):
        session.append_message(ct.Message.user("after"))
    session.close()


def test_a_newer_format_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_bytes(orjson.dumps({"type": "session", "id": "s", "created_at": "t",
                                   "version": 99}) + b"\n")
    with pytest.raises(ct.SessionError, match="upgrade contextree") as err:
        ct.Session.open(path, readonly=True)
    assert err.value.code == "invalid_session" and err.value.line == 1


def test_move_to_a_leaf_move_entry_is_refused() -> None:
    session = ct.Session.in_memory()
    first = session.append_message(ct.Message.user("a"))
    session.append_message(ct.Message.user("b"))
    session.move_to(first)
    leaf_move = next(e.id for e in session.storage.entries() if isinstance(e, ct.entries.LeafEntry))
    with pytest.raises(ct.errors.InvalidArgument) as err:
        session.move_to(leaf_move)
    assert err.value.code == "invalid_argument"


def test_the_latest_replying_model_is_in_force_without_model_changes() -> None:
    session = ct.Session.in_memory()
    session.append_message(ct.Message.user("hi"))
    session.append_message(ct.Message.assistant("a", model="m1", provider="p"))
    session.append_message(ct.Message.assistant("b", model="m2", provider="p"))
    assert session.build_context().model == ("p", "m2")


def test_an_empty_entry_id_in_a_file_is_an_invalid_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        {"type": "session", "id": "s", "created_at": "t", "version": 1},
        {"type": "message", "id": "", "parent_id": None, "timestamp": "t",
         "message": {"role": "user", "content": "x"}},
        {"type": "message", "id": "b", "parent_id": None, "timestamp": "t",
         "message": {"role": "user", "content": "y"}},
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    with pytest.raises(ct.SessionError) as err:
        ct.Session.open(path, readonly=True)
    assert err.value.code == "invalid_entry" and err.value.line == 2
    assert os.path.getsize(path) > 0


def test_a_random_id_that_is_taken_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextree._session as session_module

    session = ct.Session.in_memory()
    taken = session.append_message(ct.Message.user("a"))
    ids = iter([taken, taken, "fresh001"])
    monkeypatch.setattr(session_module, "new_id", lambda: next(ids))
    assert session.append_message(ct.Message.user("b")) == "fresh001"
    assert [e.id for e in session.branch()] == [taken, "fresh001"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_other_entry_ids_than_its_parent() -> None:
    """Ids come from a per-process generator; a forked child must not repeat the parent's
    sequence (two processes appending to one session would collide on every id)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running pytest's teardown
        os.write(write, " ".join(ct.entries.new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    parent = {ct.entries.new_id() for _ in range(8)}
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    assert len(child) == 8 and all(len(i) == 8 for i in child | parent)
    assert not child & parent


def test_set_name_none_clears_the_name_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        s.set_name("first")
        s.set_name(None)
        assert s.name is None
    with ct.Session.open(path, readonly=True) as again:
        assert again.name is None and again.stats().name is None


def test_delete_removes_the_session_and_its_spills_but_not_backups(tmp_path: Path) -> None:
    store = ct.OverflowStore(tmp_path / "spill")
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        s.append_message(ct.Message.user("hi"))
        session_id = s.id
    spilled = ct.truncate("x\n" * 5000, store=store, session_id=session_id)
    other = ct.truncate("y\n" * 5000, store=store, session_id="someone-else")
    (tmp_path / "s.jsonl.bak-1").write_text("kept")
    with ct.Session.open(path), pytest.raises(ct.SessionError) as busy:
        ct.Session.delete(path, store=store)  # open for writing elsewhere: refused
    assert busy.value.code == "locked" and path.exists()
    assert ct.Session.delete(path, store=store) == 1
    assert not path.exists() and not Path(str(spilled.saved_path)).exists()
    assert Path(str(other.saved_path)).exists() and (tmp_path / "s.jsonl.bak-1").exists()


def test_rm_command_deletes_after_yes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    path = tmp_path / "s.jsonl"
    ct.Session.create(path).close()
    refused = subprocess.run([sys.executable, "-m", "contextree", "rm", str(path)],
                             input="n\n", capture_output=True, text=True)
    assert refused.returncode == 1 and path.exists()
    done = subprocess.run([sys.executable, "-m", "contextree", "rm", str(path), "--yes"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not path.exists()
