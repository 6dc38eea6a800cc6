"""Where the store keeps its sessions: a directory of JSONL files, memory, or PostgreSQL."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from ..._session import Session
from ...entries import AnyEntry, SessionHeader, now
from ...errors import LeafConflict, SessionNotFound
from ...storage import MemoryStorage, create_storage

if TYPE_CHECKING:
    from ...storage.postgres._driver import Pool

KEY = "pydantic_ai"


def header(conversation_id: str, session_id: str) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=now(),
                         metadata={KEY: {"conversation_id": conversation_id}})


def conversation_of(h: SessionHeader) -> str | None:
    """The conversation id a session header names, or ``None`` for other sessions."""
    meta = (h.metadata or {}).get(KEY)
    cid = meta.get("conversation_id") if isinstance(meta, dict) else None
    return cid if isinstance(cid, str) else None


class Backend(ABC):
    """Opens, creates, lists and removes the session of each conversation."""

    shared = False
    """Other processes may write its sessions: the leaf is read again before each use."""

    @abstractmethod
    def open(self, cid: str, *, write: bool) -> tuple[Session, bool] | None:
        """The conversation's session and whether it is writable, or ``None``."""
        ...

    def stale(self, cid: str, session: Session) -> bool:
        """Whether a read-only session no longer shows the stored one."""
        return False

    @abstractmethod
    def create(self, cid: str, entries: Sequence[AnyEntry]) -> Session:
        """A new session holding ``entries``, created whole or not at all
        (``SessionExists`` if there is one)."""
        ...

    def append(self, session: Session, entries: Sequence[AnyEntry], leaf: str | None) -> None:
        """Append ``entries`` in order; ``LeafConflict`` if the leaf is no longer ``leaf``
        when the first is written (the others follow it or fail the same way)."""
        with session.batch():
            for entry in entries:
                session.append(entry)

    @abstractmethod
    def remove(self, cid: str, session: Session, leaf: str | None) -> None:
        """Delete the conversation's session (``LeafConflict`` if its leaf moved)."""
        ...

    @abstractmethod
    def ids(self) -> list[str]:
        """Every stored conversation's id."""
        ...

    def close(self) -> None:  # noqa: B027 (optional hook: most backends hold nothing)
        """Release what the backend holds (nothing by default)."""


class MemoryBackend(Backend):
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def open(self, cid: str, *, write: bool) -> tuple[Session, bool] | None:
        s = self._sessions.get(cid)
        return None if s is None else (s, True)

    def create(self, cid: str, entries: Sequence[AnyEntry]) -> Session:
        from ...errors import SessionExists

        if cid in self._sessions:
            raise SessionExists(f"conversation {cid!r} exists", path="memory")
        s = Session(MemoryStorage(header(cid, cid)))
        for e in entries:
            s.append(e)
        self._sessions[cid] = s
        return s

    def remove(self, cid: str, session: Session, leaf: str | None) -> None:
        self._sessions.pop(cid, None)

    def ids(self) -> list[str]:
        return list(self._sessions)


def file_name(cid: str) -> str:
    """A file name for a conversation id: percent-encoded, or a hash when that is too long."""
    name = quote(cid, safe="")
    if name.startswith("~"):
        name = "%7E" + name[1:]
    if not name or len(name) > 180:
        name = "~" + hashlib.sha256(cid.encode("utf-8", "surrogatepass")).hexdigest()
    return name + ".jsonl"


class JsonlBackend(Backend):
    """One JSONL file per conversation in a directory (``<conversation id>.jsonl``)."""

    def __init__(self, root: Path, *, durable: bool) -> None:
        self.root = root
        self.durable = durable
        root.mkdir(parents=True, exist_ok=True)
        self._stamps: dict[int, tuple[int, int] | None] = {}

    def path(self, cid: str) -> Path:
        return self.root / file_name(cid)

    def _stamp(self, path: Path) -> tuple[int, int] | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def open(self, cid: str, *, write: bool) -> tuple[Session, bool] | None:
        path = self.path(cid)
        stamp = self._stamp(path)
        try:
            s = Session.open(path, readonly=not write, durable=self.durable)
        except SessionNotFound:
            return None
        if conversation_of(s.header) != cid:  # a file that is not this conversation's
            s.close()
            return None
        self._stamps[id(s)] = stamp
        return s, write

    def stale(self, cid: str, session: Session) -> bool:
        return self._stamps.get(id(session)) != self._stamp(self.path(cid))

    def create(self, cid: str, entries: Sequence[AnyEntry]) -> Session:
        storage = create_storage(self.path(cid), header(cid, str(uuid.uuid4())), entries,
                                 durable=self.durable)
        return Session(storage)

    def remove(self, cid: str, session: Session, leaf: str | None) -> None:
        session.close()
        Session.delete(self.path(cid))

    def ids(self) -> list[str]:
        out: list[str] = []
        for path in sorted(self.root.glob("*.jsonl")):
            stem = path.name[: -len(".jsonl")]
            if stem.startswith("~"):  # hashed: the id is in the header
                try:
                    with Session.open(path, readonly=True) as s:
                        cid = conversation_of(s.header)
                except Exception:
                    continue
                if cid is not None:
                    out.append(cid)
            else:
                out.append(unquote(stem))
        return out

    def record_stamp(self, cid: str) -> tuple[int, int] | None:
        return self._stamp(self.path(cid))


class PostgresBackend(Backend):
    """Every conversation a session of one PostgreSQL database (its id is the session id)."""

    shared = True

    def __init__(self, target: str | Pool) -> None:
        from psycopg_pool import ConnectionPool

        from ...storage import postgres as pg

        self._pg = pg
        self._owned = isinstance(target, str)
        if isinstance(target, str):
            self.pool = ConnectionPool(target, min_size=1, max_size=8, open=True,
                                       kwargs={"autocommit": True}, timeout=30.0)
        else:
            self.pool = target
        self._lock = threading.Lock()

    def open(self, cid: str, *, write: bool) -> tuple[Session, bool] | None:
        try:
            storage = self._pg.PostgresStorage.open(self.pool, cid)
        except SessionNotFound:
            return None
        s = Session(storage)
        if conversation_of(s.header) != cid:
            s.close()
            return None
        return s, True

    def create(self, cid: str, entries: Sequence[AnyEntry]) -> Session:
        return Session(self._pg.PostgresStorage.create(self.pool, header(cid, cid), list(entries)))

    def append(self, session: Session, entries: Sequence[AnyEntry], leaf: str | None) -> None:
        storage = session.storage
        assert isinstance(storage, self._pg.PostgresStorage)
        expected = leaf
        # One transaction where the storage offers batches that are (the record and the
        # messages then land together); each append is checked against the one before anyway.
        with session.batch():
            for entry in entries:
                storage.append(entry, expected_leaf=expected)
                expected = entry.id

    def remove(self, cid: str, session: Session, leaf: str | None) -> None:
        from ...entries import CustomEntry

        # A tombstone first, under the leaf check: a writer that saved since gets its
        # conflict, and one that saves after sees the conversation gone.
        storage = session.storage
        assert isinstance(storage, self._pg.PostgresStorage)
        tomb = CustomEntry(f"deleted-{uuid.uuid4().hex[:12]}", leaf, now(),
                           custom_type=f"{KEY}.deleted")
        storage.append(tomb, expected_leaf=leaf)
        session.close()
        self._pg.delete_session(self.pool, cid)

    def ids(self) -> list[str]:
        out = []
        for summary in self._pg.list_sessions(self.pool):
            cid = conversation_of(summary.header)
            if cid is not None and cid == summary.id:
                out.append(cid)
        return out

    def close(self) -> None:
        if self._owned:
            self.pool.close()


def backend_for(location: str | os.PathLike[str] | Pool | None, *, durable: bool) -> Backend:
    if location is None or location == ":memory:":
        return MemoryBackend()
    if isinstance(location, str) and (location.startswith(("postgresql://", "postgres://"))
                                      or re.match(r"\s*[a-z_]+\s*=", location)):
        return PostgresBackend(location)  # a URL, or a libpq "key=value" conninfo
    if isinstance(location, str | os.PathLike):
        return JsonlBackend(Path(location), durable=durable)
    return PostgresBackend(location)  # a psycopg_pool.ConnectionPool


__all__ = ["Backend", "JsonlBackend", "LeafConflict", "MemoryBackend", "PostgresBackend",
           "backend_for", "conversation_of", "file_name", "header"]
