"""PostgreSQL storage: many sessions in one database, shared by processes on many machines.

Needs the ``contextree[postgres]`` extra (psycopg); importing this package without it raises
an ``ImportError`` that says so. The parts:

- ``schema``: tables, migrations, ``create_schema`` (run once per database, explicitly),
  ``trigrams_enabled`` (whether search looks inside words);
- ``words``: an entry's words for search, made by the client with the append;
- ``connection``: pools and connections, the session URL, password-free locations;
- ``errors``: psycopg errors as contextree errors, in one place;
- ``storage``: ``PostgresStorage``, one session;
- ``listing``: ``list_sessions`` and ``delete_session``;
- ``catalog``: ``PostgresCatalog``, the database as a catalog of sessions by id.
"""

from __future__ import annotations

from ..._public import publish
from ._catalog import PostgresCatalog
from ._connection import split_session_url
from ._driver import Target
from ._listing import SessionSummary, delete_session, list_sessions
from ._schema import SCHEMA_VERSION, create_schema, schema_version, trigrams_enabled
from ._storage import PostgresStorage

__all__ = [
    "SCHEMA_VERSION",
    "PostgresCatalog",
    "PostgresStorage",
    "SessionSummary",
    "Target",
    "create_schema",
    "delete_session",
    "list_sessions",
    "schema_version",
    "split_session_url",
    "trigrams_enabled",
]

publish(globals())
