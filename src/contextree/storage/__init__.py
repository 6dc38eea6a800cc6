"""Storage backends: one protocol, several places to keep a session's entries.

``open_storage`` and ``create_storage`` pick the backend by the scheme table in
``backends``: a file path (JSONL), a ``postgresql://host/db#SESSION_ID`` URL (PostgreSQL,
optional extra), or whatever ``register_backend`` added; both also take a ready ``Storage``
where that makes sense.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._public import publish
from ._backends import (
    Address,
    Backend,
    Target,
    create_storage,
    open_catalog,
    open_storage,
    register_backend,
    resolve,
)
from ._base import LabelBook, Outline, Storage, StorageHealth, TreeIndex
from ._catalog import (
    Catalog,
    CatalogListing,
    Query,
    SessionInfo,
    Unlisted,
    file_name_for,
    filter_sessions,
    key_to_session_id,
    pick_session,
)
from ._catalog_dir import DirectoryCatalog
from ._jsonl import JsonlStorage, TornLineWarning, clean_temp_files
from ._memory import MemoryCatalog, MemoryStorage
from ._repair import RepairReport, repair
from ._search import search
from ._search_text import SearchFilters, SearchHit, SearchResults

if TYPE_CHECKING:
    from .postgres import PostgresCatalog, PostgresStorage  # noqa: F401 (loaded on use)


def __getattr__(name: str) -> Any:
    # PostgreSQL support needs the optional psycopg: import it only when asked for (so it is
    # not in __all__, and `from contextree.storage import *` works without the extra).
    if name in ("PostgresCatalog", "PostgresStorage", "create_schema", "list_sessions"):
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Address",
    "Backend",
    "Catalog",
    "CatalogListing",
    "DirectoryCatalog",
    "JsonlStorage",
    "LabelBook",
    "MemoryCatalog",
    "MemoryStorage",
    "Outline",
    "Query",
    "RepairReport",
    "SearchFilters",
    "SearchHit",
    "SearchResults",
    "SessionInfo",
    "Storage",
    "StorageHealth",
    "Target",
    "TornLineWarning",
    "TreeIndex",
    "Unlisted",
    "clean_temp_files",
    "create_storage",
    "file_name_for",
    "filter_sessions",
    "key_to_session_id",
    "open_catalog",
    "open_storage",
    "pick_session",
    "register_backend",
    "repair",
    "resolve",
    "search",
]

publish(globals())
