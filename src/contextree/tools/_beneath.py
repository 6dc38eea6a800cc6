"""Opening files under a root directory so that no path, symlink or race leads out of it.

Resolving a path, checking it and then opening it by name is racy: a directory swapped for a
symlink in between sends the open elsewhere. Here every open starts from a descriptor of the
root and never passes through a name that was checked earlier:

- where the kernel has it (Linux 5.6+), one ``openat2`` call with ``RESOLVE_BENEATH``: the
  kernel refuses any step out of the root, whatever changes meanwhile;
- otherwise (and to settle what ``openat2`` refuses) a walk of one component at a time, each
  opened with ``O_NOFOLLOW`` relative to the descriptor of the directory before it. A
  symlink is followed only by reading it and walking its target the same way, and ``..``
  goes back to the descriptor it came from, never above the root.

Symlinks that stay under the root work; one that leads out raises ``OutsideRoot``. A hard
link inside the root to a file outside it is just another name of that file: no path check
can tell it apart, only the file system's permissions (or a real sandbox) can.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from pathlib import Path

__all__ = [
    "OutsideRoot",
    "open_beneath",
    "open_dir_beneath",
    "openat2_available",
    "relative_to_root",
]

StrPath = str | os.PathLike[str]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _CLOEXEC
_MAX_LINKS = 40  # as the kernel's own limit

# openat2(2): the number is shared by every architecture with the generic syscall table.
_SYS_OPENAT2 = 437
_OPENAT2_MACHINES = frozenset({"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x"})
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_AT_FDCWD = -100
# What openat2 refuses that the walk settles: a step out (EXDEV, which also covers absolute
# symlinks that point back inside), too many links, or a concurrent rename (EAGAIN).
_RETRY_WITH_WALK = frozenset({errno.EXDEV, errno.ELOOP, errno.EAGAIN})


class OutsideRoot(OSError):
    """The path, or a symlink on it, leads out of the root directory."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EXDEV, "leads outside the root directory", path)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


class _Openat2:
    """``openat2`` through ``syscall(2)``, probed once; ``None`` where it does not work."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long

    def __call__(self, dir_fd: int, path: str, flags: int, mode: int) -> int:
        how = _OpenHow(flags | _CLOEXEC, mode if flags & os.O_CREAT else 0,
                       _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        raw = os.fsencode(path)
        if b"\0" in raw:
            raise ValueError("embedded null byte")
        fd = self._libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd),
                                ctypes.c_char_p(raw), ctypes.byref(how),
                                ctypes.c_size_t(ctypes.sizeof(how)))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return int(fd)

    @classmethod
    def probe(cls) -> _Openat2 | None:
        if not sys.platform.startswith("linux") or platform.machine() not in _OPENAT2_MACHINES:
            return None
        try:
            call = cls()
            os.close(call(_AT_FDCWD, ".", _DIR_FLAGS, 0))
        except (OSError, AttributeError):  # ENOSYS on old kernels, EPERM under some seccomp
            return None
        return call


_openat2: _Openat2 | None = _Openat2.probe()


def openat2_available() -> bool:
    """Whether opens use the kernel's ``openat2(RESOLVE_BENEATH)`` (else the walk)."""
    return _openat2 is not None


def open_beneath(root: StrPath, rel: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """A descriptor of ``rel`` under the directory ``root``, opened with ``flags``.

    Symlinks are followed while they stay under ``root``; ``OutsideRoot`` when the path
    leads out. Other failures are the usual ``OSError`` (``FileNotFoundError``...).
    """
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        return _open(root_fd, os.fspath(root), rel, flags, mode, want_dir=False, create=False)
    finally:
        os.close(root_fd)


def open_dir_beneath(root: StrPath, rel: str, *, create: bool = False) -> int:
    """A descriptor of the directory ``rel`` under ``root`` (``""`` is the root itself).

    ``create`` makes missing directories on the way (mode ``0o777`` less the umask), each
    relative to the one before it.
    """
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        return _open(root_fd, os.fspath(root), rel, _DIR_FLAGS, 0, want_dir=True,
                     create=create)
    finally:
        os.close(root_fd)


def _open(root_fd: int, root: str, rel: str, flags: int, mode: int, *, want_dir: bool,
          create: bool) -> int:
    if _openat2 is not None:
        try:
            return _openat2(root_fd, rel or ".", flags, mode)
        except OSError as e:
            if e.errno not in _RETRY_WITH_WALK and not (create and e.errno == errno.ENOENT):
                raise
    return _walk(root_fd, root, rel, flags, mode, want_dir=want_dir, create=create)


def _parts(path: str) -> list[str]:
    """The components of ``path``, ``.`` and empty ones left out."""
    return [p for p in path.split("/") if p not in ("", ".")]


def _readlink(name: str, dir_fd: int) -> str | None:
    """The target of the symlink ``name`` in ``dir_fd``, or None when it is not a symlink."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _inside(target: str, root: str) -> str | None:
    """An absolute symlink target as a path relative to ``root``, or None when outside."""
    if target == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return target[len(prefix):] if target.startswith(prefix) else None


def _walk(root_fd: int, root: str, rel: str, flags: int, mode: int, *, want_dir: bool,
          create: bool) -> int:
    """The open as a walk of single ``O_NOFOLLOW`` steps, each from the directory before."""
    if "\0" in rel:
        raise ValueError("embedded null byte")
    pending = _parts(rel)[::-1]  # a stack: the next component is last
    stack = [os.dup(root_fd)]  # the directories walked through, root first
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name == "..":
                if len(stack) == 1:
                    raise OutsideRoot(rel)
                os.close(stack.pop())
                continue
            last = not pending
            as_dir = want_dir or not last
            try:
                fd = os.open(name, (_DIR_FLAGS if as_dir else flags | _CLOEXEC) | _NOFOLLOW,
                             mode, dir_fd=stack[-1])
            except FileNotFoundError:
                if not (create and as_dir):
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=stack[-1])
                except FileExistsError:
                    pass
                pending.append(name)  # open what is there now, by the same careful step
                continue
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise
                target = _readlink(name, stack[-1])
                if target is None:
                    raise
                links += 1
                if links > _MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel) from None
                if target.startswith("/"):
                    inside = _inside(target, root)
                    if inside is None:
                        raise OutsideRoot(rel) from None
                    for extra in stack[1:]:
                        os.close(extra)
                    del stack[1:]
                    target = inside
                pending.extend(_parts(target)[::-1])
                continue
            if last:
                return fd
            stack.append(fd)
        # Nothing left to walk: the path named a directory already open (the root, or "a/..").
        if want_dir:
            return os.dup(stack[-1])
        return os.open(".", flags | _CLOEXEC, mode, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def relative_to_root(path: Path, root: Path) -> str:
    """``path`` (lexically under ``root``) as the relative path the opens take."""
    return path.relative_to(root).as_posix() if path != root else ""
