"""In-memory storage: fast, nothing persisted; for tests and throwaway sessions."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from msgspec import UNSET, UnsetType

from ..entries import AnyEntry, SessionHeader
from ..errors import SessionNotFound
from ._base import IndexedStorage, StorageHealth, TreeIndex, settle_parent


class MemoryStorage(IndexedStorage):
    """Entries held in a dict, with the same rules as every other backend."""

    def __init__(self, header: SessionHeader) -> None:
        super().__init__(TreeIndex(header, "memory"))
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
