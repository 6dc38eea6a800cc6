"""Sessions in a database: ``list_sessions`` (one indexed query) and ``delete_session``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ...entries import SessionHeader
from ._codec import decode_header
from ._connection import describe, short_lived
from ._driver import Target
from ._errors import mapped
from ._schema import require_schema
from ._tables import SESSIONS

__all__ = ["SessionSummary", "delete_session", "list_sessions"]


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
    with mapped("could not list sessions"), short_lived(target) as conn:
        require_schema(conn)
        rows = conn.execute(
            f"SELECT id, name, created_at, updated_at, entry_count, leaf_id, header "
            f"FROM {SESSIONS} ORDER BY updated_at DESC, id LIMIT %s", [limit]
        ).fetchall()
        where = describe(conn)
    return [
        SessionSummary(id=r[0], name=r[1], created_at=r[2], updated_at=r[3],
                       entry_count=int(r[4]), leaf_id=r[5], header=decode_header(r[6], where))
        for r in rows
    ]


def delete_session(target: Target, session_id: str) -> bool:
    """Delete a session and all its entries (the one exception to append-only); True if found."""
    with mapped("could not delete the session"), short_lived(target) as conn:
        require_schema(conn)
        cur = conn.execute(f"DELETE FROM {SESSIONS} WHERE id = %s", [session_id])
        return cur.rowcount > 0
