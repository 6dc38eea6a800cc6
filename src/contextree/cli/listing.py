"""``contextree ls``: describe many session files without reading them whole.

Each ``*.jsonl`` file is read in bounded memory (about a megabyte whatever its size): the
header line gives id and creation time; the last ``TAIL_BYTES`` give the last activity; the
number of entries is exact when the whole file fits in the tail, else estimated from the
newlines in ``SAMPLES`` windows spread over the file. The name comes from the last
``session_info`` line, found by a byte search from the end in ``CHUNK``-sized reads
(nothing is parsed but that line).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ..entries import LineError, SessionHeader, decode_line
from .output import human_size, short_id
from .terminal import ELLIPSIS, fit, visible, width_of

TAIL_BYTES = 64 * 1024
HEADER_LIMIT = 1 << 20
NAME_TAG = b'"session_info"'
MAX_NAME_PROBES = 64
CHUNK = 1 << 20  # bytes read at a time when searching back for the name
LINE_LIMIT = 1 << 20  # the longest session_info line looked at
SAMPLES = 64  # windows whose newlines estimate the entry count of a big file
SAMPLE_BYTES = 16 * 1024
NAME_WIDTH = 40  # columns of a name in the table (--json has it whole)
PATH_WIDTH = 70  # columns of a path in the table (the end is kept)


@dataclass
class Listing:
    """One session file as ``ls`` shows it."""

    path: str
    id: str
    name: str | None
    created: str
    last_activity: str
    entries: int
    entries_exact: bool
    size: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def session_files(root: Path) -> Iterator[Path]:
    """``*.jsonl`` files under ``root`` (recursively; hidden files and directories skipped)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            items = list(os.scandir(folder))
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for item in items:
            if item.name.startswith("."):
                continue
            if item.is_dir(follow_symlinks=False):
                stack.append(Path(item.path))
            elif item.name.endswith(".jsonl") and item.is_file():
                yield Path(item.path)


def scan(root: Path) -> tuple[list[Listing], list[Path]]:
    """Sessions under ``root``, newest activity first, and the ``.jsonl`` files that are not."""
    found: list[Listing] = []
    other: list[Path] = []
    for path in session_files(root):
        listing = describe(path)
        if listing is None:
            other.append(path)
        else:
            found.append(listing)
    found.sort(key=lambda s: (s.last_activity, s.path), reverse=True)
    return found, sorted(other)


def describe(path: Path) -> Listing | None:
    """The ``ls`` line for one file, or ``None`` if it is not a contextree session."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            first = f.readline(HEADER_LIMIT)
            header = _header(first)
            if header is None:
                return None
            start = max(len(first), size - TAIL_BYTES)
            f.seek(start)
            tail = f.read(TAIL_BYTES)
            whole = start == len(first)
            lines = _complete_lines(tail, whole)
            count = len(lines) if whole else _estimate_lines(f, len(first), size, tail)
            name = _last_name(f, len(first), size)
    except OSError:
        return None
    last = _last_timestamp(lines) or header.created_at
    return Listing(str(path), header.id, name, header.created_at, last, count, whole, size)


def _header(first: bytes) -> SessionHeader | None:
    if not first.strip():
        return None
    try:
        line = decode_line(first)
    except LineError:
        return None
    return line if isinstance(line, SessionHeader) else None


def _complete_lines(tail: bytes, whole: bool) -> list[bytes]:
    parts = tail.split(b"\n")
    if not whole:
        parts = parts[1:]  # the first piece may start in the middle of a line
    if parts and not tail.endswith(b"\n"):
        parts = parts[:-1] if not _parses(parts[-1]) else parts
    return [p for p in parts if p.strip()]


def _estimate_lines(f: IO[bytes], body_start: int, size: int, tail: bytes) -> int:
    """The lines after the header, from the newline density of windows spread evenly over
    the body (the tail is one of them): unbiased whatever the mix of line lengths."""
    body = size - body_start
    span = max(body - len(tail), 0)
    newlines = tail.count(b"\n")
    sampled = len(tail)
    step = span / SAMPLES
    for i in range(SAMPLES):
        offset = body_start + int(i * step)
        length = min(SAMPLE_BYTES, body_start + span - offset)
        if length <= 0:
            continue
        f.seek(offset)
        window = f.read(length)
        newlines += window.count(b"\n")
        sampled += len(window)
    if not sampled:
        return 0
    return max(round(newlines * body / sampled), tail.count(b"\n"))


def _parses(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def _last_timestamp(lines: list[bytes]) -> str | None:
    for raw in reversed(lines):
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("timestamp"), str):
            return str(obj["timestamp"])
    return None


def _name_from_line(raw: bytes) -> str | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, dict) and obj.get("type") == "session_info":
        name = obj.get("name")
        return name if isinstance(name, str) else None
    return None


def _last_name(f: IO[bytes], start: int, end: int) -> str | None:
    """The name set by the last ``session_info`` line between ``start`` and ``end``,
    searched from the back one ``CHUNK`` at a time (memory stays bounded)."""
    probes = 0
    overlap = len(NAME_TAG) - 1
    hi = end
    while hi > start and probes < MAX_NAME_PROBES:
        lo = max(start, hi - CHUNK)
        f.seek(lo)
        buf = f.read(min(hi + overlap, end) - lo)
        stop = len(buf)
        while probes < MAX_NAME_PROBES:
            hit = buf.rfind(NAME_TAG, 0, stop)
            if hit < 0:
                break
            probes += 1
            line_start = buf.rfind(b"\n", 0, hit) + 1
            if line_start == 0 and lo > start:
                line_start = _line_start(f, lo, start) - lo
            line = _line_at(f, lo + line_start)
            name = _name_from_line(line)
            if name is not None:
                return name
            stop = max(line_start - 1, 0) if line_start > 0 else hit
        hi = lo
    return None


def _line_start(f: IO[bytes], offset: int, floor: int) -> int:
    """Where the line holding ``offset`` starts (looked for at most ``LINE_LIMIT`` back)."""
    lo = max(floor, offset - LINE_LIMIT)
    f.seek(lo)
    before = f.read(offset - lo)
    nl = before.rfind(b"\n")
    return lo + nl + 1 if nl >= 0 else lo


def _line_at(f: IO[bytes], offset: int) -> bytes:
    f.seek(offset)
    return f.readline(LINE_LIMIT)


def rows(listings: list[Listing], root: Path) -> list[list[str]]:
    """Table rows for ``ls``: path relative to ``root``, name, id, times, entries, size;
    every cell one line of bounded width (``--json`` has the values whole)."""
    out = []
    for s in listings:
        try:
            shown = str(Path(s.path).relative_to(root))
        except ValueError:
            shown = s.path
        entries = str(s.entries) if s.entries_exact else f"≈{s.entries}"
        out.append([_keep_end(visible(shown), PATH_WIDTH), fit(visible(s.name or ""), NAME_WIDTH),
                    short_id(s.id), _when(s.created), _when(s.last_activity), entries,
                    human_size(s.size)])
    return out


def _keep_end(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, keeping its end (``…`` + the end of a path)."""
    if width_of(text) <= width:
        return text
    kept: list[str] = []
    used = 0
    for ch in reversed(text):
        used += width_of(ch)
        if used > width - 1:
            break
        kept.append(ch)
    return ELLIPSIS + "".join(reversed(kept))


def _when(stamp: str) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM`` (UTC)."""
    return visible(stamp[:16].replace("T", " ") if len(stamp) >= 16 else stamp)
