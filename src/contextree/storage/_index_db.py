"""The SQLite file beside a directory of sessions, ``<WHERE>/.contextree/index.sqlite``: where
it is, how it is opened, and its schema. It holds the search index (``_search_index``) and the
listing cache (``_listing_cache``); this module is what both need, so that ``ls`` opens the
file without loading search.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
from pathlib import Path

__all__ = ["BUSY_MS", "INDEX_DIR", "INDEX_FILE", "VERSION", "connect", "db_path", "fs_path",
           "index_path", "prepare", "remove_index", "require_own_folder",
           "require_plain_file"]

INDEX_DIR = ".contextree"
INDEX_FILE = "index.sqlite"
VERSION = "1"
BUSY_MS = 100  # how long a refresh waits for another process's write lock

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    """CREATE TABLE files (
        id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,
        dev INTEGER, ino INTEGER, size INTEGER, mtime_ns INTEGER,
        indexed_bytes INTEGER NOT NULL DEFAULT 0, head_crc INTEGER, tail_crc INTEGER,
        problem TEXT,
        session_id TEXT, name TEXT, created TEXT, last_activity TEXT,
        entries INTEGER NOT NULL DEFAULT 0, cwd TEXT, parent_session TEXT, metadata TEXT,
        labels TEXT, models TEXT, leaf TEXT, branch TEXT, compactions TEXT)""",
    """CREATE TABLE entries (
        rowid INTEGER PRIMARY KEY, file INTEGER NOT NULL, id TEXT NOT NULL, parent TEXT,
        offset INTEGER NOT NULL, length INTEGER NOT NULL,
        role TEXT, tool TEXT, ts TEXT)""",
    "CREATE INDEX entries_file ON entries (file)",
    "CREATE VIRTUAL TABLE texts USING fts5(text, content='', "
    "tokenize='unicode61 remove_diacritics 2')",
    # FTS5 writes its pending terms out as a new segment each time they pass 1 MB, and merges
    # four segments of a level into one: pending terms of 16 MB and merges of 16 segments
    # rewrite the index fewer times, and a build of 1 GB of sessions takes a fifth less
    # time, its queries none more (bench/bench_search.py)
    "INSERT INTO texts (texts, rank) VALUES ('hashsize', 16777216)",
    "INSERT INTO texts (texts, rank) VALUES ('automerge', 16)",
    """CREATE TABLE listing (
        path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, size INTEGER, mtime_ns INTEGER,
        id TEXT NOT NULL, name TEXT, created TEXT, last_activity TEXT, entries INTEGER,
        entries_exact INTEGER, bytes INTEGER, cwd TEXT, parent_session TEXT, metadata TEXT,
        name_exact INTEGER)""",
)


def index_path(root: str | os.PathLike[str]) -> Path:
    """Where the index of the sessions under ``root`` is kept."""
    return Path(root) / INDEX_DIR / INDEX_FILE


def connect(path: str) -> sqlite3.Connection:
    """A connection in autocommit mode that waits ``BUSY_MS`` for another writer, usable
    from any thread."""
    con = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None,
                          check_same_thread=False)
    con.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
    return con


def prepare(con: sqlite3.Connection, temporary: bool) -> None:
    """Check the schema (create it when the file is new); ``sqlite3.DatabaseError`` when the
    file is not a usable index."""
    if not temporary:
        mode = con.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            con.execute("PRAGMA journal_mode = WAL")  # readers never wait for a refresh
    con.execute("PRAGMA synchronous = OFF")  # a cache: a crash is a rebuild, not a loss
    con.execute("PRAGMA cache_size = -32768")  # 32 MB of pages: bounded, and big merges
    row = con.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone()
    if row is not None:
        version = con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        if version is not None and version[0] == VERSION:
            return
        raise sqlite3.DatabaseError(f"an index of another version ({version})")
    con.execute("BEGIN IMMEDIATE")
    try:
        if con.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone():
            con.execute("ROLLBACK")  # another process made it meanwhile
            return prepare(con, temporary)
        for statement in _SCHEMA:
            con.execute(statement)
        con.executemany("INSERT INTO meta VALUES (?, ?)",
                        [("version", VERSION), ("next_rowid", "1"), ("dead", "0")])
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        raise
    return None


def require_plain_file(path: Path) -> None:
    """Refuse (``OSError``) an index path that is a FIFO, a device, a folder or a link, or
    whose folder (``.contextree``) is a link or no folder: SQLite would follow or block on
    it, and write (or delete its journal) wherever the link points."""
    require_own_folder(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "the index path is not a regular file", str(path))


def require_own_folder(path: Path) -> None:
    """Refuse (``OSError``) an index whose folder is a link (or not a folder): whatever is
    done there would be done where the link points."""
    try:
        mode = os.lstat(path.parent).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise OSError(errno.EINVAL, "the index folder is a link or not a folder",
                      str(path.parent))


def remove_index(path: Path) -> None:
    """Delete an index file and SQLite's files beside it (``-wal``, ``-shm``)."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def db_path(path: str) -> str | bytes:
    """A path as the index stores it: text, or its bytes when the name is not UTF-8 (a
    file name Python holds with surrogate escapes, which SQLite's text cannot take)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape")
    return path


def fs_path(value: str | bytes) -> str:
    """A stored path back as Python names the file (``db_path`` undone)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
