"""``rm``: delete a session with the tool outputs it spilled, wherever they went.

Truncation records where each original output was saved (``saved_path``). A session run with
its own store (``OverflowStore(dir)``, as the demo does) spills outside the per-user store, so
deleting the session's folder in one store is not enough: every path its entries record is
removed too, if it is a spill file. A path is taken for one only when it is a regular file of
this user named the way the overflow store names its files, so a session file (perhaps
imported from elsewhere) cannot make ``rm`` delete anything else.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .._overflow import OverflowStore, _session_dirname
from .._session import Session
from ..entries import MessageEntry
from .sessions import open_session

# ``OverflowStore`` file names: UTC stamp with milliseconds, random hex, label, ``.txt``.
SPILL_NAME = re.compile(r"\d{8}T\d{9}-[0-9a-f]{10}-[A-Za-z0-9_-]{1,40}\.txt")


@dataclass
class Removal:
    """What ``rm`` deleted besides the session: the spill files, by path."""

    session_id: str
    removed: list[str] = field(default_factory=list)


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
    and every spill file its entries record."""
    with open_session(target, readonly=True) as session:
        report = Removal(session.id)
        recorded = list(recorded_spills(session))
    folder = store.directory / _session_dirname(report.session_id)
    in_folder = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    Session.delete(target, store=store)
    report.removed.extend(str(p) for p in in_folder)
    own = _session_dirname(report.session_id)
    for path in recorded:
        if str(path) in report.removed or not is_spill_file(path):
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
