"""In-memory storage: fast, nothing persisted; for tests and throwaway sessions."""

from __future__ import annotations

from ..entries import AnyEntry, SessionHeader
from .base import IndexedStorage, TreeIndex


class MemoryStorage(IndexedStorage):
    """Entries held in a dict, with the same rules as every other backend."""

    def __init__(self, header: SessionHeader) -> None:
        super().__init__(TreeIndex(header, "memory"))

    def append(self, entry: AnyEntry) -> None:
        self._index.check(entry)
        self._index.add(entry)
