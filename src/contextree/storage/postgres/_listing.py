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
from ._tables import ENTRIES, SESSIONS

__all__ = ["SessionSummary", "delete_session", "list_sessions"]


@dataclass(frozen=True)
class SessionSummary:
    """One row of ``list_sessions``.

    ``updated_at`` is when the database last stored an entry of it; ``last_activity`` is the
    timestamp of its last entry (the header's ``created_at`` when it has none), the time a
    session file's last entry gives.
    """

    id: str
    name: str | None
    created_at: datetime
    updated_at: datetime
    entry_count: int
    leaf_id: str | None
    header: SessionHeader
    last_activity: str = ""
    size: int | None = None  # the session's bytes as JSON lines (header included)


def list_sessions(target: Target, *, limit: int | None = None,
                  prefix: str | None = None) -> list[SessionSummary]:
    """Sessions in the database, most recently updated first: one indexed query
    (``prefix``: only those whose id starts with it, the one whose id it is first, so that a
    limit never leaves out the exact match)."""
    where_id = ""
    first = ""
    params: list[object] = []
    if prefix is not None:
        where_id = "WHERE s.id LIKE %s "
        first = "s.id = %s DESC, "
        params.append(prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        params.append(prefix)
    params.append(limit)
    with mapped("could not list sessions"), short_lived(target) as conn:
        require_schema(conn)
        rows = conn.execute(
            f"SELECT s.id, s.name, s.created_at, s.updated_at, s.entry_count, s.leaf_id, "
            f"s.header, (SELECT e.line::json ->> 'timestamp' FROM {ENTRIES} e "
            f"WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1), s.bytes "
            f"FROM {SESSIONS} s {where_id}ORDER BY {first}s.updated_at DESC, s.id LIMIT %s", params
        ).fetchall()
        where = describe(conn)
    summaries = []
    for r in rows:
        header = decode_header(r[6], where)
        summaries.append(SessionSummary(
            id=r[0], name=r[1], created_at=r[2], updated_at=r[3], entry_count=int(r[4]),
            leaf_id=r[5], header=header, last_activity=r[7] or header.created_at,
            size=int(r[8])))
    return summaries


def delete_session(target: Target, session_id: str, *,
                   entry_count: int | None = None) -> bool:
    """Delete a session and all its entries (the one exception to append-only); True if found.

    With ``entry_count``, only if it still holds exactly that many entries, checked in the
    same statement: a retention sweep run from many machines at once never deletes a session
    that was written to after it was chosen, and two sweeps never both delete it."""
    with mapped("could not delete the session"), short_lived(target) as conn:
        require_schema(conn)
        if entry_count is None:
            cur = conn.execute(f"DELETE FROM {SESSIONS} WHERE id = %s", [session_id])
        else:
            cur = conn.execute(f"DELETE FROM {SESSIONS} WHERE id = %s AND entry_count = %s",
                               [session_id, entry_count])
        return cur.rowcount > 0
