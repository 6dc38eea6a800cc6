"""``search``: the entries of a catalog's sessions whose text matches a query.

A directory is searched through the index beside it (``_search_index``), PostgreSQL through
its own full-text search (``postgres._search``): each is the catalog's ``search`` method. Any
other catalog (``memory://``, a registered backend without a ``search`` method) is searched
by reading every session, with the same terms, filters and hits.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidArgument, SessionNotFound
from ._backends import open_catalog
from ._base import Storage
from ._catalog import Catalog
from ._describe import utc_stamp
from ._search_text import (
    SearchFilters,
    SearchHit,
    SearchResults,
    entry_text,
    parse_query,
    snippet,
)

__all__ = ["scan_search", "search"]


def search(where: str | os.PathLike[str] | Catalog, query: str, *, role: str | None = None,
           since: str | None = None, until: str | None = None, cwd: str | None = None,
           model: str | None = None, tool: str | None = None, on_branch: bool = False,
           limit: int | None = 20, fts: bool = False, refresh: bool = True) -> SearchResults:
    """The entries of the sessions at ``where`` (a directory, a ``postgresql://`` URL, any
    catalog) whose text matches ``query``, newest first, at most ``limit``.

    The query's words are taken literally: each matches a whole word (``word*`` and a sha's
    first digits match its start), and a ``"quoted phrase"`` those words in a row; an
    identifier (``test_parse_header``) matches as the phrase of its parts. ``fts=True`` takes SQLite FTS5 syntax instead (``AND``,
    ``OR``, ``NOT``, ``NEAR``...; a directory only). The filters: ``role`` (``user``,
    ``assistant``, ``tool``, ``compaction``...), ``since``/``until`` (ISO times, on the
    entry), ``cwd`` (sessions run there or below), ``model`` (a model that answered in
    the session), ``tool`` (a tool called or answered), ``on_branch`` (only entries on the
    current branch). Hits off the current branch, and those a compaction took out of the
    model's view, are found too, and say so (``on_branch``, ``compacted``). A directory's
    index is refreshed first unless ``refresh`` is false. The result is a list of
    ``SearchHit`` with ``notes`` (what happened to the index) and ``unlisted``."""
    filters = SearchFilters(role=role, since=utc_stamp(since) if since else None,
                            until=utc_stamp(until) if until else None, cwd=cwd, model=model,
                            tool=tool, on_branch=on_branch)
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidArgument(f"limit must be 1 or more (or None); got {limit!r}")
    catalog = open_catalog(where)
    method = getattr(catalog, "search", None)
    if method is not None:
        found: SearchResults = method(query, filters, limit=limit, fts=fts, refresh=refresh)
        return found
    return scan_search(catalog, query, filters, limit=limit, fts=fts)


def scan_search(catalog: Catalog, query: str, filters: SearchFilters | None = None, *,
                limit: int | None = 20, fts: bool = False) -> SearchResults:
    """``search`` by reading every session of ``catalog`` (no index): newest entries first."""
    if fts:
        raise InvalidArgument(f"FTS5 syntax needs an index; {catalog.where} has none: leave "
                              "fts off to search for the words as they are")
    filters = filters or SearchFilters()
    terms = parse_query(query)
    if terms.empty:
        raise InvalidArgument(f"nothing to search for in {query!r}: a query needs a word "
                              "(letters or digits)")
    pattern = terms.pattern()
    listing = catalog.list()
    hits: list[SearchHit] = []
    for info in listing.sessions:
        if not filters.matches_cwd(info.cwd):
            continue
        try:
            storage = catalog.open(info.id, readonly=True)
        except (OSError, SessionNotFound):
            continue
        try:
            hits.extend(_scan_one(storage, info.target, info.name, filters, terms, pattern))
        finally:
            storage.close()
    hits.sort(key=lambda h: h.timestamp, reverse=True)
    return SearchResults(hits[:limit] if limit is not None else hits,
                         unlisted=listing.unlisted)


def _scan_one(storage: Storage, target: str, name: str | None, filters: SearchFilters,
              terms: Any, pattern: Any) -> list[SearchHit]:
    from ..entries import CompactionEntry, MessageEntry, ModelChangeEntry, to_dict
    from ._search_index import hidden_by_compaction

    entries = list(storage.entries())
    if filters.model is not None and not any(
            (isinstance(e, MessageEntry) and e.message.model == filters.model)
            or (isinstance(e, ModelChangeEntry) and e.model_id == filters.model)
            for e in entries):
        return []
    branch = [e.id for e in storage.path(storage.leaf_id)]
    compactions = {e.id: [e.first_kept_entry_id, e.pinned, e.retained_tail is not None]
                   for e in entries if isinstance(e, CompactionEntry)}
    on = set(branch)
    hidden = hidden_by_compaction(branch, compactions)
    out: list[SearchHit] = []
    for entry in entries:
        found = entry_text(to_dict(entry))
        if found is None:
            continue
        role, tool, text = found
        stamp = utc_stamp(entry.timestamp)
        if not filters.matches_entry(role, tool, stamp) or not terms.found_in(text):
            continue
        if filters.on_branch and entry.id not in on:
            continue
        shown, marks = snippet(text, pattern)
        out.append(SearchHit(session_id=storage.header.id, target=target, entry_id=entry.id,
                             role=role, timestamp=stamp, snippet=shown, marks=marks,
                             on_branch=entry.id in on, compacted=entry.id in hidden,
                             tool=tool, session_name=name))
    return out
