"""``contextree ls``: describe many session files without reading them whole.

For each ``*.jsonl`` file only the header line and the last ``TAIL_BYTES`` are read: the
header gives id and creation time, the tail gives the last activity and, from its average
line length, an estimate of the number of entries (exact when the whole file fits in the
tail). The name comes from the last ``session_info`` line, found by a byte search from the
end of the memory-mapped file (nothing is parsed but that line).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from ..entries import LineError, SessionHeader, decode_line
from .output import human_size, short_id

TAIL_BYTES = 64 * 1024
HEADER_LIMIT = 1 << 20
NAME_TAG = b'"session_info"'
MAX_NAME_PROBES = 64


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
            tail = f.read()
            name = _name(tail) or (_name_by_search(f, start) if start > len(first) else None)
    except OSError:
        return None
    whole = start == len(first)
    lines = _complete_lines(tail, whole)
    last = _last_timestamp(lines) or header.created_at
    body = size - len(first)
    if whole:
        count = len(lines)
    else:
        used = sum(len(line) + 1 for line in lines)
        count = round(len(lines) * body / used) if used else 0
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


def _name(tail: bytes) -> str | None:
    """The name set by the last ``session_info`` line in ``tail``."""
    return _last_name(tail, len(tail))


def _name_by_search(f: Any, end: int) -> str | None:
    """Search the rest of the file (before ``end``) from the back, without parsing it."""
    if end <= 0:
        return None
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return _last_name(mm, end)


def _last_name(buf: bytes | mmap.mmap, end: int) -> str | None:
    """The name of the last ``session_info`` line that starts before ``end`` in ``buf``."""
    for _ in range(MAX_NAME_PROBES):
        hit = buf.rfind(NAME_TAG, 0, end)
        if hit < 0:
            return None
        lo = buf.rfind(b"\n", 0, hit) + 1
        hi = buf.find(b"\n", hit)
        name = _name_from_line(buf[lo : hi if hi >= 0 else len(buf)])
        if name is not None:
            return name
        end = lo
    return None


def rows(listings: list[Listing], root: Path) -> list[list[str]]:
    """Table rows for ``ls``: path relative to ``root``, name, id, times, entries, size."""
    out = []
    for s in listings:
        try:
            shown = str(Path(s.path).relative_to(root))
        except ValueError:
            shown = s.path
        entries = str(s.entries) if s.entries_exact else f"≈{s.entries}"
        out.append([shown, s.name or "", short_id(s.id), _when(s.created),
                    _when(s.last_activity), entries, human_size(s.size)])
    return out


def _when(stamp: str) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM`` (UTC)."""
    return stamp[:16].replace("T", " ") if len(stamp) >= 16 else stamp
