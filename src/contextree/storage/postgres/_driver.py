"""psycopg, imported in one place: without the ``contextree[postgres]`` extra, importing
``contextree.storage.postgres`` raises an ``ImportError`` that names it."""

from __future__ import annotations

from typing import Any

from ...errors import missing_extra

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.adapt import Dumper
    from psycopg.pq import Format, TransactionStatus
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise missing_extra("postgres", "psycopg") from _e
try:
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise missing_extra("postgres", "psycopg_pool") from _e

__all__ = [
    "Connection",
    "ConnectionPool",
    "Dumper",
    "Format",
    "Pool",
    "PoolTimeout",
    "Target",
    "TransactionStatus",
    "pg_errors",
    "psycopg",
    "sql",
]

Connection = psycopg.Connection[Any]
Pool = ConnectionPool[Any]
Target = str | Connection | Pool
"""Where the database is: a libpq URL or conninfo string, a connection, or a pool."""
