"""Storage backends: one protocol, several places to keep a session's entries.

``open_storage`` and ``create_storage`` pick the backend by the scheme table in
``backends``: a file path (JSONL), a ``postgresql://host/db#SESSION_ID`` URL (PostgreSQL,
optional extra), or whatever ``register_backend`` added; both also take a ready ``Storage``
where that makes sense.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._public import publish

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from contextree.storage._backends import (
        Address,
        Backend,
        Target,
        create_storage,
        open_catalog,
        open_storage,
        register_backend,
        resolve,
    )
    from contextree.storage._base import LabelBook, Outline, Storage, StorageHealth, TreeIndex
    from contextree.storage._catalog import (
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
    from contextree.storage._catalog_dir import DirectoryCatalog
    from contextree.storage._jsonl import JsonlStorage, TornLineWarning, clean_temp_files
    from contextree.storage._memory import MemoryCatalog, MemoryStorage
    from contextree.storage._repair import RepairReport, repair
    from contextree.storage._search import search
    from contextree.storage._search_text import SearchFilters, SearchHit, SearchResults

    # PostgreSQL support needs the optional psycopg: loaded only when asked for (so these
    # are not in __all__, and `from contextree.storage import *` works without the extra).
    from contextree.storage.postgres import (  # noqa: F401
        PostgresCatalog,
        PostgresStorage,
        create_schema,
        list_sessions,
    )

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

_LAZY = {
    "._backends": ("Address", "Backend", "Target", "create_storage", "open_catalog",
                   "open_storage", "register_backend", "resolve"),
    "._base": ("LabelBook", "Outline", "Storage", "StorageHealth", "TreeIndex"),
    "._catalog": ("Catalog", "CatalogListing", "Query", "SessionInfo", "Unlisted",
                  "file_name_for", "filter_sessions", "key_to_session_id", "pick_session"),
    "._catalog_dir": ("DirectoryCatalog",),
    "._jsonl": ("JsonlStorage", "TornLineWarning", "clean_temp_files"),
    "._memory": ("MemoryCatalog", "MemoryStorage"),
    "._repair": ("RepairReport", "repair"),
    "._search": ("search",),
    "._search_text": ("SearchFilters", "SearchHit", "SearchResults"),
    ".postgres": ("PostgresCatalog", "PostgresStorage", "create_schema", "list_sessions"),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
