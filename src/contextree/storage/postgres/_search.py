"""Search in PostgreSQL: the entries whose text matches a query, across every session.

Each entry's ``search`` (a ``tsvector``) is sent by the client with the append
(``_words``) and stored in the append's own statement (``_schema``, version 4), so the index
is current when the append commits and no refresh exists. A query's terms become a
``tsquery`` of the same words (split and case-folded as the entries' are: a whole word,
``word*`` or a sha's start as a prefix, a quoted phrase as those words in a row). Where the
trigram index is on (``create_schema(url, trigrams=True)``) and the words find fewer hits
than asked for, terms of three characters or more are also looked for inside words
(``CONNREF`` finds ``ECONNREFUSED``) through the trigram index on ``search_text``; those
candidates are checked against the entry's text before they count. Hits come newest
first, in the order the database stored them (an index on ``seq`` lets a common word stop
at the limit).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from ...errors import InvalidArgument
from .._search_index import hidden_by_compaction
from .._search_text import (
    SearchFilters,
    SearchHit,
    SearchResults,
    Terms,
    entry_text,
    parse_line,
    query_terms,
    snippet,
)
from ._codec import decode_header
from ._connection import describe, short_lived
from ._driver import Connection, Target
from ._errors import mapped
from ._schema import require_schema, trigrams_on
from ._tables import ENTRIES, SESSIONS

__all__ = ["search_database"]

PAGE = 200  # candidates fetched at a time
FIRST_WINDOW = 4096  # entries (by seq, newest first) the first query looks among
MIN_TRIGRAM = 3  # a term shorter than this cannot use the trigram index


def tsquery(terms: Terms) -> str:
    """``terms`` as ``tsquery`` text: every word of every phrase required (``&``), the last
    word of a phrase a prefix (``:*``) where the term is one. The stored vectors have no
    positions (``_words``), so a phrase's order is checked on the text (``phrase_checks``).
    The words are already split and case-folded as the stored vectors' are (letters and
    digits only: nothing to quote)."""
    parts = []
    for words, prefix in zip(terms.phrases, terms.prefix, strict=True):
        lexemes = [f"'{w}'" for w in words]
        if prefix:
            lexemes[-1] += ":*"
        parts.append("(" + " & ".join(lexemes) + ")")
    return " & ".join(parts)


def phrase_checks(terms: Terms) -> list[re.Pattern[str]]:
    """A pattern for each phrase of two words or more: the words in a row, as the candidate's
    case-folded text must hold them."""
    return [Terms((words,), (prefix,)).pattern()
            for words, prefix in zip(terms.phrases, terms.prefix, strict=True)
            if len(words) > 1]


def search_database(target: Target, target_of: Callable[[str], str], query: str,
                    filters: SearchFilters | None = None, *, limit: int | None = 20,
                    fts: bool = False) -> SearchResults:
    """The entries of the database at ``target`` whose text matches ``query`` (see the
    module's docstring); ``target_of`` names a session's target (``URL#ID``)."""
    if fts:
        raise InvalidArgument("FTS5 syntax is for a directory's index; PostgreSQL searches "
                              "the words as they are: leave --fts off")
    filters = filters or SearchFilters()
    terms = query_terms(query)
    notes: list[str] = []
    with mapped("could not search"), short_lived(target) as conn:
        require_schema(conn)
        trigrams = trigrams_on(conn)
        inside = [w for w in terms.phrases if all(len(x) >= MIN_TRIGRAM for x in w)]
        use_trigrams = trigrams and len(inside) == len(terms.phrases)
        query_args: list[Any] = [tsquery(terms)]
        words = "e.search @@ %s::tsquery"
        hits = _collect(conn, words, query_args, filters, limit,
                        terms.pattern(), target_of, required=phrase_checks(terms))
        if use_trigrams and (limit is None or len(hits) < limit):
            # Few whole-word hits: look inside words too (the trigram index), for the rest.
            likes = " AND ".join(["e.search_text ILIKE %s"] * len(inside))
            more = _collect(conn, f"{likes} AND NOT ({words})",
                            ["%" + "%".join(w) + "%" for w in inside]
                            + query_args, filters,
                            None if limit is None else limit - len(hits),
                            _pattern(terms, inside=True), target_of,
                            required=[_pattern(Terms((w,), (False,)), inside=True)
                                      for w in inside])
            hits = sorted(hits + more, key=lambda h: h.timestamp, reverse=True)
        elif not trigrams and not hits:
            notes.append("search inside words is off in this database: terms are found as "
                         "whole words or their starts (turn it on with `contextree db init "
                         "URL --trigrams`; appends then cost more)")
    return SearchResults(hits, notes=notes)


def _pattern(terms: Terms, *, inside: bool) -> re.Pattern[str]:
    if not inside:
        return terms.pattern()
    body = "|".join(r"[\W_]*".join(re.escape(w) for w in words) for words in terms.phrases)
    return re.compile(body, re.IGNORECASE)


def _collect(conn: Connection, condition: str, args: list[Any], filters: SearchFilters,
             limit: int | None, pattern: re.Pattern[str],
             target_of: Callable[[str], str], *,
             required: list[re.Pattern[str]] | None = None) -> list[SearchHit]:
    """Hits a page of candidates at a time, newest first, each page's sessions read in three
    queries whatever their number. A candidate whose case-folded text does not match every
    pattern of ``required`` is not a hit.

    The candidates are read from windows of ``seq``, the newest ``FIRST_WINDOW`` entries
    first, then windows eight times as wide, then the rest: a common word is answered from
    the newest rows through the ``seq`` index, and a rare one reaches the whole table, where
    the planner takes the GIN index. One query over the whole table would leave the planner
    to guess between the two from the words' frequencies, which it cannot do for several
    words together (it multiplies them, and sorts every match of an identifier's parts)."""
    sessions: dict[str, _DbSession | None] = {}
    hits: list[SearchHit] = []
    where = describe(conn)
    page = max(PAGE, 2 * (limit or 0))
    newest = conn.execute(f"SELECT max(seq) FROM {ENTRIES}").fetchone()
    if newest is None or newest[0] is None:
        return hits
    upper = int(newest[0]) + 1  # exclusive
    window = FIRST_WINDOW
    lower: int | None = upper - window
    while True:
        bounds = " AND e.seq < %s" + ("" if lower is None else " AND e.seq >= %s")
        rows = conn.execute(
            f"SELECT e.session_id, e.id, e.line, e.seq FROM {ENTRIES} e WHERE {condition}"
            f"{bounds} ORDER BY e.seq DESC LIMIT %s",
            [*args, upper, *([] if lower is None else [lower]), page]).fetchall()
        candidates = []
        for session_id, eid, line, _ in rows:
            obj = parse_line(line)
            found = entry_text(obj)
            if found is None:
                continue
            if required:
                folded = found[2].casefold()
                if not all(p.search(folded) for p in required):
                    continue
            stamp = obj.get("timestamp") if isinstance(obj, dict) else None
            stamp = stamp if isinstance(stamp, str) else ""
            if filters.matches_entry(found[0], found[1], stamp):
                candidates.append((session_id, eid, stamp, found))
        missing = {c[0] for c in candidates} - set(sessions)
        if missing:
            sessions.update(_sessions(conn, sorted(missing), filters, where))
        for session_id, eid, stamp, (role, tool, text) in candidates:
            session = sessions.get(session_id)
            if session is None:
                continue
            on_branch, compacted = session.place(eid)
            if filters.on_branch and not on_branch:
                continue
            shown, marks = snippet(text, pattern)
            hits.append(SearchHit(session_id=session_id, target=target_of(session_id),
                                  entry_id=eid, role=role, timestamp=stamp, snippet=shown,
                                  marks=marks, on_branch=on_branch, compacted=compacted,
                                  tool=tool, session_name=session.name))
            if limit is not None and len(hits) >= limit:
                return hits
        if len(rows) == page:
            upper = rows[-1][3]  # the rest of this window
            continue
        if lower is None or lower <= 1:
            return hits
        upper = lower
        window *= 8
        lower = upper - window if upper - window > 1 else None


class _DbSession:
    """A session of the hits: its name, current branch and compaction boundary."""

    def __init__(self, name: str | None, branch: list[str],
                 compactions: dict[str, Any]) -> None:
        self.name = name
        self.on = set(branch)
        self.hidden = hidden_by_compaction(branch, compactions)

    def place(self, eid: str) -> tuple[bool, bool]:
        """Whether ``eid`` is on the current branch, and whether compaction hid it."""
        return eid in self.on, eid in self.hidden


_BRANCHES = f"""WITH RECURSIVE p(session_id, id, parent, depth) AS (
    SELECT e.session_id, e.id, e.parent_id, 1 FROM {SESSIONS} s
    JOIN {ENTRIES} e ON e.session_id = s.id AND e.id = s.leaf_id
    WHERE s.id = ANY(%(ids)s)
    UNION ALL
    SELECT e.session_id, e.id, e.parent_id, p.depth + 1 FROM p
    JOIN {ENTRIES} e ON e.session_id = p.session_id AND e.id = p.parent
    WHERE p.depth <= %(most)s
) SELECT session_id, id FROM p ORDER BY session_id, depth DESC"""


def _sessions(conn: Connection, ids: list[str], filters: SearchFilters,
              where: str) -> dict[str, _DbSession | None]:
    """The sessions ``ids`` (``None`` for one the filters leave out): their rows, current
    branches and compactions, in three queries."""
    out: dict[str, _DbSession | None] = dict.fromkeys(ids)
    rows = conn.execute(f"SELECT id, header, name, entry_count FROM {SESSIONS} "
                        "WHERE id = ANY(%s)", [ids]).fetchall()
    kept: dict[str, tuple[str | None, int]] = {}
    for session_id, head, name, count in rows:
        if filters.matches_cwd(decode_header(head, where).cwd):
            kept[session_id] = (name, int(count))
    if filters.model is not None and kept:
        model = orjson.dumps(filters.model).decode()
        found = conn.execute(
            f"SELECT DISTINCT session_id FROM {ENTRIES} WHERE session_id = ANY(%s) AND type "
            "IN ('message', 'model_change') AND (line LIKE %s OR line LIKE %s)",
            [list(kept), f'%"model":{model}%', f'%"model_id":{model}%']).fetchall()
        kept = {r[0]: kept[r[0]] for r in found}
    if not kept:
        return out
    branches: dict[str, list[str]] = {i: [] for i in kept}
    most = max(count for _, count in kept.values())
    for session_id, eid in conn.execute(_BRANCHES, {"ids": list(kept), "most": most}):
        branches[session_id].append(eid)
    compactions: dict[str, dict[str, Any]] = {i: {} for i in kept}
    for session_id, eid, line in conn.execute(
            f"SELECT session_id, id, line FROM {ENTRIES} WHERE session_id = ANY(%s) "
            "AND type = 'compaction'", [list(kept)]):
        obj = parse_line(line)
        if isinstance(obj, dict):
            pinned = obj.get("pinned")
            compactions[session_id][eid] = [obj.get("first_kept_entry_id"),
                                            pinned if isinstance(pinned, list) else None,
                                            obj.get("retained_tail") is not None]
    for session_id, (name, _) in kept.items():
        out[session_id] = _DbSession(name, branches[session_id], compactions[session_id])
    return out
