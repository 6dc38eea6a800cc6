"""A Ctrl-C at any line of opening, creating, or closing a session file never keeps
its lock or leaves this process's registry of open files holding a released file; threads
racing to create one session all get it. Found by a probe: an interrupt between the lock and
the load kept the descriptor (the lock) until exit; one inside ``_release`` left a registry
entry whose descriptor was closed (every later open of the file failed); threads racing
``open_or_create`` got ``SessionLocked`` from the creator's not yet registered lock.

The interrupt is raised by a trace function at the n-th line run in the storage modules, for
every n until the operation completes, which is where a real SIGINT can land."""

from __future__ import annotations

import dis
import fcntl
import functools
import gc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from contextree import Message, Session
from contextree.storage import _jsonl

STORAGE = str(Path(_jsonl.__file__).parent)
FILES = str(Path(_jsonl.__file__).parent.parent / "_files.py")
MAX_LINES = 20_000  # far more than any of these operations runs
# Code no interrupt is raised inside: a real signal's handler runs only at a call, a function's
# entry, after a call returns, or at a loop's jump back, and each finds it in a whole state.
ATOMIC = {_jsonl._drop_descriptor.__code__}


class Interrupt(KeyboardInterrupt):
    """The Ctrl-C the trace raises (a subclass, to tell it from a real one)."""


def _interrupt_at(n: int, call: Callable[[], Any]) -> bool:
    """Run ``call``, raising ``Interrupt`` at the ``n``-th place a real signal could land in
    the storage modules; True if it was interrupted, False if it completed first.

    The places are the starts of lines, but for two that no signal handler runs at: a line
    right after an exception reached the frame (the handler's first line: nothing checks
    for signals between the raise and the handler's first call) and a line right after a
    call of a Python function returned (nothing checks between that return and the next
    call), and the places ``_just_entered`` names."""
    seen = 0
    skip: set[int] = set()  # the frames whose next line is no landing place

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal seen
        name = frame.f_code.co_filename
        if not (name.startswith(STORAGE) or name == FILES) or frame.f_code in ATOMIC:
            return None
        if event == "exception":
            skip.add(id(frame))
        elif event == "return" and frame.f_back is not None:
            skip.add(id(frame.f_back))
        elif event == "line":
            if id(frame) in skip or frame.f_lasti in _just_entered(frame.f_code):
                skip.discard(id(frame))
                return tracer
            seen += 1
            if seen == n:
                raise Interrupt
        return tracer

    sys.settrace(tracer)
    try:
        call()
    except Interrupt:
        return True
    finally:
        sys.settrace(None)
    return False


@functools.cache
def _just_entered(code: Any) -> frozenset[int]:
    """The offsets in ``code`` no signal lands at: right after a ``with`` statement's entry
    (``BEFORE_WITH`` and the instruction that drops its result), and a ``try:`` line's
    ``NOP`` (which no handler covers: a trace that raised there would skip them all)."""
    ops = list(dis.get_instructions(code))
    after_with = {ops[i + k].offset for i, op in enumerate(ops) if op.opname == "BEFORE_WITH"
                  for k in (1, 2) if i + k < len(ops)}
    return frozenset(after_with | {op.offset for op in ops if op.opname == "NOP"})


def _lock_is_free(path: Path) -> bool:
    """Whether no descriptor of this process (or any other) holds the writer's lock."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _no_released_file_registered() -> None:
    assert not _jsonl.registry_lock()._is_owned()  # type: ignore[attr-defined]
    assert all(shared.fd >= 0 for shared in _jsonl._OPEN.values())


def _session_file(path: Path, messages: int = 3) -> Path:
    with Session.create(path) as s:
        for i in range(messages):
            s.append_message(Message.user(f"message {i}"))
    return path


def _usable(path: Path, before: int) -> None:
    """The file opens for writing, holds the ``before`` messages it had, and appends."""
    with Session.open(path) as s:
        assert len(list(s.entries())) >= before
        s.append_message(Message.user("after the interrupt"))
    assert _lock_is_free(path)


def _every_line(run: Callable[[int], bool], after: Callable[[], None]) -> int:
    """``run(n)`` for n = 1, 2, ... until it completes uninterrupted, ``after()`` each time;
    the number of lines it was interrupted at."""
    for n in range(1, MAX_LINES):
        interrupted = run(n)
        gc.collect()  # what a dropped half-made object held is let go with it
        after()
        if not interrupted:
            return n - 1
    raise AssertionError("the operation never completed")


def test_an_interrupted_open_keeps_no_lock(tmp_path: Path) -> None:
    path = _session_file(tmp_path / "s.jsonl")
    opened: list[Session] = []

    def run(n: int) -> bool:
        return _interrupt_at(n, lambda: opened.append(Session.open(path)))

    def after() -> None:
        _no_released_file_registered()
        while opened:
            opened.pop().close()
        assert _lock_is_free(path)

    assert _every_line(run, after) > 50
    _usable(path, 3)


@pytest.mark.filterwarnings("ignore::contextree.storage.TornLineWarning")
def test_an_interrupted_open_of_a_torn_file_keeps_no_lock_and_loses_no_line(
        tmp_path: Path) -> None:
    path = _session_file(tmp_path / "s.jsonl")
    quarantined = Path(f"{path}.quarantine")
    whole = path.read_bytes()
    torn = b'{"type": "message", "id": "cut'
    cuts = 0

    def run(n: int) -> bool:
        path.write_bytes(whole + torn)
        return _interrupt_at(n, lambda: Session.open(path).close())

    def after() -> None:
        nonlocal cuts
        _no_released_file_registered()
        assert _lock_is_free(path)
        now = path.read_bytes()
        assert now in (whole, whole + torn)
        if now == whole:  # cut off only once it was in the quarantine file
            cuts += 1
            records = quarantined.read_bytes().count(b"torn last line")
            assert records >= cuts

    _every_line(run, after)
    assert cuts > 0
    _usable(path, 3)


def test_an_interrupted_close_leaves_the_file_openable(tmp_path: Path) -> None:
    path = _session_file(tmp_path / "s.jsonl")
    handles: list[Session] = []

    def run(n: int) -> bool:
        s = Session.open(path)
        s.append_message(Message.user("to close"))
        handles.append(s)
        return _interrupt_at(n, s.close)

    def after() -> None:
        _no_released_file_registered()
        while handles:
            handles.pop().close()  # closing again finishes what was interrupted
        assert _lock_is_free(path)
        with Session.open(path) as again:
            list(again.entries())

    assert _every_line(run, after) > 10


def test_an_interrupted_create_keeps_no_lock_and_no_half_file(tmp_path: Path) -> None:
    made: list[Session] = []
    paths: list[Path] = []

    def run(n: int) -> bool:
        path = tmp_path / f"s{n}.jsonl"
        paths.append(path)
        return _interrupt_at(n, lambda: made.append(Session.create(path)))

    def after() -> None:
        _no_released_file_registered()
        while made:
            made.pop().close()
        path = paths[-1]
        if path.exists():  # linked whole, or not at all
            assert _lock_is_free(path)
            _usable(path, 0)

    assert _every_line(run, after) > 20


@pytest.mark.parametrize("round_", range(20))
def test_threads_racing_to_create_one_session_all_get_it(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "s.jsonl"
    start = threading.Barrier(8)
    got: list[str] = []
    failed: list[BaseException] = []

    def worker(i: int) -> None:
        start.wait()
        try:
            with Session.open_or_create(path) as s:
                s.append_message(Message.user(f"from thread {i}"))
                got.append(s.id)
        except BaseException as e:  # reported below
            failed.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    assert len(set(got)) == 1 and len(got) == 8
    with Session.open(path) as s:
        assert sorted(e.message.content for e in s.entries()  # type: ignore[attr-defined]
                      ) == sorted(
            f"from thread {i}" for i in range(8))
