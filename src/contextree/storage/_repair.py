"""``repair``: make a damaged session file loadable again, keeping everything that can be kept.

Good lines are kept byte for byte; bad ones (not JSON, invalid entries, duplicate ids, entries
whose parent is missing or part of a cycle, and everything below them) go to the quarantine
file with the reason. A backup of the original file is written first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .._files import atomic_write
from ..entries import (
    AnyEntry,
    LabelEntry,
    LeafEntry,
    LineError,
    SessionHeader,
    decode_line,
    encode_line,
    new_id,
    now,
)
from ..errors import SessionNotFound
from ._jsonl import _lock, lock_info_path, quarantine, quarantine_path


@dataclass
class RepairReport:
    """What ``repair`` did: lines kept, lines quarantined (line number, reason), the backup."""

    path: str
    kept: int
    quarantined: list[tuple[int, str]] = field(default_factory=list)
    backup: str | None = None
    quarantine_file: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.quarantined)


def repair(path: str | os.PathLike[str], *, dry_run: bool = False) -> RepairReport:
    """Repair a session file in place (after a backup); ``dry_run`` only reports."""
    target = Path(path)
    if not target.is_file():
        raise SessionNotFound("no session file here", path=str(target))
    fd = os.open(target, os.O_RDWR)
    locked = False
    try:
        _lock(fd, target)
        locked = True
        with open(target, "rb") as f:
            raw_lines = f.read().split(b"\n")
        if raw_lines and raw_lines[-1] == b"":
            raw_lines.pop()
        keep, bad = _triage(raw_lines, str(target))
        report = RepairReport(str(target), kept=len(keep), quarantined=[(n, r) for n, r, _ in bad])
        if not bad or dry_run:
            return report
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        backup = Path(f"{target}.bak-{stamp}")
        shutil.copy2(target, backup)
        report.backup = str(backup)
        records = [{"reason": reason, "line": n, "repaired_at": now(),
                    "text": raw.decode("utf-8", errors="replace")} for n, reason, raw in bad]

        def body() -> Iterator[bytes]:
            yield b"".join(line + b"\n" for line in keep)
            # Once the new file is written in full (so the disk had room) and before it
            # replaces the old one, the quarantine gets the lines: a crash in between leaves
            # them in both places, never in neither.
            quarantine(target, records)

        atomic_write(target, body())
        report.quarantine_file = str(quarantine_path(target))
        return report
    finally:
        if locked:  # repair leaves no lock info behind (and dry runs change nothing)
            with contextlib.suppress(OSError):
                lock_info_path(target).unlink()
        os.close(fd)


def _triage(
    raw_lines: list[bytes], location: str
) -> tuple[list[bytes], list[tuple[int, str, bytes]]]:
    """Split lines into those to keep (header first) and those to quarantine with a reason."""
    bad: list[tuple[int, str, bytes]] = []
    keep_header: bytes | None = None
    entries: dict[str, tuple[int, AnyEntry, bytes]] = {}
    for n, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            item = decode_line(raw)
        except LineError as e:
            bad.append((n, str(e), raw))
            continue
        if isinstance(item, SessionHeader):
            if keep_header is None and n == 1:
                keep_header = raw
            else:
                bad.append((n, "a second session header", raw))
            continue
        if item.id in entries:
            bad.append((n, f"duplicate id {item.id!r} (first used on line "
                           f"{entries[item.id][0]})", raw))
            continue
        entries[item.id] = (n, item, raw)
    if keep_header is None:
        keep_header = encode_line(SessionHeader(id=str(new_id()), created_at=now())).rstrip(b"\n")
        bad.append((0, "no session header: a new one was written", b""))
    ok = _reachable(entries)
    keep = [keep_header]
    for eid, (n, entry, raw) in entries.items():
        reason = ok.get(eid)
        if reason is None and isinstance(entry, LeafEntry | LabelEntry):
            target = entry.target_id
            if target is not None and ok.get(target, "missing") is not None:
                reason = f"points at {target!r}, which is missing or quarantined"
        if reason is None:
            keep.append(raw)
        else:
            bad.append((n, reason, raw))
    bad.sort(key=lambda b: b[0])
    return keep, bad


def _reachable(entries: dict[str, tuple[int, AnyEntry, bytes]]) -> dict[str, str | None]:
    """For each entry: ``None`` if its parent chain reaches a root, else why not."""
    verdict: dict[str, str | None] = {}
    for start in entries:
        if start in verdict:
            continue
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = start
        reason: str | None = None
        while current is not None:
            if current in verdict:
                reason = verdict[current]
                if reason is not None and not reason.startswith("ancestor "):
                    reason = f"ancestor {current!r} was quarantined: {reason}"
                break
            if current in on_chain:
                reason = "parent links form a cycle"
                break
            if current not in entries:
                reason = f"parent {current!r} does not exist"
                break
            chain.append(current)
            on_chain.add(current)
            current = entries[current][1].parent_id
        for eid in chain:
            verdict[eid] = reason
    return verdict
