"""The files beside a session file: ``<file>.quarantine``, ``<file>.lock``, the writer's lock.

Sidecars are created 0600 beside the session, never through a symbolic link and never into a
file with other links or another owner (``_files.open_private``); the lock info is replaced
whole (``atomic_write``), so a link planted under its name is replaced, not followed. In a
directory that others can write to, none of them can make a writer overwrite a file of their
choosing.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

from .._files import UnsafeFile, atomic_write, open_private, open_regular_readonly, write_all
from .._limits import parse_json
from ..errors import InvalidArgument, SessionLocked, StorageFailure

__all__ = ["clear_lock_info", "describe_os_error", "line_text", "lock", "lock_info_path",
           "note_shared_with_children", "quarantine", "quarantine_path", "quarantined_count",
           "write_lock_info"]


def quarantine_path(path: str | os.PathLike[str]) -> Path:
    """Where lines removed from a session are kept: ``<file>.quarantine``."""
    return Path(f"{os.fspath(path)}.quarantine")


def lock_info_path(path: str | os.PathLike[str]) -> Path:
    """Who holds the writer's lock (pid, host, since when): ``<file>.lock``, for messages."""
    return Path(f"{os.fspath(path)}.lock")


def describe_os_error(e: OSError) -> str:
    """An ``OSError`` in words, without the path (the caller's message names it)."""
    if isinstance(e, UnsafeFile):
        return f"{e.filename}: {e.strerror}"
    if e.errno == errno.ENOSPC:
        return "no space left on device"
    if e.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return e.strerror or str(e) or type(e).__name__


def line_text(raw: bytes) -> dict[str, str]:
    """A removed line as a quarantine record keeps it: its text, and when that is not UTF-8
    its exact bytes too (``base64``), so nothing of it is lost to the replacement
    characters of the readable form."""
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": raw.decode("utf-8", errors="replace"),
                "base64": base64.b64encode(raw).decode("ascii")}


def quarantine(path: str | os.PathLike[str], records: Iterable[dict[str, object]]) -> int:
    """Append records (reason, line number, original text) to the quarantine file, durably.

    All or nothing: if the disk fills up midway, the file is cut back to what it held (or
    removed, if this call created it), and ``StorageFailure`` says so.
    """
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if not lines:
        return 0
    target = quarantine_path(path)
    unchanged = "the session file and its quarantine file are unchanged"
    created = False
    try:
        try:
            fd = open_private(target, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            fd = open_private(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
            created = True
    except OSError as e:
        raise StorageFailure(f"could not open the quarantine file {target} "
                             f"({describe_os_error(e)}); {unchanged}",
                             path=os.fspath(path)) from e
    try:
        start = os.fstat(fd).st_size
        try:
            write_all(fd, "".join(lines).encode())
            os.fsync(fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                if created:
                    os.unlink(target)
                else:
                    os.ftruncate(fd, start)
            raise StorageFailure(f"could not write to the quarantine file {target} "
                                 f"({describe_os_error(e)}); {unchanged} — free disk space "
                                 "and retry", path=os.fspath(path)) from e
    finally:
        os.close(fd)
    return len(lines)


def quarantined_count(path: str | os.PathLike[str]) -> int:
    """How many lines of this session were ever quarantined (lines of its quarantine file)."""
    try:
        fd = open_regular_readonly(quarantine_path(path))
    except OSError:
        return 0
    with open(fd, "rb") as f:
        return sum(1 for line in f if line.strip())


def write_lock_info(path: str | os.PathLike[str]) -> None:
    """Record who holds the writer's lock; best effort (it only improves messages)."""
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    with contextlib.suppress(OSError, InvalidArgument):  # InvalidArgument: not a file there
        atomic_write(lock_info_path(path), info.encode(), durable=False)


def clear_lock_info(path: str | os.PathLike[str]) -> None:
    """Remove the lock info (unlinking never follows a link)."""
    with contextlib.suppress(OSError):
        lock_info_path(path).unlink()


def _lock_info(path: str | os.PathLike[str]) -> tuple[object, object, object] | None:
    try:
        fd = open_regular_readonly(lock_info_path(path))
        with open(fd, "rb") as f:
            info = parse_json(f.read(4096))
        return info["pid"], info["host"], info["since"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


_SHARED_WITH_CHILDREN: set[tuple[int, int]] = set()  # (st_dev, st_ino) open at a fork()


def note_shared_with_children(files: Iterable[tuple[int, int]]) -> None:
    """Record files this process had open for writing when it forked: a child holds a
    copy of their locked descriptors until its at-fork hook closes it."""
    _SHARED_WITH_CHILDREN.update(files)


def _shared_with_a_child(fd: int) -> bool:
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in _SHARED_WITH_CHILDREN


def _holder(path: str | os.PathLike[str]) -> str:
    info = _lock_info(path)
    if info is None:
        return "another process"
    pid, host, since = info
    if pid == os.getpid() and host == socket.gethostname():
        return f"this process (pid {pid}, since {since}: another Session or repair here)"
    return f"pid {pid} on {host} (since {since})"


def _lock_when_a_fresh_child_lets_go(fd: int) -> bool:
    # This process had the file open when it forked, and the caller found no writer of its
    # own open on it now: a child just forked may still share the locked descriptor, until its at-fork hook
    # (storage._jsonl._forget_after_fork) closes it, which it does before running any code.
    # Wait for that, briefly, instead of reporting this process as its own blocker.
    for _ in range(_FRESH_CHILD_POLLS):
        time.sleep(0.01)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        return True
    return False


_FRESH_CHILD_POLLS = 200  # 2 s: a child is scheduled long before that, even under load


def lock(fd: int, path: str | os.PathLike[str], *, then: str) -> None:
    """Take the writer's lock on ``fd`` or raise ``SessionLocked`` naming who holds it;
    ``then`` ends the message (what the user can do)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if _shared_with_a_child(fd) and _lock_when_a_fresh_child_lets_go(fd):
            return
        raise SessionLocked(f"the session is open for writing by {_holder(path)}; {then}",
                            path=os.fspath(path)) from None
