"""PostgreSQL plans: a lookup by (session_id, id) uses the key's index even while the table
is small and never analyzed (a new database), so that an append's checks, the foreign keys'
checks and reads by id cost the same at entry 3,000 as at entry 5."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg")

import contextree as ct
from conformance import fresh_schema_url
from contextree.entries import MessageEntry, SessionHeader, encode_line, now
from contextree.storage import postgres as pg
from contextree.storage.postgres._schema import MIGRATIONS
from helpers import as_url, require_postgres

pytestmark = pytest.mark.postgres

LOOKUPS = [
    # the append function's duplicate check and reads by id
    "SELECT line FROM contextree_entries WHERE session_id = $1 AND id = $2",
    # the foreign keys' check (what PostgreSQL runs for each row with a parent)
    'SELECT 1 FROM ONLY contextree_entries x WHERE "session_id" OPERATOR(pg_catalog.=) $1 '
    'AND "id" OPERATOR(pg_catalog.=) $2 FOR KEY SHARE OF x',
]


@pytest.fixture
def fresh() -> Iterator[str]:
    fresh, drop = fresh_schema_url(require_postgres())
    yield fresh
    drop()


def _generic_plan(conn: object, query: str) -> str:
    conn.execute("SET plan_cache_mode = force_generic_plan")  # type: ignore[attr-defined]
    conn.execute("DEALLOCATE ALL")  # type: ignore[attr-defined]
    conn.execute(f"PREPARE lookup(text, text) AS {query}")  # type: ignore[attr-defined]
    rows = conn.execute("EXPLAIN EXECUTE lookup('s', 'e')").fetchall()  # type: ignore[attr-defined]
    return "\n".join(r[0] for r in rows)


@pytest.mark.parametrize("query", LOOKUPS, ids=["by-id", "foreign-key"])
def test_a_lookup_by_id_uses_the_key_on_a_new_table(fresh: str, query: str) -> None:
    import psycopg

    pg.create_schema(fresh)
    with psycopg.connect(fresh, autocommit=True) as conn:
        plan = _generic_plan(conn, query)
    assert "contextree_entries_pkey" in plan, plan
    assert "Filter" not in plan, plan  # both columns in the index condition


def test_a_version_5_database_migrates_keeping_entries_and_keys(fresh: str) -> None:
    """Schema 6 makes the key's index again: the entries stay, the key and the foreign keys
    still refuse a duplicate id and a missing parent, and appends go on."""
    import psycopg

    with psycopg.connect(fresh, autocommit=True) as conn:
        conn.execute("CREATE TABLE contextree_schema_version (version integer PRIMARY "
                     "KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        for version in (1, 2, 3, 4, 5):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute("INSERT INTO contextree_schema_version (version) VALUES (%s)",
                         [version])
        # what schema 5 holds: a session and its first entry, as its append wrote them
        sid = "v5"
        head = encode_line(SessionHeader(id=sid, created_at=now(), cwd="/w")).decode()
        first = MessageEntry("e1", None, now(), message=ct.Message.user("before the migration"))
        line = encode_line(first).decode().rstrip("\n")
        conn.execute("INSERT INTO contextree_sessions (id, header, created_at, leaf_id, "
                     "entry_count) VALUES (%s, %s, now(), 'e1', 1)", [sid, head.rstrip("\n")])
        conn.execute("INSERT INTO contextree_entries (session_id, id, type, line) "
                     "VALUES (%s, 'e1', 'message', %s)", [sid, line])
    assert pg.create_schema(fresh) == 6
    with psycopg.connect(fresh, autocommit=True) as conn:
        # the key's index is the newest of those on session_id: a tie goes to it
        newest = conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'contextree_entries'::regclass ORDER BY c.oid DESC "
            "LIMIT 1").fetchone()
        assert newest == ("contextree_entries_pkey",)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO contextree_entries (session_id, id, type, line) "
                         "VALUES (%s, %s, 'message', '{}')", [sid, first.id])
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("INSERT INTO contextree_entries (session_id, id, parent_id, type, "
                         "line) VALUES (%s, 'x1', 'nowhere', 'message', '{}')", [sid])
    with ct.Session.open(as_url(fresh) + "#" + sid) as s:
        s.append_message(ct.Message.assistant("after it"))
        assert [m.text for m in s.build_context().messages] == ["before the migration",
                                                                 "after it"]
