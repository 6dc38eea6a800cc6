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
from ._index_db import connect, db_path, fs_path, index_path, prepare, require_plain_file

__all__ = ["ListingCache"]

_COLUMNS = ("path", "dev", "ino", "size", "mtime_ns", "id", "name", "created", "last_activity",
            "entries", "entries_exact", "bytes", "cwd", "parent_session", "metadata",
            "name_exact")


class ListingCache:
    """The cached ``SessionInfo`` of the session files under one directory."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.rows: dict[str, tuple[Any, ...]] = {
            fs_path(row[0]): row
            for row in con.execute(f"SELECT {', '.join(_COLUMNS)} FROM listing")}
        self.fresh: list[tuple[Any, ...]] = []
        self.seen: set[str] = set()

    @classmethod
    def open(cls, root: Path) -> ListingCache | None:
        """The cache beside the sessions under ``root``, or ``None`` when it is unusable."""
        path = index_path(root)
        con: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(exist_ok=True)
            require_plain_file(path)
            con = connect(str(path))
            prepare(con, temporary=False)
            return cls(con)
        except (OSError, sqlite3.Error):
            if con is not None:
                con.close()
            return None

    def describe(self, path: str, st: os.stat_result) -> SessionInfo | Unlisted:
        """``describe(path)``, from the cache when the file's ``lstat`` (``st``, from the
        walk) is what it was when it was last described."""
        self.seen.add(path)
        row = self.rows.get(path)
        if row is not None and row[1:5] == (st.st_dev, st.st_ino, st.st_size,
                                            st.st_mtime_ns):
            ok, metadata = _metadata(row[14])
            if ok:
                return SessionInfo(row[5], path, row[6], row[7], row[8], row[9],
                                   bool(row[10]), row[11], row[12], row[13], metadata,
                                   bool(row[15]))
        found = describe(Path(path))
        if isinstance(found, SessionInfo) and found.size == st.st_size:
            self.fresh.append((db_path(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                               found.id, found.name, found.created, found.last_activity,
                               found.entries, found.entries_exact, found.size, found.cwd,
                               found.parent_session,
                               None if found.metadata is None else _json(found.metadata),
                               found.name_exact))
        return found

    def save(self) -> None:
        """Write what was described anew and forget files that are gone; skipped when
        another process holds the write lock (the next listing tries again)."""
        gone = [p for p in self.rows if p not in self.seen]
        try:
            if self.fresh or gone:
                self.con.execute("BEGIN IMMEDIATE")
                try:
                    marks = ", ".join("?" * len(_COLUMNS))
                    self.con.executemany(f"INSERT OR REPLACE INTO listing VALUES ({marks})",
                                         self.fresh)
                    self.con.executemany("DELETE FROM listing WHERE path = ?",
                                         [(db_path(p),) for p in gone])
                    self.con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self.con.execute("ROLLBACK")
                    raise
        except sqlite3.Error:
            pass
        finally:
            self.con.close()


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def _metadata(text: str | None) -> tuple[bool, dict[str, Any] | None]:
    """Whether the cached metadata reads back, and the header's metadata (or ``None``)."""
    if text is None:
        return True, None
    try:
        value = parse_json(text)
    except JSONError:
        return False, None
    return (True, value) if isinstance(value, dict) else (False, None)
