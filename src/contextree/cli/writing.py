"""Where a command's new file goes: a new path, an existing file it replaces (``--force``),
or stdout (``-o -``).

A new session file is always created by the library, which refuses an existing path. To
replace one, the new file is made under a temporary name beside it and renamed over it at
the end, while the old file's writer lock is held: a session another process is writing to
is never replaced under it, and a failure leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .._files import fsync_dir, refuse_non_file, temp_path
from ..errors import SessionLocked
from .output import emit_bytes


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """The path to create the new file at: ``target`` itself when nothing is there, else a
    temporary name beside it that replaces ``target`` when the block ends without error."""
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
        tmp = temp_path(target)
        try:
            yield tmp
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        fsync_dir(target.parent)
    finally:
        os.close(fd)


@contextlib.contextmanager
def to_stdout(name: str) -> Iterator[Path]:
    """A path in a private temporary directory; what is written there goes to stdout when
    the block ends (``-o -``), and the directory is removed."""
    with tempfile.TemporaryDirectory(prefix="contextree-out-") as folder:
        path = Path(folder) / name
        yield path
        emit_bytes(path.read_bytes())
