"""What ``ls`` read of each session file, kept in the search index's file (``listing``).

A listing of a directory stats every session file and describes again only those whose
(device, inode, size, mtime) changed since they were last described: ten thousand unchanged
sessions are ten thousand ``stat`` calls and one query, not ten thousand files read. The
cache is only ever a shortcut: when it cannot be opened or written (a read-only directory,
another process writing it, a corrupt file) the listing describes every file as it would
without it, and says nothing (the search index reports its own problems when it is used).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

from .._limits import JSONError, parse_json
from ._catalog import SessionInfo, Unlisted
from ._describe import describe

__all__ = ["ListingCache"]

_COLUMNS = ("path", "dev", "ino", "size", "mtime_ns", "info")
_Key = tuple[int, int, int, int]


class ListingCache:
    """The cached ``SessionInfo`` of the session files under one directory."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.rows: dict[str, tuple[_Key, str]] = {
            row[0]: ((row[1], row[2], row[3], row[4]), row[5])
            for row in con.execute("SELECT path, dev, ino, size, mtime_ns, info FROM listing")}
        self.fresh: list[tuple[Any, ...]] = []
        self.seen: set[str] = set()

    @classmethod
    def open(cls, root: Path) -> ListingCache | None:
        """The cache beside the sessions under ``root``, or ``None`` when it is unusable."""
        from ._search_index import _connect, _prepare, index_path

        path = index_path(root)
        con: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(exist_ok=True)
            con = _connect(str(path))
            _prepare(con, temporary=False)
            return cls(con)
        except (OSError, sqlite3.Error):
            if con is not None:
                con.close()
            return None

    def describe(self, path: Path) -> SessionInfo | Unlisted:
        """``describe(path)``, from the cache when the file did not change since."""
        name = str(path)
        self.seen.add(name)
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return describe(path)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        row = self.rows.get(name)
        if row is not None and row[0] == key:
            info = _info(name, row[1])
            if info is not None:
                return info
        found = describe(path)
        if isinstance(found, SessionInfo) and found.size == st.st_size:
            self.fresh.append((name, *key, _encode(found)))
        return found

    def save(self) -> None:
        """Write what was described anew and forget files that are gone; skipped when
        another process holds the write lock (the next listing tries again)."""
        gone = [p for p in self.rows if p not in self.seen]
        try:
            if self.fresh or gone:
                self.con.execute("BEGIN IMMEDIATE")
                try:
                    self.con.executemany("INSERT OR REPLACE INTO listing VALUES "
                                         "(?, ?, ?, ?, ?, ?)", self.fresh)
                    self.con.executemany("DELETE FROM listing WHERE path = ?",
                                         [(p,) for p in gone])
                    self.con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self.con.execute("ROLLBACK")
                    raise
        except sqlite3.Error:
            pass
        finally:
            self.con.close()


_FIELDS = ("id", "name", "created", "last_activity", "entries", "entries_exact", "size",
           "cwd", "parent_session", "metadata", "name_exact")


def _encode(info: SessionInfo) -> str:
    import orjson

    return orjson.dumps([getattr(info, f) for f in _FIELDS]).decode()


def _info(path: str, text: str) -> SessionInfo | None:
    try:
        values = parse_json(text)
    except JSONError:
        return None
    if not isinstance(values, list) or len(values) != len(_FIELDS):
        return None
    fields = dict(zip(_FIELDS, values, strict=True))
    try:
        return SessionInfo(target=path, **fields)
    except TypeError:
        return None
