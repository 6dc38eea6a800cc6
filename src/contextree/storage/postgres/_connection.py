"""Connections: a pool of our own for a URL, or the application's connection or pool; the
URL of a session; the password-free location shown in messages."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from urllib.parse import quote

from ...errors import SessionLocked, StorageFailure
from ._driver import Connection, ConnectionPool, Pool, Target, TransactionStatus, psycopg
from ._errors import connect_failure

__all__ = ["Db", "connect", "describe", "hold_in_batch", "redact", "setup_connection",
           "short_lived", "split_session_url"]


class Db:
    """Hands out connections for one target; knows whether a lost one can be replaced.

    A child of ``os.fork()`` inherits the parent's sockets: a statement sent from both
    processes on one connection garbles both, and closing it ends the parent's. So a Db
    serves only the process that made it; in a child it refuses, and ``close`` only
    forgets (psycopg leaves a connection collected in a child open for its parent).
    """

    def __init__(self, target: Target) -> None:
        self.pid = os.getpid()
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

    @property
    def forked(self) -> bool:
        """Whether this process is a child (``os.fork()``) of the one that made this Db."""
        return self.pid != os.getpid()

    def refuse_if_forked(self) -> None:
        """``SessionLocked`` in a child of ``os.fork()``: its connections are the parent's."""
        if self.forked:
            raise SessionLocked(
                f"this PostgreSQL session was opened by process {self.pid}, and this "
                "process is a child of it (os.fork()): a child shares its parent's "
                "connections and must not use them, to read or to write; open the "
                "session again in the child (Session.open(url))")

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        self.refuse_if_forked()
        if self.conn is not None:
            autocommit(self.conn)
            yield self.conn
            return
        assert self.pool is not None
        with self.pool.connection() as conn:
            autocommit(conn)
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
        if not self.owned or self.forked:  # a child's close must not end the parent's
            return
        if self.pool is not None:
            self.pool.close()
        if self.conn is not None:
            self.conn.close()


_IN_BATCH: dict[int, Connection] = {}  # id of a storage -> its batch's connection, while open


def hold_in_batch(key: int, conn: Connection | None) -> None:
    """Note (or with ``None`` forget) the connection a batch has open: a child of
    ``os.fork()`` cuts it off (``_cut_after_fork``)."""
    if conn is None:
        _IN_BATCH.pop(key, None)
    else:
        _IN_BATCH[key] = conn


def _cut_after_fork() -> None:
    """In a child of ``os.fork()``, point the socket of every batch's connection at a closed
    socket: the parent's transaction is in flight on it, and whatever the child's copy would
    send there (the COMMIT or ROLLBACK of a ``with`` block it leaves, a pool's reset) would
    end it. There it fails instead, and reaches no server."""
    for conn in list(_IN_BATCH.values()):
        try:
            fd = conn.pgconn.socket
        except Exception:  # closed already
            continue
        dead, other = socket.socketpair()
        other.close()
        os.dup2(dead.fileno(), fd)
        dead.close()
    _IN_BATCH.clear()


os.register_at_fork(after_in_child=_cut_after_fork)


def connect(conninfo: str) -> Connection:
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as e:
        raise connect_failure(e, redact(conninfo)) from e


def autocommit(conn: Connection) -> None:
    """contextree runs its own transactions, so the connections it uses are in autocommit."""
    if conn.autocommit:
        return
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise StorageFailure("the connection has a transaction in progress; commit or "
                             "roll it back before contextree uses it (or pass a pool)")
    conn.autocommit = True


@contextlib.contextmanager
def short_lived(target: Target) -> Iterator[Connection]:
    """A connection for one call: a new one for a URL (closed after), else the given one."""
    if isinstance(target, str):
        with connect(target) as conn:
            yield conn
        return
    with Db(target).connection() as conn:
        yield conn


@contextlib.contextmanager
def setup_connection(db: Db, target: Target) -> Iterator[Connection]:
    """The connection used while creating or opening: a direct one when we own a pool.

    Connecting directly gives the real error (refused, bad password) at once, where a pool
    would retry in the background and time out.
    """
    if isinstance(target, str):
        conn = connect(target)
        try:
            yield conn
        finally:
            conn.close()
    else:
        with db.connection() as conn:
            yield conn


def split_session_url(url: str) -> tuple[str, str | None]:
    """``postgresql://host/db#SESSION_ID`` to the conninfo and the session id (if any)."""
    base, sep, session_id = url.partition("#")
    return base, (session_id or None) if sep else None


def redact(conninfo: str) -> str:
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


def describe(conn: Connection) -> str:
    """Where ``conn`` points, as a URL that opens the same database (no password)."""
    return redact(conn.info.dsn)
