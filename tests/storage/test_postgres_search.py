"""Search over PostgreSQL: the text an append stores is searchable when the append commits
(a trigger in its own statement), a batch that rolls back leaves nothing to find, sizes are
known, and a database of schema version 2 migrates with its entries searchable."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg")

import contextree as ct
from conformance import fresh_schema_url
from contextree import Message, Session, ToolCall
from contextree.entries import SessionHeader, encode_line, now
from contextree.errors import InvalidArgument
from contextree.storage import open_catalog
from contextree.storage import postgres as pg
from contextree.storage._search_text import parse_query
from contextree.storage.postgres._schema import MIGRATIONS
from contextree.storage.postgres._search import tsquery
from helpers import as_url, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def url() -> Iterator[str]:
    base = require_postgres()
    fresh, drop = fresh_schema_url(base)
    pg.create_schema(fresh)
    yield as_url(fresh)
    drop()


def _hits(url: str, query: str, **filters: object) -> dict[str, ct.SearchHit]:
    return {h.entry_id: h for h in ct.search(url, query, **filters)}  # type: ignore[arg-type]


def test_search_finds_words_identifiers_and_marks_branches(url: str) -> None:
    s = Session.create(url, cwd="/proj")
    old = s.append_message(Message.user("it fails with ECONNREFUSED in test_parse_header"))
    noted = s.append_message(Message.assistant("commit 3f9a2b1c4d fixes it", model="m-1"))
    kept = s.append_message(Message.user("keep"))
    s.append_compaction(summary="a summary", first_kept_entry_id=kept, tokens_before=9)
    call = s.append_message(Message.assistant("", tool_calls=[ToolCall(
        id="c", name="shell", arguments={"command": "pytest -k test_parse_header"})]))
    s.move_to(noted)
    side = s.append_message(Message.user("ECONNREFUSED again, on a side branch"))
    s.move_to(call)
    s.close()
    hits = _hits(url, "econnrefused")
    assert set(hits) == {old, side}
    assert hits[old].on_branch and hits[old].compacted
    assert not hits[side].on_branch and not hits[side].compacted
    assert hits[old].target == f"{url}#{s.id}" and hits[old].role == "user"
    start, end = hits[old].marks[0]
    assert hits[old].snippet[start:end] == "ECONNREFUSED"
    assert set(_hits(url, "test_parse_header")) == {old, call}
    assert set(_hits(url, "test_parse_header", tool="shell")) == {call}
    assert set(_hits(url, "3f9a2")) == {noted}
    assert set(_hits(url, '"fails with"')) == {old}
    assert set(_hits(url, "econnrefused", on_branch=True)) == {old}
    assert set(_hits(url, "econnrefused", role="assistant")) == set()
    assert set(_hits(url, "econnrefused", cwd="/elsewhere")) == set()
    assert set(_hits(url, "3f9a2", model="m-1")) == {noted}
    assert set(_hits(url, "3f9a2", model="m-2")) == set()
    assert len(ct.search(url, "econnrefused", limit=1)) == 1
    with pytest.raises(InvalidArgument, match="FTS5"):
        ct.search(url, "x", fts=True)
    with pytest.raises(InvalidArgument, match="nothing to search for"):
        ct.search(url, "!!")


def test_a_term_inside_a_word_is_found_with_pg_trgm(url: str) -> None:
    with Session.create(url) as s:
        eid = s.append_message(Message.user("connect() -> ECONNREFUSED"))
    found = ct.search(url, "connref")
    if found.notes:  # a server without pg_trgm: whole words and their starts only
        assert found == [] and "pg_trgm" in found.notes[0]
    else:
        assert [h.entry_id for h in found] == [eid]
        start, end = found[0].marks[0]
        assert found[0].snippet[start:end].lower() == "connref"


def test_an_append_is_searchable_when_it_commits_and_a_rollback_leaves_nothing(
        url: str) -> None:
    s = Session.create(url)
    eid = s.append_message(Message.user("visible at once"))
    assert set(_hits(url, "visible")) == {eid}
    with pytest.raises(RuntimeError), s.storage.batch():  # type: ignore[attr-defined]
        s.append_message(Message.user("rolled back words"))
        raise RuntimeError("abort the batch")
    assert _hits(url, "rolled") == {}
    s.close()


def test_text_with_nul_and_control_characters_never_fails_an_append(url: str) -> None:
    with Session.create(url) as s:
        eid = s.append_message(Message.user("nul \x00 here and \x1b[31m escape word"))
        s.append_message(Message.user("lone \ud800 surrogate".encode("utf-8", "replace")
                                      .decode()))
    assert set(_hits(url, "escape")) == {eid}


def test_sizes_are_known_and_kept_by_create_and_append(url: str) -> None:
    header = SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/w")
    catalog = open_catalog(url)
    storage = catalog.create(header, [])
    with Session.open(storage) as s:
        s.append_message(Message.user("some bytes"))
        size = s.storage.health().size
    assert catalog.get(header.id).size == size and size is not None and size > 0


def test_a_version_2_database_migrates_and_its_entries_become_searchable() -> None:
    import psycopg

    base = require_postgres()
    fresh, drop = fresh_schema_url(base)
    try:
        header = SessionHeader(id="old-one", created_at=now(), cwd="/w")
        line = encode_line(_old_entry()).decode().rstrip("\n")
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute("CREATE TABLE contextree_schema_version (version integer PRIMARY "
                         "KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for version in (1, 2):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO contextree_schema_version (version) VALUES (%s)",
                             [version])
            head = encode_line(header).decode().rstrip("\n")
            conn.execute("INSERT INTO contextree_sessions (id, header, created_at, leaf_id, "
                         "entry_count) VALUES (%s, %s, now(), 'e1', 1)", [header.id, head])
            conn.execute("INSERT INTO contextree_entries (session_id, id, type, line) "
                         "VALUES (%s, 'e1', 'message', %s)", [header.id, line])
        assert pg.create_schema(fresh) == pg.SCHEMA_VERSION
        assert [h.entry_id for h in ct.search(as_url(fresh), "migrated")] == ["e1"]
        info = open_catalog(as_url(fresh)).get(header.id)
        assert info.size == len(head.encode()) + 1 + len(line.encode()) + 1
    finally:
        drop()


def _old_entry() -> object:
    from contextree.entries import MessageEntry

    return MessageEntry(id="e1", parent_id=None, timestamp=now(),
                        message=Message.user("an entry from before search: migrated"))


def test_queries_become_tsqueries_without_operators_from_the_user() -> None:
    assert tsquery(parse_query('test_parse_header "a b" x* 3f9a2')) == (
        "('test' <-> 'parse' <-> 'header') & ('a' <-> 'b') & ('x':*) & ('3f9a2':*)")
    assert tsquery(parse_query("it's & | ! (x)")) == "('it' <-> 's') & ('x')"


def test_the_search_command_takes_a_database_url(url: str) -> None:
    from helpers import run, run_json

    with Session.create(url) as s:
        eid = s.append_message(Message.user("fleet wide words"))
    rows = run_json("search", "fleet", url)
    assert [r["entry_id"] for r in rows] == [eid] and rows[0]["url"] == f"{url}#{s.id}"
    assert "nothing to build" in run("index", url).stdout
    assert run("search", "fleet", url, "--fts", code=2).stderr.startswith("error: ")
