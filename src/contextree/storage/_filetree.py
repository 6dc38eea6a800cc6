"""A tree index whose entries stay in their file: JSONL sessions open in the time of their
branch, not of the whole file.

``FileTree`` keeps, for every entry, where its line is and what the tree needs of it, as
columns (offset, length, parent entry number, type, id), and decodes an entry only when it
is asked for, through a small cache. Every decoded line is checked against its columns (id,
type, parent); a mismatch means they are stale (a file edited in place, a hostile index),
and the tree is rebuilt from a full read of the file before it answers.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import struct
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Container, Iterator, Mapping
from typing import Any, Protocol

from .._files import open_regular_readonly
from ..entries import AnyEntry, LineError, MessageEntry, SessionHeader, decode_line
from ..errors import EntryNotFound, ParentCycle, StorageFailure
from ._base import Outline, Span, TreeIndex, bookkeeping
from ._index import Columns, IndexRead, TailRecord, line_crc

__all__ = ["CACHE_BYTES", "FileTree", "ReadFile"]

CACHE_BYTES = 32 << 20  # decoded entries kept, counted by the length of their lines
LINES_BLOCK = 8 << 20  # bytes read at once by ``FileTree.lines``
READ_GAP = 8 << 10  # lines further apart than this are read apart (a pread costs about
# what copying 8 KB from the page cache does)
_BOOKKEEPING = frozenset({"leaf", "label", "session_info"})
UNKNOWN_FACT = ord("?")
ROLE_CODES = {"user": ord("u"), "assistant": ord("a"), "tool": ord("t"), "system": ord("s")}
ROLE_OF_FACT = {code: role for role, code in ROLE_CODES.items()}


def fact_code(entry: AnyEntry) -> int:
    """What ``stats`` needs to know of an entry without reading its line, as one byte: a
    message's role (``u``/``a``/``t``/``s``) when it records no call, else ``?`` (read it).
    The bulk of a big session, tool results and prompts, is then never read for a count."""
    if isinstance(entry, MessageEntry) and entry.message.usage is None:
        return ROLE_CODES.get(entry.message.role, UNKNOWN_FACT)
    return UNKNOWN_FACT
_SCANS_BEFORE_DICT = 3  # lookups by id answered by a scan before the id dict is built
_RECENT = 4096  # entries at the end a scan looks at first
_CHECK_BLOCK = 8192  # entries whose places are checked at once
_FORWARD = -2  # a parent that comes later in the file, until ``seal`` resolves it


class Encoded(Protocol):
    """What ``FileTree.add_encoded`` reads of an entry held as its line
    (``_encoded.EncodedEntry``, which imports this module)."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def type(self) -> str: ...
    @property
    def target(self) -> str | None: ...
    @property
    def text(self) -> str | None: ...
    @property
    def fact(self) -> int: ...


class _Stale(Exception):
    """A line does not say what the columns say of it."""


READ_BUFFER = 1 << 16  # a stream's buffer (bulk reads go past it, into the reader's)
_PREADV = getattr(os, "preadv", None)


class _Positioned(io.RawIOBase):
    """A read-only stream of a descriptor it does not own, at a position of its own."""

    def __init__(self, fd: int, offset: int) -> None:
        self._fd, self._pos = fd, offset

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos,
                os.SEEK_END: os.fstat(self._fd).st_size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if _PREADV is not None:
            n: int = _PREADV(self._fd, [buffer], self._pos)
        else:  # pragma: no cover - a platform without preadv: one copy more
            data = os.pread(self._fd, len(buffer), self._pos)
            n = len(data)
            memoryview(buffer).cast("B")[:n] = data
        self._pos += n
        return n


class ReadFile:
    """A read-only descriptor of a session file, of its own (not a copy of a writer's: a
    child of ``fork()`` that keeps it holds no lock of its parent's).

    ``close`` releases it when the session is closed; a read after that opens the file
    again, if the path still names the same file."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        info = os.fstat(fd)
        self.key = (info.st_dev, info.st_ino)
        self._lock = threading.Lock()

    def pread(self, length: int, offset: int) -> bytes:
        fd = self.fd if self.fd >= 0 else self._reopen()
        try:
            return os.pread(fd, length, offset)
        except OSError as e:
            raise StorageFailure(f"could not read the session file ({e.strerror})",
                                 path=self.path) from e

    def reader(self, offset: int = 0) -> io.BufferedReader:
        """A buffered stream of the file from ``offset``, with a position of its own (read
        with ``pread``): streams of one descriptor never move each other, as the copies of a
        ``dup()`` would, which share one offset."""
        return io.BufferedReader(_Positioned(self.fd if self.fd >= 0 else self._reopen(),
                                             offset), READ_BUFFER)

    def _reopen(self) -> int:
        with self._lock:
            if self.fd >= 0:
                return self.fd
            try:
                fd = open_regular_readonly(self.path)
            except OSError as e:
                raise StorageFailure("the session was closed and its file cannot be read "
                                     f"again ({e.strerror}); open it again",
                                     path=self.path) from e
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self.key:
                os.close(fd)
                raise StorageFailure("the session was closed and its path names another "
                                     "file now (repaired or replaced); open it again",
                                     path=self.path)
            self.fd = fd
            return fd

    def close(self) -> None:
        fd, self.fd = getattr(self, "fd", -1), -1  # (a construction cut short has none)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()


class _Cache:
    """Recently decoded entries by entry number, bounded by the bytes of their lines."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.items: OrderedDict[int, tuple[AnyEntry, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, slot: int) -> AnyEntry | None:
        with self.lock:
            hit = self.items.get(slot)
            if hit is None:
                return None
            self.items.move_to_end(slot)
            return hit[0]

    def put(self, slot: int, entry: AnyEntry, size: int) -> None:
        if size > self.budget // 4:
            return  # one huge entry would push out everything else
        with self.lock:
            old = self.items.pop(slot, None)
            if old is not None:
                self.used -= old[1]
            self.items[slot] = (entry, size)
            self.used += size
            while self.used > self.budget:
                _, (_, dropped) = self.items.popitem(last=False)
                self.used -= dropped

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.used = 0


class _Entries(Mapping[str, AnyEntry]):
    """``FileTree.by_id``: entries by id, decoded from the file on demand. It refers to its
    tree weakly, so that a dropped tree (and its descriptor) goes at once, not at the next
    collection of cycles."""

    def __init__(self, tree: FileTree) -> None:
        self._tree = weakref.ref(tree)

    @property
    def tree(self) -> FileTree:
        tree = self._tree()
        assert tree is not None, "a FileTree's entries outlived it"
        return tree

    def __getitem__(self, entry_id: str) -> AnyEntry:
        entry = self.get(entry_id)
        if entry is None:
            raise KeyError(entry_id)
        return entry

    def get(self, entry_id: str, default: AnyEntry | None = None) -> AnyEntry | None:  # type: ignore[override]
        tree = self.tree
        slot = tree.slot_of(entry_id)
        return default if slot is None else tree.entry_at(slot)

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.tree.slot_of(entry_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.tree.ids))

    def __len__(self) -> int:
        return len(self.tree.ids)

    def values(self) -> Iterator[AnyEntry]:  # type: ignore[override]
        return self.tree.iter_entries()


class FileTree(TreeIndex):
    """Entries by id with parent links, labels, name and leaf, read from the session file
    on demand; the tree's rules are ``TreeIndex``'s."""

    wants_spans = True

    def __init__(self, header: SessionHeader, location: str, file: ReadFile,
                 header_line: bytes) -> None:
        super().__init__(header, location)
        self.file = file
        self.header_line = header_line
        self.offsets = array("q")
        self.lengths = array("q")
        self.parents = array("q")  # entry numbers; -1: a root
        self.types: list[str] = []
        self.ids: list[str] = []
        self.facts = bytearray()  # fact_code of each entry
        self.extra: dict[int, tuple[str | None, str | None]] = {}  # bookkeeping entries
        self.crcs: dict[int, int] = {}  # the line checksums known (the last one is checked)
        self.leaf_slot = -1
        self._slots: dict[str, int] | None = {}
        self._scans = 0
        self._forward: list[tuple[int, str]] = []
        self.by_id = _Entries(self)
        self.cache = _Cache(CACHE_BYTES)
        # Reads the whole file again into a fresh tree, when the columns prove stale.
        self.rebuild: Callable[[], FileTree] | None = None
        self.lock = threading.RLock()

    @staticmethod
    def of(storage: object) -> FileTree | None:
        """The file tree a storage reads through (a JSONL session's), or ``None``: for views
        of the whole session (``tree``, ``stats``) that work on its columns directly."""
        tree = getattr(storage, "_index", None)
        return tree if isinstance(tree, FileTree) else None

    # -- ids --------------------------------------------------------------------------------
    def slot_of(self, entry_id: str) -> int | None:
        """The entry number of an id: by a scan at first (an open that only builds a
        context needs none or one), by a dict once lookups repeat."""
        slots = self._slots
        if slots is None:
            self._scans += 1
            if self._scans <= _SCANS_BEFORE_DICT:
                return _scan_for(self.ids, entry_id)
            slots = self._build_slots()
        return slots.get(entry_id)

    def _build_slots(self) -> dict[str, int]:
        with self.lock:
            if self._slots is None:
                slots = dict(zip(self.ids, range(len(self.ids)), strict=True))
                if len(slots) != len(self.ids):  # an index with a duplicate id
                    self._rebuild_now()
                    assert self._slots is not None
                    return self._slots
                self._slots = slots
            return self._slots

    def known_ids(self) -> Container[str]:
        slots = self._slots
        return slots if slots is not None else self._build_slots()

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def from_index(cls, header: SessionHeader, location: str, file: ReadFile,
                   header_line: bytes, read: IndexRead, size: int) -> tuple[FileTree, int] | None:
        """A tree from an index, and where in the session its entries end; ``None`` if the
        index does not hold together or its last line no longer matches the session."""
        tree = cls(header, location, file, header_line)
        cols = read.columns
        try:
            tree.offsets.frombytes(cols.offsets)
            tree.lengths.frombytes(cols.lengths)
            tree.parents.frombytes(cols.parents)
            tree.types = list(map(cols.type_names.__getitem__, cols.types))
        except (ValueError, IndexError):  # not whole numbers, or a type code out of range
            return None
        tree.ids = cols.ids.split("\0") if cols.ids or cols.offsets else []
        n = len(tree.ids)
        if not len(tree.offsets) == len(tree.lengths) == len(tree.parents) == len(
                tree.types) == n:
            return None
        tree.extra = {k: (target, text) for k, target, text in cols.extra}
        tree.facts = bytearray(cols.facts if len(cols.facts) == n else bytes([UNKNOWN_FACT]) * n)
        tree._slots = None
        if n:
            tree.crcs[n - 1] = cols.last_crc
            if not _in_order(tree.offsets, tree.lengths, read.header_len, file):
                return None
            if tree.extra and (min(tree.extra) < 0 or max(tree.extra) >= n):
                return None
        end = tree.offsets[-1] + tree.lengths[-1] if n else read.header_len
        for r in read.tail:
            if r.offset < end or r.length <= 0 or not -1 <= r.parent < len(tree.ids) or (
                    r.offset > end and not _blank(file, end, r.offset)):
                return None
            tree._append(r.offset, r.length, r.type, r.id, r.parent, r.crc, r.target, r.text,
                         r.fact or UNKNOWN_FACT)
            end = r.offset + r.length
        if end > size or not tree._last_line_matches():
            return None
        try:
            tree._replay_bookkeeping()
        except _Stale:
            return None
        return tree, end

    def _append(self, offset: int, length: int, kind: str, entry_id: str, parent: int,
                crc: int, target: str | None, text: str | None, fact: int) -> int:
        slot = len(self.ids)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.parents.append(parent)
        self.types.append(kind)
        self.ids.append(entry_id)
        self.facts.append(fact if 0 < fact < 256 else UNKNOWN_FACT)
        if kind in _BOOKKEEPING:
            self.extra[slot] = (target, text)
        if crc:
            self.crcs[slot] = crc
        if self._slots is not None:
            self._slots[entry_id] = slot
        return slot

    def _last_line_matches(self) -> bool:
        if not self.ids:
            return True
        last = len(self.ids) - 1
        line = self.file.pread(self.lengths[last], self.offsets[last])
        return (len(line) == self.lengths[last] and line.endswith(b"\n")
                and line_crc(line) == self.crcs.get(last))

    def _replay_bookkeeping(self) -> None:
        """Labels, name and leaf from the bookkeeping columns, each entry they come from
        checked against its line (there are few), and the last entry too."""
        for k in sorted(self.extra):
            kind = self.types[k]
            if kind == "leaf":
                continue
            self._check_line(k)
            target, text = self.extra[k]
            self._account(self.ids[k], None, kind, target, text)
        last = len(self.ids) - 1
        if last < 0:
            self.leaf_id, self.leaf_slot = None, -1
            return
        self._check_line(last)
        if self.types[last] == "leaf":
            self.leaf_id = self.extra[last][0]
            found = None if self.leaf_id is None else self.slot_of(self.leaf_id)
            if self.leaf_id is not None and found is None:
                raise _Stale
            self.leaf_slot = -1 if found is None else found
        else:
            self.leaf_id, self.leaf_slot = self.ids[last], last

    def _check_line(self, slot: int) -> AnyEntry:
        entry = self._read(slot)
        if self.types[slot] in _BOOKKEEPING:
            _, target, text = bookkeeping(entry)
            if (target, text) != self.extra[slot]:
                raise _Stale
        return entry

    def add(self, entry: AnyEntry, span: Span | None = None) -> None:
        """``TreeIndex.add``; a message (what most appends are) is indexed in one step."""
        if type(entry) is not MessageEntry or span is None:
            super().add(entry, span)
            return
        eid, parent, m = entry.id, entry.parent_id, entry.message
        fact = ROLE_CODES.get(m.role, UNKNOWN_FACT) if m.usage is None else UNKNOWN_FACT
        self.cache.put(self._place(eid, parent, "message", None, None, fact, span), entry,
                       span[1])
        self.leaf_id = eid  # what _account does for a message
        if self._children is not None:
            self._children.setdefault(parent, []).append(eid)

    def _store(self, entry: AnyEntry, span: Span | None, kind: str, target: str | None,
               text: str | None) -> None:
        if span is None:
            raise AssertionError("a FileTree entry needs its place in the file")
        slot = self._place(entry.id, entry.parent_id, kind, target, text, fact_code(entry),
                           span)
        self.cache.put(slot, entry, span[1])

    def add_encoded(self, entry: Encoded, span: Span) -> None:
        """``add`` of an entry held as its line (``JsonlStorage.append_encoded``)."""
        self.add_place(entry.id, entry.parent_id, entry.type, entry.target, entry.text,
                       entry.fact, span)

    def add_place(self, eid: str, parent: str | None, kind: str, target: str | None,
                  text: str | None, fact: int, span: Span) -> None:
        """``add`` for an entry known by its place and bookkeeping, not as an object (its
        line was encoded before: ``JsonlStorage.append_encoded``)."""
        self._place(eid, parent, kind, target, text, fact, span)
        self._account(eid, parent, kind, target, text)

    def _place(self, eid: str, parent: str | None, kind: str, target: str | None,
               text: str | None, fact: int, span: Span) -> int:
        offset, length, crc = span
        slots = self._slots
        if parent is None:
            pslot = -1
        else:
            found = slots.get(parent) if slots is not None else self.slot_of(parent)
            pslot = _FORWARD if found is None else found
        slot = self._append(offset, length, kind, eid, pslot, crc, target, text, fact)
        if pslot == _FORWARD:
            assert parent is not None
            self._forward.append((slot, parent))
        if kind == "leaf":
            found = None if target is None else self.slot_of(target)
            self.leaf_slot = -1 if found is None else found
        else:
            self.leaf_slot = slot
        return slot

    def seal(self) -> None:
        """After a load: resolve parents that came later in the file, and compute the
        checksum of the last line (the one an index is checked by)."""
        for slot, parent in self._forward:
            found = self.slot_of(parent)
            assert found is not None  # verify_links has checked it exists
            self.parents[slot] = found
        self._forward.clear()
        self.last_crc()

    def last_crc(self) -> int:
        """The checksum of the last line (the one an index is checked by), computed from
        the file when not known (appends leave it to the index records: see
        ``tail_records``); 0 for no entries."""
        last = len(self.ids) - 1
        if last < 0:
            return 0
        crc = self.crcs.get(last)
        if not crc:
            crc = self.crcs[last] = line_crc(self.file.pread(self.lengths[last],
                                                             self.offsets[last]))
        return crc

    def columns(self) -> Columns | None:
        """The whole index, as ``write_index`` stores it; ``None`` if it cannot hold these
        entries (an id with a NUL in it, more than 256 entry types)."""
        names = list(dict.fromkeys(self.types))
        ids = "\0".join(self.ids)
        if len(names) > 256 or ids.count("\0") != max(len(self.ids) - 1, 0):  # a NUL in one
            return None
        code = {name: k for k, name in enumerate(names)}
        extra = [(k, t, x) for k, (t, x) in sorted(self.extra.items())]
        return Columns(self.offsets.tobytes(), self.lengths.tobytes(), self.parents.tobytes(),
                       bytes(map(code.__getitem__, self.types)), names, ids,
                       extra, self.last_crc(), bytes(self.facts))

    def tail_records(self, start: int) -> list[TailRecord]:
        """Entries from ``start`` on, as tail records, each with its line's checksum: those
        not known are computed here, from lines read back in a few blocks (an append
        leaves it to this, once per ``TAIL_EVERY`` lines: a CRC-32 per append runs with the
        caches cold after each sync, and its tables cost more than the rest of it)."""
        crcs, lengths = self.crcs, self.lengths
        found = self._new_line_crcs(start)
        last = len(self.ids) - 1
        if last in found:
            crcs[last] = found[last]
        out = []
        for k in range(start, len(self.ids)):
            target, text = self.extra.get(k, (None, None))
            crc = crcs.get(k) or found.get(k, 0)
            out.append(TailRecord(self.offsets[k], lengths[k], self.types[k], self.ids[k],
                                  self.parents[k], crc, target, text, self.facts[k]))
        return out

    def _new_line_crcs(self, start: int) -> dict[int, int]:
        """The checksums of the lines of entries ``start`` on whose checksum is not known;
        a line cut short by a truncation has none. Lines that follow one another with no
        gap (what appends leave: the usual case) are read at once and cut by their lengths;
        any others through ``lines``."""
        crcs, offsets, lengths = self.crcs, self.offsets, self.lengths
        end = len(self.ids)
        if start < end:
            begin = offsets[start]
            size = offsets[end - 1] + lengths[end - 1] - begin
            if size <= LINES_BLOCK and size == sum(lengths[start:end]):
                data = memoryview(self.file.pread(size, begin))
                found = {}
                for k in range(start, end):
                    if k not in crcs:
                        at = offsets[k] - begin
                        line = data[at:at + lengths[k]]
                        if at >= 0 and len(line) == lengths[k]:
                            found[k] = line_crc(line)
                return found
        return {k: line_crc(line) for k, line in self.lines(None, skip=crcs.__contains__,
                                                            start=start)
                if len(line) == lengths[k]}

    # -- reading ----------------------------------------------------------------------------
    def _read(self, slot: int) -> AnyEntry:
        """The entry of ``slot`` from its line, or ``_Stale`` if the line says otherwise."""
        hit = self.cache.get(slot)
        if hit is not None:
            return hit
        length = self.lengths[slot]
        pslot = self.parents[slot]
        if length <= 0 or not -1 <= pslot < len(self.ids):  # numbers no writer gives
            raise _Stale
        data = self.file.pread(length, self.offsets[slot])
        try:
            entry = decode_line(data)
        except LineError:
            raise _Stale from None
        parent = None if pslot < 0 else self.ids[pslot]
        if (isinstance(entry, SessionHeader) or entry.id != self.ids[slot]
                or entry.type != self.types[slot] or entry.parent_id != parent):
            raise _Stale
        self.cache.put(slot, entry, length)
        return entry

    def entry_at(self, slot: int) -> AnyEntry | None:
        """The entry numbered ``slot``; stale columns make the tree rebuild itself first."""
        try:
            return self._read(slot)
        except _Stale:
            entry_id = self.ids[slot]
        self._rebuild_now()
        found = self.slot_of(entry_id)
        return None if found is None else self._read_fresh(found)

    def _read_fresh(self, slot: int) -> AnyEntry:
        try:
            return self._read(slot)
        except _Stale:
            raise StorageFailure("the session file changed while it was being read (edited "
                                 "by another program?); open it again",
                                 path=self.location) from None

    def _rebuild_now(self) -> None:
        if self.rebuild is None:
            raise StorageFailure("the session file no longer matches what was read from it "
                                 "(edited by another program?); open it again",
                                 path=self.location)
        with self.lock:
            self.adopt(self.rebuild())

    def adopt(self, fresh: FileTree) -> None:
        """Take over another tree's state (a rebuild from the same file)."""
        if fresh is self:
            return
        self.offsets, self.lengths, self.parents = fresh.offsets, fresh.lengths, fresh.parents
        self.types, self.ids, self.extra, self.crcs = (fresh.types, fresh.ids, fresh.extra,
                                                       fresh.crcs)
        self._slots, self.leaf_slot = fresh._slots, fresh.leaf_slot
        self.label_book, self.labels = fresh.label_book, fresh.labels
        self.name, self.leaf_id = fresh.name, fresh.leaf_id
        self._children = None
        self.cache.clear()

    def path(self, leaf_id: str | None) -> list[AnyEntry]:
        """Entries from the root down to ``leaf_id``, following the parent columns (every
        entry checked against its line on the way)."""
        try:
            return self._walk(leaf_id)
        except _Stale:
            pass
        self._rebuild_now()
        if leaf_id is not None and self.slot_of(leaf_id) is None:  # cut off the file
            raise StorageFailure(f"the session file changed while it was being read (edited "
                                 f"by another program?): entry {leaf_id!r} is no longer in "
                                 "it; open it again", path=self.location)
        try:
            return self._walk(leaf_id)
        except _Stale:
            raise StorageFailure("the session file changed while it was being read (edited "
                                 "by another program?); open it again",
                                 path=self.location) from None

    def _walk(self, leaf_id: str | None) -> list[AnyEntry]:
        if leaf_id is None:
            return []
        slot = self.leaf_slot if (leaf_id == self.leaf_id and self.leaf_slot >= 0) else (
            self.slot_of(leaf_id))
        if slot is None:
            raise EntryNotFound(f"entry {leaf_id!r} is not in this session",
                                path=self.location)
        out: list[AnyEntry] = []
        limit = len(self.ids)
        parents = self.parents
        while slot >= 0:
            out.append(self._read(slot))
            slot = parents[slot]
            if len(out) > limit:
                raise ParentCycle(f"parent links from {leaf_id!r} form a cycle",
                                  path=self.location)
        out.reverse()
        return out

    def iter_entries(self) -> Iterator[AnyEntry]:
        """Every entry in append order (of the entries there when this is called)."""
        for slot in range(len(self.ids)):
            entry = self.entry_at(slot)
            if entry is not None:
                yield entry

    def lines(self, kinds: frozenset[str] | None, block: int = LINES_BLOCK,
              skip: Callable[[int], bool] | None = None,
              start: int = 0) -> Iterator[tuple[int, memoryview]]:
        """``(entry number, line)`` of every entry whose type is in ``kinds`` (``None``:
        of every type) from entry ``start`` on, in append order, for a caller that needs a
        few fields of many entries and decodes them itself.
        Lines close together are read at once, up to ``block`` bytes; bytes between lines
        further apart than ``READ_GAP`` are not read at all. The lines are not checked
        against the columns; the caller compares what it decodes. A line is cut short where
        the file ends (a last line whose newline is not written yet, or a file truncated
        since). ``skip(k)`` leaves out more entries (their lines unread)."""
        types, offsets, lengths = self.types, self.offsets, self.lengths
        wanted = [k for k in range(start, len(self.ids))
                  if (kinds is None or types[k] in kinds) and (skip is None or not skip(k))]
        i = 0
        while i < len(wanted):
            first = wanted[i]
            start = offsets[first]
            end = start + lengths[first]
            j = i + 1
            while j < len(wanted):  # the lines that come close after it, in one read
                k = wanted[j]
                if offsets[k] < end or offsets[k] - end > READ_GAP or (
                        offsets[k] + lengths[k] - start > block):
                    break
                end = offsets[k] + lengths[k]
                j += 1
            data = memoryview(self.file.pread(end - start, start))
            for k in wanted[i:j]:
                yield k, data[offsets[k] - start:offsets[k] - start + lengths[k]]
            i = j

    def links(self) -> Iterator[tuple[str, str | None]]:
        ids = self.ids
        return ((ids[k], None if p < 0 else ids[p])
                for k, p in enumerate(list(self.parents)))

    def outline(self) -> list[Outline]:
        ids, extra = self.ids, self.extra
        parents = [None if p < 0 else ids[p] for p in self.parents]
        targets = [extra[k][0] if t == "leaf" else None for k, t in enumerate(self.types)]
        return list(zip(ids, parents, self.types, targets, strict=False))

    def parent_of(self, entry_id: str) -> str | None:
        slot = self.slot_of(entry_id)
        if slot is None:
            raise KeyError(entry_id)
        p = self.parents[slot]
        if p == _FORWARD:
            return next(parent for s, parent in self._forward if s == slot)
        return None if p < 0 else self.ids[p]

    def find(self, entry_type: str) -> list[AnyEntry]:
        found = (self.entry_at(k) for k, t in enumerate(list(self.types)) if t == entry_type)
        return [e for e in found if e is not None]


def _scan_for(ids: list[str], entry_id: str) -> int | None:
    """Where ``entry_id`` is in ``ids``, the recent entries looked at first (a leaf move
    goes back to a recent entry, most often), or ``None``."""
    recent = max(0, len(ids) - _RECENT)
    for start, stop in ((recent, len(ids)), (0, recent)):
        try:
            return ids.index(entry_id, start, stop)
        except ValueError:
            pass
    return None


def _contiguous(offsets: array[int], lengths: array[int], start: int) -> bool:
    """No gaps (what a writer gives): the offsets are the running sum of the lengths from
    ``start``, packed and compared as bytes (half the instructions of comparing ints pair
    by pair), a block at a time (a few hundred KB at most, not a list of them all)."""
    at = start
    for first in range(0, len(offsets), _CHECK_BLOCK):
        last = first + _CHECK_BLOCK
        running = list(itertools.accumulate(lengths[first:last], initial=at))
        at = running.pop()
        if struct.pack(f"{len(running)}q", *running) != offsets[first:last].tobytes():
            return False
    return True


def _in_order(offsets: array[int], lengths: array[int], start: int, file: ReadFile) -> bool:
    """Each line starts where the one before ended (or after blank lines)."""
    if not offsets or offsets[0] < start:
        return False
    if _contiguous(offsets, lengths, start):
        return True
    prev = start  # gaps: allowed only where the file holds blank lines
    for offset, length in zip(offsets, lengths, strict=True):
        if offset < prev or (offset > prev and not _blank(file, prev, offset)):
            return False
        prev = offset + length
    return True


def _blank(file: ReadFile, start: int, stop: int) -> bool:
    if stop - start > 1 << 20:
        return False
    gap = file.pread(stop - start, start)
    return len(gap) == stop - start and not gap.strip(b" \t\r\n")
