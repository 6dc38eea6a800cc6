"""File tools: ``read`` (numbered, paginated), ``write`` (atomic) and ``edit`` (exact replace).

``read``'s parameters are exactly ``path``, ``offset`` (1-based first line), ``limit`` (number
of lines) and ``char_offset`` (characters of the first line to skip, to page through a line
longer than the cap): truncation hints tell the model to call it that way.
"""

from __future__ import annotations

import codecs
import difflib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from contextree._files import atomic_write as write_whole
from contextree._text import count_lines
from contextree._truncation import BINARY_SNIFF, LIMITS, cut_marker, is_binary
from contextree._truncation import read_call as read_call  # the call form hints share
from contextree.errors import ToolError
from contextree.markers import EditMeta, ListMeta, ReadMeta, TruncationRecord, WriteMeta
from contextree.tools._context import ToolContext
from contextree.tools._decorator import tool
from contextree.tools._kinds import ToolKind
from contextree.tools._result import ToolResult

MAX_LINES = LIMITS.max_lines
MAX_BYTES = LIMITS.max_bytes
MAX_LINE_CHARS = LIMITS.max_line_chars
_CHUNK = 1 << 20


# -- helpers shared by the file and search tools -------------------------------------------
def cut_line(text: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``max_chars`` characters, marked as truncation marks a cut line."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + cut_marker(len(text))


def clean(text: str) -> str:
    """``text`` safe to show: undecodable bytes (surrogate escapes) become U+FFFD."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


# What a name must not carry raw into tool output: C0 controls (newline, tab, escape...),
# DEL, C1 controls, the bidirectional controls (they reorder what follows), the Unicode line
# and paragraph separators, and lone surrogates (undecodable bytes kept by surrogateescape).
_UNSAFE_IN_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                             "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte: show the byte itself
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown_name(name: str) -> str:
    """A file name or path as tool output shows it: every control character, line
    separator, bidirectional control and undecodable byte written as an escape (``\\n``,
    ``\\x1b``, ``\\u2028``, ``\\xff``), so a name is always one line of plain text and
    cannot forge a line of output (a hint, another entry) or act on a terminal."""
    if _UNSAFE_IN_NAME.search(name) is None:
        return name
    return _UNSAFE_IN_NAME.sub(_escape_char, name)


def plural(n: int, noun: str) -> str:
    """``1 line``, ``2 lines``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def replace_file(path: str, target: Path, data: bytes, ctx: ToolContext, *,
                 create_dirs: bool = False) -> bool:
    """Write ``data`` to ``target`` all at once (``contextree._files.atomic_write``), keeping
    an existing file's mode (a new file gets ``0o666`` less the umask); True if it existed.

    The temp file, the rename and the sync go through a descriptor of the parent directory
    opened from the workspace root, so a symlink swapped in meanwhile cannot redirect them.
    ``create_dirs`` makes missing parent directories, each from the one before it.
    """
    try:
        dir_fd, name = ctx.open_parent(target, create=create_dirs)
    except OSError as e:
        raise _write_error(shown_name(path), e, f"{shown_name(ctx.display(target.parent))} no "
                           "longer exists (it was "
                           "removed meanwhile)") from None
    try:
        mode = _existing_mode(path, name, dir_fd)
        write_whole(name, data, mode=0o666 if mode is None else mode, dir_fd=dir_fd)
    except OSError as e:
        raise _write_error(path, e, "was removed while writing") from None
    finally:
        os.close(dir_fd)
    return mode is not None


def _write_error(path: str, e: OSError, gone: str) -> ToolError:
    """The error for a failed write of ``path``; ``gone`` says how its directory went."""
    if isinstance(e, FileNotFoundError):
        return ToolError(f"cannot write {path}: its directory {gone}; check the path and try "
                         "again")
    return os_error("write", path, e)


def _existing_mode(path: str, name: str, dir_fd: int) -> int | None:
    """The permission bits of the file ``name`` in ``dir_fd`` (None when there is none); a
    directory there is refused."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory; give the path of a file inside it")
    if stat.S_ISLNK(st.st_mode):  # swapped in after resolve: replace the link, not its target
        return 0o666
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path} is not a regular file (a device, socket or pipe); refused")
    return stat.S_IMODE(st.st_mode)


def os_error(action: str, path: str, e: OSError) -> ToolError:
    """A ``ToolError`` for a failed file operation, in the model's terms."""
    why = {
        errno.ENAMETOOLONG: "the path or one of its names is too long for the file system",
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOTDIR: "a part of the path is a file, not a directory",
        errno.ELOOP: "too many symbolic links on the way (a symlink loop?)",
        errno.EISDIR: "it is a directory",
    }.get(e.errno or 0, e.strerror or str(e))
    return ToolError(f"cannot {action} {path}: {why}")


def not_found(path: str, target: Path, ctx: ToolContext) -> ToolError:
    """A ``ToolError`` for a missing path, suggesting close names in the same directory."""
    parent = target.parent
    try:
        fd = ctx.open_dir(parent)
    except (OSError, ToolError):
        return ToolError(
            f"file not found: {path} (the directory {shown_name(ctx.display(parent))} does not exist); "
            f'find the file with glob(pattern="**/{target.name}")'
        )
    try:
        names = os.listdir(fd)
    except OSError:
        names = []
    finally:
        os.close(fd)
    close = difflib.get_close_matches(target.name, names, n=3, cutoff=0.6)
    shown = ", ".join(shown_name(ctx.display(parent / n)) for n in close)
    hint = f"did you mean {shown}? " if close else ""
    return ToolError(
        f"file not found: {path}; {hint}"
        f"list the directory with read(path={json.dumps(ctx.display(parent))}) "
        f'or search with glob(pattern="**/{target.name}")'
    )


def open_text(path: str, target: Path, ctx: ToolContext) -> tuple[int, os.stat_result]:
    """An open descriptor of ``target`` and its ``fstat``, refusing what is not a file or
    a directory (a FIFO is opened without blocking, then refused)."""
    try:
        fd = ctx.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise not_found(path, target, ctx) from None
    except OSError as e:
        raise os_error("read", path, e) from None
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        os.close(fd)
        raise ToolError(f"{path} is not a regular file (a device, socket or pipe); refused")
    return fd, st


# -- read ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Piece:
    """The part of a line a call with ``char_offset`` shows: characters ``start`` to ``end``
    (counted from 0, ``end`` excluded) of line ``line``, which has ``length``."""

    line: int
    start: int
    end: int
    length: int


@dataclass
class _Page:
    lines: list[str]
    total: int
    last: int  # number of the last line shown (offset - 1 when none)
    byte_capped: bool
    cut: int  # lines cut at MAX_LINE_CHARS
    first_cut: int  # number of the first of them (0 when none)
    piece: _Piece | None = None  # the first line, shown from its character char_offset


@tool(truncates_itself=True, kind=ToolKind.READ)
def read(
    path: str, offset: int = 1, limit: int = MAX_LINES, char_offset: int = 0,
    context: ToolContext | None = None,
) -> ToolResult:
    """Read a text file with numbered lines, or list a directory. Long files come a page at a time: at most 2000 lines or 50 KB per call, lines cut at 2000 characters (char_offset reads the rest of a cut line); the end of the output says how to read the next page.

    Args:
        path: File or directory to read, relative to the working directory or absolute.
        offset: Number of the first line to show (1 is the first line of the file).
        limit: How many lines to show (at most 2000).
        char_offset: Characters of line offset to skip (0 shows it from its start); a line continued this way is shown up to 50 KB per call, so a line longer than 2000 characters is read in pieces.
    """
    ctx = context or ToolContext()
    if offset < 1:
        raise ToolError(f"offset must be 1 or more (line 1 is the first line), got {offset}")
    if limit < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}")
    if char_offset < 0:
        raise ToolError(f"char_offset must be 0 or more (0 is the start of the line), got "
                        f"{char_offset}")
    target = ctx.resolve(path)
    fd, st = open_text(path, target, ctx)
    if stat.S_ISDIR(st.st_mode):
        try:
            if char_offset:
                raise ToolError(f"{path} is a directory; char_offset applies to a file's lines")
            return _list_dir(path, target, fd, offset, limit, ctx)
        finally:
            os.close(fd)
    try:
        with os.fdopen(fd, "rb") as f:
            if is_binary(f.read(BINARY_SNIFF)):
                raise _binary(path, st.st_size)
            f.seek(0)
            page = _read_page(f, offset, min(limit, MAX_LINES), char_offset)
    except OSError as e:
        raise os_error("read", path, e) from None
    return _page_result(path, target, st.st_size, offset, limit, page, ctx)


def _binary(path: str, size: int) -> ToolError:
    return ToolError(
        f"{path} is a binary file ({size} bytes, it contains NUL bytes); read shows text only. "
        "Inspect it with shell instead, e.g. `file` or `xxd | head`"
    )


# A shown line needs at most MAX_LINE_CHARS characters, 4 bytes each at most in UTF-8, and
# invalid bytes decode to one character each: this many bytes always hold enough of a line.
_LINE_HEAD_BYTES = 4 * MAX_LINE_CHARS + 8


def _read_page(f: IO[bytes], offset: int, want: int, char_offset: int = 0) -> _Page:
    """The lines of the page, read in bounded memory: lines before ``offset`` are skipped a
    chunk at a time, and of a long line only its head is kept (its length is counted). With
    ``char_offset`` the first line is shown from that character, up to the byte cap."""
    lines: list[str] = []
    size = cut = first_cut = 0
    lineno = 0
    capped = False
    piece = None
    while lineno < offset - 1:
        if not _skip_line(f):
            break
        lineno += 1
    if char_offset and lineno == offset - 1:
        prefix = f"{offset:>6}\t"
        got = _line_piece(f, char_offset, MAX_BYTES - len(prefix) - 1)
        if got is not None:
            lineno += 1
            text, length = got
            piece = _Piece(lineno, char_offset, char_offset + len(text), length)
            lines.append(prefix + text)
            size = len(lines[0].encode("utf-8")) + 1
            if piece.end < length:  # the cap was reached inside the line
                want = len(lines)
    while len(lines) < want:
        line = _next_line(f)
        if line is None:
            break
        lineno += 1
        text, length = line
        shown = text if length <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + cut_marker(length)
        rendered = f"{lineno:>6}\t{shown}"
        cost = len(rendered.encode("utf-8")) + 1
        if lines and size + cost > MAX_BYTES:
            capped = True
            break
        if length > MAX_LINE_CHARS:
            cut += 1
            first_cut = first_cut or lineno
        lines.append(rendered)
        size += cost
    total = lineno + _count_rest(f)
    return _Page(lines, total, offset + len(lines) - 1, capped, cut, first_cut, piece)


def _line_piece(f: IO[bytes], skip: int, budget: int) -> tuple[str, int] | None:
    """The line at the position of ``f`` from its character ``skip``, as much as ``budget``
    UTF-8 bytes hold in whole characters, and the line's length in characters (without its
    ending); None at the end of the file. The line is read a chunk at a time to its end, so
    memory stays bounded whatever its length."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    room = budget
    seen = 0  # characters of the line decoded so far
    full = False
    started = ended = False
    last = ""
    while True:
        chunk = f.readline(_CHUNK)
        if not chunk and not started:
            return None
        started = True
        part = decoder.decode(chunk, final=not chunk)
        if chunk.endswith(b"\n"):
            part, ended = part[:-1], True
        if not full and seen + len(part) > skip:
            wanted = part[max(0, skip - seen):]
            taken = wanted[:room]
            raw = taken.encode("utf-8")
            if len(raw) > room:  # whole characters only: drop a cut one at the end
                taken = raw[:room].decode("utf-8", "ignore")
            full = len(taken) < len(wanted)
            parts.append(taken)
            room -= len(taken.encode("utf-8"))
        seen += len(part)
        last = part[-1:] or last
        if not chunk or ended:
            break
    length = seen - 1 if ended and last == "\r" else seen  # CRLF: the CR ends the line too
    return "".join(parts)[: max(0, length - skip)], length


def _skip_line(f: IO[bytes]) -> bool:
    """Read past one line, a chunk at a time; False at the end of the file."""
    chunk = f.readline(_CHUNK)
    if not chunk:
        return False
    while not chunk.endswith(b"\n"):
        chunk = f.readline(_CHUNK)
        if not chunk:
            break
    return True


def _next_line(f: IO[bytes]) -> tuple[str, int] | None:
    """The next line without its ending (at least its first ``MAX_LINE_CHARS`` characters)
    and its whole length in characters; None at the end of the file."""
    head = f.readline(_LINE_HEAD_BYTES)
    if not head:
        return None
    if head.endswith(b"\n"):
        text = head.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")
        return text, len(text)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(head)
    length = len(text)
    last = text[-1:]
    while True:
        chunk = f.readline(_CHUNK)
        part = decoder.decode(chunk, final=not chunk)
        if part:
            length += len(part)
            last = part[-1]
        if not chunk or chunk.endswith(b"\n"):
            break
    if last == "\n":
        length -= 1
        if length >= 1 and length == len(text) and text.endswith("\r"):
            length -= 1
    return text.removesuffix("\r"), length


def _count_rest(f: IO[bytes]) -> int:
    """Lines left in ``f`` from its current position (which is at a line start)."""
    count = 0
    last = b""
    for chunk in iter(lambda: f.read(_CHUNK), b""):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (1 if last not in (b"", b"\n") else 0)


def _page_result(
    path: str, target: Path, size: int, offset: int, limit: int, page: _Page, ctx: ToolContext
) -> ToolResult:
    shown = ctx.display(target)
    if page.total == 0:
        return ToolResult(f"{path} is empty (0 lines).",
                          meta=ReadMeta(path=shown, offset=offset, total_lines=0,
                                        lines=0).to_meta())
    if offset > page.total:
        raise ToolError(
            f"offset {offset} is past the end of {path}, which has {page.total} lines; "
            f"use an offset from 1 to {page.total}"
        )
    piece = page.piece
    if piece is not None and piece.start >= piece.length:
        what = "is empty" if piece.length == 0 else f"has {plural(piece.length, 'character')}"
        use = "0" if piece.length == 0 else f"from 0 to {piece.length - 1}"
        raise ToolError(f"char_offset {piece.start} is past the end of line {piece.line} of "
                        f"{path}, which {what}; use a char_offset {use}")
    meta = ReadMeta(path=shown, offset=offset, total_lines=page.total,
                    lines=len(page.lines)).to_meta()
    text = "\n".join(page.lines)
    partial = page.last < page.total or page.cut > 0 or piece is not None
    if piece is not None and piece.end < piece.length:  # the rest of this line comes next
        text += "\n\n" + _piece_hint(path, page, piece, limit)
    elif page.last < page.total:
        text += "\n\n" + _more_hint(path, page, limit)
    if page.cut:
        text += "\n\n" + _cut_hint(path, page)
    if partial:  # nothing was lost (no saved_path): the file itself holds the rest
        meta.update(TruncationRecord(
            total_lines=page.total, total_bytes=size,
            shown_lines=len(page.lines), direction="head", by="read", first_line=offset,
            cut_lines=page.cut,
        ).to_meta())
    return ToolResult(text, meta=meta)


def _shown_span(page: _Page) -> str:
    """What the page shows: ``lines 4-6``, or ``line 4 from character 2001 and lines 5-6``."""
    first = page.last - len(page.lines) + 1
    if page.piece is None:
        return f"lines {first}-{page.last}"
    head = f"line {first} from character {page.piece.start + 1}"
    if page.last == first:
        return head
    return f"{head} and {'line' if page.last == first + 1 else 'lines'} {_span(first + 1, page.last)}"


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _more_hint(path: str, page: _Page, limit: int) -> str:
    why = " (output capped at 50 KB)" if page.byte_capped else ""
    nxt = page.last + 1
    return (
        f"[Showing {_shown_span(page)} of {page.total}{why}. "
        f"{plural(page.total - page.last, 'more line')}. Read more with "
        f"{read_call(path, nxt, min(limit, MAX_LINES))}]"
    )


def _piece_hint(path: str, page: _Page, piece: _Piece, limit: int) -> str:
    after = page.total - piece.line
    rest = f" {plural(after, 'more line')} after it." if after else ""
    return (
        f"[Showing characters {piece.start + 1}-{piece.end} of {piece.length} in line "
        f"{piece.line} (output capped at 50 KB).{rest} Read more of the line "
        f"with {read_call(path, piece.line, min(limit, MAX_LINES), piece.end)}]"
    )


def _cut_hint(path: str, page: _Page) -> str:
    first = page.first_cut
    which = "" if page.cut == 1 else " (the first of them; the others likewise, with their own offset)"
    return (
        f"[{plural(page.cut, 'line')} longer than {MAX_LINE_CHARS} characters cut; read the "
        f"rest of line {first}{which} with {read_call(path, first, 1, MAX_LINE_CHARS)}]"
    )


def _list_dir(
    path: str, target: Path, fd: int, offset: int, limit: int, ctx: ToolContext
) -> ToolResult:
    try:
        entries = sorted(_dir_entries(fd))
    except OSError as e:
        raise os_error("list", path, e) from None
    meta = ListMeta(path=ctx.display(target), entries=len(entries)).to_meta()
    if not entries:
        return ToolResult(f"{path} is an empty directory.", meta=meta)
    if offset > len(entries):
        raise ToolError(
            f"offset {offset} is past the end of the listing of {path} ({len(entries)} entries)"
        )
    want = min(limit, MAX_LINES)
    shown = entries[offset - 1 : offset - 1 + want]
    last = offset - 1 + len(shown)
    noun = "entry" if len(entries) == 1 else "entries"
    head = f"{path} is a directory with {len(entries)} {noun}:"
    text = "\n".join([head, *shown])
    if last < len(entries):
        text += (
            f"\n\n[Showing entries {offset}-{last} of {len(entries)}. Read more with "
            f"{read_call(path, last + 1, want)}]"
        )
    return ToolResult(text, meta=meta)


def _dir_entries(fd: int) -> Iterator[str]:
    """The names in the open directory ``fd``, directories with a trailing ``/``."""
    with os.scandir(fd) as it:
        for entry in it:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            yield shown_name(entry.name) + "/" if is_dir else shown_name(entry.name)


# -- write ---------------------------------------------------------------------------------
@tool(kind=ToolKind.WRITE)
def write(path: str, content: str, context: ToolContext | None = None) -> ToolResult:
    """Write a file, replacing it if it exists; missing parent directories are created. The file is written atomically (a reader never sees half of it).

    Args:
        path: File to write, relative to the working directory or absolute.
        content: The complete new content of the file.
    """
    ctx = context or ToolContext()
    target = ctx.resolve(path, write=True)
    if ctx.workspace is not None and target == ctx.workspace.root:
        raise ToolError(f"{path} is a directory; give the path of a file inside it")
    data = content.encode("utf-8", "replace")
    existed = replace_file(path, target, data, ctx, create_dirs=True)
    shown = ctx.display(target)
    lines = count_lines(content)
    verb = "Overwrote" if existed else "Created"
    return ToolResult(
        f"{verb} {shown_name(shown)}: {plural(len(data), 'byte')}, {plural(lines, 'line')}.",
        meta=WriteMeta(path=shown, bytes=len(data), lines=lines, created=not existed).to_meta(),
    )


# -- edit ----------------------------------------------------------------------------------
_NUMBERED = re.compile(r"^\s*\d+\t")


@tool(kind=ToolKind.EDIT)
def edit(
    path: str,
    old_string: str,
    new_string: str,
    replace_all: bool = False,
    context: ToolContext | None = None,
) -> ToolResult:
    """Replace exact text in a file. old_string must match the file character for character (whitespace and indentation included) and, unless replace_all is true, exactly once; copy it from read output without the line-number prefix.

    Args:
        path: File to edit.
        old_string: The exact text to replace; include enough surrounding lines to make it unique.
        new_string: The text to put in its place.
        replace_all: Replace every occurrence instead of requiring exactly one.
    """
    ctx = context or ToolContext()
    if not old_string:
        raise ToolError("old_string is empty; to create a file or replace all of it, use write")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; there is nothing to change")
    target = ctx.resolve(path, write=True)
    text = _load_for_edit(path, target, ctx)
    old, new = _match_line_endings(text, old_string, new_string)
    starts = _find_all(text, old)
    if not starts:
        raise ToolError(_not_found_message(path, text, old_string))
    if len(starts) > 1 and not replace_all:
        raise ToolError(_ambiguous_message(path, text, starts))
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    try:
        data = updated.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ToolError("new_string contains a lone surrogate character, which is not valid "
                        "text; remove it or write the character it stands for") from None
    replace_file(path, target, data, ctx)
    return _edit_result(ctx.display(target), text, updated, starts, new)


def _load_for_edit(path: str, target: Path, ctx: ToolContext) -> str:
    fd, st = open_text(path, target, ctx)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ToolError(f"{path} is a directory; edit changes files")
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise os_error("read", path, e) from None
    if is_binary(raw):
        raise ToolError(f"{path} is a binary file (it contains NUL bytes); edit changes text only")
    return raw.decode("utf-8", "surrogateescape")  # lossless: undecodable bytes round-trip


def _match_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """``old``/``new`` with ``\\n`` turned into ``\\r\\n`` when the file uses CRLF."""
    crlf = text.count("\r\n")
    if crlf == 0 or crlf < text.count("\n") - crlf:
        return old, new
    old_crlf = old.replace("\r\n", "\n").replace("\n", "\r\n")
    if old_crlf != old and old_crlf in text:
        return old_crlf, new.replace("\r\n", "\n").replace("\n", "\r\n")
    return old, new


def _find_all(text: str, needle: str) -> list[int]:
    starts: list[int] = []
    i = text.find(needle)
    while i != -1:
        starts.append(i)
        i = text.find(needle, i + len(needle))
    return starts


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _not_found_message(path: str, text: str, old: str) -> str:
    msg = f"old_string was not found in {path}."
    lines = old.splitlines()
    if lines and all(_NUMBERED.match(line) for line in lines):
        return (
            f"{msg} It looks like it includes line numbers from read output; leave out the "
            "number and tab at the start of each line"
        )
    tokens = old.split()
    if tokens:
        pattern = r"\s+".join(re.escape(t) for t in tokens)
        m = re.search(pattern, text)
        if m:
            return (
                f"{msg} A match that differs only in whitespace or indentation starts at line "
                f"{_line_of(text, m.start())}; copy the text exactly as read shows it"
            )
    return f"{msg} Read the file again and copy old_string exactly, whitespace included"


def _ambiguous_message(path: str, text: str, starts: list[int]) -> str:
    where = ", ".join(str(_line_of(text, s)) for s in starts[:10])
    more = ", ..." if len(starts) > 10 else ""
    return (
        f"old_string matches {len(starts)} times in {path} (at lines {where}{more}); add "
        "surrounding lines to old_string so it matches once, or set replace_all to true "
        "to replace every occurrence"
    )


def _edit_result(shown: str, before: str, after: str, starts: list[int], new: str) -> ToolResult:
    first = _line_of(before, starts[0])
    n = len(starts)
    what = "1 occurrence" if n == 1 else f"{n} occurrences"
    text = f"Edited {shown_name(shown)}: replaced {what} (first at line {first})."
    if n == 1:
        text += "\n" + _snippet(after, first, first + new.count("\n"))
    return ToolResult(text, meta=EditMeta(path=shown, replacements=n, first_line=first).to_meta())


def _snippet(text: str, first: int, last: int, around: int = 2, cap: int = 20) -> str:
    """Numbered lines ``first - around`` .. ``last + around`` of ``text`` (at most ``cap``)."""
    lines = [line.removesuffix("\r") for line in clean(text).removesuffix("\n").split("\n")]
    lo = max(1, first - around)
    hi = min(len(lines), last + around, lo + cap - 1)
    return "\n".join(f"{n:>6}\t{cut_line(lines[n - 1])}" for n in range(lo, hi + 1))
