"""A PostgreSQL database as a catalog: every session in it, by id, through one query each."""

from __future__ import annotations

from collections.abc import Sequence

from ...entries import AnyEntry, SessionHeader
from .._base import Storage, check_session_id
from .._catalog import CatalogListing, Query, SessionInfo, filter_sessions, pick_session
from .._describe import utc_stamp
from .._search_text import SearchFilters, SearchResults
from ._connection import redact, split_session_url
from ._driver import Target
from ._listing import SessionSummary, delete_session, list_sessions
from ._storage import PostgresStorage

__all__ = ["PostgresCatalog"]


class PostgresCatalog:
    """The sessions of one database: ``target`` is a ``postgresql://`` URL (without
    ``#SESSION_ID``) or the application's own pool."""

    def __init__(self, target: Target) -> None:
        if isinstance(target, str):
            target, _ = split_session_url(target)
        self._target = target
        self._url = target if isinstance(target, str) else None

    @property
    def where(self) -> str:
        """The database's URL, without its password."""
        return redact(self._url) if self._url is not None else "postgresql (a pool)"

    def __repr__(self) -> str:
        return f"PostgresCatalog({self.where!r})"

    def _info(self, row: SessionSummary) -> SessionInfo:
        h = row.header
        return SessionInfo(id=row.id, target=self.target(row.id), name=row.name,
                           created=utc_stamp(h.created_at),
                           last_activity=utc_stamp(row.last_activity or h.created_at),
                           entries=row.entry_count, size=row.size, cwd=h.cwd,
                           parent_session=h.parent_session, metadata=h.metadata)

    def list(self, query: Query | None = None, *, limit: int | None = None) -> CatalogListing:
        """Sessions matching ``query``, newest activity first."""
        rows = list_sessions(self._target)
        infos = [self._info(r) for r in rows]
        return CatalogListing(filter_sessions(infos, query, limit,
                                       lambda i: PostgresStorage.open(self._target, i.id,
                                                                      readonly=True)))

    def search(self, query: str, filters: SearchFilters | None = None, *,
               limit: int | None = 20, fts: bool = False,
               refresh: bool = True) -> SearchResults:
        """The entries whose text matches ``query``, through the database's full-text
        search (kept current by every append: ``refresh`` has nothing to do); see
        ``contextree.search``."""
        from ._search import search_database

        return search_database(self._target, self.target, query, filters, limit=limit,
                               fts=fts)

    def get(self, ref: str) -> SessionInfo:
        """The session with id ``ref`` (or the one whose id starts with it): one query."""
        check_session_id(ref)
        rows = list_sessions(self._target, prefix=ref, limit=6)
        return pick_session(ref, (self._info(r) for r in rows), self.where)

    def target(self, session_id: str) -> str:
        """``URL#SESSION_ID`` (with the URL as given, so that it opens)."""
        base = self._url if self._url is not None else self.where
        return f"{base}#{check_session_id(session_id)}"

    def open(self, ref: str, *, readonly: bool = False, durable: bool = True) -> Storage:
        """The session ``ref`` names, on this catalog's URL or pool."""
        info = self.get(ref)
        return PostgresStorage.open(self._target, info.id, readonly=readonly, durable=durable)

    def create(self, header: SessionHeader, entries: Sequence[AnyEntry] = (), *,
               durable: bool = True) -> Storage:
        """A new session, header and entries in one transaction."""
        return PostgresStorage.create(self._target, header, entries, durable=durable)

    def delete(self, ref: str) -> SessionInfo:
        """Delete the session and all its entries."""
        info = self.get(ref)
        delete_session(self._target, info.id)
        return info

    def delete_unchanged(self, info: SessionInfo) -> bool:
        """Delete the session only if nothing was appended to it since ``info`` was listed,
        in one statement (see ``delete_session``); True if it was deleted."""
        return delete_session(self._target, info.id, entry_count=info.entries)
