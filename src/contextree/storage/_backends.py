"""One table from a target's URL scheme to the backend that keeps it.

A target with no ``scheme://`` is a session file (JSONL); ``postgresql://host/db#SESSION_ID``
(or ``postgres://``) is a session in PostgreSQL. Nothing else is guessed: an unknown scheme,
or a libpq conninfo string (``"host=... dbname=..."``) that would otherwise become a file of
that name, is refused with the forms that are accepted. A ``Path`` (any ``os.PathLike``) is
always a file. ``register_backend`` adds a scheme; the built-in ones are registered the same
way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..entries import AnyEntry, SessionHeader
from ..errors import InvalidArgument, SessionNotFound
from ._base import Storage, check_session_id
from ._catalog import Catalog
from ._catalog_dir import DirectoryCatalog

__all__ = [
    "Address",
    "Backend",
    "Target",
    "accepted_forms",
    "create_storage",
    "open_catalog",
    "open_storage",
    "register_backend",
    "resolve",
]

Target = str | os.PathLike[str]
"""A session file path, or a URL whose scheme is in the table."""


@dataclass(frozen=True)
class Address:
    """A target resolved by the table: its backend, where it is, and the session it names.

    ``scheme`` is ``None`` for a file path; ``where`` is the path, or the URL without its
    ``#SESSION_ID``; ``session_id`` is that id, if the target names one.
    """

    backend: Backend
    where: str
    session_id: str | None = None
    scheme: str | None = None

    @property
    def is_file(self) -> bool:
        """True when the target is a session file (no URL scheme)."""
        return self.scheme is None


class Backend(Protocol):
    """What the table maps a scheme to: how to open and create sessions at its addresses,
    and the catalog of the sessions kept at one (``catalog``)."""

    def address(self, target: str, scheme: str | None) -> Address:
        """Parse a target of this backend (``scheme`` is ``None`` for a file path)."""
        ...

    def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
        """The storage of the existing session at ``address``."""
        ...

    def create(self, address: Address, header: SessionHeader, entries: Sequence[AnyEntry],
               *, durable: bool) -> Storage:
        """A new session at ``address`` holding ``entries``, all at once or not at all."""
        ...

    def catalog(self, address: Address, *, create: bool) -> Catalog:
        """The sessions kept where ``address`` points (a directory, a database...); with
        ``create``, make that place first if the backend can."""
        ...


class JsonlBackend:
    """Session files: a path opens or creates a ``JsonlStorage``."""

    def address(self, target: str, scheme: str | None) -> Address:
        return Address(self, target, None, scheme)

    def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
        """The storage of the existing session at ``address``."""
        from ._jsonl import JsonlStorage  # on use: a listing writes no session
        return JsonlStorage.open(address.where, readonly=readonly, durable=durable)

    def create(self, address: Address, header: SessionHeader, entries: Sequence[AnyEntry],
               *, durable: bool) -> Storage:
        """A new session at ``address`` holding ``entries``, all at once or not at all."""
        from ._jsonl import JsonlStorage
        return JsonlStorage.create(address.where, header, entries, durable=durable)

    def catalog(self, address: Address, *, create: bool) -> Catalog:
        """The session files under the directory ``address`` names."""
        root = Path(address.where)
        if create:
            root.mkdir(parents=True, exist_ok=True)
        elif not root.is_dir():
            what = "a file, not a directory" if root.exists() else "no such directory"
            raise SessionNotFound(f"{what}: a catalog of session files is a directory",
                                  path=address.where)
        return DirectoryCatalog(root)


class MemoryBackend:
    """``memory://NAME#SESSION_ID``: sessions held by this process, by catalog name."""

    def address(self, target: str, scheme: str | None) -> Address:
        rest = target.split("://", 1)[1]
        name, _, session_id = rest.partition("#")
        if not name:
            raise InvalidArgument(f"{target!r}: name the memory catalog, memory://NAME")
        return Address(self, f"memory://{name}", session_id or None, scheme)

    def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
        if address.session_id is None:
            raise InvalidArgument("the URL names no session: add #SESSION_ID")
        return self.catalog(address, create=True).open(address.session_id, readonly=readonly)

    def create(self, address: Address, header: SessionHeader, entries: Sequence[AnyEntry],
               *, durable: bool) -> Storage:
        _same_id(address, header)
        return self.catalog(address, create=True).create(header, entries)

    def catalog(self, address: Address, *, create: bool) -> Catalog:
        """The process-wide memory catalog of that name."""
        from ._memory import memory_catalog
        return memory_catalog(address.where.split("://", 1)[1])


def _same_id(address: Address, header: SessionHeader) -> None:
    if address.session_id is not None and address.session_id != header.id:
        raise InvalidArgument(f"the URL names session {address.session_id!r} but "
                              f"the session's id is {header.id!r}; leave #... off the URL "
                              "and it is stored under the session's id")


class PostgresBackend:
    """``postgresql://host/db#SESSION_ID``: a ``PostgresStorage`` on a pool of its own."""

    def address(self, target: str, scheme: str | None) -> Address:
        where, _, session_id = target.partition("#")
        return Address(self, where, session_id or None, scheme)

    def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
        from .postgres import PostgresStorage

        if address.session_id is None:
            raise InvalidArgument("the URL names no session: add #SESSION_ID "
                                  "(`contextree ls URL` lists them)")
        return PostgresStorage.open(address.where, address.session_id, readonly=readonly,
                                    durable=durable)

    def create(self, address: Address, header: SessionHeader, entries: Sequence[AnyEntry],
               *, durable: bool) -> Storage:
        from .postgres import PostgresStorage

        _same_id(address, header)
        return PostgresStorage.create(address.where, header, entries, durable=durable)

    def catalog(self, address: Address, *, create: bool) -> Catalog:
        """Every session in the database (its schema must exist: ``contextree db init``)."""
        from .postgres import PostgresCatalog

        return PostgresCatalog(address.where)


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# A libpq conninfo string: nothing but keyword=value pairs (values bare or single-quoted).
_CONNINFO = re.compile(r"\s*(?:\w+\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']*)\s*)+")
_CONNINFO_KEYS = frozenset((
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service",
    "options", "application_name", "connect_timeout", "sslmode", "sslrootcert", "sslcert",
    "sslkey", "target_session_attrs", "client_encoding", "gssencmode",
))

FILES: Backend = JsonlBackend()
"""The backend of targets with no scheme."""
_BACKENDS: dict[str, Backend] = {}


def register_backend(scheme: str, backend: Backend) -> None:
    """Route ``scheme://...`` targets to ``backend`` (the built-in schemes come this way)."""
    if not _SCHEME.fullmatch(f"{scheme}://"):
        raise InvalidArgument(f"{scheme!r} is not a URL scheme (letters, digits, + - .)")
    _BACKENDS[scheme.lower()] = backend


register_backend("postgresql", PostgresBackend())
register_backend("postgres", _BACKENDS["postgresql"])
register_backend("memory", MemoryBackend())


def accepted_forms() -> str:
    """The targets ``Session.open`` and friends take, for error messages."""
    schemes = ", ".join(f"{s}://" for s in sorted(_BACKENDS))
    return ("a session file path, a URL (postgresql://user@host/db#SESSION_ID; schemes: "
            f"{schemes}), or a Storage instance such as PostgresStorage.open(pool, session_id)")


def resolve(target: Target) -> Address:
    """The backend and address of ``target``, by the table; ``InvalidArgument`` if none."""
    if not isinstance(target, str):
        if isinstance(target, os.PathLike):
            return FILES.address(os.fspath(target), None)
        raise InvalidArgument(f"expected {accepted_forms()}; got a {type(target).__name__}")
    match = _SCHEME.match(target)
    if match is not None:
        scheme = match.group(1).lower()
        backend = _BACKENDS.get(scheme)
        if backend is None:
            raise InvalidArgument(f"unknown scheme {scheme + '://'!r}; expected "
                                  f"{accepted_forms()}")
        address = backend.address(target, scheme)
        if address.session_id is not None:
            check_session_id(address.session_id)
        return address
    if _looks_like_conninfo(target):
        keys = ", ".join(f"{k}=..." for k in re.findall(r"(\w+)\s*=", target))
        raise InvalidArgument(f"a libpq conninfo string ({keys}) is not a session: write it "
                              f"as a URL, postgresql://user@host/db#SESSION_ID; expected "
                              f"{accepted_forms()}")
    return FILES.address(target, None)


def _looks_like_conninfo(text: str) -> bool:
    if "=" not in text or not _CONNINFO.fullmatch(text):
        return False
    return any(key.lower() in _CONNINFO_KEYS for key in re.findall(r"(\w+)\s*=", text))


def open_storage(target: Target | Storage, *, readonly: bool = False,
                 durable: bool = True) -> Storage:
    """The storage of an existing session: a file, a URL with ``#SESSION_ID``, or a ready
    ``Storage`` (returned as it is, so options it cannot take are refused)."""
    if isinstance(target, str | os.PathLike):
        address = resolve(target)
        return address.backend.open(address, readonly=readonly, durable=durable)
    if not _is_storage(target):
        raise InvalidArgument(f"expected {accepted_forms()}; got a {type(target).__name__}")
    if readonly and not target.readonly:
        raise InvalidArgument("this storage is open for writing: readonly=True cannot apply "
                              "to it; open it read-only where it is made", path=target.location)
    if not durable:
        raise InvalidArgument("durable=False cannot apply to a ready storage; pass it where "
                              "the storage is opened or created", path=target.location)
    return target


def _is_storage(obj: object) -> bool:
    """Whether ``obj`` looks like a ``Storage``, judged by its class: ``isinstance`` with the
    protocol would read every property (on PostgreSQL, queries)."""
    return all(hasattr(type(obj), name) for name in ("header", "append", "path", "close"))


def create_storage(target: Target | Address, header: SessionHeader,
                   entries: Iterable[AnyEntry] = (), *, durable: bool = True) -> Storage:
    """A new session at ``target`` holding ``entries``, created all at once or not at all.

    For a URL the session id is the header's (a ``#SESSION_ID`` in the URL must match it).
    """
    address = target if isinstance(target, Address) else resolve(target)
    return address.backend.create(address, header, list(entries), durable=durable)


def open_catalog(where: Target | Catalog = ".", *, create: bool = False) -> Catalog:
    """The catalog of the sessions kept at ``where``: a directory, ``postgresql://host/db``,
    ``memory://NAME``, a registered scheme, or a ready ``Catalog`` (returned as it is).
    ``create`` makes the directory first (an integration's own folder); commands never do.
    A backend registered without a ``catalog`` method is refused, saying what to add."""
    if not isinstance(where, str | os.PathLike):
        if all(hasattr(type(where), n) for n in ("list", "get", "open", "create", "delete")):
            return where
        raise InvalidArgument(f"expected a directory, a URL or a Catalog; got a "
                              f"{type(where).__name__}")
    address = resolve(where)
    if address.session_id is not None:
        raise InvalidArgument(f"{os.fspath(where)!r} names one session (#{address.session_id}); "
                              "a catalog is the place that holds sessions: leave #... off")
    make = getattr(address.backend, "catalog", None)
    if make is None:
        raise InvalidArgument(f"the backend registered for {address.scheme}:// has no "
                              "catalog: give it a catalog(address, *, create) method that "
                              "returns a contextree.storage.Catalog")
    catalog: Catalog = make(address, create=create)
    return catalog
