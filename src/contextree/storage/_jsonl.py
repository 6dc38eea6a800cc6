"""JSONL storage: one session per file, one entry per line, append-only and crash-safe.

- Each ``append`` is one ``write`` of a whole line, then ``fdatasync``: when it returns the
  entry is on disk. ``batch()`` defers the sync (and buffers the writes) to the end of a block.
- One writer process at a time: it holds an exclusive ``flock`` on the file; readers need
  none. Within that process, every writable open of the same file (same device and inode)
  shares one open file: like two SQLite connections in one process, each handle sees every
  append made through the others, and the lock goes when the last handle is closed (or
  collected, with a ``ResourceWarning`` as ``io`` gives for an unclosed file).
- A writer checks, once it holds the lock, that the path still names the file it locked
  (``repair`` or ``delete`` may have replaced or removed it since it opened it), and opens the
  new file if not; ``repair`` and ``delete`` take the lock too.
- A crash can only tear the line being written. On open, a torn last line is moved to the
  quarantine file beside the session and reported; anything else malformed raises
  ``SessionError`` with the file and line, and ``repair`` deals with it. Temp files that a
  crashed create, fork or repair left in the directory are removed on the first writable
  open or create there in each process.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec import UNSET, UnsetType

from .._files import atomic_create, remove_stale_temps, write_all
from .._gc import gc_paused
from ..entries import NO_JSON_FORM, AnyEntry, SessionHeader, encode_line, plain_message_line
from ..entries import now as entry_now
from ..errors import (
    InvalidArgument,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StorageFailure,
)
from . import _index
from ._base import (
    IndexedStorage,
    StorageHealth,
    TreeIndex,
    check_header,
    settle_parent,
    unencodable,
)
from ._encoded import EncodedEntry
from ._filetree import FileTree, ReadFile
from ._index import (
    TAIL_REWRITE,
    IndexFile,
    IndexRead,
    encode_tail,
    index_path,
    line_crc,
    read_index,
    write_index,
)
from ._loading import (
    CHUNK,
    TornLineWarning,
    TornTail,
    decode_header,
    load,
    load_rest,
    report_torn,
    torn_record,
)
from ._sidecars import (
    clear_lock_info,
    describe_os_error,
    line_text,
    lock,
    lock_info_path,
    note_shared_with_children,
    quarantine,
    quarantine_path,
    quarantined_count,
    write_lock_info,
)

__all__ = [
    "CHUNK",
    "JsonlStorage",
    "TornLineWarning",
    "TornTail",
    "clean_temp_files",
    "load",
    "lock_info_path",
    "open_for_writing",
    "open_locked",
    "open_regular",
    "quarantine",
    "quarantine_path",
    "quarantined_count",
    "sweep",
]

BATCH_BUFFER = 1 << 20  # bytes buffered in a batch before they are written
PATH_CHECK_EVERY = 1.0
"""Seconds between two checks that the path still names the file written to (a ``stat``:
after a sync, as long as a tenth of it; the size is checked at every write)."""
TAIL_EVERY = 64  # index records a single append defers, written together (one write, not 64)
REOPEN_TRIES = 5  # opens of a path that keeps being replaced before giving up
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(eq=False, slots=True)
class _OpenFile:
    """A session file open for writing in this process, shared by all its handles (slots:
    every append reads a dozen of its fields)."""

    path: Path
    key: tuple[int, int]
    fd: int
    index: FileTree
    size: int  # bytes of the file that hold accepted lines
    newline_due: bool = False  # the last line has no newline yet: the next write adds it
    torn: TornTail | None = None
    handles: int = 0
    failed: str | None = None
    deleted: bool = False
    buffer: bytearray = field(default_factory=bytearray)
    sidecar: IndexFile | None = None  # the index beside the file, open for appending
    indexed: int = 0  # records of ``index`` written to the sidecar
    index_tried: bool = False  # the sidecar was written anew (or that failed) once
    path_checked: float = float("-inf")  # when the path was last seen to name this file
    path_size: int = 0  # ``size`` then: the lines after it were written since
    lock: threading.RLock = field(default_factory=threading.RLock)
    # The process that opened the file: a child of fork() has a copy of this object but
    # none of its descriptor, lock or buffer (see _forget_after_fork).
    pid: int = field(default_factory=os.getpid)
    # The batch the current thread or asyncio task has open on this file, if any (a batch
    # belongs to the thread or task that opened it, not to the handle; see _Batch).
    batch: contextvars.ContextVar[_Batch | None] = field(
        default_factory=lambda: contextvars.ContextVar("contextree_batch", default=None))

    def forked(self) -> bool:
        """True in a child of fork(): the file belongs to the parent process."""
        return self.pid != _pid  # every append asks: no getpid() system call each time


class _Batch:
    """A batch that one thread or asyncio task has open on a file, and how deep it is in
    nested ``batch()`` blocks. The context variable that holds it is copied into every task
    and thread started inside the block (``create_task``, ``to_thread``), so an append asks
    whether the batch is its own, and still open, before it buffers."""

    __slots__ = ("depth", "task", "thread")

    def __init__(self) -> None:
        self.depth = 1
        self.thread = threading.get_ident()
        self.task = _current_task()

    def mine(self) -> bool:
        """The batch is open, and the current thread and task opened it."""
        return (self.depth > 0 and self.thread == threading.get_ident()
                and self.task is _current_task())


def _current_task() -> object | None:
    """The running asyncio task, if any (asyncio is never imported for the question)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        task: object | None = asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        return None
    return task


class _Writer:
    """What a handle needs to write: ``with handle._writer as shared`` takes the lock of
    the shared file, once the handle may write to it (not read-only, closed, or a copy in a
    child of fork()), and reads the file's deleted and failed states under the lock (other
    handles change them there); else it raises what stops it. One per handle, made when it
    opens (no allocation per append), with no reference to its handle: a handle dropped
    unclosed is still collected (and closed) at once."""

    __slots__ = ("closed", "path", "shared")

    def __init__(self, shared: _OpenFile | None, path: Path) -> None:
        self.shared = shared
        self.path = path
        self.closed = False

    def __enter__(self) -> _OpenFile:
        shared = self.shared
        if shared is None or self.closed or shared.pid != _pid:
            raise self.refusal()
        shared.lock.acquire()
        if shared.deleted or shared.failed is not None:
            shared.lock.release()
            raise self.refusal()
        return shared

    def __exit__(self, *exc: object) -> None:
        assert self.shared is not None
        self.shared.lock.release()

    def refusal(self) -> SessionError:
        """Why this handle cannot write now (``__enter__`` found that it cannot)."""
        shared, path = self.shared, str(self.path)
        if shared is not None and shared.forked():
            return SessionLocked(f"this session was opened for writing by process "
                                 f"{shared.pid}, and this process is a child of it "
                                 "(os.fork()): a child holds none of its parent's writers; "
                                 "open the session again in the child once the parent has "
                                 "closed it", path=path)
        if self.closed:
            return ReadOnlySession("this session is closed; open it again to write", path=path)
        if shared is None:
            return ReadOnlySession("this session was opened read-only; open it with "
                                   "readonly=False to write", path=path)
        if shared.deleted:
            return SessionNotFound("the session was deleted", path=path)
        return StorageFailure(f"an earlier write failed ({shared.failed}), so this session "
                              "may differ from the file; close it and open it again "
                              "(reopening reads what is really on disk)", path=path)


_OPEN: dict[tuple[int, int], _OpenFile] = {}  # (st_dev, st_ino) -> the file, while open
_OPEN_LOCK = threading.RLock()
def registry_lock() -> threading.RLock:
    """The lock that guards which files this process has open for writing."""
    return _OPEN_LOCK


_pid = os.getpid()  # this process's id, set anew in a child of fork() (below)


def _forget_after_fork() -> None:
    # A child of os.fork() holds none of its parent's writers: its opens lock (and find the
    # parent holding the lock) like any other process's. Its copies of the parent's handles
    # refuse to write (their _OpenFile.pid is the parent's); the inherited descriptors are
    # closed so that the child cannot keep the parent's lock alive after the parent closes,
    # and their buffers are dropped so that the child's exit never writes the parent's batch.
    global _OPEN_LOCK, _pid
    _pid = os.getpid()
    for shared in _OPEN.values():
        with contextlib.suppress(OSError):
            os.close(shared.fd)
        shared.fd = -1
        if shared.sidecar is not None:
            shared.sidecar.close()
        shared.buffer = bytearray()
        shared.lock = threading.RLock()  # a thread of the parent may have held it
    _OPEN.clear()
    _OPEN_LOCK = threading.RLock()


def _remember_after_fork() -> None:
    note_shared_with_children(_OPEN)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork, after_in_parent=_remember_after_fork)

_SWEPT: dict[str, int] = {}  # directory -> its mtime when this process last swept it


def sweep(directory: Path, *, always: bool = False) -> None:
    """Remove the temp files that crashed writers left in ``directory``, if it changed since
    this process last looked (a crash leaves a temp file only by creating it, which changes
    the directory); ``always``: look anyway."""
    key = os.path.abspath(directory)
    try:
        mtime = os.stat(key).st_mtime_ns
    except OSError:
        return
    if not always and _SWEPT.get(key) == mtime:
        return
    remove_stale_temps(key)
    _seen(directory)


def clean_temp_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files that crashed writers (a killed fork, create or repair) left in
    ``directory``; return them. Writes in progress keep theirs (they hold them locked), and
    nothing but contextree's own temp names (``.NAME.RANDOM.tmp``) is touched. Writable
    opens do this by themselves when the directory changed; ``gc`` can call it."""
    removed = remove_stale_temps(directory)
    _seen(Path(directory))
    return removed


def _seen(directory: Path) -> None:
    """Note the directory as it is after a change of ours, so that only others' changes
    (new temp files among them) make the next open look again."""
    key = os.path.abspath(directory)
    with contextlib.suppress(OSError):
        _SWEPT[key] = os.stat(key).st_mtime_ns


class JsonlStorage(IndexedStorage):
    """A session in a JSONL file. Create with ``create``, open with ``open``."""

    def __init__(self, path: Path, index: TreeIndex, *, shared: _OpenFile | None,
                 size: int, durable: bool, torn: TornTail | None = None) -> None:
        super().__init__(index)
        self.file = path
        self._shared = shared
        self._readonly = shared is None
        self._closed = False
        self._size = size
        self._durable = durable
        self.torn = torn
        self._writer = _Writer(shared, path)
        if shared is not None:
            shared.handles += 1

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
        ``durable``), locked, then linked into place, so a crash leaves either no file or
        the complete one, and no other writer can take the new file's lock first.
        """
        target = Path(path)
        checked = TreeIndex(check_header(header), str(target))
        header_line = encode_line(header)
        data = bytearray(header_line)
        placed: list[tuple[AnyEntry, tuple[int, int, int]]] = []
        for entry in entries:
            checked.check(entry)
            checked.add(entry)
            line = _encode(entry, target)
            placed.append((entry, (len(data), len(line), line_crc(line))))
            data += line
        # The registry's lock is held from the file's link to its registration: another
        # thread of this process that finds the new file then shares it, where it would
        # find the file locked by an open it cannot see (``SessionLocked``).
        with _OPEN_LOCK:
            fd, shared = -1, None
            try:  # whatever interrupts it, at any line, lets the new file's lock go
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    sweep(target.parent)
                    fd = atomic_create(target, bytes(data), durable=durable)
                except FileExistsError:
                    raise SessionExists("a file is already there; choose another path or "
                                        "open it", path=str(target)) from None
                except OSError as e:
                    raise StorageFailure(f"could not create the session file "
                                         f"({describe_os_error(e)}); nothing was written — "
                                         "free disk space or check permissions and retry",
                                         path=str(target)) from e
                info = os.fstat(fd)
                index = FileTree(header, str(target),
                                 ReadFile(_reader_of(fd, target), str(target)), header_line)
                for entry, span in placed:
                    index.add(entry, span)
                index.rebuild = _rebuilder(index.file, target)
                shared = _OpenFile(target, (info.st_dev, info.st_ino), fd, index, len(data))
                _fresh_sidecar(shared)
                _hold(shared)
                return cls(target, index, shared=shared, size=len(data), durable=durable)
            except BaseException:
                if shared is not None:
                    _let_go(shared)
                elif fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        durable: bool = True,
    ) -> JsonlStorage:
        """Open a session file. Writers take the lock (or share this process's open file);
        a torn last line is quarantined."""
        target = Path(path)
        if readonly:
            file = ReadFile(open_regular(target, os.O_RDONLY), str(target))
            try:
                index, end, torn, known, _ = _read(file, target)
            except BaseException:
                file.close()
                raise
            if known is None and torn is None and end >= _index.INDEX_MIN_BYTES:
                write_index(target, index.header_line, index.columns())  # best effort
            if torn is not None:
                report_torn(target, torn, moved=False)
            return cls(target, index, shared=None, size=end, durable=durable, torn=torn)
        with _OPEN_LOCK:
            shared = None
            try:
                shared = open_for_writing(target, then="close it there first, or open it "
                                          "read-only with Session.open(path, readonly=True)")
                return cls(target, shared.index, shared=shared, size=shared.size,
                           durable=durable, torn=shared.torn)
            except BaseException:  # an interrupt: a file no handle holds is let go
                if shared is not None:
                    _let_go(shared)
                raise

    # -- writing ---------------------------------------------------------------------------
    def _writable(self) -> _OpenFile:
        """The shared file, if this handle may write to it now; else what stops it, raised."""
        with self._writer as shared:
            return shared

    def append(self, entry: AnyEntry, *, expected_leaf: str | UnsetType | None = UNSET,
               on_leaf: bool = False) -> None:
        """Validate one entry and write it durably as one line (it becomes the leaf); the
        leaf is read and the line written under the file's lock (see ``Storage.append``)."""
        with self._writer as shared:
            index = shared.index
            if expected_leaf is not UNSET or (on_leaf and entry.parent_id != index.leaf_id):
                entry = settle_parent(entry, index.leaf_id, location=str(shared.path),
                                      expected_leaf=expected_leaf, on_leaf=on_leaf)
            try:
                data = plain_message_line(entry)
            except NO_JSON_FORM as e:
                raise unencodable(entry, str(shared.path), e) from None
            if data is None:
                index.check(entry)
                data = _encode(entry, shared.path)
            else:  # a plain message, within the limits: only the tree's rules to check
                index.check_place(entry.id, entry.parent_id, None)
            self._put(shared, data, entry, index.add)

    def append_encoded(self, entry: EncodedEntry) -> None:
        """``append`` of an entry that ``encode_entry`` made (it checked the entry against
        the limits of a line, and encoded it): its line is written as it is, after the
        checks that need the session (a new id, a parent and a leaf target that exist). For
        bulk writers that hold their entries encoded (an import)."""
        with self._writer as shared:
            entry.check_line(str(shared.path))
            index = shared.index
            index.check_place(entry.id, entry.parent_id, entry.leaf_target)
            self._put(shared, entry.line, entry, index.add_encoded)

    def append_encoded_many(self, entries: Sequence[EncodedEntry]) -> None:
        """``append_encoded`` of each of ``entries`` in turn, inside this thread's
        ``batch()``: the same checks, lines and writes, under one lock and without a call
        each through ``_put`` (an import writes tens of thousands). An entry that fails its
        checks is raised with those before it buffered, as one call each would leave them.
        Outside a batch each is appended on its own."""
        shared = self._shared
        batch = None if shared is None else shared.batch.get()
        if batch is None or not batch.mine():
            for entry in entries:
                self.append_encoded(entry)
            return
        with self._writer as shared:
            index = shared.index
            location = str(shared.path)
            check_place, add = index.check_place, index.add_encoded
            buffer = shared.buffer
            offset = _next_offset(shared)
            try:
                for entry in entries:
                    entry.check_line(location)
                    check_place(entry.id, entry.parent_id, entry.leaf_target)
                    line = entry.line
                    add(entry, (offset, len(line), 0))
                    buffer += line
                    offset += len(line)
                    if len(buffer) >= BATCH_BUFFER:  # where _put flushes: the same writes
                        self._guarded(shared, _flush)
                        buffer = shared.buffer
                        offset = _next_offset(shared)
            except SessionError:
                raise  # a refused entry: those before it are in the tree and the buffer
            except BaseException as e:
                if shared.failed is None:
                    shared.failed = f"interrupted while entries were added ({type(e).__name__})"
                raise

    def _put(self, shared: _OpenFile, data: bytes, entry: Any,
             add: Callable[[Any, tuple[int, int, int]], None]) -> None:
        """Write an entry's checked line (buffered in a batch) and ``add`` it to the tree
        with its place; call with the file's lock held. The line's checksum is left to the
        index records (``FileTree.tail_records``).

        An exception other than the write's own (a ``KeyboardInterrupt``) may leave the
        tree and the file disagreeing by this entry: the file then refuses appends until it
        is opened again, which reads what is really on disk."""
        try:
            batch = shared.batch.get()
            if batch is not None and batch.mine():
                add(entry, (_next_offset(shared), len(data), 0))
                shared.buffer += data
                if len(shared.buffer) >= BATCH_BUFFER:
                    self._guarded(shared, _flush)
                return
            if shared.buffer:  # another handle's batch: its lines go first
                self._guarded(shared, _flush)
            span = (shared.size + shared.newline_due, len(data), 0)
            _write(shared, data)
            add(entry, span)
        except SessionError:
            raise  # the write's own failure: it left the file as it was, or failed it
        except BaseException as e:
            shared.failed = f"interrupted while an entry was written ({type(e).__name__})"
            raise
        if self._durable:
            _sync(shared, guarded=True)
        if (len(shared.index.ids) - shared.indexed >= TAIL_EVERY if shared.sidecar is not None
                else not shared.index_tried and shared.size >= _index.INDEX_MIN_BYTES):
            _index_new(shared, every=TAIL_EVERY)  # due (as _index_new would find)

    @staticmethod
    def _guarded(shared: _OpenFile, action: Callable[[_OpenFile], None]) -> None:
        """Run a write or sync after which memory and file could disagree if it fails;
        a failure puts the file in a failed state that refuses further appends."""
        try:
            action(shared)
        except SessionError as e:
            shared.failed = str(e.__cause__ or e)
            raise
        except BaseException as e:  # a KeyboardInterrupt: how far it got is not known
            shared.failed = f"interrupted while entries were written ({type(e).__name__})"
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Buffer appends and sync once at the end: for bulk writes.

        Entries appended inside the block are durable when the block exits; a crash inside
        it may lose them (but never anything appended before it). The block belongs to the
        thread or asyncio task that opened it: appends from other threads and tasks (those
        started inside the block too), through this handle or another, stay durable when
        they return.
        """
        shared = self._shared
        if shared is None or shared.forked():
            yield  # appends raise what applies
            return
        entered: _Batch | None = None
        try:  # an interrupt anywhere from here on still ends the batch (finally)
            current = shared.batch.get()
            if current is not None and current.mine():
                entered = current  # before the count: an interrupt between ends it early
                current.depth += 1
            else:
                entered = _Batch()
                shared.batch.set(entered)
            yield
        finally:
            if entered is not None:
                entered.depth -= 1
                if entered.depth <= 0:
                    entered.task = None  # ended: it keeps no finished task alive
            if (entered is not None and entered.depth <= 0 and not self._closed
                    and not shared.forked() and shared.failed is None
                    and not shared.deleted):
                with shared.lock:
                    self._guarded(shared, _flush)
                    if self._durable:
                        _sync(shared, guarded=True)
                    _index_caught_up(shared)
                self._size = shared.size

    def quarantined_lines(self) -> int:
        """Lines of this session ever quarantined, plus a torn tail skipped read-only."""
        skipped = 1 if self.torn is not None and self._shared is None else 0
        return quarantined_count(self.file) + skipped

    def save_index(self) -> bool:
        """Write the index of a read-only view anew from what it now knows (``stats`` learns
        the columns an older index lacks); best effort, and only where no writer of this
        process appends to it. True if written."""
        index = self._index
        if self._shared is not None or not isinstance(index, FileTree) or self.torn is not None:
            return False
        try:
            size = os.stat(self.file).st_size
        except OSError:
            return False
        if self._size < _index.INDEX_MIN_BYTES or size != self._size:  # it grew: not now
            return False
        return write_index(self.file, index.header_line, index.columns())

    def health(self) -> StorageHealth:
        """Entries, the file's size on disk, quarantined lines, a torn tail left in place."""
        try:
            size = os.stat(self.file).st_size
        except OSError:
            size = self.size
        left = self.torn.line if self.torn is not None and self._shared is None else None
        return StorageHealth(entries=len(self), size=size,
                             quarantined_lines=self.quarantined_lines(), torn_line=left)

    def delete(self) -> None:
        """Remove the session file and its quarantine file (repair's backups stay), then
        close. Needs the writer's lock, so nobody is writing to it meanwhile, and no other
        handle of this process may have it open."""
        shared = self._writable()
        with _OPEN_LOCK, shared.lock:
            if shared.handles > 1:
                raise SessionLocked(f"the session is open for writing by {shared.handles - 1} "
                                    "other Session object(s) in this process; close them "
                                    "first", path=str(self.file))
            try:
                now = os.stat(shared.path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) != shared.key:
                raise StorageFailure("the path names another file now (it was replaced "
                                     "after this session was opened); nothing was deleted",
                                     path=str(self.file))
            if now is not None:
                for path in (shared.path, quarantine_path(shared.path), index_path(shared.path)):
                    try:
                        path.unlink(missing_ok=True)
                    except OSError as e:
                        raise StorageFailure(f"could not delete {path} "
                                             f"({describe_os_error(e)})",
                                             path=str(self.file)) from e
            shared.deleted = True
            shared.buffer.clear()
        self.close()

    @property
    def size(self) -> int:
        """Bytes of the file that hold whole lines (as this handle last saw it)."""
        return self._shared.size if self._shared is not None and not self._closed else self._size

    @property
    def readonly(self) -> bool:
        """True when opened read-only (no lock, no writes)."""
        return self._readonly or self._closed

    def close(self) -> None:
        """Write what a batch buffered, sync, and release this handle; the last handle of
        the file releases the writer's lock."""
        shared = self._shared
        if self._closed:
            if shared is not None and shared.handles <= 0 and shared.fd >= 0:
                with _OPEN_LOCK, shared.lock:  # a close interrupted in the release: finish
                    if shared.handles <= 0 and not shared.forked():
                        _release(shared)
            return
        if shared is None or shared.forked():
            self._closed = self._writer.closed = True
            if shared is None and isinstance(self._index, FileTree):
                self._index.file.close()
            return  # (a child of fork() leaves its parent's file, lock and buffer alone)
        with _OPEN_LOCK, shared.lock:
            if self._closed:
                return  # closed by another thread meanwhile
            try:
                if not shared.deleted and shared.failed is None:
                    _flush(shared)
                    if self._durable:
                        _sync(shared)
                    _index_caught_up(shared)
            finally:
                # Closed and counted out in one statement: an interrupt lands before it
                # (close again to finish) or after it, never between the two.
                self._closed, self._writer.closed, shared.handles = True, True, shared.handles - 1
                self._size = shared.size
                if shared.handles <= 0:
                    _release(shared)

    def __del__(self) -> None:
        if getattr(self, "_closed", True) or getattr(self, "_shared", None) is None:
            return
        try:
            warnings.warn(f"unclosed session {self.file} (open for writing): it was closed "
                          "when collected; close sessions with close() or a with block",
                          ResourceWarning, source=self, stacklevel=2)
            self.close()
        except Exception:
            pass


# -- the shared open file --------------------------------------------------------------------

def open_for_writing(target: Path, *, then: str) -> _OpenFile:
    """This process's open file for ``target``: shared if already open, else opened, locked
    and loaded (a torn last line quarantined). Call with ``_OPEN_LOCK`` held."""
    fd, shared = -1, None
    try:  # whatever interrupts the open, at any line, lets the lock (the descriptor) go
        fd, key, found = open_locked(target, os.O_RDWR | os.O_APPEND, then=then)
        if found is not None:
            return found
        shared, kept_index = _loaded(target, fd, key)
        if kept_index:
            shared.sidecar = IndexFile.open(target)
            _index_new(shared)  # what the session gained since its index was written
        else:
            _fresh_sidecar(shared)
        return _hold(shared)
    except BaseException:
        if shared is not None:
            _release(shared)
        elif fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def open_locked(target: Path, flags: int, *, then: str,
                share: bool = True) -> tuple[int, tuple[int, int], _OpenFile | None]:
    """Open ``target`` and take the writer's lock on the file the path names *once locked*.

    Returns the descriptor and the file's (device, inode); or, when this process already
    has the file open for writing, ``(-1, key, shared)`` if ``share`` (else
    ``SessionLocked``). A file replaced between our open and our lock (by ``repair``) is
    opened again, so a writer never locks an orphaned file; a deleted one is
    ``SessionNotFound``. Call with ``_OPEN_LOCK`` held.
    """
    for _ in range(REOPEN_TRIES):
        fd = open_regular(target, flags)
        try:
            info = os.fstat(fd)
            key = (info.st_dev, info.st_ino)
            shared = _OPEN.get(key)
            if shared is not None:
                os.close(fd)
                if not share:
                    raise SessionLocked(f"the session is open for writing by this process "
                                        f"(pid {os.getpid()}: another Session object); "
                                        f"{then}", path=str(target))
                return -1, key, shared
            lock(fd, target, then=then)
            if _still_names(target, key):
                return fd, key, None  # (in the try: an interrupt here closes it too)
            os.close(fd)  # replaced (repaired) between our open and our lock: again
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
    raise SessionLocked("the file kept being replaced while it was being opened (is a "
                        "repair running in a loop?); retry", path=str(target))


def _still_names(target: Path, key: tuple[int, int]) -> bool:
    try:
        now = os.stat(target)
    except FileNotFoundError:
        raise SessionNotFound("the session file was deleted while it was being opened",
                              path=str(target)) from None
    return (now.st_dev, now.st_ino) == key


def _loaded(target: Path, fd: int, key: tuple[int, int]) -> tuple[_OpenFile, bool]:
    """The file on the locked descriptor ``fd`` read and made ready to write (a torn last
    line quarantined and cut off), and whether its index file is kept (brought up to date,
    not written anew). ``fd`` stays open whatever happens (its caller closes it), and
    nothing is registered yet."""
    file = ReadFile(_reader_of(fd, target), str(target))
    try:
        index, end, torn, known, indexed = _read(file, target)
        newline_due = False
        if torn is not None:
            quarantine(target, [torn_record(torn)])
            report_torn(target, torn, moved=True)
            try:
                os.ftruncate(fd, torn.offset)
                os.fsync(fd)
            except OSError as e:
                raise StorageFailure(f"could not cut the torn last line off "
                                     f"({describe_os_error(e)}); it is in the quarantine file "
                                     "and still in the session file, which is unchanged",
                                     path=str(target)) from e
            end = torn.offset
        elif end and os.pread(fd, 1, end - 1) != b"\n":
            newline_due = True
        sweep(target.parent)
        shared = _OpenFile(target, key, fd, index, end, newline_due=newline_due, torn=torn)
    except BaseException:
        file.close()
        raise
    kept = (known is not None and known.whole and torn is None
            and len(known.tail) <= TAIL_REWRITE)
    if kept:
        shared.indexed = indexed
    return shared, kept


def _hold(shared: _OpenFile) -> _OpenFile:
    """Register a file this process has just opened and locked, with its lock info."""
    _OPEN[shared.key] = shared
    write_lock_info(shared.path)
    _seen(shared.path.parent)
    return shared


def _let_go(shared: _OpenFile) -> None:
    """Release a file that no handle holds (an open interrupted before its handle was
    made); one that a handle holds is released when the last one closes."""
    if shared.handles <= 0:
        _release(shared)


def _release(shared: _OpenFile) -> None:
    """Let the file go: out of the registry, its index records written, its lock (the
    descriptor) released even if the tidying before it is interrupted."""
    try:
        if shared.sidecar is not None:
            if shared.fd >= 0 and not shared.deleted and shared.failed is None:
                _index_new(shared)  # the records a single append deferred
            sidecar, shared.sidecar = shared.sidecar, None
            sidecar.close()
        shared.index.file.close()
        clear_lock_info(shared.path)
        _seen(shared.path.parent)
    finally:
        # Out of the registry before the descriptor closes (an open never finds a released
        # file there), with no call between the look and the removal (a signal handler runs
        # only at calls, function entries and loops). Interrupted after the removal, the
        # descriptor is still this file's: closing a handle again lets it go.
        key = shared.key
        if key in _OPEN and _OPEN[key] is shared:
            del _OPEN[key]
        _drop_descriptor(shared)


def _drop_descriptor(shared: _OpenFile) -> None:
    """Close the file's descriptor (releasing its lock) once: it is taken from ``shared``
    before it is closed, so a signal (at the call, or after ``os.close``) never leaves the
    number of a closed descriptor behind for a later close to hit."""
    fd, shared.fd = shared.fd, -1
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)




def _encode(entry: AnyEntry, path: Path) -> bytes:
    """The entry's line; ``InvalidEntry`` (not a raw ``TypeError``) for data that has no
    JSON form, such as an arbitrary object in custom data."""
    try:
        return encode_line(entry)
    except NO_JSON_FORM as e:
        raise unencodable(entry, str(path), e) from None


def _write(shared: _OpenFile, data: bytes) -> None:
    checked = _check_unchanged(shared)
    if shared.newline_due:
        data = b"\n" + data
    try:
        written = os.write(shared.fd, data)
        if written != len(data):  # rare: the rest, however many writes it takes
            write_all(shared.fd, memoryview(data)[written:])
    except OSError as e:
        # Never leave a partial line behind: cut the file back to its last whole line.
        with contextlib.suppress(OSError):
            os.ftruncate(shared.fd, shared.size)
        raise StorageFailure(f"could not write the entry ({describe_os_error(e)}); nothing "
                             "was written — free disk space or check permissions and retry",
                             path=str(shared.path)) from e
    shared.size += len(data)
    shared.newline_due = False
    if checked:
        shared.path_size = shared.size


def _check_unchanged(shared: _OpenFile) -> bool:
    """Refuse to write to a file that another program cut or wrote to since it was read
    (``truncate``, a writer that ignored the lock): appended to, an entry would be glued to
    a cut line and lost with it, or follow lines the tree does not know. Nor, once a second
    has passed since the last look, to one that the path no longer names (an editor saved
    over it, or it was deleted): the lines written to it since are kept in the quarantine
    file beside the path (``_rescue``), and nothing more goes where nobody reads. Whether
    the path was looked at (the write's lines then went where it names)."""
    size = os.lseek(shared.fd, 0, os.SEEK_END)
    if size != shared.size:
        _refuse(shared, f"it is {size:,} bytes, not {shared.size:,}", "nothing was written")
    now = time.monotonic()
    if now - shared.path_checked < PATH_CHECK_EVERY:
        return False
    try:
        named = os.stat(shared.path)
    except OSError:  # gone from its path: moved (written on there) or deleted
        gone = not os.fstat(shared.fd).st_nlink
        why = "it was deleted"
    else:
        gone = (named.st_dev, named.st_ino) != shared.key
        why = "its path names another file now"
    if gone:
        _refuse(shared, why, _rescue(shared))
    shared.path_checked = now
    return True


def _rescue(shared: _OpenFile) -> str:
    """The lines written since the path last named the file, read back from it (the file
    this session holds open) into the quarantine file beside the path; what became of them."""
    if shared.size <= shared.path_size:
        return "nothing was written"
    try:
        data = os.pread(shared.fd, shared.size - shared.path_size, shared.path_size)
        reason = ("appended after another program replaced or deleted the session file "
                  "(written to the file it replaced)")
        kept = quarantine(shared.path, [{"reason": reason, "repaired_at": entry_now(),
                                         **line_text(raw)}
                                        for raw in data.split(b"\n") if raw.strip()])
    except (OSError, SessionError) as e:
        return (f"the entries appended in the last second went to the file it replaced and "
                f"could not be kept ({e})")
    return (f"nothing more was written; the {kept} line(s) appended since it was last seen "
            f"(a second at most) went to the file it replaced and are kept in "
            f"{quarantine_path(shared.path)}")


def _refuse(shared: _OpenFile, why: str, what: str) -> None:
    shared.failed = f"the file was changed by another program since this session read it ({why})"
    raise StorageFailure(f"{shared.failed}; {what}: open the session again (`contextree "
                         "verify` tells whether it is whole, `contextree repair` mends a cut "
                         "line)", path=str(shared.path))


def _flush(shared: _OpenFile) -> None:
    """Write a batch's buffered lines. Their index records wait for the batch's end
    (``_index_caught_up``): written at every flush, they were a CRC pass and a record per
    line that a big batch (an import) then replaced with an index written anew."""
    if shared.buffer:
        data = bytes(shared.buffer)
        shared.buffer.clear()
        _write(shared, data)


def _index_caught_up(shared: _OpenFile) -> None:
    """After a batch's lines are written, the index gets them: as an index written anew
    when more are due than an open would read as tail records (``TAIL_REWRITE``: a big
    batch, an import), else as tail records; best effort, as ``_index_new``."""
    if shared.sidecar is not None and len(shared.index.ids) - shared.indexed > TAIL_REWRITE:
        _fresh_sidecar(shared)
    else:
        _index_new(shared)


def _next_offset(shared: _OpenFile) -> int:
    """Where the next line will start in the file (after the buffered ones)."""
    return shared.size + len(shared.buffer) + (1 if shared.newline_due else 0)


def _index_new(shared: _OpenFile, *, every: int = 1) -> None:
    """Write the records of lines now in the file to the index; no sync, best effort.

    ``every``: write only once that many records are due (a single append defers its
    record, saving a write per append; ``_release`` writes what is left). An index that
    stops short is safe: an open reads the session from where its records stop."""
    count = len(shared.index.ids)
    if shared.sidecar is None:
        if not shared.index_tried and shared.size >= _index.INDEX_MIN_BYTES:
            _fresh_sidecar(shared)  # the session just grew big enough to have an index
        return
    if count - shared.indexed < every or shared.buffer:
        return
    if shared.sidecar.append(encode_tail(shared.index.tail_records(shared.indexed))):
        shared.indexed = count


def _fresh_sidecar(shared: _OpenFile) -> None:
    """Write the index anew from the tree and open it for appending."""
    index = shared.index
    if shared.sidecar is not None:
        shared.sidecar.close()
        shared.sidecar = None
    if shared.size < _index.INDEX_MIN_BYTES or shared.buffer:
        return
    shared.index_tried = True
    if write_index(shared.path, index.header_line, index.columns()):
        shared.sidecar = IndexFile.open(shared.path)
        shared.indexed = len(index.ids)


def _sync(shared: _OpenFile, *, guarded: bool = False) -> None:
    """``fdatasync`` the file; ``guarded``: a failure also puts it in the failed state that
    refuses further appends (as ``JsonlStorage._guarded`` does)."""
    try:
        os.fdatasync(shared.fd)
    except OSError as e:
        if guarded:
            shared.failed = str(e)
        raise StorageFailure(f"could not sync the file to disk ({describe_os_error(e)})",
                             path=str(shared.path)) from e


# -- file helpers ----------------------------------------------------------------------------

def open_regular(target: Path, flags: int) -> int:
    """Open a session file; refuse what is missing, a directory or not a regular file."""
    try:
        # Non-blocking: opening a FIFO put where a session was expected must not wait for a
        # writer (it is refused below); on a regular file the flag changes nothing.
        fd = os.open(target, flags | _CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise SessionNotFound(
            "no such session file (Session.create(path) or `contextree import` makes one)",
            path=str(target),
        ) from None
    except IsADirectoryError:
        raise _not_a_file(target, directory=True) from None
    except OSError as e:
        raise StorageFailure(f"could not open the session file ({describe_os_error(e)})",
                             path=str(target)) from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # read-only opens of a directory succeed
            raise _not_a_file(target, directory=stat.S_ISDIR(mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read(file: ReadFile, target: Path,
          ) -> tuple[FileTree, int, TornTail | None, IndexRead | None, int]:
    """The tree of the file behind ``file``: from its index when that matches (reading only
    what the file gained since), else from a full read. Also returns the good length, a
    torn tail, the index read (``None``: there was no usable one) and how many entries it
    placed."""
    info = os.fstat(file.fd)
    size = info.st_size
    with gc_paused():
        known = read_index(target, file.fd) if size >= _index.INDEX_MIN_BYTES else None
        found = _tree_from(known, file, target, size) if known is not None else None
    if found is not None and known is not None and found[1] == size and (
            info.st_mtime_ns > known.mtime_ns):
        # Written after the index that places all of it: changed in place (an editor that
        # kept the length, a tool): its lines may no longer be what the index says.
        found = None
    if found is None:
        known = None
        tree, end, torn = _full_tree_read(file, target)
        indexed = 0
    else:
        tree, end = found
        indexed = len(tree.ids)
        torn = None
        if end < size:
            with file.reader(end) as f:
                _, end, torn = load_rest(f, tree, str(target))
    tree.seal()
    tree.rebuild = _rebuilder(file, target)
    return tree, end, torn, known, indexed


def _tree_from(known: IndexRead, file: ReadFile, target: Path,
               size: int) -> tuple[FileTree, int] | None:
    header_line = file.pread(known.header_len, 0)
    try:
        header = decode_header(header_line, str(target))
    except SessionError:
        return None
    return FileTree.from_index(header, str(target), file, header_line, known, size)


def _full_tree_read(file: ReadFile, target: Path) -> tuple[FileTree, int, TornTail | None]:
    def make(header: SessionHeader, line: bytes) -> FileTree:
        return FileTree(header, str(target), file, line)

    with file.reader() as f:
        tree, end, torn = load(f, str(target), make)
    assert isinstance(tree, FileTree)
    return tree, end, torn


def _rebuilder(file: ReadFile, target: Path) -> Callable[[], FileTree]:
    def rebuild() -> FileTree:
        with _OPEN_LOCK:
            shared = next((s for s in _OPEN.values() if s.index.file is file), None)
        if shared is None:
            tree, _, _ = _full_tree_read(file, target)
            return tree
        with shared.lock:  # a writer's: nothing is appended meanwhile, and its batch is out
            _flush(shared)
            tree, _, _ = _full_tree_read(file, target)
            tree.seal()
            shared.index.adopt(tree)
            _fresh_sidecar(shared)
            return tree
    return rebuild


def _reader_of(fd: int, target: Path) -> int:
    """A read-only descriptor of the file behind a writer's ``fd``, of its own (it shares
    neither the lock nor the offset, so a forked child keeping it holds no lock)."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | _CLOEXEC)
    except OSError:
        return open_regular(target, os.O_RDONLY)


def read_all(fd: int, target: Path) -> bytes:
    """The whole file behind ``fd``; ``StorageFailure`` if it cannot be read."""
    chunks: list[bytes] = []
    offset = 0
    try:
        while chunk := os.pread(fd, 1 << 24, offset):  # pread: the descriptor's offset stays
            chunks.append(chunk)
            offset += len(chunk)
    except OSError as e:
        raise StorageFailure(f"could not read the session file ({describe_os_error(e)})",
                             path=str(target)) from e
    return b"".join(chunks)


def _not_a_file(path: Path, *, directory: bool) -> InvalidArgument:
    if directory:
        return InvalidArgument("this is a directory, not a session file (`contextree ls DIR` "
                               "lists the sessions in it)", path=str(path))
    return InvalidArgument("this is not a regular file, not a session file", path=str(path))
