"""The schema: tables, indexes and the append function, created and migrated only by
``create_schema`` and versioned in ``contextree_schema_version``.

- ``contextree_sessions``: one row per session: the header line, ``created_at``, ``name``,
  ``leaf_id``, ``entry_count`` and ``updated_at`` (indexed, so ``list_sessions`` is one query).
- ``contextree_entries``: one row per entry: ``session_id``, ``id`` (primary key together, so
  duplicate ids are impossible), ``seq`` (append order), ``parent_id`` and a leaf entry's
  ``target_id`` (both foreign keys into the same session, so a missing parent is impossible),
  ``type``, and ``line``: the entry's JSON line exactly as ``encode_line`` wrote it, so every
  entry (an unknown type or field included) reads back unchanged.
- ``contextree_append(...)``: one append as one statement (see ``PostgresStorage``).

Version 3 adds search and sizes: ``contextree_sessions.bytes`` (the session's JSON lines, as
a file would hold them, kept by the append and by ``create``), and on each entry its
``search_text`` (what ``contextree_entry_text`` reads from the line: the same text as
``_search_text.entry_text``) and ``search`` (its ``tsvector``, words of letters and digits as
the directory index splits them), filled by a trigger in the statement that inserts the entry,
so in the append's own transaction. ``search`` has a GIN index; ``search_text`` a trigram one
(``pg_trgm``) when the extension can be created, so a term is found inside a word too.

Version 4 makes that cheap for the append: the client sends the entry's ``tsvector`` (a
literal of its distinct words, made by ``_words`` from the text it already has; no
positions) and ``contextree_append`` stores it; the trigger that parsed every line's JSON in
SQL is gone. The vectors of entries stored before keep their positions; search reads both.
The trigram index (words found inside words: ``CONNREF`` in ``ECONNREFUSED``) is optional
and off in a new database, because it costs an append more than the rest of search does:
``create_schema(target, trigrams=True)`` turns it on (``contextree db init URL
--trigrams``), ``trigrams=False`` off. It is on when the row ``trigrams`` is in
``contextree_settings``; the append reads that row under the session's row lock, so an
append never stores an entry without its words while the index is on. A version 3 database
that has the trigram index keeps it on through the migration.

Version 5 takes the vector as a ``tsvector`` parameter, which the client sends in binary
(its words distinct and sorted: the server copies them), where version 4 took a literal
that the server parsed and sorted in every append.
"""

from __future__ import annotations

from ...errors import InvalidArgument, StorageFailure
from ._connection import describe, short_lived
from ._driver import Connection, Target, psycopg, sql
from ._errors import first_line, mapped
from ._tables import (
    APPEND_FUNCTION,
    CONTENT_TEXT_FUNCTION,
    ENTRIES,
    ENTRY_ID_KEY,
    ENTRY_TEXT_FUNCTION,
    NO_SCHEMA,
    PARENT_KEY,
    SCHEMA_VERSIONS,
    SEARCH_VECTOR_FUNCTION,
    SESSIONS,
    SETTINGS,
    TARGET_KEY,
    TRIGRAM_INDEX,
    TRIGRAMS,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "create_schema", "require_schema", "schema_version",
           "trigrams_enabled", "trigrams_on"]

SCHEMA_VERSION = 6

# One append = one statement = one transaction (unless inside a batch) and one round trip;
# the session row stays locked only while the server runs this, not while a client thinks.
# Version 3 keeps the session's bytes; version 4 stores the vector and words the client
# sends (``_words``), and its words only while the trigram index is on (read under the
# session's row lock, so that turning it on, which locks the sessions table, never misses an
# append; a client that opened the session before sends none, and they are read here).
def _append_function(version: int, *, replace: bool = False) -> str:
    """``contextree_append`` as schema ``version`` (2 to 5) defines it; ``replace``: as
    ``CREATE OR REPLACE`` (version 3 replaced version 2's in place: same parameters)."""
    search = version >= 4
    sizes = version >= 3
    vector = "tsvector" if version >= 5 else "text"
    create = "CREATE OR REPLACE FUNCTION" if replace else "CREATE FUNCTION"
    params = f", p_search {vector}, p_words text" if search else ""
    words = " v_words text;" if search else ""
    bytes_kept = ",\n        bytes = bytes + octet_length(v_line) + 1" if sizes else ""
    columns, values, read_words = "", "", ""
    if search:
        columns = (", search,\n"
                   "                           search_text")
        values = (f", p_search{'::tsvector' if version < 5 else ''},\n"
                  "            v_words")
        read_words = f"""    -- the index's name looked up in the catalog: an expression, not a query (cheaper); the
    -- session row lock above waited for the transaction that turns it on, and taking it
    -- read the catalog's changes
    IF p_search IS NOT NULL AND to_regclass('{TRIGRAM_INDEX}') IS NOT NULL THEN
        -- a client that did not know the trigram index is on sends no words: read them
        v_words := coalesce(p_words, {ENTRY_TEXT_FUNCTION}(v_line));
    END IF;
"""
    return f"""{create} {APPEND_FUNCTION}(
    p_session text, p_id text, p_parent text, p_type text, p_is_leaf boolean,
    p_target text, p_line text, p_name text,
    p_check_expected boolean, p_expected text,
    p_reparent boolean, p_seen text, p_placeholder text,
    p_retry boolean, p_durable boolean{params}
) RETURNS TABLE (r_status text, r_leaf text, r_parent text, r_name text,
                 r_count bigint, r_line text)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_leaf text; v_name text; v_count bigint; v_line text;
    v_parent text := p_parent; v_new_leaf text;{words}
BEGIN
    IF NOT p_durable THEN  -- durable=False: the commit does not wait for the WAL flush
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
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
{read_words}    INSERT INTO {ENTRIES} (session_id, id, parent_id, type, target_id, line{columns})
    VALUES (p_session, p_id, v_parent, p_type, p_target, v_line{values});
    v_new_leaf := CASE WHEN p_is_leaf THEN p_target ELSE p_id END;
    UPDATE {SESSIONS} SET leaf_id = v_new_leaf, name = coalesce(p_name, name),
        entry_count = entry_count + 1, updated_at = now(){bytes_kept}
    WHERE id = p_session;
    RETURN QUERY SELECT 'ok', v_new_leaf, v_parent, coalesce(p_name, v_name),
                        v_count + 1, NULL::text;
END
$fn$"""


# Version 3: the searchable text of an entry, as ``_search_text.entry_text`` reads it.
_TEXT_OF = rf"""CREATE OR REPLACE FUNCTION {ENTRY_TEXT_FUNCTION}(j jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE m jsonb; out text;
BEGIN
    IF j->>'type' = 'message' THEN
        m := j->'message';
        out := concat_ws(E'\n', {CONTENT_TEXT_FUNCTION}(m->'content'),
            (SELECT string_agg(concat_ws(E'\n', t->>'name',
                    (SELECT string_agg(v, E'\n') FROM jsonb_each_text(
                        CASE WHEN jsonb_typeof(t->'arguments') = 'object'
                             THEN t->'arguments' ELSE '{{}}'::jsonb END) AS a(k, v))),
                    E'\n')
             FROM jsonb_array_elements(CASE WHEN jsonb_typeof(m->'tool_calls') = 'array'
                                            THEN m->'tool_calls' ELSE '[]'::jsonb END) t));
    ELSIF j->>'type' IN ('compaction', 'branch_summary') THEN
        out := j->>'summary';
    ELSIF j->>'type' = 'custom_message' THEN
        out := {CONTENT_TEXT_FUNCTION}(j->'content');
    END IF;
    RETURN nullif(out, '');
END
$fn$"""
_ENTRY_TEXT = rf"""CREATE OR REPLACE FUNCTION {ENTRY_TEXT_FUNCTION}(p_line text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    IF strpos(p_line, '\u') = 0 THEN
        RETURN {ENTRY_TEXT_FUNCTION}(p_line::jsonb);
    END IF;
    -- jsonb refuses NUL and lone surrogates: such lines (rare: text is written as UTF-8,
    -- only control characters escaped) are read in a block that turns an error into no
    -- text, so that an append never fails for its text
    BEGIN
        RETURN {ENTRY_TEXT_FUNCTION}(replace(p_line, '\u0000', ' ')::jsonb);
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
END
$fn$"""
_CONTENT_TEXT = f"""CREATE OR REPLACE FUNCTION {CONTENT_TEXT_FUNCTION}(p_content jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT CASE jsonb_typeof(p_content)
        WHEN 'string' THEN p_content #>> '{{}}'
        WHEN 'array' THEN (SELECT string_agg(coalesce(p->>'text', p->>'thinking'), E'\\n')
                           FROM jsonb_array_elements(p_content) p
                           WHERE jsonb_typeof(p) = 'object'
                             AND (p ? 'text' OR p ? 'thinking'))
    END
$fn$"""
_SEARCH_VECTOR = f"""CREATE OR REPLACE FUNCTION {SEARCH_VECTOR_FUNCTION}(p_text text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT to_tsvector('simple', regexp_replace(coalesce(p_text, ''), '[^[:alnum:]]+', ' ',
                                                'g'))
$fn$"""
_FILL_SEARCH = f"""CREATE OR REPLACE FUNCTION {ENTRIES}_fill_search() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.search_text := {ENTRY_TEXT_FUNCTION}(NEW.line);
    IF NEW.search_text IS NOT NULL THEN
        NEW.search := {SEARCH_VECTOR_FUNCTION}(NEW.search_text);
    END IF;
    RETURN NEW;
END
$fn$"""

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
            CONSTRAINT {ENTRY_ID_KEY} PRIMARY KEY (session_id, id),
            CONSTRAINT {PARENT_KEY} FOREIGN KEY (session_id, parent_id)
                REFERENCES {ENTRIES} (session_id, id),
            CONSTRAINT {TARGET_KEY} FOREIGN KEY (session_id, target_id)
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
    ),
    # Version 1 databases made by contextree 0.1 have an append function with a last
    # parameter that only tests used; it goes, and the function takes ``p_durable``.
    2: (
        f"DROP FUNCTION IF EXISTS {APPEND_FUNCTION}(text, text, text, text, boolean, text, "
        "text, text, boolean, text, boolean, text, text, boolean, float8)",
        _append_function(2),
    ),
    3: (
        f"ALTER TABLE {SESSIONS} ADD COLUMN bytes bigint NOT NULL DEFAULT 0",
        f"""UPDATE {SESSIONS} s SET bytes = octet_length(s.header) + 1 + coalesce(
            (SELECT sum(octet_length(e.line) + 1) FROM {ENTRIES} e
             WHERE e.session_id = s.id), 0)""",
        _CONTENT_TEXT,
        _TEXT_OF,
        _ENTRY_TEXT,
        _SEARCH_VECTOR,
        f"ALTER TABLE {ENTRIES} ADD COLUMN search_text text, ADD COLUMN search tsvector",
        f"""UPDATE {ENTRIES} SET search_text = {ENTRY_TEXT_FUNCTION}(line)""",
        f"UPDATE {ENTRIES} SET search = {SEARCH_VECTOR_FUNCTION}(search_text) "
        "WHERE search_text IS NOT NULL",
        _FILL_SEARCH,
        f"CREATE TRIGGER {ENTRIES}_search BEFORE INSERT ON {ENTRIES} FOR EACH ROW "
        f"EXECUTE FUNCTION {ENTRIES}_fill_search()",
        f"CREATE INDEX {ENTRIES}_search_idx ON {ENTRIES} USING gin (search)",
        # newest first: a common word's hits are read backwards from here, to the limit
        f"CREATE INDEX {ENTRIES}_newest_idx ON {ENTRIES} (seq)",
        # (contextree 0.2 also created the trigram index here when it could: see version 4)
        _append_function(3, replace=True),
    ),
    4: (
        f"CREATE TABLE {SETTINGS} (name text PRIMARY KEY, value text NOT NULL)",
        # a version 3 database that has the trigram index keeps searching inside words
        f"INSERT INTO {SETTINGS} (name, value) SELECT '{TRIGRAMS}', 'on' "
        f"WHERE to_regclass('{TRIGRAM_INDEX}') IS NOT NULL",
        f"DROP TRIGGER {ENTRIES}_search ON {ENTRIES}",
        f"DROP FUNCTION {ENTRIES}_fill_search()",
        # an entry's line with its vector is past the 2 KB at which PostgreSQL compresses a
        # row's line: keep rows of up to 4 KB as they are (compressing cost an append more
        # than storing the vector), as they were before the vector
        f"ALTER TABLE {ENTRIES} SET (toast_tuple_target = 4096)",
        f"DROP FUNCTION {APPEND_FUNCTION}(text, text, text, text, boolean, text, text, text, "
        "boolean, text, boolean, text, text, boolean, boolean)",
        _append_function(4),
    ),
    5: (
        f"DROP FUNCTION {APPEND_FUNCTION}(text, text, text, text, boolean, text, text, text, "
        "boolean, text, boolean, text, text, boolean, boolean, text, text)",
        _append_function(5),
    ),
    # Lookups by (session_id, id) planned while the table is small and never analyzed (a new
    # database, until autovacuum's first ANALYZE) estimate one row on every index that
    # starts with session_id, and a tie goes to the index created last: the append
    # function's checks, the foreign keys' checks and reads by id then kept generic plans
    # that scanned the whole session (an append at 3,000 entries cost 4x one at 500). The
    # key's index is made again, last, so that a tie goes to it; tests/storage checks the
    # plans.
    6: (
        f"CREATE UNIQUE INDEX {ENTRIES}_id_new ON {ENTRIES} (session_id, id)",
        f"ALTER TABLE {ENTRIES} DROP CONSTRAINT {PARENT_KEY}, DROP CONSTRAINT {TARGET_KEY}, "
        f"DROP CONSTRAINT {ENTRY_ID_KEY}",
        f"ALTER TABLE {ENTRIES} ADD CONSTRAINT {ENTRY_ID_KEY} PRIMARY KEY "
        f"USING INDEX {ENTRIES}_id_new",
        # the rows were checked when they were written: NOT VALID skips reading them again
        f"ALTER TABLE {ENTRIES} ADD CONSTRAINT {PARENT_KEY} FOREIGN KEY (session_id, parent_id) "
        f"REFERENCES {ENTRIES} (session_id, id) NOT VALID",
        f"ALTER TABLE {ENTRIES} ADD CONSTRAINT {TARGET_KEY} FOREIGN KEY (session_id, target_id) "
        f"REFERENCES {ENTRIES} (session_id, id) NOT VALID",
    ),
}
_MIGRATION_LOCK = 0x636F6E7465787472  # pg_advisory_xact_lock key: serializes create_schema


def create_schema(target: Target, *, trigrams: bool | None = None) -> int:
    """Create or upgrade contextree's tables; idempotent, safe to run from many processes.

    Nothing is created implicitly elsewhere: run this once per database (deploy step, or
    ``contextree db init URL``). Returns the schema version now in place.

    ``trigrams=True`` turns on search inside words (the ``pg_trgm`` index on each entry's
    words: ``CONNREF`` finds ``ECONNREFUSED``), ``False`` turns it off, ``None`` leaves it as
    it is (off in a new database). With it on, an append costs noticeably more (see the
    README's benchmarks). Turning it on indexes the entries already stored; appends wait
    meanwhile, and the server needs the ``pg_trgm`` extension (in PostgreSQL's contrib).
    """
    if trigrams is not None and not isinstance(trigrams, bool):
        raise InvalidArgument(f"trigrams must be True, False or None; got {trigrams!r}")
    with (mapped("could not create the schema"), short_lived(target) as conn,
          conn.transaction()):
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
        conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA_VERSIONS} ("
                     " version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute(
            f"SELECT coalesce(max(version), 0) FROM {SCHEMA_VERSIONS}").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StorageFailure(_newer_schema(current), path=describe(conn))
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"INSERT INTO {SCHEMA_VERSIONS} (version) VALUES (%s)", [version])
        if trigrams is not None and trigrams != trigrams_on(conn):
            _set_trigrams(conn, trigrams)
    return SCHEMA_VERSION


def trigrams_enabled(target: Target) -> bool:
    """Whether the database searches inside words (``create_schema(target, trigrams=True)``)."""
    with mapped("could not read the search settings"), short_lived(target) as conn:
        require_schema(conn)
        return trigrams_on(conn)


def trigrams_on(conn: Connection) -> bool:
    """Whether the trigram index is on (see the module's docstring), on ``conn``."""
    return conn.execute(f"SELECT 1 FROM {SETTINGS} WHERE name = %s",
                        [TRIGRAMS]).fetchone() is not None


def _set_trigrams(conn: Connection, on: bool) -> None:
    """Turn the trigram index on (index every stored entry's text) or off (drop it and the
    words kept for it), with the sessions table locked so that no append runs meanwhile."""
    conn.execute(f"LOCK TABLE {SESSIONS} IN EXCLUSIVE MODE")
    if not on:
        conn.execute(f"DELETE FROM {SETTINGS} WHERE name = %s", [TRIGRAMS])
        conn.execute(f"DROP INDEX IF EXISTS {TRIGRAM_INDEX}")
        conn.execute(f"UPDATE {ENTRIES} SET search_text = NULL WHERE search_text IS NOT NULL")
        return
    schema = _trigram_schema(conn)
    if schema is None:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION pg_trgm SCHEMA public")
        except psycopg.Error as e:
            raise StorageFailure(
                f"search inside words needs the pg_trgm extension, which this server could "
                f"not create ({first_line(e)}): install PostgreSQL's contrib package, or "
                "have a superuser run CREATE EXTENSION pg_trgm in this database",
                path=describe(conn)) from None
        schema = _trigram_schema(conn)
        assert schema is not None
    conn.execute(f"INSERT INTO {SETTINGS} (name, value) VALUES (%s, 'on') "
                 "ON CONFLICT (name) DO NOTHING", [TRIGRAMS])
    # what was stored while it was off: its text as the version 3 functions read it
    conn.execute(f"UPDATE {ENTRIES} SET search_text = {ENTRY_TEXT_FUNCTION}(line) "
                 "WHERE search_text IS NULL AND search IS NOT NULL")
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (search_text {}.{})")
                 .format(sql.Identifier(TRIGRAM_INDEX), sql.Identifier(ENTRIES),
                         sql.Identifier(schema), sql.Identifier("gin_trgm_ops")))


def _trigram_schema(conn: Connection) -> str | None:
    row = conn.execute("SELECT n.nspname FROM pg_extension x JOIN pg_namespace n "
                       "ON n.oid = x.extnamespace WHERE x.extname = 'pg_trgm'").fetchone()
    return None if row is None else str(row[0])


def schema_version(target: Target) -> int | None:
    """The schema version in the database, or ``None`` when ``create_schema`` never ran."""
    with mapped("could not read the schema version"), short_lived(target) as conn:
        return _schema_version(conn)


def _schema_version(conn: Connection) -> int | None:
    row = conn.execute(f"SELECT to_regclass('{SCHEMA_VERSIONS}') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    row = conn.execute(f"SELECT max(version) FROM {SCHEMA_VERSIONS}").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def require_schema(conn: Connection) -> None:
    """Refuse to work on a database whose schema is missing, older or newer than ours."""
    version = _schema_version(conn)
    where = describe(conn)
    if version is None:
        raise StorageFailure(f"no contextree tables in this database; {NO_SCHEMA}",
                             path=where)
    if version < SCHEMA_VERSION:
        raise StorageFailure(f"the contextree schema is at version {version}, this "
                             f"version needs {SCHEMA_VERSION}; {NO_SCHEMA} (it migrates)",
                             path=where)
    if version > SCHEMA_VERSION:
        raise StorageFailure(_newer_schema(version), path=where)


def _newer_schema(version: int) -> str:
    return (f"the contextree schema is at version {version}, newer than this contextree "
            f"understands ({SCHEMA_VERSION}); upgrade contextree")
