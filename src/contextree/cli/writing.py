"""Where a command's new file goes: a new path, an existing file it replaces (``--force``),
or stdout (``-o -``).

A new session file is always created by the library, which refuses an existing path. To
replace one, or to print one, the new file is made in a private temporary directory first;
it then replaces the old file in one step (``atomic_write``) while the old file's writer lock
is held, so a session another process is writing to is never replaced under it, and a failure
leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .._files import atomic_write, refuse_non_file
from ..errors import SessionLocked
from .output import emit_bytes

_CHUNK = 1 << 20


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """The path to create the new file at: ``target`` itself when nothing is there, else a
    temporary path whose file replaces ``target`` when the block ends without error."""
    if not os.path.lexists(target):
        yield target
        return
    refuse_non_file(target)
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionLocked("the file is open for writing by another process; close it "
                                "there first, or choose another -o path",
                                path=str(target)) from None
        with _scratch(target.name) as new:
            yield new
            with open(new, "rb") as f:
                atomic_write(target, iter(lambda: f.read(_CHUNK), b""),
                             mode=stat.S_IMODE(os.fstat(f.fileno()).st_mode))
    finally:
        os.close(fd)


@contextlib.contextmanager
def to_stdout(name: str) -> Iterator[Path]:
    """A temporary path; what is written there goes to stdout when the block ends
    (``-o -``)."""
    with _scratch(name) as path:
        yield path
        emit_bytes(path.read_bytes())


@contextlib.contextmanager
def _scratch(name: str) -> Iterator[Path]:
    """A path called ``name`` in a private temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="contextree-new-") as folder:
        yield Path(folder) / name
