"""The format table: every format ``import`` and ``export`` know, by name.

``register_format(Format(...))`` adds one; the built-in formats are registered the same way
(in ``contextree.formats``). An installed package can add its own without being imported
first: an entry point in the group ``contextree.formats`` that names a ``Format`` is
registered the first time the table is read, so ``contextree import NAME`` finds it too.
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._session import Session
from ..errors import InvalidArgument, UnknownFormat
from ._base import Imported, Progress

__all__ = [
    "ENTRY_POINT_GROUP",
    "Companions",
    "Format",
    "FoundSession",
    "Reader",
    "SessionHome",
    "VersionWriter",
    "Writer",
    "get_format",
    "list_formats",
    "register_format",
    "unregister_format",
]

ENTRY_POINT_GROUP = "contextree.formats"
"""The entry-point group whose entries (each a ``Format``) are registered on first use."""

Reader = Callable[[Path, Progress | None], Imported]
"""Reads a source file (reporting progress) into the header and entries of a new session."""
Writer = Callable[[Session, str | None], bytes]
"""Writes a session, as seen at an entry (``None``: the leaf), as the bytes of a file."""
VersionWriter = Callable[[Session, str | None, str], bytes]
"""A ``Writer`` that also takes the version of the format to write (one of ``versions``)."""
if TYPE_CHECKING:
    from ..redaction import Redactor

    Companions = Callable[[Session, str | None, Redactor], dict[str, bytes]]
else:  # the same at run time, without importing redaction for every import of a file
    Companions = Callable[[Session, str | None, Any], dict[str, bytes]]
"""The files a format writes beside an export (paths relative to the file less its suffix),
from the redacted session, the exported entry and the ``Redactor`` (for sessions it links)."""
Home = str | os.PathLike[str] | None
"""A tool's home directory (``None``: where the tool keeps it by default)."""


@dataclass(frozen=True)
class FoundSession:
    """A session of another agent, found under its home directory."""

    format: str
    id: str
    path: Path
    modified: float
    cwd: str | None
    first_prompt: str | None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (``contextree import FMT --list --json``)."""
        return {"format": self.format, "id": self.id, "path": str(self.path),
                "modified": datetime.fromtimestamp(self.modified, UTC).isoformat(
                    timespec="seconds").replace("+00:00", "Z"),
                "cwd": self.cwd, "first_prompt": self.first_prompt}


@dataclass(frozen=True)
class SessionHome:
    """Where a tool keeps its own sessions: ``sessions(home)`` lists them, newest first, and
    ``find(key, home)`` is the file of the one whose id is ``key`` or starts with it."""

    sessions: Callable[[Home], list[FoundSession]]
    find: Callable[[str, Home], Path]


@dataclass(frozen=True)
class Format:
    """A session format: how to read it, how to write it, its usual file suffix.

    ``reader`` imports, ``writer`` exports (a format needs one of them). ``aliases`` are other
    names it answers to. ``detect(path)`` says whether a file is in this format, for
    ``import auto`` (the built-in formats are told apart first). ``home`` finds the tool's
    own sessions by id (``import FMT --list``). ``copy`` is contextree's own format: every
    entry as it is, any storage. ``versions`` are the versions of the format ``export`` can
    write (the default first), each by ``version_writer``; ``writer`` writes the default.
    ``companions`` gives the files the tool keeps beside a session file (Claude Code's
    sub-agent transcripts), which ``export_session`` writes with it.
    """

    name: str
    description: str
    reader: Reader | None = None
    writer: Writer | None = None
    suffix: str = ".jsonl"
    aliases: tuple[str, ...] = field(default=(), kw_only=True)
    detect: Callable[[Path], bool] | None = field(default=None, kw_only=True)
    home: SessionHome | None = field(default=None, kw_only=True)
    copy: bool = field(default=False, kw_only=True)
    versions: tuple[str, ...] = field(default=(), kw_only=True)
    version_writer: VersionWriter | None = field(default=None, kw_only=True)
    companions: Companions | None = field(default=None, kw_only=True)

    @property
    def can_import(self) -> bool:
        """True when ``import_session`` can read this format."""
        return self.reader is not None or self.copy

    @property
    def can_export(self) -> bool:
        """True when ``export_session`` can write this format."""
        return self.writer is not None or self.copy

    def write(self, session: Session, at: str | None = None,
              version: str | None = None) -> bytes:
        """The bytes of ``session`` in this format, as seen at ``at``, in ``version`` (one of
        ``versions``; ``None``: the default). Another version is refused, naming them."""
        if version is not None:
            if self.version_writer is None or version not in self.versions:
                known = (f"choose one of: {', '.join(self.versions)}" if self.versions
                         else "it has only one; leave the version out")
                raise InvalidArgument(f"format {self.name!r} cannot be written as version "
                                      f"{version!r}; {known}")
            return self.version_writer(session, at, version)
        if self.writer is None:
            raise InvalidArgument(f"format {self.name!r} can be imported, not exported")
        return self.writer(session, at)


_NAME = re.compile(r"[a-z0-9][a-z0-9.+-]*")
_FORMATS: dict[str, Format] = {}  # by name, in the order registered
_NAMES: dict[str, str] = {}  # every name and alias -> the format's name
_lock = threading.RLock()
_plugins_loaded = False
_builtins: list[Callable[[], None]] = []  # what registers the built-in formats, not yet run


def register_builtins(register: Callable[[], None]) -> Callable[[], None]:
    """Run ``register`` (it registers the built-in formats; ``contextree.formats`` gives it)
    before the table is first read or written, so that importing the package imports no
    format module and the built-ins still come first."""
    with _lock:
        _builtins.append(register)
    return register


def _load_builtins() -> None:
    with _lock:
        while _builtins:
            _builtins.pop(0)()


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def register_format(fmt: Format, *, replace: bool = False) -> Format:
    """Add ``fmt`` to the table under its name and aliases (the built-in formats come this
    way); returns it. A name already taken is refused unless ``replace``."""
    if not isinstance(fmt, Format):
        raise InvalidArgument(f"register_format takes a contextree.formats.Format; got a "
                              f"{type(fmt).__name__}")
    if not fmt.can_import and not fmt.can_export:
        raise InvalidArgument(f"format {fmt.name!r} can neither be imported nor exported: "
                              "give it a reader=, a writer= or both")
    names = [fmt.name, *fmt.aliases]
    for name in names:
        if _key(name) != name or not _NAME.fullmatch(name) or name == "auto":
            raise InvalidArgument(f"{name!r} cannot name a format: use lower-case letters, "
                                  "digits and - . + (and not 'auto', which means: detect it)")
    _load_builtins()
    with _lock:
        if replace and fmt.name in _FORMATS:
            _remove(fmt.name)
        for name in names:
            owner = _NAMES.get(name)
            if owner is not None:
                raise InvalidArgument(f"format name {name!r} is already registered (by "
                                      f"format {owner!r}: {_FORMATS[owner].description}); "
                                      "choose another name, or pass replace=True to replace "
                                      "a format of the same name")
        _FORMATS[fmt.name] = fmt
        _NAMES.update(dict.fromkeys(names, fmt.name))
    return fmt


def unregister_format(name: str) -> Format:
    """Remove the format called ``name`` (or by one of its aliases); returns it."""
    fmt = get_format(name)
    with _lock:
        _remove(fmt.name)
    return fmt


def _remove(name: str) -> None:
    fmt = _FORMATS.pop(name)
    for alias in (fmt.name, *fmt.aliases):
        _NAMES.pop(alias, None)


def get_format(name: str) -> Format:
    """The registered format called ``name`` or by an alias (case and ``_``/``-`` do not
    matter); ``UnknownFormat`` listing the registered ones if there is none."""
    _load_plugins()
    with _lock:
        fmt = _NAMES.get(_key(name))
        if fmt is not None:
            return _FORMATS[fmt]
    raise UnknownFormat(f"unknown format {name!r}; choose one of: "
                        f"{', '.join(f.name for f in list_formats())} (or auto for import)")


def list_formats() -> list[Format]:
    """The registered formats, in the order they were registered."""
    _load_plugins()
    with _lock:
        return list(_FORMATS.values())


def _load_plugins() -> None:
    """Register the formats that installed packages name in the ``contextree.formats``
    entry-point group, once. One that cannot be loaded is left out with a warning."""
    global _plugins_loaded
    _load_builtins()
    with _lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        from importlib.metadata import entry_points  # on use: it is slow to import

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                fmt = ep.load()
                if isinstance(fmt, Format) and _NAMES.get(fmt.name) == fmt.name \
                        and _FORMATS[fmt.name] is fmt:
                    continue  # the module registered it itself when it was imported
                register_format(fmt)
            except Exception as e:  # a broken plugin must not take the built-ins down
                warnings.warn(f"the contextree format plugin {ep.name!r} ({ep.value}) was "
                              f"left out: {e}", RuntimeWarning, stacklevel=3)
