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
from contextree.entries import AnyEntry, SessionHeader, encode_line, now
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


def _trigrams_on(url: str) -> None:
    """Turn search inside words on, or skip the test on a server without pg_trgm."""
    try:
        pg.create_schema(url, trigrams=True)
    except ct.errors.StorageFailure as e:
        assert "pg_trgm" in str(e) and "CREATE EXTENSION" in str(e)
        pytest.skip(f"this server has no pg_trgm: {e}")


def test_search_inside_words_is_off_by_default_and_turned_on_and_off(url: str) -> None:
    with Session.create(url) as s:
        before = s.append_message(Message.user("connect() -> ECONNREFUSED"))
    assert pg.trigrams_enabled(url) is False
    found = ct.search(url, "connref")
    assert found == [] and "--trigrams" in found.notes[0]
    assert [h.entry_id for h in ct.search(url, "econnrefused")] == [before]

    stale = Session.open(f"{url}#{s.id}")  # opened while it is off: sends no words
    _trigrams_on(url)  # what was stored while it was off is indexed too
    assert pg.trigrams_enabled(url) is True
    late = stale.append_message(Message.user("late: ECONNREFUSED from a stale writer"))
    stale.close()
    with Session.open(f"{url}#{s.id}") as again:
        after = again.append_message(Message.user("again: ECONNREFUSED on retry"))
    header = SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/w")
    copied = open_catalog(url).create(header, [_old_entry("ECONNREFUSED, imported")])
    copied.close()
    found = ct.search(url, "connref")
    assert {h.entry_id for h in found} == {before, late, after, "e1"} and found.notes == []
    start, end = found[-1].marks[0]
    assert found[-1].snippet[start:end].lower() == "connref"
    # a candidate of the trigram index is checked against the text: the words must all be
    # inside words of the entry, not across its JSON
    assert ct.search(url, "connref nowhere") == []

    pg.create_schema(url, trigrams=False)
    assert pg.trigrams_enabled(url) is False and ct.search(url, "connref") == []
    with pytest.raises(InvalidArgument, match="trigrams must be"):
        pg.create_schema(url, trigrams="yes")  # type: ignore[arg-type]


def test_db_init_turns_search_inside_words_on_and_says_so(url: str) -> None:
    from helpers import run, run_json

    try:
        shown = run_json("db", "init", url, "--trigrams")
    except AssertionError:
        _trigrams_on(url)  # skips with the reason when the server has no pg_trgm
        raise
    assert shown["trigrams"] is True and shown["schema_version"] == pg.SCHEMA_VERSION
    assert run_json("db", "init", url)["trigrams"] is True  # left out: as it is
    assert "search inside words off" in run("db", "init", url, "--no-trigrams").stdout


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


def test_long_and_unusual_texts_never_fail_an_append_and_are_found(url: str) -> None:
    """PostgreSQL's tsvector limits (2046-byte words, 16383 positions, 1 MB of distinct
    words) are kept by the client: such entries are stored, and their words found."""
    import secrets

    texts = {
        "long-word": "x" * 3000 + " findme",
        "many-words": "opening phrase here " + "filler " * 20_000 + "closing needle",
        "distinct": "first " + " ".join(secrets.token_hex(8) for _ in range(80_000)),
        "unicode": "Straße Ünïcode naïve ΣΊΣΥΦΟΣ",
    }
    with Session.create(url) as s:
        ids = {k: s.append_message(Message.user(v)) for k, v in texts.items()}
    header = SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/w")
    open_catalog(url).create(header, [_old_entry(texts["many-words"])]).close()
    assert set(_hits(url, "findme")) == {ids["long-word"]}
    assert set(_hits(url, '"opening phrase"')) == {ids["many-words"], "e1"}
    assert set(_hits(url, "needle")) == {ids["many-words"], "e1"}
    assert set(_hits(url, "first")) == {ids["distinct"]}
    for word in ("STRASSE", "straße", "ünïcode", "naïve", "σίσυφος"):
        assert set(_hits(url, word)) == {ids["unicode"]}, word


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


@pytest.mark.parametrize("had_trigrams", [False, True])
def test_a_version_3_database_migrates_keeping_its_search(had_trigrams: bool) -> None:
    """A database made by contextree 0.2 (schema 3: a trigger parsed each line in SQL, and
    the trigram index where pg_trgm could be had) moves to the client-made vectors: what it
    holds is still found, the trigger and the old append function are gone, and search
    inside words stays as it was."""
    import psycopg

    base = require_postgres()
    fresh, drop = fresh_schema_url(base)
    try:
        header = SessionHeader(id="v3", created_at=now(), cwd="/w")
        line = encode_line(_old_entry("written by 0.2: ECONNREFUSED")).decode().rstrip("\n")
        head = encode_line(header).decode().rstrip("\n")
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute("CREATE TABLE contextree_schema_version (version integer PRIMARY "
                         "KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for version in (1, 2, 3):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO contextree_schema_version (version) VALUES (%s)",
                             [version])
            if had_trigrams:  # what schema 3 added when the server had pg_trgm
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
                except psycopg.Error:
                    pytest.skip("this server has no pg_trgm")
                conn.execute("CREATE INDEX contextree_entries_trgm_idx ON "
                             "contextree_entries USING gin (search_text public.gin_trgm_ops)")
            conn.execute("INSERT INTO contextree_sessions (id, header, created_at, bytes) "
                         "VALUES (%s, %s, now(), %s)", [header.id, head, len(head) + 1])
            # the 0.2 client's append: fifteen arguments, the text read by the trigger
            status = conn.execute(
                "SELECT r_status FROM contextree_append(%s, 'e1', NULL, 'message', false, "
                "NULL, %s, NULL, false, NULL, false, NULL, NULL, false, true)",
                [header.id, line]).fetchone()
            assert status == ("ok",)
        assert pg.create_schema(fresh) == pg.SCHEMA_VERSION == 6
        url = as_url(fresh)
        with psycopg.connect(fresh, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = "
                                "'contextree_entries'::regclass AND NOT tgisinternal"
                                ).fetchone() == (0,)
            assert conn.execute("SELECT array_agg(pronargs) FROM pg_proc WHERE proname = "
                                "'contextree_append' AND pronamespace = "
                                "current_schema()::regnamespace").fetchone() == ([17],)
        assert pg.trigrams_enabled(url) is had_trigrams
        assert [h.entry_id for h in ct.search(url, "econnrefused")] == ["e1"]
        assert [h.entry_id for h in ct.search(url, "connref")] == (
            ["e1"] if had_trigrams else [])
        with Session.open(f"{url}#{header.id}") as s:
            eid = s.append_message(Message.user("written by 0.3: ECONNREFUSED too"))
            size = s.storage.health().size
        assert [h.entry_id for h in ct.search(url, "econnrefused")] == [eid, "e1"]
        assert len(ct.search(url, "connref")) == (2 if had_trigrams else 0)
        assert open_catalog(url).get(header.id).size == size
    finally:
        drop()


def test_a_version_4_database_migrates_to_the_binary_vector() -> None:
    """A database made by schema 4 (the client sent each vector as a literal that the server
    parsed) takes the binary vector: what it holds is still found, words, identifiers,
    sha prefixes and phrases alike, and the append function takes a tsvector."""
    import psycopg

    from contextree.storage.postgres._words import search_columns, words_of

    base = require_postgres()
    fresh, drop = fresh_schema_url(base)
    try:
        header = SessionHeader(id="v4", created_at=now(), cwd="/w")
        text = "by 0.3: ECONNREFUSED in test_parse_header at 3f9a2b1c, connection refused"
        line = encode_line(_old_entry(text)).decode().rstrip("\n")
        head = encode_line(header).decode().rstrip("\n")
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute("CREATE TABLE contextree_schema_version (version integer PRIMARY "
                         "KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            for version in (1, 2, 3, 4):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO contextree_schema_version (version) VALUES (%s)",
                             [version])
            conn.execute("INSERT INTO contextree_sessions (id, header, created_at, bytes) "
                         "VALUES (%s, %s, now(), %s)", [header.id, head, len(head) + 1])
            # the 0.3 client's append: the vector as a text literal
            literal = search_columns(line, words=False)[0]
            status = conn.execute(
                "SELECT r_status FROM contextree_append(%s, 'e1', NULL, 'message', false, "
                "NULL, %s, NULL, false, NULL, false, NULL, NULL, false, true, %s, NULL)",
                [header.id, line, literal]).fetchone()
            assert status == ("ok",)
        assert pg.create_schema(fresh) == pg.SCHEMA_VERSION == 6
        with psycopg.connect(fresh, autocommit=True) as conn:
            assert conn.execute("SELECT array_agg(pg_get_function_identity_arguments(oid)) "
                                "FROM pg_proc WHERE proname = 'contextree_append' AND "
                                "pronamespace = current_schema()::regnamespace"
                                ).fetchone()[0][0].endswith("p_search tsvector, p_words text")
        url = as_url(fresh)
        with Session.open(f"{url}#{header.id}") as s:
            eid = s.append_message(Message.user(text.replace("0.3", "0.4")))
        with psycopg.connect(fresh, autocommit=True) as conn:  # sent in binary, unsorted
            expected = " ".join(w.decode() for w in words_of(text.replace("0.3", "0.4")))
            assert conn.execute("SELECT search = %s::tsvector, search::text FROM "
                                "contextree_entries WHERE id = %s", [expected, eid]
                                ).fetchone() == (True, conn.execute(
                                    "SELECT %s::tsvector::text", [expected]).fetchone()[0])
        for query in ("econnrefused", "test_parse_header", "3f9a2", '"connection refused"'):
            assert [h.entry_id for h in ct.search(url, query)] == [eid, "e1"], query
        assert [h.entry_id for h in ct.search(url, '"refused connection"')] == []
    finally:
        drop()


def test_words_are_found_whatever_the_client_encoding() -> None:
    """The vector goes in binary, which the server reads in the connection's client
    encoding: a writer whose connection is not UTF-8 stores the same words."""
    import psycopg

    fresh, drop = fresh_schema_url(require_postgres())
    try:
        pg.create_schema(fresh)
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute("SET client_encoding TO 'LATIN1'")
            header = SessionHeader(id="latin", created_at=now(), cwd="/w")
            with Session(pg.PostgresStorage.create(conn, header)) as s:
                eid = s.append_message(Message.user("Straße café naïve"))
        url = as_url(fresh)
        for query in ("café", "CAFÉ", "naïve", "strasse"):
            assert [h.entry_id for h in ct.search(url, query)] == [eid], query
    finally:
        drop()


def _old_entry(text: str = "an entry from before search: migrated") -> AnyEntry:
    from contextree.entries import MessageEntry

    return MessageEntry(id="e1", parent_id=None, timestamp=now(), message=Message.user(text))


def test_queries_become_tsqueries_without_operators_from_the_user() -> None:
    assert tsquery(parse_query('test_parse_header "a b" x* 3f9a2')) == (
        "('test' & 'parse' & 'header') & ('a' & 'b') & ('x':*) & ('3f9a2':*)")
    assert tsquery(parse_query("it's & | ! (x)")) == "('it' & 's') & ('x')"


def test_a_phrase_is_its_words_in_a_row_not_anywhere(url: str) -> None:
    """The stored vectors hold no positions: the order of a phrase (an identifier's parts)
    is checked on the text, in the database's search as in the directory's."""
    with Session.create(url) as s:
        row = s.append_message(Message.user("the connection refused: see test_parse_header"))
        apart = s.append_message(Message.user("refused the connection; header, parse, test"))
    assert set(_hits(url, '"connection refused"')) == {row}
    assert set(_hits(url, "test_parse_header")) == {row}
    assert set(_hits(url, "connection refused")) == {row, apart}  # two words, any order
    assert set(_hits(url, '"CONNECTION Refused"')) == {row}


def test_the_search_command_takes_a_database_url(url: str) -> None:
    from helpers import run, run_json

    with Session.create(url) as s:
        eid = s.append_message(Message.user("fleet wide words"))
    rows = run_json("search", "fleet", url)
    assert [r["entry_id"] for r in rows] == [eid] and rows[0]["url"] == f"{url}#{s.id}"
    assert "nothing to build" in run("index", url).stdout
    assert run("search", "fleet", url, "--fts", code=2).stderr.startswith("error: ")


def test_an_entry_s_words_are_the_same_read_from_it_or_from_its_line() -> None:
    """The append reads a plain message's text from the entry itself; any entry gives the
    words its line gives (what the directory index reads), and none has too long a word."""
    from contextree.entries import CompactionEntry, MessageEntry
    from contextree.storage.postgres._codec import line_text
    from contextree.storage.postgres._words import MAX_WORD, search_columns

    entries = [
        MessageEntry(id="a", parent_id=None, timestamp=now(),
                     message=Message.user("Straße ECONNREFUSED test_parse_header")),
        MessageEntry(id="b", parent_id=None, timestamp=now(), message=Message.assistant(
            "", tool_calls=[ToolCall(id="c", name="shell", arguments={"command": "ls -la"})])),
        MessageEntry(id="c", parent_id=None, timestamp=now(), message=Message.user("")),
        MessageEntry(id="d", parent_id=None, timestamp=now(),
                     message=Message.user("w" * (MAX_WORD + 1) + " short")),
        CompactionEntry(id="e", parent_id=None, timestamp=now(), summary="the summary",
                        first_kept_entry_id=None, tokens_before=3),
    ]
    for entry in entries:
        line = line_text(entry)
        assert search_columns(line, entry=entry) == search_columns(line), entry.id
    vectors = {e.id: search_columns(line_text(e), words=False)[0] for e in entries}
    assert set(str(vectors["a"]).split()) == {"strasse", "econnrefused", "test", "parse",
                                              "header"}
    assert set(str(vectors["b"]).split()) == {"shell", "ls", "la"}
    assert vectors["c"] is None and vectors["d"] == "short"
    assert set(str(vectors["e"]).split()) == {"the", "summary"}
    binary = search_columns(line_text(entries[4]), words=False, encoding="utf-8")[0]
    assert isinstance(binary, bytes) and binary.startswith(b"\0\0\0\2")  # two lexemes


def test_an_entry_s_words_follow_the_one_word_rule_on_any_text() -> None:
    """``words_of`` splits ASCII separators by a byte translation and leaves the rest to the
    regular expression: the words are those of ``WORD`` over the case-folded text, for any
    text (accents, scripts, symbols, combining marks, lone surrogates)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from contextree.storage._search_text import WORD
    from contextree.storage.postgres._words import words_of

    alphabet = st.one_of(st.sampled_from("aZ9_-. \n\t\u00e9\u00df\u0130\u0307\u2264\u00b5\u0661"
                                         "\u4e2d\U0001f600\udcff"), st.characters())

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet, max_size=80))
    def check(text: str) -> None:
        want = [w.encode("utf-8", "surrogatepass") for w in WORD.findall(text.casefold())]
        assert words_of(text) == want

    check()
