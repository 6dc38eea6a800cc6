"""Writing files so that a crash or a full disk leaves the old file or the new one, never half.

Every writer of a whole file (fork, repair, the flat session log, export, the write and edit
tools, the overflow store) goes through :func:`atomic_write`: a temp file created exclusively
beside the target, every byte written (short writes retried), the file and its directory
synced, then renamed (or linked, to refuse an existing target) into place.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from pathlib import Path

__all__ = ["TEMP_SUFFIX", "atomic_write", "fsync_dir", "temp_path", "write_all"]

TEMP_SUFFIX = ".tmp"
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_NOFOLLOW", 0)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``: ``os.write`` may write less than it is given."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises instead on every known system
            raise OSError("os.write wrote nothing")
        view = view[written:]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Sync a directory so a rename or link inside it survives a power cut."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(target: Path) -> Path:
    """A fresh hidden name beside ``target`` (``.NAME.RANDOM.tmp``), for leftovers to be
    recognisable after a crash."""
    return target.parent / f".{target.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}"


def atomic_write(
    target: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    mode: int = 0o600,
    overwrite: bool = True,
    durable: bool = True,
    dir_fd: int | None = None,
) -> Path:
    """Put ``data`` (bytes, or chunks of bytes) at ``target`` all at once or not at all.

    ``overwrite=False`` refuses an existing target (``FileExistsError``) without a window in
    which two writers could both succeed. ``durable`` syncs the file and the directory. On any
    error the temp file is removed, the target is as it was, and the ``OSError`` propagates.
    With ``dir_fd`` (an open directory), ``target`` is a name in that directory: the temp
    file, the rename and the sync all go through the descriptor, never through a path that
    could have been swapped for a symlink meanwhile.
    """
    target = Path(target)
    tmp = temp_path(target)
    pair: dict[str, int] = {} if dir_fd is None else {"src_dir_fd": dir_fd, "dst_dir_fd": dir_fd}
    one: dict[str, int] = {} if dir_fd is None else {"dir_fd": dir_fd}
    fd = os.open(tmp, _OPEN_FLAGS, mode, **one)
    try:
        try:
            if isinstance(data, bytes | bytearray | memoryview):
                write_all(fd, data)
            else:
                for chunk in data:
                    write_all(fd, chunk)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, target, **pair)
        else:  # atomic, and never replaces an existing file
            os.link(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.unlink(tmp, **one)
        if durable:
            if dir_fd is None:
                fsync_dir(target.parent)
            else:
                os.fsync(dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, **one)
        except FileNotFoundError:
            pass
        raise
    return target
