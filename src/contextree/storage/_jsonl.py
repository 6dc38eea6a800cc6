"""JSONL storage: one session per file, one entry per line, append-only and crash-safe.

- Each ``append`` is one ``write`` of a whole line, then ``fdatasync``: when it returns the
  entry is on disk. ``batch()`` defers the sync (and buffers the writes) to the end of a block.
- One writer at a time: the writer holds an exclusive ``flock`` on the file; readers need none.
- A crash can only tear the line being written. On open, a torn last line is moved to the
  quarantine file beside the session and reported; anything else malformed raises
  ``SessionError`` with the file and line, and ``repair`` deals with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import io
import json
import os
import socket
import stat
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from .._files import atomic_write, write_all
from ..entries import (
    FORMAT_VERSION,
    LINE_DECODER,
    AnyEntry,
    LeafEntry,
    LineError,
    SessionHeader,
    decode_line,
    encode_line,
)
from ..errors import (
    InvalidArgument,
    InvalidHeader,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StorageFailure,
)
from ._base import IndexedStorage, StorageHealth, TreeIndex, verify_links

CHUNK = 2 << 20  # bytes read and decoded per msgspec call when loading
BATCH_BUFFER = 1 << 20  # bytes buffered in a batch before they are written


def quarantine_path(path: str | os.PathLike[str]) -> Path:
    """Where lines removed from a session are kept: ``<file>.quarantine``."""
    return Path(f"{os.fspath(path)}.quarantine")


def lock_info_path(path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(path)}.lock")


def quarantine(path: str | os.PathLike[str], records: Iterable[dict[str, object]]) -> int:
    """Append records (reason, line number, original text) to the quarantine file, durably."""
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if not lines:
        return 0
    fd = os.open(quarantine_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        write_all(fd, "".join(lines).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(lines)


def quarantined_count(path: str | os.PathLike[str]) -> int:
    """How many lines of this session were ever quarantined (lines of its quarantine file)."""
    try:
        with open(quarantine_path(path), "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


@dataclass(frozen=True)
class TornTail:
    """A last line cut short by a crash: where it started and what it held."""

    offset: int
    line: int
    data: bytes


class JsonlStorage(IndexedStorage):
    """A session in a JSONL file. Create with ``create``, open with ``open``."""

    def __init__(
        self,
        path: Path,
        index: TreeIndex,
        *,
        fd: int | None,
        size: int,
        durable: bool,
        torn: TornTail | None = None,
    ) -> None:
        super().__init__(index)
        self.file = path
        self._fd = fd
        self._readonly = fd is None
        self._size = size
        self._durable = durable
        self._failed: str | None = None
        self._batch_depth = 0
        self._buffer = bytearray()
        self.torn = torn

    # -- creating and opening ------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        header: SessionHeader,
        entries: Iterable[AnyEntry] = (),
        *,
        durable: bool = True,
    ) -> JsonlStorage:
        """Create a new session file atomically; ``SessionExists`` if it is already there.

        The header and ``entries`` are written to a temporary file, synced (unless not
        ``durable``), then linked into place, so a crash leaves either no file or the
        complete one.
        """
        target = Path(path)
        index = TreeIndex(header, str(target))
        data = bytearray(encode_line(header))
        for entry in entries:
            index.check(entry)
            index.add(entry)
            data += encode_line(entry)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            atomic_write(target, bytes(data), overwrite=False, durable=durable)
        except FileExistsError:
            raise SessionExists(
                "a file is already there; choose another path or open it",
                path=str(target),
            ) from None
        fd = os.open(target, os.O_RDWR | os.O_APPEND)
        _lock(fd, target)
        return cls(target, index, fd=fd, size=len(data), durable=durable)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        durable: bool = True,
    ) -> JsonlStorage:
        """Open a session file. Writers take the lock; a torn last line is quarantined."""
        target = Path(path)
        try:
            fd = os.open(target, os.O_RDONLY if readonly else os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise SessionNotFound(
                "no such session file (Session.create(path) or `contextree import` makes one)",
                path=str(target),
            ) from None
        except IsADirectoryError:
            raise _not_a_file(target, directory=True) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # read-only opens of a directory succeed
            os.close(fd)
            raise _not_a_file(target, directory=stat.S_ISDIR(mode))
        locked = False
        try:
            if not readonly:
                _lock(fd, target)
                locked = True
            with os.fdopen(os.dup(fd), "rb") as f:
                index, end, torn = load(f, str(target))
            if torn is not None:
                _report_torn(target, torn, moved=not readonly)
                if not readonly:
                    quarantine(target, [_torn_record(torn)])
                    os.truncate(fd, torn.offset)
                    os.fsync(fd)
        except BaseException:
            if locked:  # a failed open leaves no lock info behind
                with contextlib.suppress(OSError):
                    lock_info_path(target).unlink()
            os.close(fd)
            raise
        if readonly:
            os.close(fd)
            return cls(target, index, fd=None, size=end, durable=durable, torn=torn)
        return cls(target, index, fd=fd, size=end, durable=durable, torn=torn)

    # -- writing ---------------------------------------------------------------------------
    def append(self, entry: AnyEntry) -> None:
        if self._fd is None:
            raise ReadOnlySession("this session was opened read-only; open it with "
                               "readonly=False to write", path=str(self.file))
        if self._failed is not None:
            raise StorageFailure(f"an earlier write failed ({self._failed}), so this "
                               "session may differ from the file; close it and open it again "
                               "(reopening reads what is really on disk)", path=str(self.file))
        self._index.check(entry)
        data = encode_line(entry)
        if self._batch_depth:
            self._buffer += data
            if len(self._buffer) >= BATCH_BUFFER:
                self._guarded(self._flush)
        else:
            self._write(data)
            if self._durable:
                self._guarded(self._sync)
        self._index.add(entry)

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run a write or sync after which memory and file could disagree if it fails;
        a failure puts the storage in a failed state that refuses further appends."""
        try:
            action()
        except SessionError as e:
            self._failed = str(e.__cause__ or e)
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Buffer appends and sync once at the end: for bulk writes.

        Entries appended inside the block are durable when the block exits; a crash inside
        it may lose them (but never anything appended before it).
        """
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if not self._batch_depth and self._fd is not None and self._failed is None:
                self._guarded(self._flush)
                if self._durable:
                    self._guarded(self._sync)

    def _flush(self) -> None:
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            self._write(data)

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        try:
            write_all(self._fd, data)
        except OSError as e:
            # Never leave a partial line behind: cut the file back to its last whole line.
            with contextlib.suppress(OSError):
                os.truncate(self._fd, self._size)
            raise StorageFailure(f"could not write the entry ({e}); nothing was "
                               "written — free disk space or check permissions and retry",
                               path=str(self.file)) from e
        self._size += len(data)

    def _sync(self) -> None:
        assert self._fd is not None
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            raise StorageFailure(f"could not sync the file to disk ({e})",
                               path=str(self.file)) from e

    def quarantined_lines(self) -> int:
        """Lines of this session ever quarantined, plus a torn tail skipped read-only."""
        skipped = 1 if self.torn is not None and self._readonly else 0
        return quarantined_count(self.file) + skipped

    def health(self) -> StorageHealth:
        """Entries, the file's size on disk, quarantined lines, a torn tail left in place."""
        try:
            size = os.stat(self.file).st_size
        except OSError:
            size = self._size
        left = self.torn.line if self.torn is not None and self._readonly else None
        return StorageHealth(entries=len(self), size=size,
                             quarantined_lines=self.quarantined_lines(), torn_line=left)

    def delete(self) -> None:
        """Remove the session file and its quarantine file (repair's backups stay), then
        close. Needs the writer's lock, so nobody is writing to it meanwhile."""
        if self._fd is None:
            raise ReadOnlySession("this session was opened read-only; open it with "
                                  "readonly=False to delete it", path=str(self.file))
        for path in (self.file, quarantine_path(self.file)):
            path.unlink(missing_ok=True)
        self._buffer.clear()
        self._durable = False  # nothing left to sync
        self.close()

    @property
    def size(self) -> int:
        """Bytes of the file that hold whole lines."""
        return self._size

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            self._flush()
            if self._durable:
                self._sync()
        finally:
            with contextlib.suppress(OSError):
                lock_info_path(self.file).unlink()
            os.close(self._fd)
            self._fd = None
            self._readonly = True


# -- loading -------------------------------------------------------------------------------

def load(f: io.BufferedIOBase, location: str) -> tuple[TreeIndex, int, TornTail | None]:
    """Read a session file into a ``TreeIndex``; return it, the good length and any torn tail.

    Lines are decoded in large blocks by msgspec (one C call per block); a block with an
    unusual line (an unknown type or field, a parent that comes later, or an error) is redone
    line by line from that line on. The file is read into one reused buffer (no copies of
    the data, no fresh memory per block), and line numbers are only counted when a message
    needs one.

    The cyclic garbage collector is paused while loading: decoded entries hold no cycles,
    and a collector running as the heap grows would traverse the same new objects again
    and again (a third of the time of a large load).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(f, location)
    finally:
        if collecting:
            gc.enable()


def _load(f: io.BufferedIOBase, location: str) -> tuple[TreeIndex, int, TornTail | None]:
    first = f.readline()
    if not first:
        raise InvalidHeader("the file is empty; delete it or create a new "
                           "session", path=location)
    header = _decode_header(first, location)
    index = TreeIndex(header, location)
    pending: list[tuple[AnyEntry, int | None]] = []
    lines = _LineCounter(f.fileno(), len(first), 1)
    offset = len(first)  # file offset of buf[0]
    buf = bytearray(CHUNK)
    filled = 0

    def at_end(end: int) -> bool:
        # Nothing but whitespace follows buf[:end] in the file (as far as it is written).
        return not bytes(buf[end:filled]).strip() and os.fstat(f.fileno()).st_size <= f.tell()

    while True:
        if filled == len(buf):  # a line longer than the buffer: grow it
            buf.extend(bytes(len(buf)))
        with memoryview(buf) as view:
            n = f.readinto(view[filled:])
        if not n:
            break
        filled += n
        end = buf.rfind(b"\n", 0, filled) + 1
        if not end:
            continue
        with memoryview(buf) as view, view[:end] as block:
            torn = _load_block(index, block, offset, lines, location, pending,
                               functools.partial(at_end, end))
        if torn is not None:
            return _finish(index, pending, torn)
        offset += end
        rest = filled - end
        buf[:rest] = buf[end:filled]
        filled = rest
    torn = None
    if filled:
        carry = bytes(buf[:filled])
        if carry.strip():
            torn = TornTail(offset, lines.before(offset) + 1, carry)
        else:
            offset += filled
    return _finish(index, pending, torn, offset)


class _LineCounter:
    """Line numbers on demand: counts newlines up to an offset, resuming where it stopped.

    The fast path never needs one, so loading a healthy file counts nothing; a file with many
    unusual lines costs at most one extra pass.
    """

    def __init__(self, fd: int, offset: int, lines: int) -> None:
        self.fd = fd
        self.offset = offset
        self.lines = lines

    def before(self, offset: int) -> int:
        """How many lines end before ``offset`` (the number of the line there, minus one)."""
        while self.offset < offset:
            data = os.pread(self.fd, min(CHUNK, offset - self.offset), self.offset)
            if not data:
                break
            self.lines += data.count(b"\n")
            self.offset += len(data)
        return self.lines


def _finish(
    index: TreeIndex,
    pending: list[tuple[AnyEntry, int | None]],
    torn: TornTail | None,
    end: int | None = None,
) -> tuple[TreeIndex, int, TornTail | None]:
    verify_links(index, pending)
    good_end = torn.offset if torn is not None else end
    assert good_end is not None
    return index, good_end, torn


def _decode_header(line: bytes, location: str) -> SessionHeader:
    try:
        header = decode_line(line)
    except LineError as e:
        raise InvalidHeader(f"the first line is not a session header ({e}); "
                           "is this a contextree session file?", path=location, line=1) from None
    if not isinstance(header, SessionHeader):
        raise InvalidHeader("the first line must be the session header "
                           '({"type":"session",...}); is this a contextree session file? '
                           "(`contextree import` reads other formats)", path=location, line=1)
    if header.version > FORMAT_VERSION:
        raise InvalidHeader(f"the file is in session format version "
                           f"{header.version}, newer than this contextree understands "
                           f"({FORMAT_VERSION}); upgrade contextree to open it",
                           path=location, line=1)
    return header


def _load_block(
    index: TreeIndex,
    block: memoryview,
    offset: int,
    lines: _LineCounter,
    location: str,
    pending: list[tuple[AnyEntry, int | None]],
    is_last: Callable[[], bool],
) -> TornTail | None:
    """Index one newline-terminated block; return a torn tail if its last line is one."""
    try:
        entries = LINE_DECODER.decode_lines(block)
    except msgspec.DecodeError:
        return _load_block_slowly(index, block, offset, lines, location, pending, is_last)
    by_id = index.by_id
    add = index.add
    for i, entry in enumerate(entries):
        if isinstance(entry, SessionHeader) or not entry.id or entry.id in by_id or (
            entry.parent_id is not None and entry.parent_id not in by_id
        ) or (
            isinstance(entry, LeafEntry) and entry.target_id is not None
            and entry.target_id not in by_id
        ):
            # Rare: redo the rest of the block line by line, so that errors (and parents
            # that come later in the file, checked at the end) carry their exact line.
            return _load_block_slowly(index, block, offset, lines, location, pending,
                                      is_last, start=i)
        add(entry)
    return None


def _load_block_slowly(
    index: TreeIndex,
    block: memoryview,
    offset: int,
    lines: _LineCounter,
    location: str,
    pending: list[tuple[AnyEntry, int | None]],
    is_last: Callable[[], bool],
    start: int = 0,
) -> TornTail | None:
    raw_lines = bytes(block).split(b"\n")[:-1]
    nonblank = [i for i, raw in enumerate(raw_lines) if raw.strip()]
    last_nonblank = nonblank[-1] if nonblank else -1
    line_no = lines.before(offset)
    pos = offset
    seen = 0
    for i, raw in enumerate(raw_lines):
        here = line_no + 1 + i
        if not raw.strip():
            pos += len(raw) + 1
            continue
        if seen < start:  # already indexed by the fast path
            seen += 1
            pos += len(raw) + 1
            continue
        seen += 1
        try:
            entry = decode_line(raw)
        except LineError as e:
            if i == last_nonblank and is_last():
                return TornTail(pos, here, b"\n".join(raw_lines[i:]) + b"\n")
            raise e.kind(
                f"{e}; run `contextree repair` to quarantine bad lines (a backup is kept)",
                path=location, line=here,
            ) from None
        if isinstance(entry, SessionHeader):
            raise InvalidHeader("a second session header in the middle of the "
                               "file (were two files concatenated?); run `contextree repair`",
                               path=location, line=here)
        forward = entry.parent_id is not None and entry.parent_id not in index.by_id
        index.check(entry, here, forward_parent_ok=forward)
        if forward:
            pending.append((entry, here))
        index.add(entry)
        pos += len(raw) + 1
    return None


def _torn_record(torn: TornTail) -> dict[str, object]:
    return {
        "reason": "torn last line (incomplete write, e.g. a crash)",
        "line": torn.line,
        "offset": torn.offset,
        "quarantined_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "text": torn.data.decode("utf-8", errors="replace"),
    }


def _report_torn(path: Path, torn: TornTail, *, moved: bool) -> None:
    where = f"{path}:{torn.line}"
    if moved:
        msg = (f"{where}: the last line was incomplete (a write was cut short); it was moved "
               f"to {quarantine_path(path)} and the session continues from the line before")
    else:
        msg = (f"{where}: the last line is incomplete (a write was cut short or is in "
               "progress); it was skipped (read-only: nothing was changed)")
    warnings.warn(msg, TornLineWarning, stacklevel=4)


class TornLineWarning(UserWarning):
    """A torn last line was found (and, when writable, quarantined) while opening a session."""


# -- file helpers ----------------------------------------------------------------------------

def _not_a_file(path: Path, *, directory: bool) -> InvalidArgument:
    if directory:
        return InvalidArgument("this is a directory, not a session file (`contextree ls DIR` "
                               "lists the sessions in it)", path=str(path))
    return InvalidArgument("this is not a regular file, not a session file", path=str(path))


def _lock(fd: int, path: Path) -> None:
    """Take the writer's lock or raise ``SessionLocked`` naming who holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = "another process"
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(lock_info_path(path).read_text())
            holder = f"pid {info['pid']} on {info['host']} (since {info['since']})"
        raise SessionLocked(
            f"the session is open for writing by {holder}; close it there first, or open it "
            "read-only with Session.open(path, readonly=True)",
            path=str(path),
        ) from None
    with contextlib.suppress(OSError):
        lock_info_path(path).write_text(json.dumps({
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }))
