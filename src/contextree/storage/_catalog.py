"""Sessions by id, in one place: what every catalog (a directory, a database, memory) offers.

``open_catalog(where)`` picks the backend by the same scheme table as ``open_storage``: a
directory path, ``postgresql://host/db``, ``memory://NAME``, or any scheme that
``register_backend`` added. Every command and integration that reaches sessions by id goes
through a ``Catalog``; a backend provides one by implementing ``Backend.catalog``.

A catalog lists sessions cheaply (``SessionInfo``: what the header and the end of a session
say, without loading it), finds them by id or id prefix and by metadata (``Query``), and
opens, creates and deletes them. It never decides anything about tool outputs spilled to the
overflow store: that is the session's business (``Session.delete``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from ..entries import AnyEntry, SessionHeader
from ..errors import InvalidArgument, SessionNotFound
from ._base import Storage

__all__ = [
    "Catalog",
    "CatalogListing",
    "Query",
    "SessionInfo",
    "Unlisted",
    "file_name_for",
    "filter_sessions",
    "key_to_session_id",
    "pick_session",
]

NOT_A_SESSION = "not a contextree session (no session header on its first line)"
SHOWN_MATCHES = 5


@dataclass(frozen=True)
class SessionInfo:
    """One session as a catalog lists it, read without loading the session.

    ``target`` is what ``Session.open`` takes to open it (a path, or a URL with
    ``#SESSION_ID``). Times are UTC ISO stamps (``2025-01-02T03:04:05.678Z``):
    ``last_activity`` is the timestamp of the last entry (the creation time when there is
    none). ``entries_exact`` is false when ``entries`` is an estimate (a big file is sampled),
    ``name_exact`` false when the start of a big file was not searched for a name. ``size``
    is the bytes the session takes where it is kept, ``None`` when it is kept nowhere.
    """

    id: str
    target: str
    name: str | None
    created: str
    last_activity: str
    entries: int
    entries_exact: bool = True
    size: int | None = None
    cwd: str | None = None
    parent_session: str | None = None
    metadata: dict[str, Any] | None = None
    name_exact: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values (``--json`` output): a plain copy, not
        ``dataclasses.asdict``'s deep one, which costs a listing of ten thousand sessions
        most of its time."""
        out = dict(self.__dict__)
        if self.metadata is not None:
            out["metadata"] = copy.deepcopy(self.metadata)
        return out


@dataclass(frozen=True)
class Unlisted:
    """Something a catalog found but could not list as a session, and why (a corrupt or
    foreign file, a FIFO, a symbolic link, a folder that cannot be read)."""

    where: str
    reason: str


@dataclass
class CatalogListing:
    """What ``Catalog.list`` found: sessions newest activity first, and what it passed over."""

    sessions: list[SessionInfo] = field(default_factory=list)
    unlisted: list[Unlisted] = field(default_factory=list)


@dataclass(frozen=True)
class Query:
    """Which sessions to list: every field that is set must match (``None`` matches all).

    ``cwd`` matches the session's working directory or any directory below it; ``name`` is a
    case-insensitive substring of its name; ``since``/``until`` bound its last activity (UTC
    ISO stamps, compared as text, inclusive); ``min_size``/``max_size`` its bytes; ``label``
    a label set on one of its entries; ``model`` a model that answered in it (both need the
    session read: cheap for the others, so they are checked first).
    """

    cwd: str | None = None
    name: str | None = None
    since: str | None = None
    until: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    label: str | None = None
    model: str | None = None

    @property
    def reads_sessions(self) -> bool:
        """Whether matching needs more than a ``SessionInfo`` (labels, models)."""
        return self.label is not None or self.model is not None

    def matches_info(self, info: SessionInfo) -> bool:
        """Whether ``info`` passes the filters a listing line can answer."""
        if self.cwd is not None:
            cwd = (info.cwd or "").rstrip("/")
            want = self.cwd.rstrip("/") or "/"
            if not (cwd == want or cwd.startswith(want if want.endswith("/") else want + "/")):
                return False
        if self.name is not None and self.name.casefold() not in (info.name or "").casefold():
            return False
        if self.since is not None and info.last_activity < self.since:
            return False
        if self.until is not None and info.last_activity > self.until:
            return False
        if self.min_size is not None and (info.size is None or info.size < self.min_size):
            return False
        return not (self.max_size is not None and info.size is not None
                    and info.size > self.max_size)

    def matches_storage(self, storage: Storage) -> bool:
        """Whether the open session passes the filters that need it read."""
        if self.label is not None and self.label not in storage.labels().values():
            return False
        return self.model is None or self.model in models_in(storage)


def models_in(storage: Storage) -> set[str]:
    """The models that answered in a session or that it was switched to."""
    from ..entries import MessageEntry, ModelChangeEntry

    found: set[str] = set()
    for entry in storage.entries():
        if isinstance(entry, MessageEntry) and entry.message.model:
            found.add(entry.message.model)
        elif isinstance(entry, ModelChangeEntry):
            found.add(entry.model_id)
    return found


class Catalog(Protocol):
    """Sessions by id in one place: list, find, open, create, delete.

    ``open``/``create`` return a ``Storage`` (wrap it in ``Session``, or pass
    ``target(id)`` to ``Session.open``). Ids are matched exactly first, then as a unique
    prefix; a prefix of several ids is an ``InvalidArgument`` that lists them.
    """

    @property
    def where(self) -> str:
        """The directory or URL this catalog reads (without a ``#SESSION_ID``)."""
        ...

    def list(self, query: Query | None = None, *, limit: int | None = None) -> CatalogListing:
        """Sessions matching ``query``, newest activity first, and what was passed over."""
        ...

    def get(self, ref: str) -> SessionInfo:
        """The session with id ``ref`` (or the one whose id starts with it);
        ``SessionNotFound`` if none."""
        ...

    def target(self, session_id: str) -> str:
        """What ``Session.open``/``Session.create`` take for the session ``session_id`` here
        (it need not exist yet)."""
        ...

    def open(self, ref: str, *, readonly: bool = False, durable: bool = True) -> Storage:
        """The storage of the session ``ref`` names (see ``get``)."""
        ...

    def create(self, header: SessionHeader, entries: Sequence[AnyEntry] = (), *,
               durable: bool = True) -> Storage:
        """A new session with ``header``'s id, holding ``entries``, all at once or not at
        all (``SessionExists`` if the id is taken)."""
        ...

    def delete(self, ref: str) -> SessionInfo:
        """Delete the session ``ref`` names (its entries and what its backend keeps beside
        them; spilled tool outputs are ``Session.delete``'s); returns what it was."""
        ...


def pick_session(ref: str, candidates: Iterable[SessionInfo], where: str) -> SessionInfo:
    """The session ``ref`` names among ``candidates``: the exact id, else the one id that
    starts with it; ``SessionNotFound`` or an ``InvalidArgument`` listing the candidates."""
    if not isinstance(ref, str) or not ref:
        raise InvalidArgument(f"name a session by its id or an id prefix; got {ref!r}")
    exact: list[SessionInfo] = []
    prefixed: list[SessionInfo] = []
    for info in candidates:
        if info.id == ref:
            exact.append(info)
        elif info.id.startswith(ref):
            prefixed.append(info)
    if len(exact) == 1:
        return exact[0]
    if exact:
        prefixed = exact
    elif len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        ids = sorted({p.id for p in prefixed})
        if len(ids) == 1:
            places = ", ".join(sorted(p.target for p in prefixed)[:SHOWN_MATCHES])
            raise InvalidArgument(f"{len(prefixed)} sessions in {where} have the id {ids[0]!r} "
                                  f"(copies: {places}); open one by its path")
        shown = ", ".join(ids[:SHOWN_MATCHES]) + (", ..." if len(ids) > SHOWN_MATCHES else "")
        raise InvalidArgument(f"{ref!r} is the start of {len(ids)} session ids in {where} "
                              f"({shown}); type more of the id")
    raise SessionNotFound(f"no session {ref!r} in {where} (`contextree ls {where}` lists "
                          "them)", path=where)


def filter_sessions(infos: Iterable[SessionInfo], query: Query | None, limit: int | None,
             read: Callable[[SessionInfo], Storage]) -> list[SessionInfo]:
    """``infos`` that match ``query``, newest activity first, at most ``limit`` of them;
    ``read`` opens one (read-only) for the filters that need it."""
    ordered = sorted(infos, key=lambda s: (s.last_activity, s.target), reverse=True)
    if query is None:
        return ordered[:limit] if limit is not None else ordered
    out: list[SessionInfo] = []
    for info in ordered:
        if not query.matches_info(info):
            continue
        if query.reads_sessions:
            try:
                storage = read(info)
            except (OSError, SessionNotFound):
                continue
            try:
                if not query.matches_storage(storage):
                    continue
            finally:
                storage.close()
        out.append(info)
        if limit is not None and len(out) >= limit:
            break
    return out


def key_to_session_id(key: str) -> str:
    """A session id for an application's key (a conversation or thread id): the key itself
    when it can be one (text of at most 128 characters, no control characters), else a
    stable hash of it, so that any key has exactly one session. ``file_name_for`` makes any
    id a safe file name."""
    if isinstance(key, str) and 0 < len(key) <= 128 and key.isprintable():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return key
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else repr(key).encode()
    import hashlib  # here, not at start-up: few names need it

    return "k-" + hashlib.sha256(raw).hexdigest()[:40]


def file_name_for(session_id: str) -> str:
    """The file a directory catalog keeps session ``session_id`` in: ``<id>.jsonl``, its
    characters percent-encoded where a file name could not hold them, or a hash when that
    would be too long."""
    name = quote(session_id, safe="")
    if name.startswith((".", "~")):
        name = "%" + format(ord(name[0]), "02X") + name[1:]
    if len(name) > 180:
        import hashlib

        name = "~" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return name + ".jsonl"
