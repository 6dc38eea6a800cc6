"""Writing files so that a crash or a full disk leaves the old file or the new one, never half.

Every writer of a whole file (fork, repair, the flat session log, export, the write and edit
tools, the overflow store) goes through :func:`atomic_write`: a temp file created exclusively
beside the target (never through a symbolic link), every byte written (short writes
retried), the file and its directory synced, then renamed (or linked, to refuse an existing
target) into place.

The writer holds an exclusive ``flock`` on its temp file from the moment it exists until it
is renamed away, so :func:`remove_stale_temps` can tell the leftovers of a crashed writer
(unlocked) from a write in progress (locked) without guessing from ages.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from .errors import InvalidArgument

__all__ = [
    "TEMP_SUFFIX",
    "UnsafeFile",
    "atomic_create",
    "atomic_write",
    "fsync_dir",
    "node_kind",
    "open_private",
    "open_regular_readonly",
    "refuse_non_file",
    "remove_stale_temps",
    "storable_path",
    "temp_path",
    "write_all",
]

TEMP_SUFFIX = ".tmp"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | _CLOEXEC | _NOFOLLOW
_TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{12}" + re.escape(TEMP_SUFFIX))


class UnsafeFile(PermissionError):
    """A file that is a symbolic link, has other names, or belongs to another user, where
    only a private file of ours may be: writing through it could change another file."""


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``: ``os.write`` may write less than it is given."""
    written = os.write(fd, data)
    if written == len(data):  # the common case: all of it at once
        return
    if written <= 0:  # pragma: no cover - os.write raises instead on every known system
        raise OSError(errno.EIO, "os.write wrote nothing")
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises instead on every known system
            raise OSError(errno.EIO, "os.write wrote nothing")
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
    recognisable after a crash. ``os.urandom(6).hex()`` is ``secrets.token_hex(6)``
    without importing ``secrets`` (and hashlib) at every command's start."""
    return target.parent / f".{target.name}.{os.urandom(6).hex()}{TEMP_SUFFIX}"


def _open_temp(target: Path, mode: int, dir_fd: int | None) -> tuple[int, Path]:
    """Create and lock a temp file beside ``target``; never through a link, never reused."""
    while True:
        tmp = temp_path(target)
        try:
            fd = os.open(tmp, _TEMP_FLAGS, mode, **_in(dir_fd))
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        try:
            # Blocking: another process's sweep of stale temp files may hold the lock for a
            # moment to look at it (and, finding it unlocked, delete it: then try again).
            fcntl.flock(fd, fcntl.LOCK_EX)
            named = os.stat(tmp, follow_symlinks=False, **_in(dir_fd))
            mine = os.fstat(fd)
            if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
                return fd, tmp  # (in the try: an interrupt at the return removes it too)
        except FileNotFoundError:
            os.close(fd)  # swept away between our open and our lock: a new name
            continue
        except BaseException:
            _discard(fd, tmp, dir_fd)
            raise
        os.close(fd)  # pragma: no cover - swept, and the 48-bit name taken again meanwhile


def _in(dir_fd: int | None) -> dict[str, int]:
    """``dir_fd=`` for the os calls, only when there is one."""
    return {} if dir_fd is None else {"dir_fd": dir_fd}


def _discard(fd: int, tmp: Path, dir_fd: int | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, **_in(dir_fd))
    os.close(fd)


def _fill(fd: int, data: bytes | bytearray | memoryview | Iterable[bytes], durable: bool) -> None:
    if isinstance(data, bytes | bytearray | memoryview):
        write_all(fd, data)
    else:
        for chunk in data:
            write_all(fd, chunk)
    if durable:
        os.fsync(fd)


def open_regular_readonly(path: str | os.PathLike[str]) -> int:
    """A descriptor of ``path`` for reading, never through a final symbolic link and never
    waiting (a FIFO or device put there is refused: ``OSError``)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    return fd


def storable_path(path: str) -> str:
    """``path`` as a session line can hold it: UTF-8 (JSON) cannot carry undecodable bytes
    (lone surrogates), so those are written as ``\\xff``, as tool output shows them."""
    try:
        path.encode()
        return path
    except UnicodeEncodeError:
        pass
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte stands for
        return path.encode("utf-8", "backslashreplace").decode()
    return raw.decode("utf-8", "backslashreplace")


def node_kind(mode: int) -> str:
    """What kind of node an ``st_mode`` is, in words for an error message (``a FIFO (named
    pipe)``, ``a character device``)."""
    return ("a directory" if stat.S_ISDIR(mode) else
            "a regular file" if stat.S_ISREG(mode) else
            "a character device" if stat.S_ISCHR(mode) else
            "a block device" if stat.S_ISBLK(mode) else
            "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a special file")


def refuse_non_file(target: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
    """``InvalidArgument`` when ``target`` exists and is not a regular file (a device, a
    FIFO, a socket, a directory): a replacing write would put a regular file in its place
    (``/dev/null`` among them), and opening one may block."""
    try:
        info = os.stat(target, follow_symlinks=False, **_in(dir_fd))
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        return
    raise InvalidArgument(f"{node_kind(info.st_mode)} is there, not a regular file: nothing "
                          "was written to it "
                          "and it was not replaced; choose a file path", path=str(target))


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
    The new file is locked (``flock``) by this call until it is in place, so a writer that
    locks the target sees the new file only once it is complete.

    With ``dir_fd`` (an open directory), ``target`` is a name in that directory: the temp
    file, the rename and the sync all go through the descriptor, never through a path that
    could have been swapped for a symlink meanwhile.
    """
    target = Path(target)
    if overwrite:
        refuse_non_file(target, dir_fd=dir_fd)
    fd, tmp = _open_temp(target, mode, dir_fd)
    try:
        _fill(fd, data, durable)
        _commit(tmp, target, overwrite=overwrite, durable=durable, dir_fd=dir_fd)
    except BaseException:
        _discard(fd, tmp, dir_fd)
        raise
    os.close(fd)
    return target


def atomic_create(
    target: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int = 0o600,
    durable: bool = True,
) -> int:
    """Create ``target`` holding ``data`` all at once (``FileExistsError`` if it exists) and
    return a descriptor of it, open for reading and appending and holding an exclusive
    ``flock``, taken before the file had its name: no other writer can lock it first."""
    target = Path(target)
    fd, tmp = _open_temp(target, mode, None)
    try:
        _fill(fd, data, durable)
        _commit(tmp, target, overwrite=False, durable=durable, dir_fd=None)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)
        return fd  # (in the try: an interrupt at the return closes it too)
    except BaseException:
        _discard(fd, tmp, None)
        raise


def _commit(tmp: Path, target: Path, *, overwrite: bool, durable: bool,
            dir_fd: int | None) -> None:
    pair = {} if dir_fd is None else {"src_dir_fd": dir_fd, "dst_dir_fd": dir_fd}
    if overwrite:
        os.replace(tmp, target, **pair)
    else:
        os.link(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # never replaces a file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, **_in(dir_fd))
    if durable:
        if dir_fd is None:
            fsync_dir(target.parent)
        else:
            os.fsync(dir_fd)


def open_private(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
    """Open a sidecar file (created ``mode`` if missing) that must be ours alone.

    The last component is never followed if it is a symbolic link, and a file with other
    hard links or another owner is refused (``UnsafeFile``): in a directory others can write
    to, either would let them point our writes at a file of theirs choosing.
    """
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO with no reader (O_NONBLOCK: never waits)
            raise UnsafeFile(errno.EPERM, "it is not a regular file; refusing to write to "
                             "it (remove it)", os.fspath(path)) from None
        if e.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, "it is a symbolic link; refusing to follow it "
                             "(remove the link)", os.fspath(path)) from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "it is not a regular file"
    elif info.st_nlink != 1:
        problem = "it has other hard links"
    elif info.st_uid != os.geteuid():
        problem = "it belongs to another user"
    if problem is not None:
        os.close(fd)
        raise UnsafeFile(errno.EPERM, f"{problem}; refusing to write to it (remove it)",
                         os.fspath(path))
    return fd


def remove_stale_temps(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files (``.NAME.RANDOM.tmp``) that crashed writers left in
    ``directory``; return them.

    Only regular files of ours that no writer holds locked are removed: a write in progress
    keeps its temp file locked until it is renamed into place. Symbolic links, other users'
    files and anything unreadable are left alone.
    """
    removed: list[Path] = []
    try:
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    except OSError:
        return removed
    try:
        with os.scandir(dir_fd) as it:
            names = [e.name for e in it if e.name.startswith(".")
                     and e.name.endswith(TEMP_SUFFIX) and _TEMP_NAME.fullmatch(e.name)]
        for name in names:
            if _remove_if_stale(name, dir_fd):
                removed.append(Path(directory) / name)
    finally:
        os.close(dir_fd)
    return removed


def _remove_if_stale(name: str, dir_fd: int) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a writer holds it: a write in progress
        # The name must still be this file (not renamed away and replaced meanwhile).
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
