"""``PostgresStorage``: one session in a database shared by processes on many machines.

Writes: every ``append`` is one call of the ``contextree_append`` SQL function (created by
the migration), so one statement, one transaction and one round trip. It locks the session
row first (``SELECT ... FOR UPDATE``), so appends to one session are serialized across
processes and machines, and ``leaf_id`` in the session row always names the leaf of the last
commit; the lock is held only while the server runs the function. Because ``Session`` builds
each entry with ``parent_id = storage.leaf_id``, a writer whose view of the leaf is stale
would fork the conversation. ``append`` therefore *re-parents*: if the entry's parent is the
leaf the calling thread last read through this object (``leaf_id``, or its own last append),
and another writer has moved the leaf since, the entry is stored as a child of the current
leaf instead (the server fills the parent into the line under the lock; ``get`` returns the
stored entry). A branch summary, whose parent is by definition its ``from_id``, is never
re-parented. A caller that wants a fork to be an error passes ``expected_leaf=`` and gets
``LeafConflict`` when the leaf is not that entry at commit time. A connection
lost mid-append is retried once on a fresh connection; the retry first checks (under the
lock) whether the lost transaction committed, so an entry is never stored twice or in part.
A client killed mid-append leaves the server to finish or abort that one statement: the
entry is then stored whole or not at all.

``batch()`` runs the appends inside it in one transaction on one connection: they commit
together or not at all, and the session row stays locked from the first append to the end
of the block. ``durable=False`` commits without waiting for the WAL to reach disk
(``synchronous_commit = off`` for contextree's transactions only): a crash of the server may
lose the last commits, never part of one.

Reads: entries never change, so entries read once are cached by id for good. The leaf, name
and length come from the session row (one small query per call, so they are always current);
``path`` walks the cache and fetches what is missing with one recursive query; ``entries``,
``labels`` and the like fetch only what was appended since their last call.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from msgspec import UNSET, UnsetType

from ...entries import (
    AnyEntry,
    LabelEntry,
    LeafEntry,
    SessionHeader,
    SessionInfoEntry,
    line_problem,
    to_dict,
)
from ...errors import (
    ContextreeError,
    DuplicateId,
    EntryNotFound,
    InvalidArgument,
    InvalidEntry,
    LeafConflict,
    MissingParent,
    ParentCycle,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionNotFound,
    StorageFailure,
)
from .._base import (
    LabelBook,
    Outline,
    StorageHealth,
    TreeIndex,
    anchored,
    check_expected_leaf,
    check_header,
    check_refs,
    check_session_id,
    unencodable,
    verify_links,
    with_parent,
)
from ._codec import (
    created_at,
    decode_entry,
    decode_header,
    decode_many,
    entry_row,
    line_text,
)
from ._connection import Db, describe, hold_in_batch, setup_connection
from ._driver import Connection, Target, psycopg
from ._errors import first_line, is_connection_lost, mapped, storage_error
from ._schema import require_schema, trigrams_on
from ._tables import APPEND_FUNCTION, ENTRIES, SESSIONS, SETTINGS, TRIGRAMS
from ._words import client_encoding, search_columns

__all__ = ["PostgresStorage"]

T = TypeVar("T")



_ROW = f"SELECT leaf_id, name, entry_count FROM {SESSIONS} WHERE id = %s"
_APPEND = (f"SELECT r_status, r_leaf, r_parent, r_name, r_count, r_line FROM {APPEND_FUNCTION}("
           + ", ".join(["%s"] * 17) + ")")
# The session's size as JSON lines (header included), as a JSONL file would hold it.
_HEALTH = (f"SELECT s.entry_count, octet_length(s.header) + 1 + coalesce((SELECT "
           f"sum(octet_length(e.line) + 1) FROM {ENTRIES} e WHERE e.session_id = s.id), 0) "
           f"FROM {SESSIONS} s WHERE s.id = %s")


@dataclass
class _Saved:
    """What a batch that rolls back restores: the state its appends and reads changed."""

    leaf: str | None
    name: str | None
    count: int
    seen: str | None
    cached: int
    order: int
    order_seq: int
    labels: LabelBook
    labels_seq: int
# The path from an entry to the root, one index lookup per step; the depth bound stops a
# cycle (impossible through this module, but the table could be edited by hand).
_PATH = f"""
WITH RECURSIVE p (id, parent_id, line, depth) AS (
    SELECT id, parent_id, line, 0 FROM {ENTRIES} WHERE session_id = %(s)s AND id = %(leaf)s
  UNION ALL
    SELECT e.id, e.parent_id, e.line, p.depth + 1
    FROM p JOIN {ENTRIES} e ON e.session_id = %(s)s AND e.id = p.parent_id
    WHERE p.depth <= (SELECT entry_count FROM {SESSIONS} WHERE id = %(s)s)
)
SELECT id, parent_id, line, depth FROM p"""  # sorted in Python: cheaper than sorting wide rows


class PostgresStorage:
    """A session stored in PostgreSQL. Create with ``create``, open with ``open``.

    ``target`` is a URL/conninfo (the storage then owns a small connection pool and closes
    it in ``close``), a ``psycopg_pool.ConnectionPool`` or a ``psycopg.Connection`` (both left
    open): ``Session.open(PostgresStorage.open(pool, session_id))`` runs a session on the
    application's own pool. Connections are switched to autocommit: every statement
    contextree sends is its own transaction, except inside ``batch()``. A lost connection is
    replaced and the call retried once when there is a pool to take a fresh one from; with a
    bare connection (or inside a batch) it is reported as ``StorageFailure``.

    Safe to use from several processes and machines at once (see the module docstring for
    how concurrent appends are ordered). One object may be shared by threads.
    """

    def __init__(self, db: Db, header: SessionHeader, location: str, *,
                 readonly: bool, leaf_id: str | None, name: str | None, count: int,
                 durable: bool = True, trigrams: bool = False) -> None:
        self._db = db
        self._durable = durable
        self._trigrams = trigrams  # the trigram index was on at open: send the words
        self._header = header
        self._id = header.id
        self._location = location
        self._readonly = readonly
        self._leaf = leaf_id
        self._opened_leaf = leaf_id
        self._seen = threading.local()  # .leaf: the leaf this thread last read or wrote
        self._name = name
        self._count = count
        self._closed = False
        self._lock = threading.RLock()
        self._cache: dict[str, AnyEntry] = {}
        self._order: list[str] = []  # ids of every entry with seq <= _order_seq, in order
        self._order_seq = 0
        self._labels = LabelBook()
        self._labels_seq = 0
        self._tx: Connection | None = None  # the connection of the batch in progress
        self._after_commit: Callable[[Connection], None] | None = None  # for fault tests

    # -- creating and opening ----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        target: Target,
        header: SessionHeader,
        entries: Iterable[AnyEntry] = (),
        *,
        durable: bool = True,
    ) -> PostgresStorage:
        """Create a session (``SessionExists`` if its id is taken), with optional entries.

        The header and ``entries`` (checked like an append: unique ids, parents that exist)
        are written in one transaction: the session appears complete or not at all. This is
        how ``contextree import`` copies a JSONL session losslessly. ``durable=False``: see
        the module docstring.
        """
        index = TreeIndex(check_header(header), "")
        pending: list[tuple[AnyEntry, int | None]] = []
        batch = list(entries)
        for entry in batch:
            forward = entry.parent_id is not None and entry.parent_id not in index.by_id
            index.check(entry, forward_parent_ok=True)
            if forward:
                pending.append((entry, None))
            index.add(entry)
        verify_links(index, pending)
        db = Db(target)
        try:
            db.open_pool()  # it connects in the background while we check the schema
            with mapped("could not create the session"), setup_connection(db, target) as conn:
                require_schema(conn)
                location = f"{describe(conn)}#{header.id}"
                with conn.transaction():
                    if not durable:
                        conn.execute("SET LOCAL synchronous_commit = off")
                    rows = [entry_row(header.id, entry) for entry in batch]
                    head = line_text(header)
                    size = sum(len(r[5].encode()) + 1 for r in rows) + len(head.encode()) + 1
                    cur = conn.execute(
                        f"INSERT INTO {SESSIONS} (id, header, created_at, name, leaf_id, "
                        "entry_count, bytes) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (id) DO NOTHING",
                        [header.id, head, created_at(header), index.name,
                         index.leaf_id, len(batch), size],
                    )
                    if cur.rowcount != 1:
                        raise SessionExists(f"a session with id {header.id!r} is "
                                           "already in this database; open it or choose "
                                           "another id", path=location)
                    # read after the insert above, which waits while the trigram index
                    # is being turned on (``_schema``)
                    trigrams = trigrams_on(conn)
                    if batch:
                        with conn.cursor().copy(
                            f"COPY {ENTRIES} (session_id, id, parent_id, type, target_id, "
                            "line, search, search_text) FROM STDIN"
                        ) as copy:
                            for row in rows:
                                copy.write_row((*row, *search_columns(row[5],
                                                                      words=trigrams)))
        except BaseException:
            db.close()
            raise
        storage = cls(db, header, location, readonly=False, leaf_id=index.leaf_id,
                      name=index.name, count=len(batch), durable=durable, trigrams=trigrams)
        for entry in batch:
            storage._cache[entry.id] = entry
        return storage

    @classmethod
    def open(cls, target: Target, session_id: str, *, readonly: bool = False,
             durable: bool = True) -> PostgresStorage:
        """Open a session by id. Cheap: entries are read when first needed, then cached."""
        check_session_id(session_id)
        db = Db(target)
        try:
            db.open_pool()  # it connects in the background while we check the schema
            with mapped("could not open the session"), setup_connection(db, target) as conn:
                require_schema(conn)
                location = f"{describe(conn)}#{session_id}"
                row = conn.execute(
                    f"SELECT header, leaf_id, name, entry_count, EXISTS (SELECT 1 FROM "
                    f"{SETTINGS} WHERE name = %s) FROM {SESSIONS} WHERE id = %s",
                    [TRIGRAMS, session_id],
                ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r} in this database; "
                                   "create it with PostgresStorage.create (or list them with "
                                   "list_sessions)", path=location)
            header = decode_header(row[0], location)
        except BaseException:
            db.close()
            raise
        return cls(db, header, location, readonly=readonly, leaf_id=row[1], name=row[2],
                   count=int(row[3]), durable=durable, trigrams=bool(row[4]))

    def close(self) -> None:
        """Release the connection pool if this object opened it (a given pool stays open)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __del__(self) -> None:
        # A pool this object opened holds connections (sockets) and threads: collected
        # unclosed, it is closed here, with a ResourceWarning as ``io`` gives.
        if getattr(self, "_closed", True) or not getattr(getattr(self, "_db", None), "owned",
                                                         False):
            return
        try:
            warnings.warn(f"unclosed PostgreSQL session storage {self._location}: it was "
                          "closed when collected; close it with close() or a with block",
                          ResourceWarning, source=self, stacklevel=2)
            self.close()
        except Exception:
            pass

    def delete(self) -> None:
        """Delete the session and all its entries from the database, then close."""
        if self.readonly:
            raise ReadOnlySession("this session was opened read-only (or is closed); open "
                                  "it with readonly=False to delete it", path=self._location)
        with self._lock:
            if self._tx is not None:
                raise InvalidArgument("delete() inside a batch: end the batch first",
                                      path=self._location)
            self._run(lambda conn, _retry: conn.execute(
                f"DELETE FROM {SESSIONS} WHERE id = %s", [self._id]),
                "could not delete the session")
            self.close()

    def health(self) -> StorageHealth:
        """Entry count and the session's size as JSON lines (one query). The database's
        constraints keep out anything a file would quarantine, so nothing is set aside."""
        with self._lock:
            row = self._query(lambda c: c.execute(_HEALTH, [self._id]).fetchone(),
                              "could not read the session")
        if row is None:
            raise SessionNotFound("the session was deleted from the database",
                                  path=self._location)
        return StorageHealth(entries=int(row[0]), size=int(row[1]))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Run the appends inside the block in one transaction: all are stored, or (on an
        exception, or a failed commit) none, and this object forgets them too.

        The session row stays locked from the first append until the block ends, so keep
        batches short; other threads using this object wait for the block to end.
        """
        with self._lock:
            if self._tx is not None:  # nested: part of the enclosing batch
                yield
                return
            if self.readonly:
                raise ReadOnlySession("this session was opened read-only (or is closed)",
                                      path=self._location)
            saved = self._save()
            try:
                with mapped("could not commit the batch", self._location), \
                        self._db.connection() as conn, conn.transaction():
                    self._tx = conn
                    hold_in_batch(id(self), conn)  # a child of fork() cuts it off
                    try:
                        yield
                    finally:
                        self._tx = None
                        hold_in_batch(id(self), None)
            except BaseException:
                self._restore(saved)
                raise

    def __enter__(self) -> PostgresStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- identity -----------------------------------------------------------------------------
    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def session_id(self) -> str:
        return self._id

    @property
    def location(self) -> str:
        """``postgresql://user@host:port/db#session_id`` (never the password)."""
        return self._location

    @property
    def readonly(self) -> bool:
        return self._readonly or self._closed

    @property
    def leaf_id(self) -> str | None:
        """The leaf as committed in the database now (one small query)."""
        with self._lock:
            self._refresh_row()
            self._seen.leaf = leaf = self._leaf
        return leaf

    def _seen_leaf(self) -> str | None:
        """The leaf this thread last read (``leaf_id``) or made (``append``), else at open."""
        leaf: str | None = getattr(self._seen, "leaf", self._opened_leaf)
        return leaf

    @property
    def name(self) -> str | None:
        self._refresh_row()
        return self._name

    def __len__(self) -> int:
        self._refresh_row()
        return self._count

    # -- writing --------------------------------------------------------------------------------
    def append(self, entry: AnyEntry, *, expected_leaf: str | UnsetType | None = UNSET,
               on_leaf: bool = False) -> None:
        """Store one entry in its own transaction (or the batch's); it becomes the leaf (or
        moves it).

        With ``expected_leaf`` (left out: ``msgspec.UNSET``) the append fails with ``LeafConflict`` unless the leaf is that
        entry at commit time. Without it, an entry whose parent is the leaf this thread last
        saw (or any entry, with ``on_leaf``) is re-parented onto the current leaf if another
        writer moved it meanwhile.
        """
        if self.readonly:
            raise ReadOnlySession("this session was opened read-only (or is closed); "
                               "open it with readonly=False to write", path=self._location)
        eid = entry.id
        if not isinstance(eid, str) or not eid:
            raise InvalidEntry("entry id must be a non-empty string",
                               path=self._location)
        check_refs(eid, entry.parent_id,
                   entry.target_id if isinstance(entry, LeafEntry) else None, self._location)
        check_expected_leaf(expected_leaf)
        problem = line_problem(entry)
        if problem is not None:
            raise InvalidEntry(f"entry {eid!r} cannot be stored: {problem}",
                               path=self._location)
        with self._lock:
            try:
                stored, leaf, name, count = self._run(
                    lambda conn, retry: self._append_tx(conn, entry, expected_leaf, retry,
                                                       on_leaf),
                    "could not append the entry", entry=entry,
                )
            except (TypeError, ValueError) as e:
                if isinstance(e, ContextreeError):  # a duplicate id, a missing parent...
                    raise
                raise unencodable(entry, self._location, e) from None  # no JSON form
            self._cache[stored.id] = stored
            self._leaf, self._count = leaf, count
            self._seen.leaf = leaf
            if name is not None:
                self._name = name

    def _append_tx(self, conn: Connection, entry: AnyEntry, expected: str | UnsetType | None,
                   retry: bool, on_leaf: bool = False,
                   ) -> tuple[AnyEntry, str | None, str | None, int]:
        """One call of ``contextree_append``: lock, decide the parent, insert, update, commit.

        When the entry may be re-parented its line is sent with a placeholder for the
        parent, which the server fills in under the lock.
        """
        check = not isinstance(expected, UnsetType)
        seen = self._seen_leaf()
        reparent = (not check and (on_leaf or entry.parent_id == seen)
                    and not anchored(entry))
        placeholder: str | None = None
        line = ""
        if reparent:
            token = f"contextree-parent-{secrets.token_hex(12)}"
            line = line_text(with_parent(entry, token))
            placeholder = f'"{token}"'
            if line.count(placeholder) != 1:  # pragma: no cover - 96 random bits
                reparent, placeholder = False, None
        if not reparent:
            line = line_text(entry)
        is_leaf = isinstance(entry, LeafEntry)
        # the words only while the trigram index is on (the server reads them if it is on
        # now and was not when this object opened the session)
        vector, words = search_columns(line, words=self._trigrams, entry=entry,
                                       encoding=client_encoding(conn))
        row = conn.execute(_APPEND, [
            self._id, entry.id, entry.parent_id, entry.type, is_leaf,
            entry.target_id if isinstance(entry, LeafEntry) else None, line,
            entry.name if isinstance(entry, SessionInfoEntry) else None,
            check, None if isinstance(expected, UnsetType) else expected,
            reparent, seen, placeholder, retry, self._durable, vector, words,
        ]).fetchone()
        if self._after_commit is not None:
            self._after_commit(conn)
        assert row is not None
        status, leaf, parent, name, count, stored_line = row
        if status == "ok":
            stored = entry if parent == entry.parent_id else with_parent(entry, parent)
            return stored, leaf, name, int(count)
        if status == "done":  # an entry with this id is there: our lost commit, or not?
            stored = decode_entry(stored_line, self._location)
            mine = with_parent(entry, stored.parent_id) if reparent else entry
            if stored_line != line_text(mine) and to_dict(stored) != to_dict(mine):
                # Another writer stored a different entry under this id (the lost attempt
                # did not commit): a duplicate id, which the caller can retry with a new id.
                raise DuplicateId(f"entry id {entry.id!r} is already used in this session "
                                  "by a different entry (found when retrying after a lost "
                                  "connection); use a new id", path=self._location)
            return stored, leaf, name, int(count)
        raise self._refusal(status, entry, leaf, parent, expected)

    def _refusal(self, status: str, entry: AnyEntry, leaf: str | None, parent: str | None,
                 expected: str | UnsetType | None) -> SessionError:
        where = self._location
        if status == "duplicate_id":
            return DuplicateId(f"entry id {entry.id!r} is already used in "
                                "this session; every id must be unique (use a new id)",
                                path=where)
        if status == "conflict":
            return LeafConflict(f"the leaf is {leaf!r}, not the expected "
                                f"{expected!r}: another writer appended first; read the new "
                                "leaf and retry", path=where)
        if status == "missing_parent":
            return MissingParent(f"entry {entry.id!r} has parent {parent!r}, "
                                "which is not an entry of this session", path=where)
        if status == "missing_target":
            target = entry.target_id if isinstance(entry, LeafEntry) else None
            return MissingParent(f"leaf entry {entry.id!r} moves to "
                                f"{target!r}, which does not exist", path=where)
        if status == "not_found":
            return SessionNotFound("the session was deleted from the database",
                                path=where)
        return StorageFailure(f"unexpected append status {status!r}", path=where)

    # -- reading --------------------------------------------------------------------------------
    def get(self, entry_id: str) -> AnyEntry | None:
        """An entry by id: from the cache, else one query (entries never change)."""
        entry = self._cache.get(entry_id)
        if entry is not None or not isinstance(entry_id, str):
            return entry
        with self._lock:
            row = self._query(
                lambda c: c.execute(f"SELECT line FROM {ENTRIES} WHERE session_id = %s "
                                    "AND id = %s", [self._id, entry_id]).fetchone(),
                "could not read the entry",
            )
            if row is None:
                return None
            return self._remember(entry_id, row[0])

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.get(entry_id) is not None

    def path(self, leaf_id: str | None) -> list[AnyEntry]:
        """Entries from the root to ``leaf_id``: the cached part, plus one recursive query."""
        if leaf_id is None:
            return []
        with self._lock:
            out: list[AnyEntry] = []
            current: str | None = leaf_id
            cache = self._cache
            while current is not None:
                entry = cache.get(current)
                if entry is None:
                    break
                out.append(entry)
                current = entry.parent_id
                if len(out) > len(cache):
                    raise ParentCycle(f"parent links from {leaf_id!r} form a cycle",
                                       path=self._location)
            if current is not None:
                missing = current
                rows = self._query(
                    lambda c: c.execute(_PATH, {"s": self._id, "leaf": missing}).fetchall(),
                    "could not read the path",
                )
                if not rows:
                    raise EntryNotFound(f"entry {missing!r} is not in this "
                                       "session", path=self._location)
                rows.sort(key=lambda r: r[3], reverse=True)  # root first; O(n) when in order
                if rows[0][1] is not None:
                    raise ParentCycle(f"parent links from {leaf_id!r} form a cycle "
                                       "or reach a missing entry", path=self._location)
                fetched = self._remember_many([(r[0], r[2]) for r in rows])
                fetched.reverse()
                out.extend(fetched)
            out.reverse()
            return out

    def entries(self) -> Iterator[AnyEntry]:
        """Every entry in append order (fetching only those appended since the last call)."""
        with self._lock:
            rows = self._query(
                lambda c: c.execute(f"SELECT seq, id, line FROM {ENTRIES} WHERE session_id = %s "
                                    "AND seq > %s ORDER BY seq",
                                    [self._id, self._order_seq]).fetchall(),
                "could not read the entries",
            )
            if rows:
                self._remember_many([(r[1], r[2]) for r in rows])
                self._order.extend(r[1] for r in rows)
                self._order_seq = int(rows[-1][0])
            cache = self._cache
            return iter([cache[i] for i in self._order])

    def children(self, entry_id: str | None) -> Sequence[str]:
        """Ids of the entries whose parent is ``entry_id``, oldest first (one indexed query)."""
        with self._lock:
            if entry_id is None:
                sql = (f"SELECT id, line FROM {ENTRIES} WHERE session_id = %s "
                       "AND parent_id IS NULL ORDER BY seq")
                params: list[Any] = [self._id]
            else:
                sql = (f"SELECT id, line FROM {ENTRIES} WHERE session_id = %s "
                       "AND parent_id = %s ORDER BY seq")
                params = [self._id, entry_id]
            rows = self._query(lambda c: c.execute(sql, params).fetchall(),
                               "could not read the children")
            self._remember_many([(r[0], r[1]) for r in rows])
            return tuple(r[0] for r in rows)

    def outline(self) -> list[Outline]:
        """Every entry's id, parent id, type and leaf-move target, in append order (one
        query of columns; no line is read)."""
        with self._lock:
            rows = self._query(
                lambda c: c.execute(f"SELECT id, parent_id, type, target_id FROM {ENTRIES} "
                                    "WHERE session_id = %s ORDER BY seq",
                                    [self._id]).fetchall(),
                "could not read the tree",
            )
        return [(eid, parent, kind, target if kind == "leaf" else None)
                for eid, parent, kind, target in rows]

    def find(self, entry_type: str) -> list[AnyEntry]:
        """Entries of one type, in append order (one indexed query)."""
        with self._lock:
            rows = self._query(
                lambda c: c.execute(f"SELECT id, line FROM {ENTRIES} WHERE session_id = %s "
                                    "AND type = %s ORDER BY seq",
                                    [self._id, entry_type]).fetchall(),
                "could not find entries",
            )
            return self._remember_many([(r[0], r[1]) for r in rows])

    def label(self, entry_id: str) -> str | None:
        return self.labels().get(entry_id)

    def labels(self) -> dict[str, str]:
        """Current labels by entry id (reading only label entries new since the last call)."""
        with self._lock:
            rows = self._query(
                lambda c: c.execute(f"SELECT seq, id, line FROM {ENTRIES} WHERE session_id = %s "
                                    "AND type = 'label' AND seq > %s ORDER BY seq",
                                    [self._id, self._labels_seq]).fetchall(),
                "could not read the labels",
            )
            for entry in self._remember_many([(r[1], r[2]) for r in rows]):
                if isinstance(entry, LabelEntry):
                    self._labels.apply(entry.target_id, entry.label)
            if rows:
                self._labels_seq = int(rows[-1][0])
            return dict(self._labels.current)

    def label_holders(self, label: str) -> list[str]:
        """Every entry that holds ``label``, oldest first (see ``LabelBook``)."""
        with self._lock:
            self.labels()
            return self._labels.holders(label)

    def ambiguous_labels(self) -> dict[str, list[str]]:
        """Labels more than one entry holds: label -> entry ids, oldest first."""
        with self._lock:
            self.labels()
            return self._labels.ambiguous()

    # -- internals ------------------------------------------------------------------------------
    def _refresh_row(self) -> None:
        with self._lock:
            row = self._query(lambda c: c.execute(_ROW, [self._id]).fetchone(),
                              "could not read the session")
            if row is None:
                raise SessionNotFound("the session was deleted from the database",
                                   path=self._location)
            self._leaf, self._name, self._count = row[0], row[1], int(row[2])

    def _save(self) -> _Saved:
        return _Saved(self._leaf, self._name, self._count, self._seen_leaf(), len(self._cache),
                      len(self._order), self._order_seq, self._labels.copy(), self._labels_seq)

    def _restore(self, saved: _Saved) -> None:
        """Forget what a rolled-back batch appended (and what reads inside it cached)."""
        added = len(self._cache) - saved.cached
        for key in list(itertools.islice(reversed(self._cache), added)):
            del self._cache[key]  # the cache only grows, in insertion order
        del self._order[saved.order:]
        self._leaf, self._name, self._count = saved.leaf, saved.name, saved.count
        self._seen.leaf = saved.seen
        self._order_seq, self._labels, self._labels_seq = (
            saved.order_seq, saved.labels, saved.labels_seq)

    def _remember(self, entry_id: str, line: str) -> AnyEntry:
        entry = self._cache.get(entry_id)
        if entry is None:
            entry = decode_entry(line, self._location)
            self._cache[entry_id] = entry
        return entry

    def _remember_many(self, rows: list[tuple[str, str]]) -> list[AnyEntry]:
        """Decode the rows not cached yet (in one msgspec call when possible), cache them."""
        cache = self._cache
        new = [(i, line) for i, line in rows if i not in cache]
        if new:
            for (i, _), entry in zip(new, decode_many([line for _, line in new],
                                                       self._location), strict=True):
                cache[i] = entry
        return [cache[i] for i, _ in rows]

    def _query(self, fn: Callable[[Connection], T], what: str) -> T:
        """Run a read; a lost connection is retried once on a fresh one (reads are idempotent)."""
        return self._run(lambda conn, _retry: fn(conn), what)

    def _run(self, fn: Callable[[Connection, bool], T], what: str, *,
             entry: AnyEntry | None = None) -> T:
        """Run ``fn`` on a connection; retry once after a lost connection, map errors.

        Inside a batch ``fn`` runs on the batch's connection, and nothing is retried: a lost
        connection took the whole transaction with it.
        """
        if self._closed:
            raise StorageFailure("the storage is closed; open the session again",
                               path=self._location)
        if self._tx is not None:
            self._db.refuse_if_forked()  # the batch's connection is the parent's
            try:
                return fn(self._tx, False)
            except SessionError:
                raise
            except psycopg.Error as e:
                if is_connection_lost(e, self._tx):
                    raise StorageFailure(
                        f"{what}: the connection to PostgreSQL was lost ({first_line(e)}); "
                        "nothing of the batch was stored", path=self._location) from e
                raise storage_error(e, what, location=self._location, entry=entry) from e
        retry = False
        while True:
            used: Connection | None = None
            try:
                with self._db.connection() as conn:
                    used = conn
                    return fn(conn, retry)
            except SessionError:
                raise
            except psycopg.Error as e:  # a PoolTimeout is one too
                lost = is_connection_lost(e, used)
                if lost and not retry and self._db.can_reconnect:
                    retry = True
                    self._db.discard_dead()
                    continue
                if lost and entry is not None:
                    raise StorageFailure(
                        f"{what}: the connection to PostgreSQL was lost ({first_line(e)}). "
                        "The transaction either committed whole or not at all: reopen the "
                        f"session and check whether entry {entry.id!r} is there",
                        path=self._location,
                    ) from e
                raise storage_error(e, what, location=self._location, entry=entry) from e


