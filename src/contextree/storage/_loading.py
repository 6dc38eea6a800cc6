"""Loading a session file into a ``TreeIndex``: fast on healthy files, exact on damaged ones.

Lines are decoded in large blocks by msgspec; anything unusual is redone line by line so that
an error names its exact line. The last line decides how a crash is read:

- not JSON, and cut short (no newline) or holding zeros a crash left: a *torn* line,
  returned as ``TornTail`` for the caller to quarantine (writable) or skip (read-only);
- whole (its newline there, no zeros) but not JSON (a byte that is not UTF-8, a NaN):
  damage, reported like any other line (``repair`` quarantines it, after a backup);
- complete and valid but without its newline: accepted (the next append adds the newline);
- complete JSON but not a valid entry: reported as what it is, like any other line.
"""

from __future__ import annotations

import functools
import io
import os
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from .._gc import gc_paused
from ..entries import (
    FORMAT_VERSION,
    LINE_DECODER,
    AnyEntry,
    LeafEntry,
    Line,
    LineError,
    MessageEntry,
    SessionHeader,
    decode_line,
    decoded_problem,
)
from ..errors import CorruptLine, InvalidHeader
from ._base import TreeIndex, verify_links
from ._sidecars import line_text, quarantine_path

__all__ = ["BOM", "CHUNK", "MakeTree", "TornLineWarning", "TornTail", "decode_header", "load", "load_rest",
           "report_torn", "torn_record"]

CHUNK = 2 << 20  # bytes read and decoded per msgspec call when loading
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class TornTail:
    """A last line cut short by a crash: where it started and what it held."""

    offset: int
    line: int
    data: bytes


MakeTree = Callable[[SessionHeader, bytes], TreeIndex]  # from the header and its line


def load(f: io.BufferedIOBase, location: str, make_tree: MakeTree | None = None,
         ) -> tuple[TreeIndex, int, TornTail | None]:
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
    first = f.readline()
    if not first:
        raise InvalidHeader("the file is empty; delete it or create a new "
                           "session", path=location)
    header = decode_header(first, location)
    index = (make_tree or (lambda h, _: TreeIndex(h, location)))(header, first)
    return _paused_gc(_scan, f, index, location, _LineCounter(f.fileno(), len(first), 1))


def load_rest(f: io.BufferedIOBase, index: TreeIndex, location: str,
              ) -> tuple[TreeIndex, int, TornTail | None]:
    """Read the lines after ``f``'s position into ``index`` (which holds those before):
    catching up on what a session file gained since its index was written."""
    return _paused_gc(_scan, f, index, location, _LineCounter(f.fileno(), 0, 0))


def _paused_gc(scan: Callable[[io.BufferedIOBase, TreeIndex, str, _LineCounter],
                              tuple[TreeIndex, int, TornTail | None]],
               f: io.BufferedIOBase, index: TreeIndex, location: str, lines: _LineCounter,
               ) -> tuple[TreeIndex, int, TornTail | None]:
    with gc_paused():
        return scan(f, index, location, lines)


def _scan(f: io.BufferedIOBase, index: TreeIndex, location: str, lines: _LineCounter,
          ) -> tuple[TreeIndex, int, TornTail | None]:
    pending: list[tuple[AnyEntry, int | None]] = []
    offset = f.tell()  # file offset of buf[0]
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
    if filled and _NONBLANK.search(buf, 0, filled):
        # The last line has no newline: read where it lies in the buffer (never copied:
        # it may be a gigabyte long).
        with memoryview(buf) as view, view[:filled] as line:
            torn = _load_unterminated(index, line, offset, lines, location, pending)
    if torn is None:
        offset += filled
    return _finish(index, pending, torn, offset)


_NONBLANK = re.compile(rb"\S")


def _load_unterminated(index: TreeIndex, line: memoryview, offset: int, lines: _LineCounter,
                       location: str, pending: list[tuple[AnyEntry, int | None]],
                       ) -> TornTail | None:
    """The last line, whose newline is not in the file: kept if it is a whole valid entry
    (the next append adds the newline), torn if it is not JSON, reported otherwise."""
    here = lines.before(offset) + 1
    try:
        entry = decode_line(line)
    except LineError as e:
        if e.kind is CorruptLine:
            return TornTail(offset, here, bytes(line))
        raise _line_error(e, location, here) from None
    _add_line(index, entry, (offset, len(line) + 1, 0), here, location, pending)
    return None


def _line_error(e: LineError, location: str, here: int) -> Exception:
    return e.kind(f"{e}; run `contextree repair` to quarantine bad lines (a backup is kept)",
                  path=location, line=here)


def _add_line(index: TreeIndex, entry: Line, span: tuple[int, int, int], here: int,
              location: str, pending: list[tuple[AnyEntry, int | None]]) -> None:
    """Index one entry ``decode_line`` made (line ``here``), its parent checked at the end
    if it comes later in the file. Only the tree's rules are checked: the decoding held
    the line to its types and the JSON limits already, as ``line_problem`` would again."""
    if isinstance(entry, SessionHeader):
        raise InvalidHeader("a second session header in the middle of the "
                           "file (were two files concatenated?); run `contextree repair`",
                           path=location, line=here)
    forward = entry.parent_id is not None and entry.parent_id not in index.by_id
    index.check_place(entry.id, entry.parent_id,
                      entry.target_id if isinstance(entry, LeafEntry) else None, here,
                      forward_parent_ok=forward)
    if forward:
        pending.append((entry, here))
    index.add(entry, span)


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


def decode_header(line: bytes, location: str) -> SessionHeader:
    """The session header on the first line, or ``InvalidHeader`` saying what is there."""
    if line.startswith(BOM):
        raise InvalidHeader("the file starts with a UTF-8 byte order mark, which session "
                            "files never have (an editor added it?); `contextree repair` "
                            "removes it and keeps the header", path=location, line=1)
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
    except (msgspec.DecodeError, RecursionError):
        return _load_block_slowly(index, block, offset, lines, location, pending, is_last)
    spans = _line_spans(block, offset) if index.wants_spans else None
    if spans is not None and len(spans) != len(entries):
        return _load_block_slowly(index, block, offset, lines, location, pending, is_last)
    by_id = index.by_id
    add = index.add
    for i, entry in enumerate(entries):
        if isinstance(entry, SessionHeader) or not entry.id or entry.id in by_id or (
            entry.parent_id is not None and entry.parent_id not in by_id
        ) or (
            isinstance(entry, LeafEntry) and entry.target_id is not None
            and entry.target_id not in by_id
        ) or (  # beyond the JSON limits? (a plain message cannot be: skip the call)
            (type(entry) is not MessageEntry or entry.message.tool_calls
             or entry.message.meta is not None) and decoded_problem(entry) is not None
        ):
            # Rare: redo the rest of the block line by line, so that errors (and parents
            # that come later in the file, checked at the end) carry their exact line.
            return _load_block_slowly(index, block, offset, lines, location, pending,
                                      is_last, start=i)
        add(entry, None if spans is None else spans[i])
    return None


def _line_spans(block: memoryview, offset: int) -> list[tuple[int, int, int]]:
    """Where each line of ``block`` that is not blank is in the file (offset, length with
    the newline, no checksum): what ``decode_lines`` decoded, in the same order."""
    data = bytes(block)
    spans = []
    start = 0
    size = len(data)
    find = data.find
    while start < size:
        stop = find(b"\n", start) + 1
        if data[start] == 0x7B or data[start:stop].strip():  # "{": the usual first byte
            spans.append((offset + start, stop - start, 0))
        start = stop
    return spans


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
    """``_load_block``, one line at a time."""
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
            # The last line is torn if it was cut short (no newline) or a crash left zeros
            # in it (blocks the disk never got); one that is whole but not JSON (a byte
            # that is not UTF-8, a NaN) is damage to report, like any other line.
            if (e.kind is CorruptLine and i == last_nonblank and is_last()
                    and b"\x00" in raw):
                return TornTail(pos, here, b"\n".join(raw_lines[i:]) + b"\n")
            raise _line_error(e, location, here) from None
        _add_line(index, entry, (pos, len(raw) + 1, 0), here, location, pending)
        pos += len(raw) + 1
    return None


def torn_record(torn: TornTail) -> dict[str, object]:
    return {
        "reason": "torn last line (incomplete write, e.g. a crash)",
        "line": torn.line,
        "offset": torn.offset,
        "quarantined_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **line_text(torn.data),
    }


def report_torn(path: Path, torn: TornTail, *, moved: bool) -> None:
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
