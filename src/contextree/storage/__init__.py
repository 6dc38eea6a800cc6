"""Storage backends: one protocol, several places to keep a session's entries.

``open_storage`` and ``create_storage`` pick the backend from the target: a file path
(JSONL) or a ``postgresql://host/db#SESSION_ID`` URL (PostgreSQL, optional extra).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..entries import AnyEntry, SessionHeader
from ..errors import InvalidArgument
from .base import Storage, TreeIndex
from .jsonl import JsonlStorage, TornLineWarning
from .memory import MemoryStorage

if TYPE_CHECKING:
    from .postgres import PostgresStorage

Target = str | os.PathLike[str]


def is_url(target: Target) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_storage(target: Target, *, readonly: bool = False, durable: bool = True) -> Storage:
    """The storage of an existing session: a JSONL file, or a PostgreSQL URL with ``#id``."""
    if is_url(target):
        from .postgres import PostgresStorage, split_session_url

        conninfo, session_id = split_session_url(str(target))
        if session_id is None:
            raise InvalidArgument("the URL names no session: add #SESSION_ID "
                               "(`contextree ls URL` lists them)")
        return PostgresStorage.open(conninfo, session_id, readonly=readonly)
    return JsonlStorage.open(target, readonly=readonly, durable=durable)


def create_storage(target: Target, header: SessionHeader, entries: Iterable[AnyEntry] = (),
                   *, durable: bool = True) -> Storage:
    """A new session at ``target`` holding ``entries``, created all at once or not at all.

    For a PostgreSQL URL the session id is the header's (a ``#id`` in the URL must match it).
    """
    if is_url(target):
        from .postgres import PostgresStorage, split_session_url

        conninfo, session_id = split_session_url(str(target))
        if session_id is not None and session_id != header.id:
            raise InvalidArgument(f"the URL names session {session_id!r} but "
                               f"the session's id is {header.id!r}; leave #... off the URL "
                               f"and it is stored as {conninfo}#{header.id}")
        return PostgresStorage.create(conninfo, header, list(entries))
    return JsonlStorage.create(target, header, entries, durable=durable)


def __getattr__(name: str) -> Any:
    # PostgreSQL support needs the optional psycopg: import it only when asked for.
    if name in ("PostgresStorage", "create_schema", "list_sessions"):
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "JsonlStorage",
    "MemoryStorage",
    "PostgresStorage",
    "Storage",
    "TornLineWarning",
    "TreeIndex",
    "create_storage",
    "is_url",
    "open_storage",
]
