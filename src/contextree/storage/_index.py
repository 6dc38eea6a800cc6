"""The index beside a session file (``<file>.index``): where each entry's line is, so that
opening a session reads the branch it shows, not the whole file.

The index is a cache, never the truth. It holds:

- a head line (JSON) naming the session's header line (its length and CRC-32);
- a *base*: the places of the entries when it was last written whole, as columns (offsets,
  lengths, parents as entry numbers, types, ids, and the few facts bookkeeping needs: label
  targets and texts, leaf targets, names), in MessagePack, which decodes in a few C calls;
- a *tail*: one JSON line per entry appended since, written by the writer with a plain
  ``write`` (no sync: a record lost to a crash only means the next open reads a little more
  of the session).

The CRC-32 of the last line it places is checked against the session file on every open,
so an index is trusted only up to bytes it still matches; what the session holds beyond
that (an append by an older version, or lines whose records a crash lost) is read from the
session. Every entry read through an index is checked against it again (id, type, parent).
Anything wrong with the file itself (missing, torn, hostile, a link, a FIFO) makes
``read_index`` return ``None``, and the caller rebuilds it from the session.
"""

from __future__ import annotations

import contextlib
import os
import sys
import zlib
from pathlib import Path

import msgspec

from .._files import atomic_write, open_private, open_regular_readonly, write_all

__all__ = ["INDEX_MIN_BYTES", "INDEX_VERSION", "Columns", "IndexFile", "IndexRead",
           "TailRecord", "encode_tail", "index_path", "line_crc", "read_index", "write_index"]

INDEX_VERSION = 1
# Sessions smaller than this are read whole (in a few milliseconds) and get no index file.
INDEX_MIN_BYTES = 2 << 20
TAIL_REWRITE = 4096  # a writer that finds more tail records than this writes the index anew
_MAX_INDEX_BYTES = 1 << 30  # an index larger than this is not one we wrote: rebuild


class Columns(msgspec.Struct, array_like=True, gc=False):
    """The places of a session's entries, one column per field, entry ``k`` at index ``k``.

    Numbers are packed as native 64-bit integers (``array("q")``), types as one byte each
    (an index into ``type_names``), ids joined by NUL: an index of 100,000 entries decodes
    in a few milliseconds. ``parents`` are entry numbers (-1: a root). ``extra`` holds
    ``[k, target id, text]`` for label, leaf and session_info entries only. ``facts`` is one
    byte per entry, what the statistics need to know without reading its line
    (``fact_code``); an index without it is read as knowing nothing of the kind."""

    offsets: bytes
    lengths: bytes
    parents: bytes
    types: bytes
    type_names: list[str]
    ids: str
    extra: list[tuple[int, str | None, str | None]]
    last_crc: int
    facts: bytes = b""


class TailRecord(msgspec.Struct, array_like=True, gc=False, omit_defaults=True):
    """One entry appended after the base was written."""

    offset: int
    length: int
    type: str
    id: str
    parent: int
    crc: int
    target: str | None = None
    text: str | None = None
    fact: int = 0  # fact_code's byte; 0: not known (the line is read)


class _Head(msgspec.Struct, forbid_unknown_fields=False):
    contextree_index: int
    header_len: int
    header_crc: int
    base_bytes: int
    byteorder: str = ""


class IndexRead(msgspec.Struct, frozen=True):
    """An index that matches its session, before the checks a tree makes of its entries."""

    columns: Columns
    tail: list[TailRecord]
    header_len: int
    whole: bool  # the file ends with a whole record: safe to append to
    mtime_ns: int = 0  # when the index file was last written


_HEAD = msgspec.json.Decoder(_Head)
_BASE = msgspec.msgpack.Decoder(Columns)
_TAIL = msgspec.json.Decoder(TailRecord)
_JSON = msgspec.json.Encoder()
_PACK = msgspec.msgpack.Encoder()


def index_path(path: str | os.PathLike[str]) -> Path:
    """The index of a session file: ``<file>.index``."""
    return Path(f"{os.fspath(path)}.index")


def line_crc(data: bytes | bytearray | memoryview) -> int:
    """The checksum kept for a line (CRC-32: fast, and enough to see a changed tail)."""
    return zlib.crc32(data) or 1  # never 0, which means "not computed"


def encode_tail(records: list[TailRecord]) -> bytes:
    """Tail lines, as a writer appends them."""
    return b"".join(_JSON.encode(r) + b"\n" for r in records)


def read_index(path: Path, session_fd: int) -> IndexRead | None:
    """The index of ``path`` when its head matches the session behind ``session_fd`` and
    it decodes; else ``None``. (The places themselves are checked by ``FileTree``.)"""
    found = _read_small(index_path(path))
    if found is None:
        return None
    data, mtime_ns = found
    first_end = data.find(b"\n") + 1
    try:
        head = _HEAD.decode(data[:first_end])
    except msgspec.DecodeError:
        return None
    if (head.contextree_index != INDEX_VERSION or head.header_len <= 0
            or head.byteorder != sys.byteorder):
        return None
    header_line = _pread(session_fd, head.header_len, 0)
    if (header_line is None or not header_line.endswith(b"\n")
            or line_crc(header_line) != head.header_crc):
        return None
    base_end = first_end + head.base_bytes
    tail_end = data.rfind(b"\n", base_end) + 1  # a torn last record (a crash) is dropped
    try:
        columns = _BASE.decode(data[first_end:base_end])
        tail = _TAIL.decode_lines(data[base_end:tail_end]) if tail_end > base_end else []
    except (msgspec.DecodeError, ValueError):
        return None
    return IndexRead(columns, tail, head.header_len,
                     whole=tail_end == len(data) or (not tail and len(data) == base_end),
                     mtime_ns=mtime_ns)


def _pread(fd: int, length: int, offset: int) -> bytes | None:
    try:
        data = os.pread(fd, length, offset)
    except OSError:
        return None
    return data if len(data) == length else None


def _read_small(path: Path) -> tuple[bytes, int] | None:
    """The index file's bytes and its modification time, or ``None``."""
    try:
        fd = open_regular_readonly(path)  # never a link, never a FIFO
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_size > _MAX_INDEX_BYTES:
            return None
        with open(fd, "rb", closefd=False) as f:
            return f.read(), info.st_mtime_ns
    except OSError:
        return None
    finally:
        os.close(fd)


def write_index(path: Path, header_line: bytes, columns: Columns | None) -> bool:
    """Replace ``path``'s index with one whose base is ``columns``, all at once; best
    effort (False when it could not be written: the session works the same without it).
    ``None``: entries no index can hold; any old index is removed."""
    if columns is None:
        with contextlib.suppress(OSError):
            index_path(path).unlink()
        return False
    base = _PACK.encode(columns)
    head = _JSON.encode({"contextree_index": INDEX_VERSION, "header_len": len(header_line),
                         "header_crc": line_crc(header_line), "base_bytes": len(base),
                         "byteorder": sys.byteorder})
    try:
        atomic_write(index_path(path), [head + b"\n", base], durable=False)
    except (OSError, ValueError):
        return False
    return True


class IndexFile:
    """A writer's index, open for appending tail records."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, path: Path) -> IndexFile | None:
        """The index of ``path`` open for appending, or ``None`` (unsafe or unwritable)."""
        try:
            fd = open_private(index_path(path), os.O_WRONLY | os.O_APPEND)
        except OSError:
            return None
        return cls(fd)

    def append(self, data: bytes) -> bool:
        """Add tail records; on failure the index is no longer written (a partial last
        record is dropped when read, and the next open reads the session from where the
        records stop): the session's own write never depends on its index."""
        if self.fd < 0:
            return False
        try:
            write_all(self.fd, data)
        except OSError:
            self.close()
            return False
        return True

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
