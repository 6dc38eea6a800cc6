"""The search index beside a directory of sessions: ``<WHERE>/.contextree/index.sqlite``.

A cache of the session files, never their truth (they stay the only record; the index can be
deleted at any time and is rebuilt). SQLite from the standard library, with FTS5:

- ``files``: one row per session file: where it is (path, device, inode, size, mtime), how
  far it is indexed (``indexed_bytes``, and CRC-32s of the first bytes and of the bytes just
  before ``indexed_bytes``, so that a file rewritten in place is told from one that grew),
  its session id, what ``SessionInfo`` says of it, its labels and models, its leaf, current
  branch and compactions (to tell, at search time, whether an entry is on the current branch
  and whether a compaction took it out of the model's view).
- ``entries``: every entry of every file: its id, parent, where its line is, role, tool, time.
- ``texts``: an FTS5 table of the entries' texts (see ``_search_text.entry_text``),
  contentless: the text is read back from the session file for a snippet, so the index holds
  no second copy. Rows of a file that was rewritten or deleted are left behind in it (a
  contentless table cannot delete them) and ignored: every match is joined with ``entries``,
  whose row ids are never reused. When they outnumber the live rows, the index is rebuilt.

The tokenizer is ``unicode61``: words of letters and digits, case folded, accents removed.
An identifier is matched as a phrase of its parts (the query is split the same way), so
``test_parse_header`` finds exactly that identifier and ``parse`` finds it too. Terms match
whole words, which FTS5 reads newest first and stops at the limit; ``word*`` and a sha's
first digits match as prefixes (``"3f9a2"*``), which merge every word that starts so. A
trigram tokenizer would also find the middle of a word, at three times the size and a slower
build, with every query a merge; prefix indexes would only speed up one- or two-letter
prefixes.

Archives (``contextree archive``: ``*.archive.zip``, the session inside as
``session.jsonl``) under the directory are indexed too, from the session inside them, so an
archived session is still found; its hits say ``archived`` and name the archive (restore it
with ``contextree unarchive``). An archive is indexed whole whenever it changes.

Refreshing is incremental: a file whose (device, inode, size, mtime) did not change is not
read; one that only grew is read from ``indexed_bytes`` (only complete lines: a line being
written is indexed when it is finished); any other change re-indexes the file; a file that is
gone is dropped; a refresh that reads much writes the index from a thread of its own while it
parses the files (``_write_behind``). Writers of sessions never touch the index. A corrupt index is deleted and
rebuilt, one that another process is refreshing is searched as it is, and where the directory
cannot be written the index is built in a temporary database for the one run; each of these
leaves a note saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

import orjson

from .._files import open_regular_readonly
from .._limits import JSONError, parse_json
from ..errors import InvalidArgument
from ._archives import ArchivedSession, NotAnArchive, is_archive
from ._catalog import NOT_A_SESSION, SessionInfo, Unlisted
from ._describe import session_files, session_stats, utc_stamp
from ._index_db import (
    INDEX_DIR,
    INDEX_FILE,
    connect,
    db_path,
    fs_path,
    index_path,
    prepare,
    remove_index,
    require_own_folder,
    require_plain_file,
)
from ._search_text import (
    SearchFilters,
    SearchHit,
    SearchResults,
    Terms,
    entry_text,
    parse_line,
    parse_query,
    query_terms,
    snippet,
)
from ._write_behind import Table, WriteBehind

__all__ = ["INDEX_DIR", "INDEX_FILE", "IndexReport", "SearchIndex", "drop_index",
           "forget_sessions", "index_path", "leaving_indexes", "require_fts5"]

CHECK_BYTES = 4096  # bytes CRC-checked at the start of a file and before indexed_bytes
FLUSH_ROWS = 2000  # entries written to the index at a time
FLUSH_BYTES = 4 << 20  # ...or bytes of their texts
THREADED_BYTES = 16 << 20  # a refresh that reads more writes the index from a thread
COMMIT_BYTES = 64 << 20  # session bytes read between commits
REBUILD_RATIO = 1.0  # rebuild when dead text rows outnumber live ones by this much
MIN_DEAD = 10_000  # ...and there are at least this many

ProgressFn = Callable[[int, int], None]

def require_fts5() -> None:
    """Refuse, saying what to do, when this Python's SQLite was built without FTS5."""
    try:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        finally:
            con.close()
    except sqlite3.OperationalError as e:
        raise InvalidArgument(
            f"this Python's SQLite ({sqlite3.sqlite_version}) has no FTS5 full-text search "
            f"({e}); search needs it: use a Python built with a standard SQLite (the "
            "python.org and distribution builds have it)") from None


@dataclass
class IndexReport:
    """What a refresh did: files read (and bytes), dropped, passed over, and notes."""

    files: int = 0
    read_bytes: int = 0
    dropped: int = 0
    unlisted: list[Unlisted] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Locked(Exception):
    """Another process holds the index's write lock."""


def _is_locked(e: sqlite3.Error) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def drop_index(root: str | os.PathLike[str]) -> int:
    """Delete the index (and the listing cache it holds) of the sessions under ``root``, and
    ``<root>/.contextree`` if nothing else is in it; the bytes freed. Nothing else there is
    touched. The next ``search`` or ``ls`` builds it again. Also what deletes every trace
    of deleted sessions' words: the index keeps those of a deleted file until rebuilt."""
    path = index_path(root)
    try:
        require_own_folder(path)
    except OSError:
        raise InvalidArgument(f"{path.parent} is a link or not a folder: not contextree's "
                              "index, left as it is") from None
    freed = 0
    for suffix in ("", "-wal", "-shm", "-journal"):
        name = f"{path}{suffix}"
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgument(f"{name} is not a regular file: not contextree's index, "
                                  "left as it is")
        os.unlink(name)
        freed += st.st_size
    with contextlib.suppress(OSError):  # not empty (or not ours): left
        path.parent.rmdir()
    return freed


def forget_sessions(root: str | os.PathLike[str], paths: Iterable[str | os.PathLike[str]],
                    ) -> None:
    """Take deleted session files out of the index of ``root`` and its listing cache, if
    there is an index (none is made); an index that cannot be written now is left to find
    them gone at its next refresh."""
    path = index_path(root)
    if not path.is_file() or path.is_symlink() or path.parent.is_symlink():
        return
    names = [db_path(os.fspath(p)) for p in paths]
    _forget_rows(path, lambda con: names)


@contextlib.contextmanager
def leaving_indexes(target: str | os.PathLike[str]) -> Iterator[list[str]]:
    """Around the deletion of a session file or an archive (``rm``, ``archive``,
    ``unarchive``): once the body has deleted it, take it out of the search index of every
    folder above it that has one, so that a search without a refresh no longer finds it.
    Yields the notes of the indexes that could not be updated (locked, corrupt): each is a
    cache that finds the file gone at its next refresh; never raises for an index, and does
    nothing for a URL or a file the body left in place."""
    notes: list[str] = []
    name = os.fspath(target)
    try:
        before = os.lstat(name)
    except (OSError, ValueError):
        before = None
    yield notes
    if before is None or not stat.S_ISREG(before.st_mode):
        return
    with contextlib.suppress(OSError):
        now = os.lstat(name)
        if (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
            return  # not deleted
    absolute = os.path.abspath(name)
    spellings = {db_path(os.fspath(Path(s))) for s in (name, absolute,
                                                       os.path.relpath(absolute))}
    base = os.path.basename(absolute)

    def pick(con: sqlite3.Connection) -> list[str | bytes]:
        """The stored paths of the deleted file: as it was named, or its (device, inode)
        under the same name (the index was built from another spelling of the folder)."""
        found = [row[0] for row in con.execute(
            "SELECT path FROM files WHERE dev = ? AND ino = ? UNION SELECT path FROM listing "
            "WHERE dev = ? AND ino = ?", [before.st_dev, before.st_ino] * 2)
            if os.path.basename(fs_path(row[0])) == base]
        return sorted(spellings | set(found), key=repr)

    for index in _indexes_above(absolute):
        note = _forget_rows(index, pick)
        if note is not None:
            notes.append(note)


def _indexes_above(path: str) -> Iterator[Path]:
    """The search indexes (regular files) of the folders that hold ``path``, nearest first."""
    folder = os.path.dirname(path)
    while True:
        index = index_path(folder)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(index).st_mode):
                yield index
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _forget_rows(index: Path, pick: Callable[[sqlite3.Connection], list[str | bytes]],
                 ) -> str | None:
    """Delete from the index file ``index`` the files (their entries) and listing rows whose
    stored paths ``pick`` reads, under the index's write lock; a note when that cannot be
    done now (another process refreshes it, or it is not a usable index), else ``None``."""
    try:
        con = connect(str(index))
    except sqlite3.Error as e:
        return f"{index}: not updated ({e}); the next refresh finds the session gone"
    searched = SearchIndex(index.parent.parent, con, temporary=False, notes=[])
    try:
        searched._begin()
        try:
            names = pick(con)
            ids = [row[0] for name in names for row in con.execute(
                "SELECT id FROM files WHERE path = ?", [name])]
            searched._drop_files(ids)
            con.executemany("DELETE FROM listing WHERE path = ?", [[n] for n in names])
            searched._commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
    except _Locked:
        return (f"{index}: another process is refreshing this search index; it finds the "
                "session gone when it next refreshes")
    except (sqlite3.Error, ValueError, TypeError) as e:
        return (f"{index}: not a usable search index ({e}); the next search or `contextree "
                "index` rebuilds it")
    finally:
        con.close()
    return None


class SearchIndex:
    """The index of the sessions under ``root`` (see the module's docstring). ``open``
    never fails for a reason of the index's own: it rebuilds or falls back, with a note."""

    def __init__(self, root: Path, con: sqlite3.Connection, *, temporary: bool,
                 notes: list[str]) -> None:
        self.root = root
        self.con = con
        self.temporary = temporary
        self.notes = notes
        self._next_rowid = 1
        self._next_fid = 1
        self._writes = WriteBehind(con, threaded=False)
        self._batch = _Batch()

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> SearchIndex:
        """The index of ``root``: the file beside the sessions, made if missing, rebuilt if
        corrupt; a temporary one (for this run) where that file cannot be used."""
        require_fts5()
        root = Path(root)
        path = index_path(root)
        notes: list[str] = []
        for attempt in range(2):
            try:
                path.parent.mkdir(exist_ok=True)
                require_plain_file(path)
                con = connect(str(path))
            except (OSError, sqlite3.Error) as e:
                reason = getattr(e, "strerror", None) or str(e)
                notes.append(f"the search index cannot be kept in {path.parent} ({reason}); "
                             "using a temporary one for this run (every session is read)")
                break
            try:
                prepare(con, temporary=False)
                if not os.access(path, os.W_OK):
                    raise PermissionError(errno.EACCES, "the index file is read-only")
                return cls(root, con, temporary=False, notes=notes)
            except sqlite3.Error as e:
                con.close()
                if _is_locked(e):
                    notes.append(f"the search index {path} is being written by another "
                                 "process; using a temporary one for this run")
                    break
                if attempt == 0:
                    notes.append(f"the search index {path} was unusable ({e}); it is rebuilt "
                                 "(it is only a cache: the sessions are untouched)")
                    try:
                        remove_index(path)
                    except OSError as gone:
                        notes.append(f"it cannot be removed ({gone.strerror}); using a "
                                     "temporary one for this run")
                        break
                    continue
                notes.append(f"the search index {path} is still unusable ({e}); using a "
                             "temporary one for this run")
            except PermissionError:
                con.close()
                notes.append(f"the search index {path} cannot be written; using a temporary "
                             "one for this run (every session is read)")
                break
        return cls.temporary_for(root, notes)

    @classmethod
    def temporary_for(cls, root: str | os.PathLike[str],
                      notes: list[str] | None = None) -> SearchIndex:
        """An index of ``root`` in a private temporary database (SQLite keeps it in memory
        and spills to a temporary file; it is gone when closed)."""
        require_fts5()
        con = connect("")
        prepare(con, temporary=True)
        return cls(Path(root), con, temporary=True, notes=list(notes or []))

    def close(self) -> None:
        """Close the database."""
        self.con.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, int]:
        """How much the index holds: session files, texts, and its size in bytes."""
        sessions = self.con.execute("SELECT count(*) FROM files WHERE problem IS NULL"
                                    ).fetchone()[0]
        texts = self.con.execute("SELECT count(*) FROM entries WHERE role IS NOT NULL"
                                 ).fetchone()[0]
        pages = self.con.execute("PRAGMA page_count").fetchone()[0]
        size = self.con.execute("PRAGMA page_size").fetchone()[0]
        return {"sessions": int(sessions), "texts": int(texts), "bytes": int(pages * size)}

    def pending_bytes(self) -> int:
        """About how many bytes of session files a refresh would read now (for a bar)."""
        known = {fs_path(p): n for p, n in self.con.execute(
            "SELECT path, indexed_bytes FROM files")}
        total = 0
        for path in session_files(self.root, []):
            try:
                size = os.stat(path, follow_symlinks=False).st_size
            except OSError:
                continue
            total += max(size - int(known.get(str(path), 0)), 0)
        return total

    # -- refresh -----------------------------------------------------------------------
    def refresh(self, progress: ProgressFn | None = None, *,
                files: Iterable[str | os.PathLike[str]] | None = None) -> IndexReport:
        """Bring the index up to the files under the directory (see the module's docstring);
        ``files``: only those (a caller that knows what changed skips the walk of every
        file). When another process holds the write lock, nothing is done and a note says
        so."""
        report = IndexReport()
        archives: list[tuple[str, os.stat_result]] = []
        found = (list(session_stats(self.root, report.unlisted, archives)) + archives
                 if files is None else _stats_of(files))
        # spelled as the rows are (``Path``'s form: "./a.jsonl" is "a.jsonl"), so that a
        # root of "." finds its files again
        found = [(os.fspath(Path(name)), st) for name, st in found]
        columns = ("SELECT id, path, dev, ino, size, mtime_ns, indexed_bytes, head_crc, "
                   "tail_crc, problem FROM files")
        if files is None:
            known = {fs_path(row[1]): row for row in self.con.execute(columns)}
        else:
            known = {}
            for name in {os.fspath(Path(f)) for f in files}:
                row = self.con.execute(columns + " WHERE path = ?",
                                       [db_path(name)]).fetchone()
                if row is not None:
                    known[name] = row
        work = []
        for name, st in found:
            row = known.get(name)
            if row is None or row[2:6] != (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
                work.append((Path(name), st, row))
        work.sort(key=lambda w: w[1].st_mtime_ns)  # oldest first: row ids follow time
        seen = {name for name, _ in found}
        asked = None if files is None else {os.fspath(Path(f)) for f in files}
        gone = [row[0] for path, row in known.items()
                if path not in seen and (asked is None or path in asked)]
        if not work and not gone:
            self._collect_problems(report)
            return report
        try:
            self._begin()
        except _Locked:
            self.notes.append("the search index is being refreshed by another process: "
                              "searching it as it is (the newest entries may be missing)")
            return report
        total = sum(max(st.st_size - (row[6] if row else 0), 0) for _, st, row in work)
        try:
            self._writes = WriteBehind(self.con, threaded=total >= THREADED_BYTES)
            self._drop_files(gone)
            report.dropped = len(gone)
            done = since_commit = 0
            for path, st, row in work:
                read = self._index_file(path, st, row, report)
                report.files += 1
                done += read
                since_commit += read
                report.read_bytes += read
                if progress is not None:
                    progress(min(done, total), total)
                if since_commit >= COMMIT_BYTES:
                    self._commit()
                    self._begin(wait=True)
                    since_commit = 0
            self._commit()
            self._writes.close()
        except BaseException:
            self._writes.abandon()
            self._batch = _Batch()
            with contextlib.suppress(sqlite3.Error):
                self.con.execute("ROLLBACK")
            raise
        finally:
            self._writes = WriteBehind(self.con, threaded=False)
        self._maybe_rebuild(progress, report)
        self._collect_problems(report)
        return report

    def _collect_problems(self, report: IndexReport) -> None:
        for path, problem in self.con.execute(
                "SELECT path, problem FROM files WHERE problem IS NOT NULL"):
            report.unlisted.append(Unlisted(fs_path(path), problem))

    def _begin(self, wait: bool = False) -> None:
        """Take the write lock (``_Locked`` if another process has it, unless ``wait``),
        and read the next entry row id: row ids are never reused (see the module's
        docstring), so the counter lives in the index, written back by ``_commit``."""
        try:
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if _is_locked(e) and not wait:
                raise _Locked() from None
            raise
        self._next_rowid = int(self._meta("next_rowid"))
        self._next_fid = int(self.con.execute("SELECT coalesce(max(id), 0) + 1 FROM files"
                                              ).fetchone()[0])

    def _sync(self) -> None:
        """Write what is batched and wait for it: before a read of what it changes."""
        batch, self._batch = self._batch, _Batch()
        self._writes.insert(batch.writes())
        self._writes.sync()

    def _commit(self) -> None:
        self._sync()
        self.con.execute("UPDATE meta SET value = ? WHERE key = 'next_rowid'",
                         [str(self._next_rowid)])
        self.con.execute("COMMIT")

    def _drop_files(self, ids: list[int]) -> None:
        for fid in ids:
            self._forget_entries(fid)
            self.con.execute("DELETE FROM files WHERE id = ?", [fid])

    def _forget_entries(self, fid: int) -> None:
        self._sync()
        dead = self.con.execute("SELECT count(*) FROM entries WHERE file = ? AND role IS NOT "
                                "NULL", [fid]).fetchone()[0]
        self.con.execute("DELETE FROM entries WHERE file = ?", [fid])
        if dead:
            self.con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? "
                             "WHERE key = 'dead'", [dead])

    def _maybe_rebuild(self, progress: ProgressFn | None, report: IndexReport) -> None:
        dead = int(self._meta("dead"))
        if dead < MIN_DEAD:
            return  # the common case, without counting the live rows
        live = self.con.execute("SELECT count(*) FROM entries WHERE role IS NOT NULL"
                                ).fetchone()[0]
        if dead < live * REBUILD_RATIO:
            return
        try:
            self._begin()
        except _Locked:
            return
        try:
            self.con.execute("DELETE FROM entries")
            self.con.execute("DELETE FROM files")
            self.con.execute("INSERT INTO texts(texts) VALUES ('delete-all')")
            self.con.execute("UPDATE meta SET value = '0' WHERE key = 'dead'")
            self._commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.con.execute("ROLLBACK")
            raise
        report.notes.append("the index held more dead rows than live ones: rebuilt it")
        again = self.refresh(progress)
        report.files, report.read_bytes = again.files, again.read_bytes

    def _meta(self, key: str) -> str:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return str(row[0]) if row else "0"

    def _index_file(self, path: Path, st: os.stat_result, row: tuple[Any, ...] | None,
                    report: IndexReport) -> int:
        """Index what is new in one file (all of it unless it only grew); the bytes read."""
        if is_archive(path):
            return self._index_archive(path, st, row)
        try:
            fd = open_regular_readonly(path)
        except OSError as e:
            self._set_problem(path, st, row, f"cannot be read ({e.strerror})")
            return 0
        with open(fd, "rb") as f:
            state: _FileState | None = None
            if row is not None and row[9] is None and row[2] == st.st_dev \
                    and row[3] == st.st_ino and st.st_size >= row[6] \
                    and _crc_at(f, 0, CHECK_BYTES, row[6]) == row[7] \
                    and _crc_before(f, row[6]) == row[8]:
                state = self._load_state(row[0])
            if state is None:
                state = _FileState(self._fresh_row(row))
            read = self._read_lines(f, state)
            if state.problem is not None:
                self._forget_entries(state.fid)
            self._save_state(state, path, st, f)
        return read

    def _index_archive(self, path: Path, st: os.stat_result,
                       row: tuple[Any, ...] | None) -> int:
        """Index the session inside an archive, whole (an archive is replaced, never grown);
        the bytes of session read."""
        try:
            archived = ArchivedSession(path)
        except NotAnArchive as e:
            self._set_problem(path, st, row, str(e))
            return 0
        with archived:
            state = _FileState(self._fresh_row(row))
            try:
                read = self._read_lines(archived.stream, state)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
                self._set_problem(path, st, None, f"a damaged archive ({e})", fid=state.fid)
                return 0
            if state.problem is not None:
                self._forget_entries(state.fid)
            self._save_state(state, path, st, archived.stream)
        return read

    def _set_problem(self, path: Path, st: os.stat_result, row: tuple[Any, ...] | None,
                     problem: str, fid: int | None = None) -> None:
        """Record that ``path`` cannot be indexed, and why (in its row, ``fid`` if it has
        a fresh one already)."""
        if fid is None:
            fid = self._fresh_row(row)
        self._batch.add_file((fid, db_path(str(path)), st.st_dev, st.st_ino, st.st_size,
                              st.st_mtime_ns, 0, None, None, problem, *(None,) * 4, 0,
                              *(None,) * 8))

    def _fresh_row(self, row: tuple[Any, ...] | None) -> int:
        """The id of a new ``files`` row (written with the file's state); the old row, if
        any, and its entries are forgotten."""
        if row is not None:
            self._forget_entries(row[0])
            self.con.execute("DELETE FROM files WHERE id = ?", [row[0]])
        fid, self._next_fid = self._next_fid, self._next_fid + 1
        return fid

    def _load_state(self, fid: int) -> _FileState | None:
        self._sync()
        row = self.con.execute(
            "SELECT indexed_bytes, session_id, name, created, last_activity, entries, cwd, "
            "parent_session, metadata, labels, models, leaf, branch, compactions "
            "FROM files WHERE id = ?", [fid]).fetchone()
        if row is None or row[1] is None:
            return None
        state = _FileState(fid)
        (state.indexed, state.session_id, state.name, state.created, state.last,
         state.entries, state.cwd, state.parent_session) = row[:8]
        state.metadata = row[8]
        state.labels = _loads(row[9]) or {}
        state.models = set(_loads(row[10]) or ())
        state.leaf = row[11]
        state.branch = _loads(row[12]) or []
        state.compactions = _loads(row[13]) or {}
        return state

    def _save_state(self, s: _FileState, path: Path, st: os.stat_result,
                    f: IO[bytes]) -> None:
        if s.dirty_branch and s.problem is None:
            s.branch = self._branch(s.fid, s.leaf)
        self._batch.add_file((
            s.fid, db_path(str(path)), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
            s.indexed, _crc_at(f, 0, CHECK_BYTES, s.indexed), _crc_before(f, s.indexed),
            s.problem, s.session_id, s.name, s.created, s.last, s.entries, s.cwd,
            s.parent_session, s.metadata, _dumps(s.labels), _dumps(sorted(s.models)), s.leaf,
            _dumps(s.branch), _dumps(s.compactions)))

    def _branch(self, fid: int, leaf: str | None) -> list[str]:
        """The ids from the root to ``leaf``, from the parents of every entry of the file."""
        self._sync()
        parents = dict(self.con.execute("SELECT id, parent FROM entries WHERE file = ?", [fid]))
        path: list[str] = []
        seen: set[str] = set()
        current = leaf
        while current is not None and current in parents and current not in seen:
            seen.add(current)
            path.append(current)
            current = parents[current]
        path.reverse()
        return path

    def _read_lines(self, f: IO[bytes], s: _FileState) -> int:
        """Index the complete lines from ``s.indexed`` on; the bytes read."""
        start = s.indexed
        f.seek(start)
        offset = start
        next_rowid = self._next_rowid
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # being written: indexed once it is complete
            length = len(raw)
            if offset == 0:
                if not s.header(raw):
                    s.problem = NOT_A_SESSION
                    s.indexed = 0
                    return length
            else:
                found = s.entry(raw, offset, next_rowid)
                if found is not None:
                    if self._batch.add_entry(*found):
                        self._writes.insert(self._batch.writes())
                        self._batch = _Batch()
                    next_rowid += 1
            offset += length
        if offset == 0 and s.session_id is None:
            s.problem = NOT_A_SESSION  # empty, or one line being written
        self._next_rowid = next_rowid
        s.indexed = offset
        return offset - start

    # -- search ------------------------------------------------------------------------
    def search(self, query: str, filters: SearchFilters | None = None, *,
               limit: int | None = 20, fts: bool = False) -> list[SearchHit]:
        """The entries whose text matches ``query`` (words taken literally, or FTS5 syntax
        with ``fts``) that pass ``filters``, newest first: in the order they were indexed,
        which is the order they were written (files are indexed oldest first, and what is
        appended later comes after). FTS5 walks its matches in that order and stops at
        ``limit``, so a common word costs no more than a rare one (ranking by relevance
        would score every match first)."""
        filters = filters or SearchFilters()
        terms, expression = _expression(query, fts)
        pattern = terms.pattern()
        sql = ["SELECT e.file, e.id, e.offset, e.length, e.role, e.tool, e.ts "
               "FROM texts JOIN entries e ON e.rowid = texts.rowid WHERE texts MATCH ?"]
        args: list[Any] = [expression]
        if filters.role is not None:
            sql.append("AND e.role = ?")
            args.append(filters.role)
        if filters.since is not None:
            sql.append("AND e.ts >= ?")
            args.append(filters.since)
        if filters.until is not None:
            sql.append("AND e.ts <= ?")
            args.append(filters.until)
        sql.append("ORDER BY texts.rowid DESC")  # newest first, and stops at the limit
        try:
            cursor = self.con.execute(" ".join(sql), args)
        except sqlite3.OperationalError as e:
            raise _query_error(query, e) from None
        sessions = _Sessions(self.con, filters)
        hits: list[SearchHit] = []
        try:
            for fid, eid, offset, length, role, tool, ts in cursor:
                if not filters.matches_entry(role, tool, ts):
                    continue
                session = sessions.get(fid)
                if session is None:
                    continue
                on_branch, compacted = session.place(eid)
                if filters.on_branch and not on_branch:
                    continue
                shown = session.snippet(eid, offset, length, pattern)
                if shown is None:
                    continue  # the file changed since it was indexed
                hits.append(SearchHit(
                    session_id=session.info.id, target=session.info.target, entry_id=eid,
                    role=role, timestamp=ts, snippet=shown[0], marks=shown[1],
                    on_branch=on_branch, compacted=compacted, tool=tool,
                    session_name=session.info.name, archived=session.archived))
                if limit is not None and len(hits) >= limit:
                    break
        except sqlite3.OperationalError as e:
            raise _query_error(query, e) from None
        finally:
            sessions.close()
        return hits


def _expression(query: str, fts: bool) -> tuple[Terms, str]:
    if not isinstance(query, str):
        raise InvalidArgument(f"a search query is text; got {type(query).__name__}")
    if fts:
        if not query.strip():
            raise InvalidArgument("the FTS5 query is empty")
        words = " ".join(w for w in query.replace('"', " ").split()
                         if w not in ("AND", "OR", "NOT") and not w.startswith("NEAR"))
        return parse_query(words), query
    terms = query_terms(query)
    return terms, terms.fts5()


def check_query(query: str, fts: bool) -> None:
    """Refuse a query with nothing to look for, or (``fts``) one that is not FTS5 syntax,
    before any work is done."""
    _, expression = _expression(query, fts)
    if fts:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
            con.execute("SELECT rowid FROM t WHERE t MATCH ?", [expression]).fetchall()
        except sqlite3.OperationalError as e:
            raise _query_error(query, e) from None
        finally:
            con.close()


def _query_error(query: str, e: sqlite3.OperationalError) -> InvalidArgument:
    reason = str(e).removeprefix("fts5: ")
    return InvalidArgument(f"{query!r} is not a valid FTS5 query ({reason}); quote words "
                           "that hold punctuation, or leave --fts off to search for the "
                           "words as they are")


@dataclass
class _Session:
    """What a search needs of one session file: its info, branch and compaction boundary."""

    info: SessionInfo
    branch: list[str]
    compactions: dict[str, Any]
    _on: set[str] | None = None
    _hidden: set[str] | None = None
    _file: BinaryIO | None = None
    _archive: ArchivedSession | None = None

    @property
    def archived(self) -> bool:
        """Whether the session is inside an archive (``contextree archive``)."""
        return is_archive(self.info.target)

    def place(self, eid: str) -> tuple[bool, bool]:
        """Whether ``eid`` is on the current branch, and whether compaction hid it."""
        if self._on is None:
            self._on = set(self.branch)
            self._hidden = hidden_by_compaction(self.branch, self.compactions)
        assert self._hidden is not None
        return eid in self._on, eid in self._hidden

    def snippet(self, eid: str, offset: int, length: int,
                pattern: Any) -> tuple[str, list[tuple[int, int]]] | None:
        """The hit's snippet, from the entry's line in the file (``None`` if that line no
        longer holds the entry)."""
        try:
            if self.archived:
                if self._archive is None:
                    self._archive = ArchivedSession(self.info.target)
                raw = self._archive.read(offset, length)
            else:
                if self._file is None:
                    self._file = open(open_regular_readonly(self.info.target), "rb")  # noqa: SIM115
                self._file.seek(offset)
                raw = self._file.read(length)
        except (OSError, NotAnArchive):
            return None
        obj = parse_line(raw)
        if not isinstance(obj, dict) or obj.get("id") != eid:
            return None
        found = entry_text(obj)
        return snippet(found[2], pattern) if found else None

    def close(self) -> None:
        """Close the session file (or archive) if it was opened."""
        if self._file is not None:
            self._file.close()
        if self._archive is not None:
            self._archive.close()


class _Sessions:
    """The sessions of a search's hits, read from the index once each."""

    def __init__(self, con: sqlite3.Connection, filters: SearchFilters) -> None:
        self.con = con
        self.filters = filters
        self.known: dict[int, _Session | None] = {}

    def get(self, fid: int) -> _Session | None:
        if fid in self.known:
            return self.known[fid]
        row = self.con.execute(
            "SELECT path, session_id, name, created, last_activity, entries, size, cwd, "
            "parent_session, models, branch, compactions FROM files WHERE id = ? "
            "AND problem IS NULL", [fid]).fetchone()
        session = None
        if row is not None and self.filters.matches_cwd(row[7]) and (
                self.filters.model is None or self.filters.model in (_loads(row[9]) or ())):
            info = SessionInfo(id=row[1], target=fs_path(row[0]), name=row[2], created=row[3],
                               last_activity=row[4], entries=row[5], size=row[6], cwd=row[7],
                               parent_session=row[8])
            session = _Session(info, _loads(row[10]) or [], _loads(row[11]) or {})
        self.known[fid] = session
        return session

    def close(self) -> None:
        for session in self.known.values():
            if session is not None:
                session.close()


def hidden_by_compaction(branch: list[str], compactions: dict[str, Any]) -> set[str]:
    """The entries of ``branch`` that its last compaction took out of the model's view
    (as ``_context.context_entries`` builds the context): all before the compaction but the
    pinned ones and those from its first kept entry on."""
    at = next((i for i in range(len(branch) - 1, -1, -1) if branch[i] in compactions), None)
    if at is None:
        return set()
    first_kept, pinned, retained = compactions[branch[at]]
    before = branch[:at]
    if retained or first_kept is None or first_kept not in before:
        return set(before)
    cut = before.index(first_kept)
    return set(before[:cut]) - set(pinned or ())


_ENTRIES = Table("entries", ("rowid", "file", "id", "parent", "offset", "length", "role",
                            "tool", "ts"))
_TEXTS = Table("texts", ("rowid", "text"))
_FILES = Table("files", ("id", "path", "dev", "ino", "size", "mtime_ns", "indexed_bytes",
                         "head_crc", "tail_crc", "problem", "session_id", "name", "created",
                         "last_activity", "entries", "cwd", "parent_session", "metadata",
                         "labels", "models", "leaf", "branch", "compactions"), replace=True)


class _Batch:
    """Rows not written yet: entries, their texts, and the files they come from."""

    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []
        self.texts: list[tuple[int, str]] = []
        self.files: list[tuple[Any, ...]] = []
        self.text_bytes = 0

    def add_entry(self, row: tuple[Any, ...], text: str | None) -> bool:
        """Add an entry's row and text; True when the batch is full."""
        self.entries.append(row)
        if text is not None:
            self.texts.append((row[0], text))
            self.text_bytes += len(text)
        return len(self.entries) >= FLUSH_ROWS or self.text_bytes >= FLUSH_BYTES

    def add_file(self, row: tuple[Any, ...]) -> None:
        self.files.append(row)

    def writes(self) -> list[tuple[Table, list[tuple[Any, ...]]]]:
        """What to insert, in order: a file's row after its entries (a search that joins
        them sees a file when its entries are there)."""
        return [(_ENTRIES, self.entries), (_TEXTS, self.texts), (_FILES, self.files)]


class _FileState:
    """What indexing one file keeps between lines and between refreshes."""

    def __init__(self, fid: int) -> None:
        self.fid = fid
        self.indexed = 0
        self.problem: str | None = None
        self.session_id: str | None = None
        self.name: str | None = None
        self.created: str | None = None
        self.last: str | None = None
        self.entries = 0
        self.cwd: str | None = None
        self.parent_session: str | None = None
        self.metadata: str | None = None
        self.labels: dict[str, str] = {}
        self.models: set[str] = set()
        self.leaf: str | None = None
        self.branch: list[str] = []
        self.compactions: dict[str, Any] = {}
        self.dirty_branch = False

    def header(self, raw: bytes) -> bool:
        """Read the header line; False when it is not a session header."""
        obj = parse_line(raw)
        if not isinstance(obj, dict) or obj.get("type") != "session" \
                or not isinstance(obj.get("id"), str) \
                or not isinstance(obj.get("created_at"), str):
            return False
        self.session_id = obj["id"]
        self.created = utc_stamp(obj["created_at"])
        self.last = self.created
        cwd = obj.get("cwd")
        self.cwd = cwd if isinstance(cwd, str) else None
        parent = obj.get("parent_session")
        self.parent_session = parent if isinstance(parent, str) else None
        metadata = obj.get("metadata")
        self.metadata = _dumps(metadata) if isinstance(metadata, dict) else None
        return True

    def entry(self, raw: bytes, offset: int,
              rowid: int) -> tuple[tuple[Any, ...], str | None] | None:
        """One entry line: its ``entries`` row and its text (``None`` for a bad line)."""
        obj = parse_line(raw)
        if not isinstance(obj, dict):
            return None
        eid = obj.get("id")
        if not isinstance(eid, str):
            return None
        parent = obj.get("parent_id")
        parent = parent if isinstance(parent, str) else None
        kind = obj.get("type")
        stamp = obj.get("timestamp")
        ts = _stamp(stamp) if isinstance(stamp, str) else ""
        self.entries += 1
        if ts:
            self.last = ts
        if kind == "leaf":
            target = obj.get("target_id")
            self.leaf = target if isinstance(target, str) else None
            self.dirty_branch = True
        else:
            if parent == self.leaf and not self.dirty_branch:
                self.branch.append(eid)
            else:
                self.dirty_branch = True
            self.leaf = eid
        if kind == "label":
            target, label = obj.get("target_id"), obj.get("label")
            if isinstance(target, str):
                if isinstance(label, str):
                    self.labels[target] = label
                else:
                    self.labels.pop(target, None)
        elif kind == "session_info":
            name = obj.get("name")
            self.name = name if isinstance(name, str) else None
        elif kind == "model_change":
            model = obj.get("model_id")
            if isinstance(model, str):
                self.models.add(model)
        elif kind == "compaction":
            pinned = obj.get("pinned")
            self.compactions[eid] = [obj.get("first_kept_entry_id"),
                                     pinned if isinstance(pinned, list) else None,
                                     obj.get("retained_tail") is not None]
        elif kind == "message":
            message = obj.get("message")
            model = message.get("model") if isinstance(message, dict) else None
            if isinstance(model, str):
                self.models.add(model)
        found = entry_text(obj)
        role, tool, text = found if found else (None, None, None)
        return (rowid, self.fid, eid, parent, offset, len(raw), role, tool, ts), text


def _stats_of(files: Iterable[str | os.PathLike[str]]) -> list[tuple[str, os.stat_result]]:
    """The regular files among ``files``, with their ``lstat``."""
    out = []
    for f in files:
        try:
            st = os.lstat(f)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((os.fspath(f), st))
    return out


def _stamp(stamp: str) -> str:
    if len(stamp) == 24 and stamp.endswith("Z"):
        return stamp  # as entries write it
    return utc_stamp(stamp)


def _crc_at(f: IO[bytes], start: int, length: int, limit: int) -> int:
    f.seek(start)
    return zlib.crc32(f.read(max(0, min(length, limit - start))))


def _crc_before(f: IO[bytes], end: int) -> int:
    start = max(0, end - CHECK_BYTES)
    return _crc_at(f, start, end - start, end)


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return parse_json(text)
    except JSONError:
        return None


@contextlib.contextmanager
def opened(root: str | os.PathLike[str], *, temporary: bool = False) -> Iterator[SearchIndex]:
    """The index of ``root`` (``SearchIndex.open``, or a temporary one), closed after."""
    index = SearchIndex.temporary_for(root) if temporary else SearchIndex.open(root)
    try:
        yield index
    finally:
        index.close()


def search_directory(root: str | os.PathLike[str], query: str,
                     filters: SearchFilters | None = None, *, limit: int | None = 20,
                     fts: bool = False, refresh: bool = True) -> SearchResults:
    """Search the sessions under ``root`` through their index (refreshed first unless
    ``refresh`` is false; a temporary index is always built whole)."""
    check_query(query, fts)
    with opened(root) as index:
        report = index.refresh() if refresh or index.temporary else IndexReport()
        hits = index.search(query, filters, limit=limit, fts=fts)
        return SearchResults(hits, notes=index.notes + report.notes,
                             unlisted=report.unlisted)
