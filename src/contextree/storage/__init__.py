"""Storage backends: one protocol, several places to keep a session's entries.

``open_storage`` and ``create_storage`` pick the backend by the scheme table in
``backends``: a file path (JSONL), a ``postgresql://host/db#SESSION_ID`` URL (PostgreSQL,
optional extra), or whatever ``register_backend`` added; both also take a ready ``Storage``
where that makes sense.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import (
    Address,
    Backend,
    Target,
    create_storage,
    open_storage,
    register_backend,
    resolve,
)
from .base import Storage, StorageHealth, TreeIndex
from .jsonl import JsonlStorage, TornLineWarning
from .memory import MemoryStorage

if TYPE_CHECKING:
    from .postgres import PostgresStorage


def __getattr__(name: str) -> Any:
    # PostgreSQL support needs the optional psycopg: import it only when asked for.
    if name in ("PostgresStorage", "create_schema", "list_sessions"):
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Address",
    "Backend",
    "JsonlStorage",
    "MemoryStorage",
    "PostgresStorage",
    "Storage",
    "StorageHealth",
    "Target",
    "TornLineWarning",
    "TreeIndex",
    "create_storage",
    "open_storage",
    "register_backend",
    "resolve",
]
