"""A directory as a catalog: every session file under it, found by the id in its header.

New sessions are written as ``<id>.jsonl`` (``file_name_for``) at the top of the directory,
so a session created here is found by its id at once; any other session file below it
(``*.jsonl`` in any folder that is not hidden) is found by a listing. Nothing is followed
out of the directory: symbolic links and special files are reported, never opened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..entries import AnyEntry, SessionHeader
from ..errors import SessionNotFound
from ._base import Storage, check_session_id
from ._catalog import (
    CatalogListing,
    Query,
    SessionInfo,
    Unlisted,
    file_name_for,
    filter_sessions,
    pick_session,
)
from ._describe import describe, session_files, session_stats

if TYPE_CHECKING:  # search loads its modules when it runs
    from ._search_text import SearchFilters, SearchResults

__all__ = ["DirectoryCatalog"]

Describer = Callable[[Path], "SessionInfo | Unlisted"]


class DirectoryCatalog:
    """The sessions under ``root`` (see the module's docstring).

    ``describe`` reads one file's ``SessionInfo``; a cache of them (the search index) can
    stand in for it, as long as it answers what the file holds now. Without a ``describer``
    a listing uses the one kept in the search index's file (``_listing_cache``: a file is
    read again only when its stat changed), unless ``cache`` is false.
    """

    def __init__(self, root: str | Path, *, describer: Describer | None = None,
                 cache: bool = True) -> None:
        self.root = Path(root)
        self._describe: Describer = describer or describe
        self._cache = cache and describer is None

    @property
    def where(self) -> str:
        """The directory, as given."""
        return str(self.root)

    def __repr__(self) -> str:
        return f"DirectoryCatalog({self.where!r})"

    def scan(self) -> CatalogListing:
        """Every session file under the directory (unsorted) and what was passed over."""
        listing = CatalogListing()
        if not self.root.is_dir():
            raise SessionNotFound("no such directory", path=self.where)
        cache = None
        if self._cache:
            from ._listing_cache import ListingCache

            cache = ListingCache.open(self.root)
        if cache is None:
            for path in session_files(self.root, listing.unlisted):
                found = self._describe(path)
                if isinstance(found, SessionInfo):
                    listing.sessions.append(found)
                else:
                    listing.unlisted.append(found)
            return listing
        try:
            for name, st in session_stats(self.root, listing.unlisted):
                found = cache.describe(name, st)
                if isinstance(found, SessionInfo):
                    listing.sessions.append(found)
                else:
                    listing.unlisted.append(found)
        finally:
            cache.save()
        return listing

    def search(self, query: str, filters: SearchFilters | None = None, *,
               limit: int | None = 20, fts: bool = False,
               refresh: bool = True) -> SearchResults:
        """The entries of these sessions whose text matches ``query``, through the search
        index beside them (refreshed first unless ``refresh`` is false); see
        ``contextree.search``."""
        from ._search_index import search_directory

        return search_directory(self.root, query, filters, limit=limit, fts=fts,
                                refresh=refresh)

    def list(self, query: Query | None = None, *, limit: int | None = None) -> CatalogListing:
        """Sessions matching ``query``, newest activity first, and what was passed over."""
        listing = self.scan()
        listing.sessions = filter_sessions(listing.sessions, query, limit, self._read)
        listing.unlisted.sort(key=lambda u: u.where)
        return listing

    def _read(self, info: SessionInfo) -> Storage:
        from ._jsonl import JsonlStorage  # on use: a listing writes no session
        return JsonlStorage.open(info.target, readonly=True)

    def get(self, ref: str) -> SessionInfo:
        """The session with id ``ref``: its own file first (``<id>.jsonl``), else the one
        session under the directory whose id is (or starts with) ``ref``."""
        own = self._own_file(ref)
        if own is not None:
            return own
        return pick_session(ref, self.scan().sessions, self.where)

    def _own_file(self, ref: str) -> SessionInfo | None:
        if not isinstance(ref, str) or not ref:
            return None
        path = self.root / file_name_for(ref)
        if not path.is_file():
            return None
        found = self._describe(path)
        return found if isinstance(found, SessionInfo) and found.id == ref else None

    def target(self, session_id: str) -> str:
        """Where a session with this id is kept here: ``<directory>/<id>.jsonl``."""
        return str(self.root / file_name_for(check_session_id(session_id)))

    def open(self, ref: str, *, readonly: bool = False, durable: bool = True) -> Storage:
        """The storage of the session ``ref`` names (see ``get``)."""
        info = self.get(ref)
        from ._jsonl import JsonlStorage
        storage = JsonlStorage.open(info.target, readonly=readonly, durable=durable)
        if storage.header.id != info.id:  # replaced between the listing and the open
            storage.close()
            raise SessionNotFound(f"{info.target} no longer holds session {info.id!r}",
                                  path=info.target)
        return storage

    def create(self, header: SessionHeader, entries: Sequence[AnyEntry] = (), *,
               durable: bool = True) -> Storage:
        """A new ``<id>.jsonl`` at the top of the directory (``SessionExists`` if taken)."""
        if not self.root.is_dir():
            raise SessionNotFound("no such directory (create it first)", path=self.where)
        from ._jsonl import JsonlStorage
        return JsonlStorage.create(self.target(header.id), header, entries, durable=durable)

    def delete(self, ref: str) -> SessionInfo:
        """Delete the session file ``ref`` names, with its quarantine and index files."""
        info = self.get(ref)
        from ._jsonl import JsonlStorage
        storage = JsonlStorage.open(info.target)
        try:
            if storage.header.id != info.id:
                raise SessionNotFound(f"{info.target} no longer holds session {info.id!r}",
                                      path=info.target)
            storage.delete()
        finally:
            storage.close()
        return info
