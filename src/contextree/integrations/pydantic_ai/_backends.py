"""Where the store keeps its conversations: any catalog (a directory, PostgreSQL, memory, or a
registered backend), one session per conversation, found by id.

A conversation's session id is ``key_to_session_id(conversation_id)`` (the id itself when it
is a plain one, else a hash), and its header names the conversation
(``metadata["pydantic_ai"]["conversation_id"]``), so that a session that happens to have
that id but belongs to nobody's conversation is never taken for it. Files written before the
catalog (named after the conversation, with a random session id) are still found.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from ..._session import Session
from ...entries import AnyEntry, CustomEntry, SessionHeader, now
from ...errors import ContextreeError, InvalidArgument, SessionExists, SessionNotFound
from ...storage import (
    Catalog,
    DirectoryCatalog,
    MemoryCatalog,
    file_name_for,
    key_to_session_id,
    open_catalog,
)

if TYPE_CHECKING:
    from ...storage.postgres._driver import Pool

KEY = "pydantic_ai"

Stamp = tuple[int, int] | None  # a file's (mtime_ns, size), None where there is no file


def header(conversation_id: str, session_id: str) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=now(),
                         metadata={KEY: {"conversation_id": conversation_id}})


def conversation_of(metadata: dict[str, object] | None) -> str | None:
    """The conversation id a session's header metadata names, or ``None`` for others."""
    meta = (metadata or {}).get(KEY)
    cid = meta.get("conversation_id") if isinstance(meta, dict) else None
    return cid if isinstance(cid, str) else None


def legacy_file_name(cid: str) -> str:
    """The file name stores wrote before the catalog: the percent-encoded conversation id,
    or ``~`` and its hash when too long (the session id inside was random)."""
    import hashlib

    name = quote(cid, safe="")
    if name.startswith("~"):
        name = "%7E" + name[1:]
    if not name or len(name) > 180:
        name = "~" + hashlib.sha256(cid.encode("utf-8", "surrogatepass")).hexdigest()
    return name + ".jsonl"


class CatalogBackend:
    """Opens, creates, lists and removes the session of each conversation in one catalog."""

    def __init__(self, catalog: Catalog, *, durable: bool, owned_pool: Pool | None = None):
        self.catalog = catalog
        self.durable = durable
        self.is_memory = isinstance(catalog, MemoryCatalog)
        self.files = catalog.root if isinstance(catalog, DirectoryCatalog) else None
        self.shared = self.files is None and not self.is_memory
        """Other processes may write its sessions: the leaf is read again before each use."""
        self._owned_pool = owned_pool
        self._targets: dict[str, str] = {}  # conversation id -> where its session was found
        self._stamps: dict[int, Stamp] = {}
        self._lock = threading.Lock()

    def open(self, cid: str, *, write: bool) -> tuple[Session, bool] | None:
        """The conversation's session and whether it is writable, or ``None``."""
        stamp = self.record_stamp(cid)  # before reading: a save after it makes it stale
        session = (self._open_file(cid, write) if self.files is not None
                   else self._open_by_id(cid, write))
        if session is None:
            return None
        with self._lock:
            moved = self._targets.get(cid) != session.location
            self._targets[cid] = session.location
            self._stamps[id(session)] = self.record_stamp(cid) if moved else stamp
        return session, True if self.shared or self.is_memory else write

    def _open_by_id(self, cid: str, write: bool) -> Session | None:
        # A database takes no lock: its sessions open writable, each append checked
        # against the leaf it expects.
        try:
            session = Session(self.catalog.open(key_to_session_id(cid), readonly=False,
                                                durable=self.durable))
        except SessionNotFound:
            return None
        except InvalidArgument:
            # The id only starts other sessions' ids (a catalog takes an exact id first, and
            # the id was checked when the store took it): no session of this conversation.
            return None
        return self._if_ours(cid, session)

    def _open_file(self, cid: str, write: bool) -> Session | None:
        """A directory: the conversation's own file (``<session id>.jsonl``), else the one a
        store named before the catalog; nothing else is looked through."""
        assert self.files is not None
        known = self._targets.get(cid)
        names = [file_name_for(key_to_session_id(cid)), legacy_file_name(cid)]
        paths = [Path(known)] if known else []
        paths += [self.files / n for n in dict.fromkeys(names)]
        for path in paths:
            if not path.is_file():
                continue
            try:
                session = Session.open(path, readonly=not write, durable=self.durable)
            except SessionNotFound:
                continue
            if self._if_ours(cid, session) is not None:
                return session
        return None

    @staticmethod
    def _if_ours(cid: str, session: Session) -> Session | None:
        if conversation_of(session.header.metadata) != cid:  # someone else's session
            session.close()
            return None
        return session

    def stale(self, cid: str, session: Session) -> bool:
        """Whether a read-only session no longer shows the stored one (files only)."""
        return self.files is not None and self._stamps.get(id(session)) != self.record_stamp(cid)

    def record_stamp(self, cid: str) -> Stamp:
        """The (mtime, size) of the conversation's file, ``None`` elsewhere or when gone."""
        if self.files is None:
            return None
        target = self._targets.get(cid) or self.catalog.target(key_to_session_id(cid))
        try:
            st = os.stat(target)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def create(self, cid: str, entries: Sequence[AnyEntry]) -> Session:
        """A new session holding ``entries``, created whole or not at all
        (``SessionExists`` if there is one)."""
        storage = self.catalog.create(header(cid, key_to_session_id(cid)), entries,
                                      durable=self.durable)
        session = Session(storage)
        with self._lock:
            self._targets[cid] = session.location
        return session

    def occupant(self, cid: str) -> SessionExists | None:
        """Why the conversation's session cannot be created (``create`` found its id taken)
        when no reload and retry can settle it: the session there is not this conversation's
        (another tool's, or another conversation's). ``None`` when it is this conversation's
        (a concurrent create: a ``ConversationConflict``) or gone since."""
        sid = key_to_session_id(cid)
        where = self.catalog.target(sid)
        try:
            if self.files is not None:
                path = Path(where)
                if not path.exists():
                    return None
                opened = Session.open(path, readonly=True)
                try:
                    metadata = opened.header.metadata
                finally:
                    opened.close()
            else:
                info = self.catalog.get(sid)
                if info.id != sid:  # only a session whose id starts with it: gone since
                    return None
                metadata = info.metadata
        except SessionNotFound:
            return None
        except ContextreeError as exc:  # a file that does not read as a session
            return SessionExists(
                f"pydantic-ai conversation {cid!r}: its session {sid!r} cannot be created, "
                f"as the file there is not a session ({exc}); "
                "move it away, or give the store a directory of its own", path=where)
        other = conversation_of(metadata)
        if other == cid:
            return None
        what = (f"the pydantic-ai conversation {other!r} (their ids share a file name: "
                "on a case-insensitive file system, ids that differ only in case do)"
                if other is not None else
                "a session that is not a pydantic-ai conversation (written by another tool: "
                "contextree's OpenAI Agents SDK or LangChain integration, a coding agent, "
                "the command line)")
        return SessionExists(
            f"pydantic-ai conversation {cid!r} cannot be saved: its session id {sid!r} is "
            f"taken by {what}. Reloading and retrying will not help: give the "
            "store a directory (or catalog) of its own, not one other integrations write "
            "to, or use another conversation id", path=where)

    def append(self, session: Session, entries: Sequence[AnyEntry], leaf: str | None) -> None:
        """Append ``entries`` in order; ``LeafConflict`` if the leaf is no longer ``leaf``
        when the first is written (each later one is checked against the one before)."""
        expected = leaf
        with session.batch():
            for entry in entries:
                session.storage.append(entry, expected_leaf=expected)
                expected = entry.id

    def remove(self, cid: str, session: Session, leaf: str | None) -> None:
        """Delete the conversation's session (``LeafConflict`` if its leaf moved). Where
        other processes write, a tombstone goes first, under the leaf check: a writer that
        saved since gets its conflict, and one that saves after sees the conversation gone."""
        if self.shared:
            tomb = CustomEntry(f"deleted-{uuid.uuid4().hex[:12]}", leaf, now(),
                               custom_type=f"{KEY}.deleted")
            session.storage.append(tomb, expected_leaf=leaf)
        session_id = session.id
        location = session.location
        if not self.is_memory:
            session.close()
        with self._lock:
            self._targets.pop(cid, None)
        if self.files is not None and Path(location).name != file_name_for(session_id):
            Session.delete(location)  # a file named the old way
            return
        self.catalog.delete(session_id)

    def ids(self) -> list[str]:
        """Every stored conversation's id."""
        out = []
        for info in self.catalog.list().sessions:
            cid = conversation_of(info.metadata)
            if cid is not None:
                out.append(cid)
                if self.files is not None:
                    with self._lock:
                        self._targets.setdefault(cid, info.target)
        return out

    def close(self) -> None:
        """Close the pool the backend opened for a URL (an application's pool is its own)."""
        if self._owned_pool is not None:
            self._owned_pool.close()


def backend_for(location: str | os.PathLike[str] | Pool | Catalog | None, *,
                durable: bool) -> CatalogBackend:
    """The backend of a store's ``location``: ``None``/``":memory:"`` (a private memory
    catalog), a directory (made when missing), a catalog URL such as ``postgresql://...``
    (one pool for the store), a ``psycopg_pool.ConnectionPool``, or a ready ``Catalog``."""
    if location is None or location == ":memory:":
        return CatalogBackend(MemoryCatalog(f"pydantic-ai-{uuid.uuid4().hex[:8]}"),
                              durable=durable)
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        from psycopg_pool import ConnectionPool

        from ...storage.postgres import PostgresCatalog

        pool: Pool = ConnectionPool(location, min_size=1, max_size=8, open=True,
                                    kwargs={"autocommit": True}, timeout=30.0)
        return CatalogBackend(PostgresCatalog(pool), durable=durable, owned_pool=pool)
    if isinstance(location, str | os.PathLike):
        return CatalogBackend(open_catalog(location, create=True), durable=durable)
    if all(hasattr(type(location), n) for n in ("list", "get", "open", "create", "delete")):
        return CatalogBackend(location, durable=durable)  # type: ignore[arg-type]
    from ...storage.postgres import PostgresCatalog

    return CatalogBackend(PostgresCatalog(location), durable=durable)  # type: ignore[arg-type]


__all__ = ["KEY", "CatalogBackend", "backend_for", "conversation_of", "header",
           "legacy_file_name"]
