"""psycopg, imported in one place: without the ``contextree[postgres]`` extra, importing
``contextree.storage.postgres`` raises an ``ImportError`` that names it."""

from __future__ import annotations

import logging
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

# psycopg's pool logs a failed connection by itself ("error connecting in 'pool-1'"), which
# the storage raises as its own error: a library's NullHandler keeps that second report off
# stderr where logging is not configured, and passes every record on where it is.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

Connection = psycopg.Connection[Any]
Pool = ConnectionPool[Any]
Target = str | Connection | Pool
"""Where the database is: a libpq URL or conninfo string, a connection, or a pool."""
