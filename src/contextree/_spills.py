"""Whose tool outputs are whose: deleting a session with the spills it owns, wherever they
went, and finding the spills other sessions still point at (``rm``, ``prune``).

Truncation records where each original output was saved (``saved_path``). A session run with
its own store (``OverflowStore(dir)``, as the demo does) spills outside the per-user store, so
deleting the session's folder in one store is not enough: every path its entries record is
removed too, if it is a spill file *of this session*.

Spills belong to the session that wrote them: a store keeps them in a folder named after
the session's id. A fork's copied entries name its parent's spills, and a plain copy of a
session file has its original's id: ``rm`` of either leaves those spills alone. A path is
taken for a spill of this session only when it is a regular file of this user, named the
way the overflow store names its files, in the folder of this session's id, and when no
other session file beside this one has the same id; so a session file (perhaps imported
from elsewhere, or crafted) cannot make ``rm`` delete anything else.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._files import open_regular_readonly
from ._limits import parse_json
from ._overflow import OverflowStore, _session_dirname
from ._session import Session
from .entries import MessageEntry
from .storage import open_storage

# ``OverflowStore`` file names: UTC stamp with milliseconds, random hex, label, ``.txt``.
SPILL_NAME = re.compile(r"\d{8}T\d{9}-[0-9a-f]{10}-[A-Za-z0-9_-]{1,40}\.txt")


@dataclass
class Removal:
    """What ``rm`` deleted besides the session: the spill files, by path."""

    session_id: str
    removed: list[str] = field(default_factory=list)
    kept_for: str | None = None  # why the spills were kept, when they were


def _copies_beside(target: Path, session_id: str) -> bool:
    """Whether another session file in ``target``'s directory has ``session_id`` (only
    its header line is read; files that cannot be read are not copies)."""
    try:
        siblings = [p for p in target.parent.glob("*.jsonl") if p.name != target.name]
    except OSError:
        return False
    for path in siblings:
        try:
            fd = open_regular_readonly(path)
        except OSError:
            continue
        try:
            with open(fd, "rb") as f:
                first = f.readline(1 << 16)
            header = parse_json(first)
        except (OSError, ValueError):
            continue
        if isinstance(header, dict) and header.get("type") == "session" and (
                header.get("id") == session_id):
            return True
    return False


def recorded_spills(session: Session) -> Iterator[Path]:
    """The saved outputs the session's entries point at (each once)."""
    seen: set[str] = set()
    for entry in session.entries():
        if not isinstance(entry, MessageEntry):
            continue
        record = entry.message.truncation
        if record is not None and record.saved_path and record.saved_path not in seen:
            seen.add(record.saved_path)
            yield Path(record.saved_path)


def is_spill_file(path: Path) -> bool:
    """A regular file (not a link) of this user, named as the overflow store names them."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
            and SPILL_NAME.fullmatch(path.name) is not None)


def delete_session_and_spills(target: str, store: OverflowStore) -> Removal:
    """Delete the session at ``target`` (see ``Session.delete``), its folder in ``store``
    and every spill file of its own that its entries record (see the module's docstring)."""
    with Session.open(target, readonly=True) as session:
        report = Removal(session.id)
        recorded = list(recorded_spills(session))
    if _copies_beside(Path(target), report.session_id):
        storage = open_storage(target)  # the file alone: its spills are the copy's too
        try:
            storage.delete()
        finally:
            storage.close()
        report.kept_for = "another session file here has the same id (a copy)"
        return report
    folder = store.directory / _session_dirname(report.session_id)
    in_folder = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    Session.delete(target, store=store)
    report.removed.extend(str(p) for p in in_folder)
    own = _session_dirname(report.session_id)
    for path in recorded:
        if str(path) in report.removed or path.parent.name != own or not is_spill_file(path):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        report.removed.append(str(path))
        if path.parent.name == own:
            try:
                path.parent.rmdir()
            except OSError:
                pass  # other files are still there
    return report


_SAVED = re.compile(rb'"saved_path":"((?:[^"\\]|\\.)*)"')
SCAN_CHUNK = 8 << 20


def referenced_spills(path: str | os.PathLike[str]) -> set[str]:
    """Every spill path a session file's lines name (``"saved_path"`` of a truncation
    record), found by a byte search that parses only the matches: fast enough to run over
    every session that stays when others are pruned."""
    found: set[str] = set()
    try:
        fd = open_regular_readonly(path)
    except OSError:
        return found
    with open(fd, "rb") as f:
        carry = b""
        while True:
            chunk = f.read(SCAN_CHUNK)
            if not chunk:
                break
            data = carry + chunk
            cut = data.rfind(b"\n") + 1  # whole lines only; the rest waits for the next chunk
            lines, carry = (data[:cut], data[cut:]) if cut else (b"", data)
            found.update(_decoded(m) for m in _SAVED.findall(lines))
        found.update(_decoded(m) for m in _SAVED.findall(carry))
    return found


def _decoded(raw: bytes) -> str:
    value = parse_json(b'"' + raw + b'"')
    return value if isinstance(value, str) else ""
