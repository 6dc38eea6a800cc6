"""A JSONL session under Ctrl-C and crowded batches: a ``KeyboardInterrupt`` at the edges
of an open, a close, a batch or a write never leaves the lock held, a thread stuck in a
batch, or a tree that disagrees with the file unnoticed; a task or thread started inside a
batch is not in it (its appends are durable when they return)."""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree.entries import MessageEntry
from contextree.storage import _filetree, _jsonl
from helpers import open_fds, user_session
from storage.test_storage_lifecycle import other_process_can_write


def in_file(path: Path, eid: str) -> bool:
    """Whether the entry's line is in the file now (written, not only buffered)."""
    return f'"id":"{eid}"'.encode() in path.read_bytes()


def texts(path: Path) -> list[str]:
    with ct.Session.open(path, readonly=True) as s:
        return [str(e.message.content) for e in s.branch() if isinstance(e, MessageEntry)]


def once(real: Any) -> Any:
    """A stand-in for ``real`` that raises ``KeyboardInterrupt`` the first time it is
    called, then does what ``real`` does (a function: as a method, it binds like one)."""
    fired: list[bool] = []

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(True)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return stand_in


# -- batches belong to the thread or task that opened them ---------------------------------------

def test_a_task_started_inside_a_batch_appends_durably(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path, cwd="/")
    written: dict[str, bool] = {}

    async def child(name: str, gate: asyncio.Event) -> None:
        await gate.wait()
        eid = s.append_message(ct.Message.user(name))
        written[name] = in_file(path, eid)

    async def main() -> None:
        early, late = asyncio.Event(), asyncio.Event()
        with s.batch():
            s.append_message(ct.Message.user("batched"))
            tasks = [asyncio.create_task(child("during", early)),
                     asyncio.create_task(child("after", late))]
            early.set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        late.set()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert written == {"during": True, "after": True}
    s.close()
    assert sorted(texts(path)) == ["after", "batched", "during"]


def test_a_thread_started_with_the_batchs_context_appends_durably(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        async def main() -> bool:
            with s.batch():
                s.append_message(ct.Message.user("batched"))
                eid = await asyncio.to_thread(s.append_message, ct.Message.user("thread"))
                return in_file(path, eid)

        assert asyncio.run(main())
        copied = None
        with s.batch():
            copied = contextvars.copy_context()
        eid = copied.run(s.append_message, ct.Message.user("later, in the copy"))
        assert in_file(path, eid)  # the batch the copy holds has ended


def test_nested_batches_of_one_task_write_once_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s, s.batch():
        first = s.append_message(ct.Message.user("outer"))
        with s.batch():
            s.append_message(ct.Message.user("inner"))
        assert not in_file(path, first)  # the outer batch is still open
    assert in_file(path, first)


# -- Ctrl-C at the edges -----------------------------------------------------------------------------

def test_an_interrupt_as_a_batch_begins_leaves_no_batch_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        monkeypatch.setattr(_jsonl, "_Batch", once(_jsonl._Batch))
        with pytest.raises(KeyboardInterrupt), s.batch():
            pass  # pragma: no cover - the batch never begins
        assert in_file(path, s.append_message(ct.Message.user("plain")))


def test_an_interrupt_just_after_a_batch_is_set_still_ends_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        shared = s.storage._shared
        real = shared.batch

        class SetThenInterrupt:
            def get(self) -> Any:
                return real.get()

            def set(self, value: Any) -> Any:
                real.set(value)
                shared.batch = real
                raise KeyboardInterrupt

        shared.batch = SetThenInterrupt()
        with pytest.raises(KeyboardInterrupt), s.batch():
            pass  # pragma: no cover
        assert in_file(path, s.append_message(ct.Message.user("plain")))


def test_an_interrupt_after_a_line_is_written_refuses_appends_until_reopened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 2)
    s = ct.Session.open(path)
    monkeypatch.setattr(_filetree.FileTree, "add", once(_filetree.FileTree.add))
    with pytest.raises(KeyboardInterrupt):
        s.append_message(ct.Message.user("written, not in the tree"))
    with pytest.raises(ct.errors.StorageFailure, match=r"interrupted.*open it again"):
        s.append_message(ct.Message.user("refused"))
    s.close()
    assert texts(path) == ["m0", "m1", "written, not in the tree"]  # the file decides
    with ct.Session.open(path) as again:
        again.append_message(ct.Message.user("after"))
    assert texts(path)[-1] == "after"


def test_an_interrupt_while_a_batch_is_written_refuses_appends_until_reopened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path, cwd="/")
    monkeypatch.setattr(_jsonl, "_write", once(_jsonl._write))
    with pytest.raises(KeyboardInterrupt), s.batch():
        s.append_message(ct.Message.user("buffered"))
    with pytest.raises(ct.errors.StorageFailure, match="interrupted"):
        s.append_message(ct.Message.user("refused"))
    s.close()
    assert texts(path) == []
    assert other_process_can_write(path)


@pytest.mark.parametrize("step", ["clear_lock_info", "_seen"])
def test_an_interrupt_while_a_session_closes_still_releases_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 1)
    before = open_fds()
    s = ct.Session.open(path)
    s.append_message(ct.Message.user("kept"))
    monkeypatch.setattr(_jsonl, step, once(getattr(_jsonl, step)))
    with pytest.raises(KeyboardInterrupt):
        s.close()
    del s
    assert open_fds() == before
    assert other_process_can_write(path)
    ct.Session.open(path).close()
    assert texts(path) == ["m0", "kept"]


@pytest.mark.parametrize("opening", ["open", "create"])
def test_an_interrupt_while_a_session_opens_leaves_no_lock_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opening: str) -> None:
    path = tmp_path / "s.jsonl"
    if opening == "open":
        user_session(path, 1)
    before = open_fds()
    monkeypatch.setattr(_jsonl, "write_lock_info", once(_jsonl.write_lock_info))
    with pytest.raises(KeyboardInterrupt):
        getattr(ct.Session, opening)(path)
    assert open_fds() == before
    assert other_process_can_write(path)
    with ct.Session.open(path) as s:
        s.append_message(ct.Message.user("then"))


def test_an_interrupt_as_a_handle_is_made_leaves_no_lock_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path, 1)
    before = open_fds()
    monkeypatch.setattr(_jsonl, "_Writer", once(_jsonl._Writer))
    with pytest.raises(KeyboardInterrupt):
        ct.Session.open(path)
    assert open_fds() == before
    assert other_process_can_write(path)
