"""Describe a session file without reading it whole: what a directory's catalog lists.

Each ``*.jsonl`` file is read in bounded memory, a megabyte at a time, and at most about
``SCAN_BYTES`` plus ``COUNT_WHOLE`` (32 MB) of it whatever its size:

- the header line gives the id and the creation time;
- the last ``SCAN_BYTES`` are read from the end: they give the last activity (the timestamp
  of the last entry, the header's creation time when there is none: the same definition as
  for a session in PostgreSQL, and in UTC for both), the name (the
  last ``session_info`` line, found by a byte search; nothing else is parsed) and the exact
  number of lines they hold;
- before that, the lines are counted when that part is at most ``COUNT_WHOLE``, else
  estimated from the newlines in windows spread over it (marked ``≈``). A name set there is
  not searched for: the listing says so (``name_exact``), and ``contextree stats FILE``
  shows it.

A file small enough to be read whole gets exact figures.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import orjson

from .._files import node_kind, open_regular_readonly
from .._limits import parse_json
from ..entries import LineError, SessionHeader, decode_line
from ._archives import ARCHIVE_SUFFIX
from ._catalog import NOT_A_SESSION, SessionInfo, Unlisted

TAIL_BYTES = 64 * 1024  # where the last activity is looked for
HEADER_LIMIT = 1 << 20
NAME_TAG = b'"session_info"'
MAX_NAME_PROBES = 64
CHUNK = 1 << 20  # bytes read at a time
SCAN_BYTES = 16 << 20  # read from the end: the name, and lines counted exactly
LINE_LIMIT = 1 << 20  # the longest session_info line looked at
SAMPLES = 1024  # windows per round whose newlines estimate the lines before the scanned end
SAMPLE_BYTES = 4096
MAX_ROUNDS = 4  # at most this many rounds of samples (16 MB)
ENOUGH_NEWLINES = 4000  # newlines seen that make the estimate close (about 1.5%)
COUNT_WHOLE = MAX_ROUNDS * SAMPLES * SAMPLE_BYTES  # what is left is counted, not sampled
STAMP_BYTES = 4096  # the start of a long last line, where its timestamp is
_STAMP = re.compile(rb'"timestamp":"([^"\\]*)"')


def session_files(root: Path, unlisted: list[Unlisted]) -> Iterator[Path]:
    """Regular ``*.jsonl`` files under ``root``, recursively (hidden files and directories
    skipped, symbolic links not followed). Every other ``*.jsonl`` node, and every folder
    that cannot be read, goes to ``unlisted`` with the reason: nothing is passed over
    silently, and nothing is opened that could block (a FIFO) or lead outside ``root``."""
    for path, _ in session_stats(root, unlisted):
        yield Path(path)


def session_stats(root: Path, unlisted: list[Unlisted],
                  archives: list[tuple[str, os.stat_result]] | None = None,
                  ) -> Iterator[tuple[str, os.stat_result]]:
    """``session_files`` as path strings, each with the ``lstat`` the walk made of it (a
    cache of listings compares it with what it saw last, at no further system call).
    With ``archives``, the regular ``*.archive.zip`` files (``contextree archive``) found on
    the way are put there too (search reads them; a listing does not)."""
    stack: list[str | Path] = [root]
    while stack:
        folder = stack.pop()
        try:
            items = list(os.scandir(folder))
        except (PermissionError, FileNotFoundError, NotADirectoryError) as e:
            if folder != root:
                unlisted.append(Unlisted(str(folder), f"cannot be read ({e.strerror})"))
            continue
        for item in items:
            if item.name.startswith("."):
                continue
            try:
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
                    continue
                if not item.name.endswith(".jsonl"):
                    if archives is not None and item.name.endswith(ARCHIVE_SUFFIX):
                        st = item.stat(follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode):
                            archives.append((item.path, st))
                    continue
                st = item.stat(follow_symlinks=False)
                mode = st.st_mode
            except OSError as e:
                unlisted.append(Unlisted(item.path, f"cannot be read ({e.strerror})"))
                continue
            if stat.S_ISREG(mode):
                yield item.path, st
            elif stat.S_ISLNK(mode):
                unlisted.append(Unlisted(item.path, "a symbolic link (not followed: open "
                                         "its target where it is)"))
            else:
                unlisted.append(Unlisted(item.path, f"{node_kind(mode)}, not a session file"))


def describe(path: Path) -> SessionInfo | Unlisted:
    """What a catalog lists for one file (bounded reads, see the module's docstring), or
    why it is not listed (not a contextree session, unreadable, not a regular file)."""
    try:
        fd = open_regular_readonly(path)
    except OSError as e:
        return Unlisted(str(path), f"cannot be read ({e.strerror})")
    try:
        with open(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            first = f.readline(HEADER_LIMIT)
            header = _header(first)
            if header is None:
                return Unlisted(str(path), NOT_A_SESSION)
            body = len(first)
            tail_at = max(body, size - TAIL_BYTES)
            f.seek(tail_at)
            tail = f.read(TAIL_BYTES)
            scan = _scan_back(f, body, max(body, size - SCAN_BYTES), size, None)
            if 0 < scan.start - body <= COUNT_WHOLE:  # what is left is small: read it too
                scan = _scan_back(f, body, body, scan.start, scan)
            count = scan.lines
            if scan.start > body:
                count += _estimate_lines(f, body, scan.start)
            whole = scan.start == body
            if not tail.endswith(b"\n") and _parses(tail.rsplit(b"\n", 1)[-1]):
                count += 1  # a complete last line without its newline
            lines = _complete_lines(tail, tail_at == body)
            last = _last_timestamp(lines)
            if last is None and size > body:  # the last line is longer than the tail
                last = _last_line_stamp(f, body, size)
    except OSError as e:
        return Unlisted(str(path), f"cannot be read ({e.strerror})")
    return SessionInfo(
        id=header.id, target=str(path), name=scan.name, created=utc_stamp(header.created_at),
        last_activity=utc_stamp(last or header.created_at), entries=count,
        entries_exact=whole, size=size, cwd=header.cwd, parent_session=header.parent_session,
        metadata=header.metadata, name_exact=scan.name is not None or whole)


def utc_stamp(stamp: str | datetime) -> str:
    """A time as entries write it (``2025-01-02T03:04:05.678Z``, UTC), whatever offset or
    precision it came with; text that is not an ISO time (or one whose UTC time is outside
    the years 1-9999, such as ``0001-01-01T00:00+01:00``) is returned as it is."""
    if isinstance(stamp, str):
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            return stamp
    else:
        when = stamp
    found = _in_utc(when)
    if found is not None:
        return found
    return stamp if isinstance(stamp, str) else stamp.isoformat(timespec="milliseconds")


ISO_FORMS = ("2026-12-01, 2026-12-01T09:30, 2026-12-01T09:30:00Z or "
             "2026-12-01T09:30:00+02:00; UTC unless it gives an offset")
"""The ISO times ``utc_stamp`` reads, in words for a message."""


def parse_utc_stamp(text: str) -> str:
    """``text``, an ISO date or time, as ``utc_stamp`` writes it; for any other text (which
    ``utc_stamp`` keeps as it is) a ``ValueError`` that says which forms are taken."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO date or time (such as {ISO_FORMS})") from None
    found = _in_utc(when)
    if found is None:
        raise ValueError(f"{text!r} is outside the years 1-9999 once in UTC (give a time "
                         f"such as {ISO_FORMS})")
    return found


def _in_utc(when: datetime) -> str | None:
    """``when`` in UTC as entries write it (no offset: UTC); ``None`` if that falls outside
    the calendar (``0001-01-01T00:00+01:00``)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except OverflowError:
        return None


@dataclass
class _Scan:
    """What reading the end of a file found: from where, its lines, the last name."""

    start: int
    lines: int
    name: str | None


def _scan_back(f: IO[bytes], body: int, lo_limit: int, hi: int,
               later: _Scan | None) -> _Scan:
    """Read from ``hi`` back to ``lo_limit``, a chunk at a time: count the newlines, and find
    the name of the last ``session_info`` line (unless ``later``, the scan of what follows,
    found one). Returns the scan of everything from ``lo_limit`` to the end."""
    lines = later.lines if later else 0
    name = later.name if later else None
    probes = 0
    overlap = len(NAME_TAG) - 1
    while hi > lo_limit:
        lo = max(lo_limit, hi - CHUNK)
        f.seek(lo)
        window = f.read(hi + overlap - lo)  # and a tag across the chunk's end
        lines += window.count(b"\n", 0, hi - lo)
        if name is None and probes < MAX_NAME_PROBES:
            name, probes = _name_in(f, window, lo, body, probes)
        hi = lo
    return _Scan(lo_limit, lines, name)


def _name_in(f: IO[bytes], window: bytes, at: int, floor: int,
             probes: int) -> tuple[str | None, int]:
    """The name of the last ``session_info`` line with its tag in ``window`` (which starts
    at offset ``at`` of the file), and the probes used so far."""
    stop = len(window)
    while probes < MAX_NAME_PROBES:
        hit = window.rfind(NAME_TAG, 0, stop)
        if hit < 0:
            break
        probes += 1
        start = _line_start(f, at + hit, floor)
        name = _name_from_line(_line_at(f, start))
        if name is not None:
            return name, probes
        stop = hit
    return None, probes


def _count_lines(f: IO[bytes], lo: int, hi: int) -> int:
    """Newlines between ``lo`` and ``hi``, read a chunk at a time."""
    lines = 0
    f.seek(lo)
    while lo < hi:
        chunk = f.read(min(CHUNK, hi - lo))
        if not chunk:
            break
        lines += chunk.count(b"\n")
        lo += len(chunk)
    return lines


def _estimate_lines(f: IO[bytes], lo: int, hi: int) -> int:
    """The lines between ``lo`` and ``hi``, from the newline density of sampled windows:
    in each round, one window at a random place in each of ``SAMPLES`` equal stretches (so
    a regular line length cannot line up with them), until ``ENOUGH_NEWLINES`` were seen or
    ``MAX_ROUNDS`` were read. Unbiased whatever the mix of line lengths; the places depend
    only on the span, so a file gets the same figure every time."""
    import random  # here: most listings estimate nothing, and start-up counts

    span = hi - lo
    step = span / SAMPLES
    room = max(step - SAMPLE_BYTES, 0)
    rng = random.Random(span)
    newlines = sampled = 0
    for _ in range(MAX_ROUNDS):
        for i in range(SAMPLES):
            offset = lo + int(i * step + rng.random() * room)
            f.seek(offset)
            window = f.read(min(SAMPLE_BYTES, hi - offset))
            newlines += window.count(b"\n")
            sampled += len(window)
        if newlines >= ENOUGH_NEWLINES:
            break
    return round(newlines * span / sampled) if sampled else 0


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
    if not raw.strip():
        return False
    try:
        parse_json(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def _last_timestamp(lines: list[bytes]) -> str | None:
    for raw in reversed(lines):
        try:
            obj = parse_json(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("timestamp"), str):
            return str(obj["timestamp"])
    return None


def _last_line_stamp(f: IO[bytes], body: int, size: int) -> str | None:
    """The timestamp of a last line longer than the tail, from its first bytes (entries
    write it before their content, and JSON escaping keeps the key out of string values);
    its start is looked for at most ``SCAN_BYTES`` back."""
    hi = size - 1  # its own newline, if it has one
    start = None
    while hi > max(body, size - SCAN_BYTES) and start is None:
        lo = max(body, size - SCAN_BYTES, hi - CHUNK)
        f.seek(lo)
        nl = f.read(hi - lo).rfind(b"\n")
        start = lo + nl + 1 if nl >= 0 else (body if lo == body else None)
        hi = lo
    if start is None:
        return None
    f.seek(start)
    found = _STAMP.search(f.read(STAMP_BYTES))
    return found.group(1).decode("ascii", "replace") if found else None


def _name_from_line(raw: bytes) -> str | None:
    try:
        obj = parse_json(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, dict) and obj.get("type") == "session_info":
        name = obj.get("name")
        return name if isinstance(name, str) else None
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
