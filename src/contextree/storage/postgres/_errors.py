"""psycopg errors as contextree errors: every database failure goes through ``storage_error``.

A constraint the schema enforces becomes the error the other backends raise for the same
mistake (``DuplicateId``, ``MissingParent``, ``SessionExists``...); anything else becomes a
``StorageFailure`` that says what to check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..._text import without_passwords
from ...entries import AnyEntry, LeafEntry
from ...errors import (
    DuplicateId,
    MissingParent,
    SessionError,
    SessionExists,
    SessionNotFound,
    StorageFailure,
)
from ._driver import Connection, PoolTimeout, pg_errors, psycopg
from ._tables import ENTRY_ID_KEY, NO_SCHEMA, PARENT_KEY, SESSION_ID_KEY, TARGET_KEY

__all__ = ["connect_failure", "first_line", "is_connection_lost", "mapped", "storage_error"]


def first_line(e: BaseException) -> str:
    """The first line of an exception's text (psycopg adds detail lines), or its type;
    any password in it masked (libpq quotes a URL it cannot parse whole)."""
    text = str(e).strip()
    return without_passwords(text.splitlines()[0]) if text else type(e).__name__


@contextlib.contextmanager
def mapped(what: str, location: str | None = None) -> Iterator[None]:
    """Turn psycopg (and pool) errors raised inside into a ``SessionError``."""
    try:
        yield
    except psycopg.Error as e:  # a PoolTimeout is one too
        raise storage_error(e, what, location=location) from e


def connect_failure(e: BaseException, location: str) -> StorageFailure:
    """A connection that could not be made: say so before anything else is tried."""
    return StorageFailure(f"could not connect to PostgreSQL ({first_line(e)}); check the URL "
                          "and that the server is running", path=location)


def is_connection_lost(e: BaseException, conn: Connection | None) -> bool:
    """A failure of the connection itself (killed backend, network), not of the statement."""
    if isinstance(e, PoolTimeout):
        return False
    if conn is not None and (conn.closed or conn.broken):
        return True
    sqlstate = getattr(e, "sqlstate", None) or ""
    return isinstance(e, psycopg.OperationalError) and (
        sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")
    )


def storage_error(e: BaseException, what: str, *, location: str | None = None,
                  entry: AnyEntry | None = None) -> SessionError:
    """A psycopg (or pool) error as a ``SessionError`` that says what to do."""
    detail = first_line(e)
    constraint = getattr(getattr(e, "diag", None), "constraint_name", None) or ""
    eid = repr(entry.id) if entry is not None else "an entry"
    kind: type[SessionError] = StorageFailure
    if isinstance(e, pg_errors.UniqueViolation):
        if constraint == ENTRY_ID_KEY:
            kind, message = DuplicateId, (
                f"entry id {eid} is already used in this session; every id must be unique")
        elif constraint == SESSION_ID_KEY:
            kind, message = SessionExists, "a session with this id is already in the database"
        else:
            message = f"{what}: {detail}"
    elif isinstance(e, pg_errors.ForeignKeyViolation):
        if constraint == PARENT_KEY:
            parent = repr(entry.parent_id) if entry is not None else "its parent"
            kind, message = MissingParent, (
                f"entry {eid} has parent {parent}, which is not an entry of this session")
        elif constraint == TARGET_KEY:
            target = repr(entry.target_id) if isinstance(entry, LeafEntry) else "its target"
            kind, message = MissingParent, (
                f"leaf entry {eid} moves to {target}, which does not exist")
        else:
            kind, message = SessionNotFound, "the session is not in the database (deleted?)"
    elif isinstance(e, pg_errors.UndefinedTable):
        message = f"{what}: the contextree tables are missing; {NO_SCHEMA}"
    elif isinstance(e, PoolTimeout):
        message = (f"{what}: no database connection became available ({detail}); is the "
                   "server up, or is the pool too small for the threads using it?")
    elif isinstance(e, psycopg.OperationalError):
        message = (f"{what}: the database connection failed ({detail}); nothing partial was "
                   "stored — check the server and retry")
    else:
        message = f"{what}: PostgreSQL said: {detail}"
    return kind(message, path=location)
