"""Brute's flat message log on disk: read it, append to it, rewrite it, verify and repair it.

One message per line (``Message.to_dict`` as JSON). The same rules as the JSONL session
store keep it loadable through crashes and full disks:

- a torn last line (a write cut short: no newline, or only NUL bytes) is moved to the
  quarantine file beside the log (``<log>.quarantine``) and cut off when a writer loads the
  log, so the next line never lands after a fragment; a complete valid last line that only
  lacks its newline is kept, and the newline is added before the next append;
- an append starts on a line of its own: after a last line that lacks its newline, or one
  that another program cut while the log was open, so it is never glued to a fragment;
- an append writes its lines in one ``write_all`` and syncs them; if that fails the file is
  cut back to its previous size, so a full disk never leaves half a line, and the failure
  is a ``StorageFailure`` naming the file and the cause;
- a rewrite (after compaction) goes through ``atomic_write``: the old file stays whole until
  the new one is complete;
- new logs are private (0600).

``verify_log`` reports what is wrong without touching anything; ``repair_log`` moves every
unreadable line to the quarantine file (after a backup) so the log loads again;
``is_flat_log`` tells a flat log from a session file (``contextree verify`` and ``repair``
take either).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .._files import atomic_write, write_all
from .._limits import parse_json
from .._messages import Message
from ..errors import CorruptLine, InvalidArgument, SessionNotFound, StorageFailure
from ..storage._jsonl import TornLineWarning, quarantine, quarantine_path
from ..storage._sidecars import line_text

__all__ = [
    "FlatLog",
    "LogHealth",
    "LogRepair",
    "is_flat_log",
    "repair_log",
    "verify_log",
]

LOG_MODE = 0o600
_PROBE_LINES = 8
_PROBE_LINE_LIMIT = 1 << 20
StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class _Line:
    number: int
    offset: int
    raw: bytes  # without its newline
    ended: bool  # had a newline
    message: Message | None
    problem: str | None


def is_flat_log(path: StrPath) -> bool:
    """Whether ``path`` holds a flat log rather than a session file: its first line is not a
    session header, and one of its first lines is an object with a ``role``."""
    try:
        with open(path, "rb") as f:
            lines = [f.readline(_PROBE_LINE_LIMIT) for _ in range(_PROBE_LINES)]
    except OSError:
        return False
    parsed = [_json(raw) for raw in lines if raw.strip()]
    if not parsed or (isinstance(parsed[0], dict) and parsed[0].get("type") == "session"):
        return False
    return any(isinstance(p, dict) and isinstance(p.get("role"), str) for p in parsed)


def _json(raw: bytes) -> object:
    """The JSON value of a line, or ``None`` when it is not JSON."""
    try:
        return parse_json(raw)
    except orjson.JSONDecodeError:
        return None


def _parse(raw: bytes) -> tuple[Message | None, str | None]:
    try:
        data = parse_json(raw)
    except orjson.JSONDecodeError as e:
        return None, f"not JSON ({e})"
    if not isinstance(data, dict):
        return None, f"not a message object (a JSON {type(data).__name__})"
    try:
        return Message.from_dict(data), None
    except (ValueError, TypeError, RecursionError) as e:  # msgspec errors are ValueErrors
        return None, f"not a message ({e})"


def _lines(path: Path) -> Iterator[_Line]:
    """Every non-blank line of the log, parsed (bounded reads: one line at a time)."""
    with open(path, "rb") as f:
        offset = 0
        for number, raw in enumerate(f, start=1):
            ended = raw.endswith(b"\n")
            body = raw[:-1] if ended else raw
            if body.strip(b" \t\r"):
                message, problem = _parse(body)
                yield _Line(number, offset, body, ended, message, problem)
            offset += len(raw)


def _is_torn(line: _Line) -> bool:
    """A fragment a crash left: an unreadable last line without its newline, or NULs."""
    return line.problem is not None and (not line.ended or not line.raw.strip(b"\0 \t\r"))


@dataclass
class _Scan:
    messages: list[Message] = field(default_factory=list)
    bad: list[_Line] = field(default_factory=list)  # unreadable lines, torn tail included
    torn: _Line | None = None
    missing_newline: bool = False  # the last line is valid but has no newline
    size: int = 0


def _scan(path: Path) -> _Scan:
    scan = _Scan(size=path.stat().st_size)
    last: _Line | None = None
    for line in _lines(path):
        if last is not None and last.problem is not None:
            scan.bad.append(last)
        elif last is not None and last.message is not None:
            scan.messages.append(last.message)
        last = line
    if last is not None:
        if last.problem is None:
            assert last.message is not None
            scan.messages.append(last.message)
            scan.missing_newline = not last.ended
        else:
            scan.bad.append(last)
            if _is_torn(last):
                scan.torn = last
    return scan


def _record(path: Path, line: _Line, reason: str) -> dict[str, object]:
    return {
        "reason": reason,
        "line": line.number,
        "offset": line.offset,
        "quarantined_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **line_text(line.raw),
        "log": str(path),
    }


def _failure(path: Path, action: str, e: OSError) -> StorageFailure:
    return StorageFailure(
        f"could not {action} the log ({e.strerror or e}); the log is as it was before. "
        "Free some space or fix the permissions, then run the agent again",
        path=str(path),
    )


class FlatLog:
    """An open flat log: load it (a writer quarantines a torn tail), append, rewrite."""

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._needs_newline = False

    def load(self, *, writable: bool = True) -> list[Message]:
        """The messages in the log (none if there is no file).

        A torn last line is skipped; with ``writable`` it is also moved to the quarantine
        file and cut off (with a ``TornLineWarning``). Any other unreadable line raises
        ``CorruptLine`` naming the file and line (``repair_log`` fixes it).
        """
        if not self.path.exists():
            return []
        scan = _scan(self.path)
        if scan.torn is not None:
            self._drop_torn(scan.torn, moved=writable)
        others = [b for b in scan.bad if b is not scan.torn]
        if others:
            first = others[0]
            raise CorruptLine(
                f"{first.problem}; run repair_log(path) (`contextree repair`) to move the "
                "unreadable lines to the quarantine file (a backup is kept)",
                path=str(self.path), line=first.number)
        self._needs_newline = scan.missing_newline
        return scan.messages

    def _drop_torn(self, torn: _Line, *, moved: bool) -> None:
        where = f"{self.path}:{torn.number}"
        if not moved:
            warnings.warn(f"{where}: the last line is incomplete (a write was cut short or is "
                          "in progress); it was skipped (nothing was changed)",
                          TornLineWarning, stacklevel=3)
            return
        try:
            quarantine(self.path, [_record(self.path, torn, "torn last line (incomplete "
                                                            "write, e.g. a crash)")])
            os.truncate(self.path, torn.offset)
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise _failure(self.path, "quarantine the torn last line of", e) from None
        warnings.warn(f"{where}: the last line was incomplete (a write was cut short); it was "
                      f"moved to {quarantine_path(self.path)} and the log continues from the "
                      "line before", TornLineWarning, stacklevel=3)

    # -- writing ---------------------------------------------------------------------------
    def open(self) -> None:
        """Open for appending (creating the log, 0600, and its directory if needed)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT
                               | getattr(os, "O_CLOEXEC", 0), LOG_MODE)
        except OSError as e:
            raise _failure(self.path, "open", e) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, messages: Sequence[Message]) -> None:
        """Write whole lines and sync them; on failure cut the file back and raise
        ``StorageFailure`` (never half a line)."""
        data = encode(messages)
        if not data:
            return
        if self._fd is None:
            self.open()
        fd = self._fd
        assert fd is not None
        try:
            before = os.fstat(fd).st_size
            # A line cut by another program since the load (or the newline a whole last
            # line lacks): the new lines start on a line of their own, never glued to it.
            if before and (self._needs_newline or os.pread(fd, 1, before - 1) != b"\n"):
                data = b"\n" + data
        except OSError as e:
            raise _failure(self.path, "append to", e) from None
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
                os.fsync(fd)
            raise _failure(self.path, "append to", e) from None
        self._needs_newline = False

    def rewrite(self, messages: Sequence[Message]) -> None:
        """Replace the log with ``messages`` at once (``atomic_write``); the old file stays
        whole if this fails (``StorageFailure``)."""
        try:
            atomic_write(self.path, encode(messages), mode=LOG_MODE)
        except OSError as e:
            raise _failure(self.path, "rewrite (after compaction)", e) from None
        reopen = self._fd is not None
        self.close()  # later appends go to the new file, not the unlinked old one
        self._needs_newline = False
        if reopen:
            self.open()


def encode(messages: Sequence[Message]) -> bytes:
    """The JSON lines of ``messages``."""
    return b"".join(orjson.dumps(m.to_dict()) + b"\n" for m in messages)


# -- verify and repair ---------------------------------------------------------------------
@dataclass(frozen=True)
class LogHealth:
    """What ``verify_log`` found: readable messages, unreadable lines (``(line, reason)``),
    and whether the last line is torn (a crash; a writer's next load quarantines it)."""

    path: str
    messages: int
    bad_lines: tuple[tuple[int, str], ...]
    torn_tail: bool
    size: int

    @property
    def ok(self) -> bool:
        """True when the log loads as it is and nothing is unreadable."""
        return not self.bad_lines


@dataclass(frozen=True)
class LogRepair:
    """What ``repair_log`` did (or, with ``dry_run``, would do)."""

    path: str
    kept: int
    quarantined: int
    backup: str | None
    dry_run: bool


def verify_log(path: StrPath) -> LogHealth:
    """Check a flat message log without changing it (no lock, no write access needed).

    Raises ``SessionNotFound`` (also a ``FileNotFoundError``) when there is no file at
    ``path``, ``InvalidArgument`` for a directory.
    """
    target = _existing(path)
    scan = _scan(target)
    bad = tuple((b.number, "torn last line (incomplete write)" if b is scan.torn
                 else b.problem or "unreadable") for b in scan.bad)
    return LogHealth(str(target), len(scan.messages), bad, scan.torn is not None, scan.size)


def repair_log(path: StrPath, *, dry_run: bool = False, force: bool = False) -> LogRepair:
    """Make a flat message log loadable: move every unreadable line to ``<log>.quarantine``
    and rewrite the log (atomically) with the readable ones, byte for byte.

    A backup of the original is written first (``<log>.bak-<time>-<random>``, unique, made
    atomically). ``dry_run`` reports what would happen and changes nothing. A file in which
    no line is a message is refused (``InvalidArgument``: it is probably not a log) unless
    ``force``. Repair must not run while an agent is writing the log.
    """
    target = _existing(path)
    scan = _scan(target)
    if not scan.bad:
        return LogRepair(str(target), len(scan.messages), 0, None, dry_run)
    if not scan.messages and not force:
        raise InvalidArgument(
            f"no line of this file is a message ({len(scan.bad)} unreadable), so it is "
            "probably not a flat message log; nothing was changed. Pass force=True "
            "(`--force`) to quarantine every line anyway", path=str(target))
    if dry_run:
        return LogRepair(str(target), len(scan.messages), len(scan.bad), None, True)
    bad = {b.number for b in scan.bad}
    try:
        original = target.read_bytes()
        backup = _backup_path(target)
        atomic_write(backup, original, mode=LOG_MODE, overwrite=False)
        quarantine(target, [_record(target, b, b.problem or "unreadable") for b in scan.bad])
        kept = b"".join(line.raw + b"\n" for line in _lines(target) if line.number not in bad)
        atomic_write(target, kept, mode=LOG_MODE)
    except OSError as e:
        raise _failure(target, "repair", e) from None
    return LogRepair(str(target), len(scan.messages), len(scan.bad), str(backup), False)


def _existing(path: StrPath) -> Path:
    target = Path(path)
    if target.is_dir():
        raise InvalidArgument("this is a directory, not a message log", path=str(target))
    if not target.exists():
        raise SessionNotFound("no such message log", path=str(target))
    return target


def _backup_path(target: Path) -> Path:
    """A fresh name beside ``target`` for its backup (random part as in ``_files.temp_path``)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return target.with_name(f"{target.name}.bak-{stamp}-{os.urandom(4).hex()}")
