"""In-memory storage and catalogs: fast, nothing persisted; for tests and throwaway sessions."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

from msgspec import UNSET, UnsetType

from ..entries import NO_JSON_FORM, AnyEntry, SessionHeader, encode_line
from ..errors import SessionExists, SessionNotFound
from ._base import (
    IndexedStorage,
    StorageHealth,
    TreeIndex,
    check_header,
    check_session_id,
    settle_parent,
    unencodable,
)
from ._catalog import CatalogListing, Query, SessionInfo, filter_sessions, pick_session
from ._describe import utc_stamp


class MemoryStorage(IndexedStorage):
    """Entries held in a dict, with the same rules as every other backend."""

    def __init__(self, header: SessionHeader) -> None:
        super().__init__(TreeIndex(check_header(header), "memory"))
        self._deleted = False
        self._lock = threading.Lock()

    def append(self, entry: AnyEntry, *, expected_leaf: str | UnsetType | None = UNSET,
               on_leaf: bool = False) -> None:
        """Validate one entry and keep it (it becomes the leaf); see ``Storage.append``."""
        with self._lock:
            if self._deleted:
                raise SessionNotFound("the session was deleted", path=self.location)
            index = self._index
            entry = settle_parent(entry, index.leaf_id, location=self.location,
                                  expected_leaf=expected_leaf, on_leaf=on_leaf)
            index.check(entry)
            try:  # the same rule as the backends that write lines: it has a JSON form
                encode_line(entry)
            except NO_JSON_FORM as e:
                raise unencodable(entry, self.location, e) from None
            index.add(entry)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Nothing to group: an append is complete when it returns."""
        yield

    def delete(self) -> None:
        """Forget every entry; later appends fail with ``SessionNotFound``."""
        self._index = TreeIndex(self._index.header, self._index.location)
        self._deleted = True

    def health(self) -> StorageHealth:
        """Entry count; no size and nothing quarantined in memory."""
        return StorageHealth(entries=len(self), size=None)


class MemoryCatalog:
    """Sessions held in memory under one name (``memory://NAME``): for tests, and for
    applications that want throwaway sessions found by id like any others."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._sessions: dict[str, MemoryStorage] = {}
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """``memory://NAME``."""
        return f"memory://{self.name}"

    def __repr__(self) -> str:
        return f"MemoryCatalog({self.name!r})"

    def _info(self, storage: MemoryStorage) -> SessionInfo:
        header = storage.header
        last = None
        for entry in storage.entries():
            last = entry.timestamp
        return SessionInfo(id=header.id, target=self.target(header.id), name=storage.name,
                           created=utc_stamp(header.created_at),
                           last_activity=utc_stamp(last or header.created_at),
                           entries=len(storage), size=None, cwd=header.cwd,
                           parent_session=header.parent_session, metadata=header.metadata)

    def list(self, query: Query | None = None, *, limit: int | None = None) -> CatalogListing:
        """Sessions matching ``query``, newest activity first."""
        with self._lock:
            stores = dict(self._sessions)
        infos = [self._info(s) for s in stores.values()]
        return CatalogListing(filter_sessions(infos, query, limit, lambda i: stores[i.id]))

    def get(self, ref: str) -> SessionInfo:
        """The session with id ``ref`` (or the one whose id starts with it)."""
        with self._lock:
            stores = list(self._sessions.values())
        return pick_session(ref, (self._info(s) for s in stores), self.where)

    def target(self, session_id: str) -> str:
        """``memory://NAME#SESSION_ID``."""
        return f"{self.where}#{check_session_id(session_id)}"

    def open(self, ref: str, *, readonly: bool = False, durable: bool = True) -> MemoryStorage:
        """The session ``ref`` names (the same object every time: memory is shared)."""
        info = self.get(ref)
        with self._lock:
            return self._sessions[info.id]

    def create(self, header: SessionHeader, entries: Sequence[AnyEntry] = (), *,
               durable: bool = True) -> MemoryStorage:
        """A new session holding ``entries`` (``SessionExists`` if the id is taken)."""
        check_session_id(header.id)
        storage = MemoryStorage(header)
        for entry in entries:
            storage.append(entry)
        with self._lock:
            if header.id in self._sessions:
                raise SessionExists(f"session {header.id!r} exists", path=self.where)
            self._sessions[header.id] = storage
        return storage

    def delete(self, ref: str) -> SessionInfo:
        """Forget the session ``ref`` names."""
        info = self.get(ref)
        with self._lock:
            storage = self._sessions.pop(info.id, None)
        if storage is not None:
            storage.delete()
        return info


_NAMED: dict[str, MemoryCatalog] = {}
_NAMED_LOCK = threading.Lock()


def memory_catalog(name: str) -> MemoryCatalog:
    """The process-wide memory catalog called ``name`` (made on first use)."""
    with _NAMED_LOCK:
        catalog = _NAMED.get(name)
        if catalog is None:
            catalog = _NAMED[name] = MemoryCatalog(name)
        return catalog
