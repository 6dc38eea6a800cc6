"""PostgreSQL storage: many sessions in one database, shared by processes on many machines.

Layout (created only by ``create_schema``, versioned in ``contextree_schema_version``):

- ``contextree_sessions``: one row per session: the header line, ``created_at``, ``name``,
  ``leaf_id``, ``entry_count`` and ``updated_at`` (indexed, so ``list_sessions`` is one query).
- ``contextree_entries``: one row per entry: ``session_id``, ``id`` (primary key together, so
  duplicate ids are impossible), ``seq`` (append order), ``parent_id`` and a leaf entry's
  ``target_id`` (both foreign keys into the same session, so a missing parent is impossible),
  ``type``, and ``line``: the entry's JSON line exactly as ``encode_line`` wrote it, so every
  entry (an unknown type or field included) reads back unchanged.

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
``SessionError("conflict")`` when the leaf is not that entry at commit time. A connection
lost mid-append is retried once on a fresh connection; the retry first checks (under the
lock) whether the lost transaction committed, so an entry is never stored twice or in part.
A client killed mid-append leaves the server to finish or abort that one statement: the
entry is then stored whole or not at all.

Reads: entries never change, so entries read once are cached by id for good. The leaf, name
and length come from the session row (one small query per call, so they are always current);
``path`` walks the cache and fetches what is missing with one recursive query; ``entries``,
``labels`` and the like fetch only what was appended since their last call.
"""

from __future__ import annotations

import contextlib
import enum
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import msgspec

from ..entries import (
    LINE_DECODER,
    AnyEntry,
    BranchSummaryEntry,
    LabelEntry,
    LeafEntry,
    LineError,
    SessionHeader,
    SessionInfoEntry,
    decode_line,
    encode_line,
    from_dict,
    to_dict,
)
from ..errors import (
    DuplicateId,
    EntryNotFound,
    InvalidEntry,
    InvalidHeader,
    LeafConflict,
    MissingParent,
    ParentCycle,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionNotFound,
    StorageFailure,
    missing_extra,
)
from .base import TreeIndex, verify_links

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.pq import TransactionStatus
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise missing_extra("postgres", "psycopg") from _e
try:
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise missing_extra("postgres", "psycopg_pool") from _e

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStorage",
    "SessionSummary",
    "create_schema",
    "delete_session",
    "list_sessions",
    "schema_version",
    "split_session_url",
]

Connection = psycopg.Connection[Any]
Pool = ConnectionPool[Any]
Target = str | Connection | Pool
"""Where the database is: a libpq URL or conninfo string, a connection, or a pool."""

T = TypeVar("T")

SCHEMA_VERSION = 1
SESSIONS = "contextree_sessions"
ENTRIES = "contextree_entries"

# Each migration takes the schema from the version before it to its own number.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        f"""CREATE TABLE {SESSIONS} (
            id text PRIMARY KEY,
            header text NOT NULL,
            created_at timestamptz NOT NULL,
            name text,
            leaf_id text,
            entry_count bigint NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now()
        )""",
        f"CREATE INDEX {SESSIONS}_updated_idx ON {SESSIONS} (updated_at DESC, id)",
        f"""CREATE TABLE {ENTRIES} (
            session_id text NOT NULL REFERENCES {SESSIONS} (id) ON DELETE CASCADE,
            id text NOT NULL,
            seq bigserial NOT NULL,
            parent_id text,
            type text NOT NULL,
            target_id text,
            line text NOT NULL,
            CONSTRAINT {ENTRIES}_pkey PRIMARY KEY (session_id, id),
            CONSTRAINT {ENTRIES}_parent_fkey FOREIGN KEY (session_id, parent_id)
                REFERENCES {ENTRIES} (session_id, id),
            CONSTRAINT {ENTRIES}_target_fkey FOREIGN KEY (session_id, target_id)
                REFERENCES {ENTRIES} (session_id, id)
        )""",
        # No statistics on session_id: a session created after the last ANALYZE (every
        # session being written) would otherwise be estimated at ~1 row, and lookups by
        # (session_id, id) would use any index on session_id and filter, scanning the whole
        # session per step of a path. The default estimate keeps the planner on the keys.
        f"ALTER TABLE {ENTRIES} ALTER COLUMN session_id SET STATISTICS 0",
        f"CREATE UNIQUE INDEX {ENTRIES}_seq_idx ON {ENTRIES} (session_id, seq)",
        f"CREATE INDEX {ENTRIES}_parent_idx ON {ENTRIES} (session_id, parent_id)",
        f"CREATE INDEX {ENTRIES}_type_idx ON {ENTRIES} (session_id, type, seq)",
        f"CREATE INDEX {ENTRIES}_target_idx ON {ENTRIES} (session_id, target_id) "
        "WHERE target_id IS NOT NULL",
        # One append = one statement = one transaction and one round trip; the session row
        # stays locked only while the server runs this, not while a client thinks.
        f"""CREATE FUNCTION contextree_append(
            p_session text, p_id text, p_parent text, p_type text, p_is_leaf boolean,
            p_target text, p_line text, p_name text,
            p_check_expected boolean, p_expected text,
            p_reparent boolean, p_seen text, p_placeholder text,
            p_retry boolean, p_hold float8
        ) RETURNS TABLE (r_status text, r_leaf text, r_parent text, r_name text,
                         r_count bigint, r_line text)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            v_leaf text; v_name text; v_count bigint; v_line text;
            v_parent text := p_parent; v_new_leaf text;
        BEGIN
            -- Serialize appends to this session: every writer takes the row lock first.
            SELECT s.leaf_id, s.name, s.entry_count INTO v_leaf, v_name, v_count
            FROM {SESSIONS} s WHERE s.id = p_session FOR UPDATE;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 'not_found', NULL::text, NULL::text, NULL::text,
                                    NULL::bigint, NULL::text;
                RETURN;
            END IF;
            SELECT e.line INTO v_line FROM {ENTRIES} e
            WHERE e.session_id = p_session AND e.id = p_id;
            IF FOUND THEN  -- a retry finds its own lost commit; otherwise a duplicate id
                RETURN QUERY SELECT CASE WHEN p_retry THEN 'done' ELSE 'duplicate_id' END,
                                    v_leaf, NULL::text, v_name, v_count, v_line;
                RETURN;
            END IF;
            IF p_check_expected AND v_leaf IS DISTINCT FROM p_expected THEN
                RETURN QUERY SELECT 'conflict', v_leaf, NULL::text, v_name, v_count,
                                    NULL::text;
                RETURN;
            END IF;
            IF p_reparent AND v_parent IS NOT DISTINCT FROM p_seen
               AND v_leaf IS DISTINCT FROM p_seen THEN
                v_parent := v_leaf;  -- the writer's view was stale: go after the real leaf
            END IF;
            v_line := p_line;
            IF p_placeholder IS NOT NULL THEN
                v_line := replace(v_line, p_placeholder,
                                  coalesce(to_json(v_parent)::text, 'null'));
            END IF;
            IF v_parent IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM {ENTRIES} e WHERE e.session_id = p_session AND e.id = v_parent
            ) THEN
                RETURN QUERY SELECT 'missing_parent', v_leaf, v_parent, v_name, v_count,
                                    NULL::text;
                RETURN;
            END IF;
            IF p_target IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM {ENTRIES} e WHERE e.session_id = p_session AND e.id = p_target
            ) THEN
                RETURN QUERY SELECT 'missing_target', v_leaf, v_parent, v_name, v_count,
                                    NULL::text;
                RETURN;
            END IF;
            INSERT INTO {ENTRIES} (session_id, id, parent_id, type, target_id, line)
            VALUES (p_session, p_id, v_parent, p_type, p_target, v_line);
            v_new_leaf := CASE WHEN p_is_leaf THEN p_target ELSE p_id END;
            UPDATE {SESSIONS} SET leaf_id = v_new_leaf, name = coalesce(p_name, name),
                entry_count = entry_count + 1, updated_at = now()
            WHERE id = p_session;
            IF p_hold > 0 THEN
                PERFORM pg_sleep(p_hold);  -- fault-injection tests only
            END IF;
            RETURN QUERY SELECT 'ok', v_new_leaf, v_parent, coalesce(p_name, v_name),
                                v_count + 1, NULL::text;
        END
        $fn$""",
    ),
}
_MIGRATION_LOCK = 0x636F6E7465787472  # pg_advisory_xact_lock key: serializes create_schema

_NO_SCHEMA = "run contextree.storage.postgres.create_schema(url) first"


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET = _Unset.UNSET
"""``append``'s default for ``expected_leaf``: no conflict check, re-parent when stale."""


# -- connections -----------------------------------------------------------------------------

class _Db:
    """Hands out connections for one target; knows whether a lost one can be replaced."""

    def __init__(self, target: Target) -> None:
        self.owned = False
        self.pool: Pool | None = None
        self.conn: Connection | None = None
        if isinstance(target, str):  # a URL: our own pool, closed with us
            self.pool = ConnectionPool(target, min_size=1, max_size=4, open=False,
                                       kwargs={"autocommit": True}, timeout=30.0)
            self.owned = True
        elif isinstance(target, ConnectionPool):
            self.pool = target
        elif isinstance(target, psycopg.Connection):
            self.conn = target
        else:
            raise TypeError("expected a PostgreSQL URL, a psycopg.Connection or a "
                            f"psycopg_pool.ConnectionPool, got {type(target).__name__}")

    @property
    def can_reconnect(self) -> bool:
        return self.pool is not None

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        if self.conn is not None:
            _autocommit(self.conn)
            yield self.conn
            return
        assert self.pool is not None
        with self.pool.connection() as conn:
            _autocommit(conn)
            yield conn

    def open_pool(self) -> None:
        if self.pool is not None and self.owned:
            self.pool.open()

    def discard_dead(self) -> None:
        """Drop idle pooled connections that died with the one that failed (before a retry)."""
        if self.pool is not None:
            with contextlib.suppress(Exception):
                self.pool.check()

    def close(self) -> None:
        if not self.owned:
            return
        if self.pool is not None:
            self.pool.close()
        if self.conn is not None:
            self.conn.close()


def _connect(conninfo: str) -> Connection:
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as e:
        raise StorageFailure(f"could not connect to PostgreSQL ({_first_line(e)}); "
                           "check the URL and that the server is running",
                           path=_redact(conninfo)) from e


def _autocommit(conn: Connection) -> None:
    """contextree runs its own transactions, so the connections it uses are in autocommit."""
    if conn.autocommit:
        return
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise StorageFailure("the connection has a transaction in progress; commit or "
                           "roll it back before contextree uses it (or pass a pool)")
    conn.autocommit = True


def _redact(conninfo: str) -> str:
    """A conninfo as a ``postgresql://`` URL without its password, for messages and
    ``location``; other parameters (``options``, ``sslmode``...) are kept so the location
    can be opened again."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    for noise in ("password", "hostaddr", "sslcertmode"):  # secret, or libpq's own defaults
        params.pop(noise, None)
    user = params.pop("user", None)
    host = params.pop("host", None) or "localhost"
    port = params.pop("port", None)
    db = params.pop("dbname", None) or ""
    auth = f"{quote(str(user), safe='')}@" if user else ""
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in sorted(params.items()))
    return (f"postgresql://{auth}{host}{f':{port}' if port else ''}/{db}"
            + (f"?{query}" if query else ""))


def _describe(conn: Connection) -> str:
    """Where ``conn`` points, as a URL that opens the same database (no password)."""
    return _redact(conn.info.dsn)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextlib.contextmanager
def _mapped(what: str, location: str | None = None) -> Iterator[None]:
    """Turn psycopg (and pool) errors raised inside into a ``SessionError``."""
    try:
        yield
    except psycopg.Error as e:
        raise _storage_error(e, what, location=location) from e


def _is_connection_lost(e: BaseException, conn: Connection | None) -> bool:
    """A failure of the connection itself (killed backend, network), not of the statement."""
    if isinstance(e, PoolTimeout):
        return False
    if conn is not None and (conn.closed or conn.broken):
        return True
    sqlstate = getattr(e, "sqlstate", None) or ""
    return isinstance(e, psycopg.OperationalError) and (
        sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")
    )


# -- schema -----------------------------------------------------------------------------------

def create_schema(target: Target) -> int:
    """Create or upgrade contextree's tables; idempotent, safe to run from many processes.

    Nothing is created implicitly elsewhere: run this once per database (deploy step, or
    ``contextree`` setup). Returns the schema version now in place.
    """
    with (_mapped("could not create the schema"), _short_lived(target) as conn,
          conn.transaction()):
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
        conn.execute("CREATE TABLE IF NOT EXISTS contextree_schema_version ("
                     " version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute(
            "SELECT coalesce(max(version), 0) FROM contextree_schema_version").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StorageFailure(_newer_schema(current), path=_describe(conn))
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute("INSERT INTO contextree_schema_version (version) VALUES (%s)",
                         [version])
    return SCHEMA_VERSION


def schema_version(target: Target) -> int | None:
    """The schema version in the database, or ``None`` when ``create_schema`` never ran."""
    with _mapped("could not read the schema version"), _short_lived(target) as conn:
        return _schema_version(conn)


def _schema_version(conn: Connection) -> int | None:
    row = conn.execute("SELECT to_regclass('contextree_schema_version') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    row = conn.execute("SELECT max(version) FROM contextree_schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _require_schema(conn: Connection) -> None:
    version = _schema_version(conn)
    where = _describe(conn)
    if version is None:
        raise StorageFailure(f"no contextree tables in this database; {_NO_SCHEMA}",
                           path=where)
    if version < SCHEMA_VERSION:
        raise StorageFailure(f"the contextree schema is at version {version}, this "
                           f"version needs {SCHEMA_VERSION}; {_NO_SCHEMA} (it migrates)",
                           path=where)
    if version > SCHEMA_VERSION:
        raise StorageFailure(_newer_schema(version), path=where)


def _newer_schema(version: int) -> str:
    return (f"the contextree schema is at version {version}, newer than this contextree "
            f"understands ({SCHEMA_VERSION}); upgrade contextree")


# -- listing and deleting -----------------------------------------------------------------------

@dataclass(frozen=True)
class SessionSummary:
    """One row of ``list_sessions``."""

    id: str
    name: str | None
    created_at: datetime
    updated_at: datetime
    entry_count: int
    leaf_id: str | None
    header: SessionHeader


def list_sessions(target: Target, *, limit: int | None = None) -> list[SessionSummary]:
    """Sessions in the database, most recently updated first: one indexed query."""
    with _mapped("could not list sessions"), _short_lived(target) as conn:
        _require_schema(conn)
        rows = conn.execute(
            f"SELECT id, name, created_at, updated_at, entry_count, leaf_id, header "
            f"FROM {SESSIONS} ORDER BY updated_at DESC, id LIMIT %s", [limit]
        ).fetchall()
        where = _describe(conn)
    return [
        SessionSummary(id=r[0], name=r[1], created_at=r[2], updated_at=r[3],
                       entry_count=int(r[4]), leaf_id=r[5], header=_decode_header(r[6], where))
        for r in rows
    ]


def delete_session(target: Target, session_id: str) -> bool:
    """Delete a session and all its entries (the one exception to append-only); True if found."""
    with _mapped("could not delete the session"), _short_lived(target) as conn:
        _require_schema(conn)
        cur = conn.execute(f"DELETE FROM {SESSIONS} WHERE id = %s", [session_id])
        return cur.rowcount > 0


def split_session_url(url: str) -> tuple[str, str | None]:
    """``postgresql://host/db#SESSION_ID`` to the conninfo and the session id (if any)."""
    base, sep, session_id = url.partition("#")
    return base, (session_id or None) if sep else None


def is_postgres_url(text: str) -> bool:
    """True for ``postgresql://`` and ``postgres://`` URLs (as the CLI accepts for files)."""
    return text.startswith(("postgresql://", "postgres://"))


# -- the storage --------------------------------------------------------------------------------

_ROW = f"SELECT leaf_id, name, entry_count FROM {SESSIONS} WHERE id = %s"
_APPEND = ("SELECT r_status, r_leaf, r_parent, r_name, r_count, r_line FROM contextree_append("
           + ", ".join(["%s"] * 15) + ")")
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
    open). Connections are switched to autocommit: every statement contextree sends is its
    own transaction. A lost connection is replaced and the call retried once when there is a
    pool to take a fresh one from; with a bare connection it is reported as ``storage``.

    Safe to use from several processes and machines at once (see the module docstring for
    how concurrent appends are ordered). One object may be shared by threads.
    """

    def __init__(self, db: _Db, header: SessionHeader, location: str, *,
                 readonly: bool, leaf_id: str | None, name: str | None, count: int) -> None:
        self._db = db
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
        self._labels: dict[str, str] = {}
        self._labels_seq = 0
        # Fault-injection hooks for tests.
        self._hold_seconds = 0.0  # keep the append transaction open this long (pg_sleep)
        self._after_commit: Callable[[Connection], None] | None = None

    # -- creating and opening ----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        target: Target,
        header: SessionHeader,
        entries: Iterable[AnyEntry] = (),
    ) -> PostgresStorage:
        """Create a session (fails with ``exists`` if its id is taken), with optional entries.

        The header and ``entries`` (checked like an append: unique ids, parents that exist)
        are written in one transaction: the session appears complete or not at all. This is
        how ``contextree import`` copies a JSONL session losslessly.
        """
        index = TreeIndex(header, "")
        pending: list[tuple[AnyEntry, int | None]] = []
        batch = list(entries)
        for entry in batch:
            forward = entry.parent_id is not None and entry.parent_id not in index.by_id
            index.check(entry, forward_parent_ok=True)
            if forward:
                pending.append((entry, None))
            index.add(entry)
        verify_links(index, pending)
        db = _Db(target)
        try:
            db.open_pool()  # it connects in the background while we check the schema
            with _mapped("could not create the session"), _setup_connection(db, target) as conn:
                _require_schema(conn)
                location = f"{_describe(conn)}#{header.id}"
                with conn.transaction():
                    cur = conn.execute(
                        f"INSERT INTO {SESSIONS} (id, header, created_at, name, leaf_id, "
                        "entry_count) VALUES (%s, %s, %s, %s, %s, %s) "
                        "ON CONFLICT (id) DO NOTHING",
                        [header.id, _text(header), _created_at(header), index.name,
                         index.leaf_id, len(batch)],
                    )
                    if cur.rowcount != 1:
                        raise SessionExists(f"a session with id {header.id!r} is "
                                           "already in this database; open it or choose "
                                           "another id", path=location)
                    if batch:
                        with conn.cursor().copy(
                            f"COPY {ENTRIES} (session_id, id, parent_id, type, target_id, "
                            "line) FROM STDIN"
                        ) as copy:
                            for entry in batch:
                                copy.write_row(_row(header.id, entry))
        except BaseException:
            db.close()
            raise
        storage = cls(db, header, location, readonly=False, leaf_id=index.leaf_id,
                      name=index.name, count=len(batch))
        for entry in batch:
            storage._cache[entry.id] = entry
        return storage

    @classmethod
    def open(cls, target: Target, session_id: str, *, readonly: bool = False) -> PostgresStorage:
        """Open a session by id. Cheap: entries are read when first needed, then cached."""
        db = _Db(target)
        try:
            db.open_pool()  # it connects in the background while we check the schema
            with _mapped("could not open the session"), _setup_connection(db, target) as conn:
                _require_schema(conn)
                location = f"{_describe(conn)}#{session_id}"
                row = conn.execute(
                    f"SELECT header, leaf_id, name, entry_count FROM {SESSIONS} WHERE id = %s",
                    [session_id],
                ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r} in this database; "
                                   "create it with PostgresStorage.create (or list them with "
                                   "list_sessions)", path=location)
            header = _decode_header(row[0], location)
        except BaseException:
            db.close()
            raise
        return cls(db, header, location, readonly=readonly, leaf_id=row[1], name=row[2],
                   count=int(row[3]))

    def close(self) -> None:
        """Release the connection pool if this object opened it (a given pool stays open)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

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
    def append(self, entry: AnyEntry, *, expected_leaf: str | _Unset | None = UNSET) -> None:
        """Store one entry in its own transaction; it becomes the leaf (or moves it).

        With ``expected_leaf`` the append fails with ``conflict`` unless the leaf is that
        entry at commit time. Without it, an entry whose parent is the leaf this thread last
        saw is re-parented onto the current leaf if another writer moved it meanwhile.
        """
        if self.readonly:
            raise ReadOnlySession("this session was opened read-only (or is closed); "
                               "open it with readonly=False to write", path=self._location)
        eid = entry.id
        if not isinstance(eid, str) or not eid:
            raise InvalidEntry("entry id must be a non-empty string",
                               path=self._location)
        with self._lock:
            stored, leaf, name, count = self._run(
                lambda conn, retry: self._append_tx(conn, entry, expected_leaf, retry),
                "could not append the entry", entry=entry,
            )
            self._cache[stored.id] = stored
            self._leaf, self._count = leaf, count
            self._seen.leaf = leaf
            if name is not None:
                self._name = name

    def _append_tx(self, conn: Connection, entry: AnyEntry, expected: str | _Unset | None,
                   retry: bool) -> tuple[AnyEntry, str | None, str | None, int]:
        """One call of ``contextree_append``: lock, decide the parent, insert, update, commit.

        When the entry may be re-parented its line is sent with a placeholder for the
        parent, which the server fills in under the lock.
        """
        check = not isinstance(expected, _Unset)
        seen = self._seen_leaf()
        reparent = not check and entry.parent_id == seen and not _anchored(entry)
        placeholder: str | None = None
        line = ""
        if reparent:
            token = f"contextree-parent-{secrets.token_hex(12)}"
            line = _text(_reparent(entry, token))
            placeholder = f'"{token}"'
            if line.count(placeholder) != 1:  # pragma: no cover - 96 random bits
                reparent, placeholder = False, None
        if not reparent:
            line = _text(entry)
        is_leaf = isinstance(entry, LeafEntry)
        row = conn.execute(_APPEND, [
            self._id, entry.id, entry.parent_id, entry.type, is_leaf,
            entry.target_id if isinstance(entry, LeafEntry) else None, line,
            entry.name if isinstance(entry, SessionInfoEntry) else None,
            check, None if isinstance(expected, _Unset) else expected,
            reparent, seen, placeholder, retry, 0.0 if retry else self._hold_seconds,
        ]).fetchone()
        if self._after_commit is not None:
            self._after_commit(conn)
        assert row is not None
        status, leaf, parent, name, count, stored_line = row
        if status == "ok":
            stored = entry if parent == entry.parent_id else _reparent(entry, parent)
            return stored, leaf, name, int(count)
        if status == "done":  # the lost first attempt had committed
            return _decode(stored_line, self._location), leaf, name, int(count)
        raise self._refusal(status, entry, leaf, parent, expected)

    def _refusal(self, status: str, entry: AnyEntry, leaf: str | None, parent: str | None,
                 expected: str | _Unset | None) -> SessionError:
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
                    if entry.label:
                        self._labels[entry.target_id] = entry.label
                    else:
                        self._labels.pop(entry.target_id, None)
            if rows:
                self._labels_seq = int(rows[-1][0])
            return dict(self._labels)

    # -- internals ------------------------------------------------------------------------------
    def _refresh_row(self) -> None:
        with self._lock:
            row = self._query(lambda c: c.execute(_ROW, [self._id]).fetchone(),
                              "could not read the session")
            if row is None:
                raise SessionNotFound("the session was deleted from the database",
                                   path=self._location)
            self._leaf, self._name, self._count = row[0], row[1], int(row[2])

    def _remember(self, entry_id: str, line: str) -> AnyEntry:
        entry = self._cache.get(entry_id)
        if entry is None:
            entry = _decode(line, self._location)
            self._cache[entry_id] = entry
        return entry

    def _remember_many(self, rows: list[tuple[str, str]]) -> list[AnyEntry]:
        """Decode the rows not cached yet (in one msgspec call when possible), cache them."""
        cache = self._cache
        new = [(i, line) for i, line in rows if i not in cache]
        if new:
            for (i, _), entry in zip(new, _decode_many([line for _, line in new],
                                                       self._location), strict=True):
                cache[i] = entry
        return [cache[i] for i, _ in rows]

    def _query(self, fn: Callable[[Connection], T], what: str) -> T:
        """Run a read; a lost connection is retried once on a fresh one (reads are idempotent)."""
        return self._run(lambda conn, _retry: fn(conn), what)

    def _run(self, fn: Callable[[Connection, bool], T], what: str, *,
             entry: AnyEntry | None = None) -> T:
        """Run ``fn`` on a connection; retry once after a lost connection, map errors."""
        if self._closed:
            raise StorageFailure("the storage is closed; open the session again",
                               path=self._location)
        retry = False
        while True:
            used: Connection | None = None
            try:
                with self._db.connection() as conn:
                    used = conn
                    return fn(conn, retry)
            except SessionError:
                raise
            except (psycopg.Error, PoolTimeout) as e:
                lost = _is_connection_lost(e, used)
                if lost and not retry and self._db.can_reconnect:
                    retry = True
                    self._db.discard_dead()
                    continue
                if lost and entry is not None:
                    raise StorageFailure(
                        f"{what}: the connection to PostgreSQL was lost ({_first_line(e)}). "
                        "The transaction either committed whole or not at all: reopen the "
                        f"session and check whether entry {entry.id!r} is there",
                        path=self._location,
                    ) from e
                raise _storage_error(e, what, location=self._location, entry=entry) from e


@contextlib.contextmanager
def _short_lived(target: Target) -> Iterator[Connection]:
    """A connection for one call: a new one for a URL (closed after), else the given one."""
    if isinstance(target, str):
        with _connect(target) as conn:
            yield conn
        return
    with _Db(target).connection() as conn:
        yield conn


@contextlib.contextmanager
def _setup_connection(db: _Db, target: Target) -> Iterator[Connection]:
    """The connection used while creating or opening: a direct one when we own a pool.

    Connecting directly gives the real error (refused, bad password) at once, where a pool
    would retry in the background and time out.
    """
    if isinstance(target, str):
        conn = _connect(target)
        try:
            yield conn
        finally:
            conn.close()
    else:
        with db.connection() as conn:
            yield conn


# -- rows and lines -----------------------------------------------------------------------------

def _text(line: SessionHeader | AnyEntry) -> str:
    return encode_line(line)[:-1].decode()


def _row(session_id: str, entry: AnyEntry) -> tuple[str, str, str | None, str, str | None, str]:
    target = entry.target_id if isinstance(entry, LeafEntry) else None
    return (session_id, entry.id, entry.parent_id, entry.type, target, _text(entry))


def _created_at(header: SessionHeader) -> datetime:
    try:
        when = datetime.fromisoformat(header.created_at)
    except (TypeError, ValueError):
        return datetime.now(UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _anchored(entry: AnyEntry) -> bool:
    """A branch summary's parent is its ``from_id`` by definition: never re-parent it."""
    return isinstance(entry, BranchSummaryEntry) and entry.from_id == entry.parent_id


def _reparent(entry: AnyEntry, parent: str | None) -> AnyEntry:
    """A copy of ``entry`` with another parent (unknown fields kept)."""
    data = to_dict(entry)
    data["parent_id"] = parent
    copy = from_dict(data)
    assert not isinstance(copy, SessionHeader)
    return copy


def _decode(line: str, location: str) -> AnyEntry:
    try:
        entry = decode_line(line)
    except LineError as e:
        raise InvalidEntry(f"a stored entry does not decode ({e})",
                           path=location) from None
    if isinstance(entry, SessionHeader):
        raise InvalidEntry("a session header is stored as an entry",
                           path=location)
    return entry


def _decode_many(lines: list[str], location: str) -> list[AnyEntry]:
    """Decode lines in one msgspec call; lines of unknown types fall back one by one."""
    try:
        out: list[Any] = LINE_DECODER.decode_lines("\n".join(lines))
    except msgspec.DecodeError:
        return [_decode(line, location) for line in lines]
    if len(out) != len(lines) or any(isinstance(e, SessionHeader) for e in out):
        return [_decode(line, location) for line in lines]
    return out


def _decode_header(text: str, location: str) -> SessionHeader:
    try:
        header = decode_line(text)
    except LineError as e:
        raise InvalidHeader(f"the stored session header does not decode ({e})",
                           path=location) from None
    if not isinstance(header, SessionHeader):
        raise InvalidHeader("the stored session header is not a header",
                           path=location)
    return header


# -- errors -------------------------------------------------------------------------------------

def _storage_error(e: BaseException, what: str, *, location: str | None = None,
                   entry: AnyEntry | None = None) -> SessionError:
    """A psycopg (or pool) error as a ``SessionError`` that says what to do."""
    detail = _first_line(e)
    constraint = getattr(getattr(e, "diag", None), "constraint_name", None) or ""
    eid = repr(entry.id) if entry is not None else "an entry"
    kind: type[SessionError] = StorageFailure
    if isinstance(e, pg_errors.UniqueViolation):
        if constraint == f"{ENTRIES}_pkey":
            kind, message = DuplicateId, (
                f"entry id {eid} is already used in this session; every id must be unique")
        elif constraint == f"{SESSIONS}_pkey":
            kind, message = SessionExists, "a session with this id is already in the database"
        else:
            message = f"{what}: {detail}"
    elif isinstance(e, pg_errors.ForeignKeyViolation):
        if constraint == f"{ENTRIES}_parent_fkey":
            parent = repr(entry.parent_id) if entry is not None else "its parent"
            kind, message = MissingParent, (
                f"entry {eid} has parent {parent}, which is not an entry of this session")
        elif constraint == f"{ENTRIES}_target_fkey":
            target = repr(entry.target_id) if isinstance(entry, LeafEntry) else "its target"
            kind, message = MissingParent, (
                f"leaf entry {eid} moves to {target}, which does not exist")
        else:
            kind, message = SessionNotFound, "the session is not in the database (deleted?)"
    elif isinstance(e, pg_errors.UndefinedTable):
        message = f"{what}: the contextree tables are missing; {_NO_SCHEMA}"
    elif isinstance(e, PoolTimeout):
        message = (f"{what}: no database connection became available ({detail}); is the "
                   "server up, or is the pool too small for the threads using it?")
    elif isinstance(e, psycopg.OperationalError):
        message = (f"{what}: the database connection failed ({detail}); nothing partial was "
                   "stored — check the server and retry")
    else:
        message = f"{what}: PostgreSQL said: {detail}"
    return kind(message, path=location)
