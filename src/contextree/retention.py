"""Retention over a catalog: how much space sessions take (``du``), deleting old ones without
breaking the others (``prune``), and folding one into a single compressed file that
``unarchive`` restores byte for byte (``archive``).

Nothing here deletes a file the catalog does not know as a session, one of its sidecars
(quarantine, index, lock) or a spill it owns. A spill another session still names is kept,
whether that session is live or archived (``spills_named_elsewhere``). A session open for
writing elsewhere is skipped and reported, never deleted under its writer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import math
import os
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ._files import atomic_write, open_regular_readonly, storable_path
from ._overflow import OverflowStore, _session_dirname
from ._spills import (
    _SAVED,
    SCAN_CHUNK,
    _decoded,
    delete_session_and_spills,
    is_spill_file,
    referenced_spills,
)
from .errors import InvalidArgument, SessionError, SessionExists, SessionLocked
from .storage import (
    Catalog,
    CatalogListing,
    DirectoryCatalog,
    SessionInfo,
    file_name_for,
    open_catalog,
)
from .storage._archives import (
    ARCHIVE_SUFFIX,
    MANIFEST,
    SESSION_MEMBER,
    ArchivedSession,
    NotAnArchive,
    member_problem,
    read_manifest,
)
from .storage._describe import describe
from .storage._index import index_path
from .storage._sidecars import quarantine_path

__all__ = [
    "ARCHIVE_SUFFIX",
    "Archived",
    "DiskUsage",
    "PrunePlan",
    "PruneReport",
    "SpaceUsed",
    "archive",
    "disk_usage",
    "parse_age",
    "plan_prune",
    "prune",
    "spills_named_elsewhere",
    "unarchive",
]

ARCHIVE_FORMAT = "contextree-archive/1"
MAX_AGE = timedelta(days=100 * 366)
"""The oldest ``prune`` looks back (older than that: nothing a computer wrote)."""


def sidecars(path: str | os.PathLike[str]) -> list[Path]:
    """The files a session file has beside it that exist: quarantine, index, lock."""
    out = []
    for side in (quarantine_path(path), index_path(path), Path(f"{os.fspath(path)}.lock")):
        if side.is_file() and not side.is_symlink():
            out.append(side)
    return out


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _spill_folder(store: OverflowStore, session_id: str) -> Path:
    return store.directory / _session_dirname(session_id)


def _spill_files(store: OverflowStore, session_id: str) -> list[Path]:
    folder = _spill_folder(store, session_id)
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.iterdir() if is_spill_file(p))


# -- du ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpaceUsed:
    """What one session takes: its own bytes (the file; on a database its lines), its spills
    in the overflow store, and its sidecars (quarantine, index, lock)."""

    session: SessionInfo
    session_bytes: int
    spill_bytes: int
    spill_files: int
    sidecar_bytes: int

    @property
    def total(self) -> int:
        """All of it."""
        return self.session_bytes + self.spill_bytes + self.sidecar_bytes


@dataclass
class DiskUsage:
    """``du`` of a catalog: every session (largest first), the catalog's own files (the
    search index), and what could not be listed."""

    sessions: list[SpaceUsed] = field(default_factory=list)
    catalog_bytes: int = 0
    unlisted: list[Any] = field(default_factory=list)

    @property
    def totals(self) -> dict[str, int]:
        """Bytes summed per kind, and in all."""
        t = {"session": sum(s.session_bytes for s in self.sessions),
             "spills": sum(s.spill_bytes for s in self.sessions),
             "sidecars": sum(s.sidecar_bytes for s in self.sessions),
             "index": self.catalog_bytes}
        t["total"] = sum(t.values())
        return t


def disk_usage(where: str | os.PathLike[str] | Catalog,
               store: OverflowStore | None = None) -> DiskUsage:
    """How much space the sessions of ``where`` take, split by kind (see ``SpaceUsed``)."""
    catalog = open_catalog(where)
    store = store or OverflowStore.default()
    listing = catalog.list()
    report = DiskUsage(unlisted=listing.unlisted)
    for info in listing.sessions:
        spills = _spill_files(store, info.id)
        side = sidecars(info.target) if isinstance(catalog, DirectoryCatalog) else []
        own = info.size if info.size is not None else _database_bytes(catalog, info)
        report.sessions.append(SpaceUsed(info, own, sum(_size(p) for p in spills),
                                         len(spills), sum(_size(p) for p in side)))
    report.sessions.sort(key=lambda s: (-s.total, s.session.target))
    if isinstance(catalog, DirectoryCatalog):
        hidden = catalog.root / ".contextree"
        if hidden.is_dir() and not hidden.is_symlink():
            report.catalog_bytes = sum(_size(p) for p in hidden.rglob("*") if p.is_file())
    return report


def _database_bytes(catalog: Catalog, info: SessionInfo) -> int:
    """A session's bytes where the listing does not know them: the health of its storage."""
    try:
        storage = catalog.open(info.id, readonly=True)
    except SessionError:
        return 0
    try:
        return storage.health().size or 0
    finally:
        storage.close()


# -- prune ---------------------------------------------------------------------------------

def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w`` (or a bare number of days) as a ``timedelta``."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    raw = text.strip().lower()
    unit = raw[-1:] if raw[-1:] in units else "d"
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not value >= 0 or not math.isfinite(value):
        raise InvalidArgument(f"{text!r} is not an age: write it as 30d, 12h, 90m or 2w")
    seconds = value * units[unit]
    if seconds > MAX_AGE.total_seconds():
        raise InvalidArgument(f"{text!r} is too long an age: at most {MAX_AGE.days}d (100 "
                              "years); write it as 30d, 12h, 90m or 2w")
    return timedelta(seconds=seconds)


@dataclass
class PrunePlan:
    """What ``prune`` would delete, and what it keeps and why (session target -> reason)."""

    catalog: Catalog
    cutoff: str
    delete: list[SessionInfo] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    unlisted: list[Any] = field(default_factory=list)


@dataclass
class PruneReport:
    """What ``prune`` did: sessions deleted, spill files removed, spills kept because
    another session names them, and sessions skipped (target -> why)."""

    deleted: list[SessionInfo] = field(default_factory=list)
    spills_removed: list[str] = field(default_factory=list)
    spills_kept: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def plan_prune(where: str | os.PathLike[str] | Catalog, *, older_than: timedelta,
               keep_labeled: bool = False, keep_named: bool = False,
               now: datetime | None = None) -> PrunePlan:
    """The sessions of ``where`` whose last activity is older than ``older_than``, less those
    kept: with ``keep_named`` any session with a name, with ``keep_labeled`` any with a
    label in force. Nothing is deleted: pass the plan to ``prune``."""
    try:
        moment = (now or datetime.now(UTC)) - older_than
    except OverflowError:
        raise InvalidArgument(f"older_than={older_than!r} reaches outside the calendar: at "
                              f"most {MAX_AGE.days} days (100 years)") from None
    catalog = open_catalog(where)
    cutoff = moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    listing: CatalogListing = catalog.list()
    plan = PrunePlan(catalog, cutoff, unlisted=listing.unlisted)
    for info in listing.sessions:
        if info.last_activity >= cutoff:
            continue
        if keep_named and info.name:
            plan.kept[info.target] = "named"
            continue
        if keep_named and not info.name_exact:
            plan.kept[info.target] = "may have a name (a big file not searched whole)"
            continue
        if keep_labeled and _labeled(catalog, info):
            plan.kept[info.target] = "labeled"
            continue
        plan.delete.append(info)
    return plan


def _labeled(catalog: Catalog, info: SessionInfo) -> bool:
    try:
        storage = catalog.open(info.id, readonly=True)
    except SessionError:
        return True  # cannot tell: keep it
    try:
        return bool(storage.labels())
    finally:
        storage.close()


def prune(plan: PrunePlan, store: OverflowStore | None = None,
          progress: Callable[[SessionInfo], None] | None = None) -> PruneReport:
    """Delete what ``plan`` lists, each session with the spills only it names; a spill that
    a session that stays still names is kept. A session now open for writing is skipped."""
    store = store or OverflowStore.default()
    catalog = plan.catalog
    report = PruneReport()
    going = {info.target for info in plan.delete}
    still_named = spills_named_elsewhere(catalog, going)
    for info in plan.delete:
        if progress is not None:
            progress(info)
        try:
            _delete_one(catalog, info, store, still_named, report)
        except (SessionLocked, SessionError, OSError) as e:
            report.skipped[info.target] = str(e)
    if isinstance(catalog, DirectoryCatalog) and report.deleted:
        _tidy_index(catalog.root, [info.target for info in report.deleted])
    return report


def _tidy_index(root: Path, deleted: list[str]) -> None:
    """The directory's search index (and listing cache) after a prune: the deleted sessions
    taken out of it, and the whole of it deleted once no session or archive is left for it
    to cache (a pruned directory keeps no hidden copy of what was in it)."""
    from .storage._describe import session_stats
    from .storage._search_index import drop_index, forget_sessions

    archives: list[Any] = []
    left = next(iter(session_stats(root, [], archives)), None)
    try:
        if left is None and not archives:
            drop_index(root)
        else:
            forget_sessions(root, deleted)
    except (InvalidArgument, OSError):
        pass  # not contextree's file, or not ours to delete: a cache, left as it is


def spills_named_elsewhere(catalog: Catalog, going: Iterable[str]) -> set[str]:
    """The spill paths named by the sessions of ``catalog`` that are not ``going`` (targets;
    the files of a directory compared by their absolute paths): the live ones, and, in a
    directory, the archived ones too (``*.archive.zip``, read in place): an archive is a
    session that stays, to be restored. ``prune`` and ``archive`` keep these spills."""
    named: set[str] = set()
    if isinstance(catalog, DirectoryCatalog):
        gone = {os.path.abspath(t) for t in going}
        archives: list[tuple[str, os.stat_result]] = []
        from .storage._describe import session_stats

        for info in catalog.list().sessions:
            if os.path.abspath(info.target) not in gone:
                named |= referenced_spills(info.target)
        for _ in session_stats(catalog.root, [], archives):
            pass  # the walk puts the archives it meets in ``archives``
        for file, _ in archives:
            if os.path.abspath(file) not in gone:
                named |= _named_in_archive(file)
        return named
    going = set(going)
    for info in catalog.list().sessions:
        if info.target in going:
            continue
        try:
            storage = catalog.open(info.id, readonly=True)
        except SessionError:
            continue
        try:
            named |= _named_in(storage.entries())
        finally:
            storage.close()
    return named


def _named_in_archive(path: str) -> set[str]:
    """The spill paths the session inside an archive names (nothing for an archive that
    cannot be read: it restores nothing either), scanned in bounded memory."""
    found: set[str] = set()
    try:
        archived = ArchivedSession(path)
    except NotAnArchive:
        return found
    with archived:
        carry = b""
        try:
            while True:
                chunk = archived.stream.read(SCAN_CHUNK)
                if not chunk:
                    break
                data = carry + chunk
                cut = data.rfind(b"\n") + 1
                lines, carry = (data[:cut], data[cut:]) if cut else (b"", data)
                found.update(_decoded(m) for m in _SAVED.findall(lines))
                if len(carry) > SCAN_CHUNK:  # a long line: keep what a match can span
                    found.update(_decoded(m) for m in _SAVED.findall(carry))
                    carry = carry[-(1 << 20):]
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, RuntimeError):
            pass  # damaged further on: what was read before counts
        found.update(_decoded(m) for m in _SAVED.findall(carry))
    return found


def _named_in(entries: Iterable[Any]) -> set[str]:
    from .entries import MessageEntry

    out = set()
    for entry in entries:
        if isinstance(entry, MessageEntry) and entry.message.truncation is not None:
            saved = entry.message.truncation.saved_path
            if saved:
                out.add(saved)
    return out


def _delete_one(catalog: Catalog, info: SessionInfo, store: OverflowStore,
                still_named: set[str], report: PruneReport) -> None:
    shared = [p for p in _spill_files(store, info.id) if str(p) in still_named]
    if isinstance(catalog, DirectoryCatalog):
        now = describe(Path(info.target))
        if not isinstance(now, SessionInfo) or now.last_activity != info.last_activity or (
                now.id != info.id):
            report.skipped[info.target] = "it changed since it was chosen (kept)"
            return
        kept = _set_aside(shared, store)
        try:
            removal = delete_session_and_spills(info.target, store)
        finally:
            _put_back(kept)
        report.spills_removed += [p for p in removal.removed if p not in still_named]
    elif not _delete_database_session(catalog, info, store, still_named, report):
        report.skipped[info.target] = ("written to since it was chosen, or deleted by another "
                                       "sweep (kept)")
        return
    report.spills_kept += [str(p) for p in shared]
    report.deleted.append(info)


def _set_aside(paths: list[Path], store: OverflowStore) -> list[tuple[Path, Path]]:
    """Move spills that must stay out of the folder ``rm`` empties (to a hidden name at the
    top of the store, on the same file system), to put them back after."""
    import uuid

    moved = []
    for path in paths:
        aside = store.directory / f".keep-{uuid.uuid4().hex[:12]}-{path.name}"
        os.replace(path, aside)
        moved.append((aside, path))
    return moved


def _put_back(moved: list[tuple[Path, Path]]) -> None:
    for aside, path in moved:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(aside, path)


def _delete_database_session(catalog: Catalog, info: SessionInfo, store: OverflowStore,
                             still_named: set[str], report: PruneReport) -> bool:
    """Delete a session of a database catalog, only if nothing was written to it since it
    was listed (checked in the delete itself on PostgreSQL: safe from cron on many machines
    at once)."""
    from .storage.postgres import PostgresCatalog

    if isinstance(catalog, PostgresCatalog):
        if not catalog.delete_unchanged(info):
            return False
    else:
        catalog.delete(info.id)
    for path in _spill_files(store, info.id):
        if str(path) in still_named:
            continue
        path.unlink(missing_ok=True)
        report.spills_removed.append(str(path))
    try:
        _spill_folder(store, info.id).rmdir()
    except OSError:
        pass
    return True


# -- archive -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Archived:
    """An archive file and what it holds: the session, and its files with their places."""

    path: Path
    session_id: str
    files: dict[str, str]  # member name -> the path it is restored to
    spills_kept: tuple[str, ...] = ()  # archived, and left in place: other sessions name them


def archive(target: str | os.PathLike[str], *, store: OverflowStore | None = None,
            output: str | os.PathLike[str] | None = None) -> Archived:
    """Fold a session, its quarantine file and the spills it owns into one compressed file,
    then delete the originals; ``unarchive`` puts every byte back.

    A session file becomes ``<file>.archive.zip`` beside it (or ``output``); a session in a
    database (``postgresql://...#ID``) becomes ``output`` (default ``<id>.archive.zip`` in
    the current directory), its lines exactly as the database holds them. The archive is
    written and synced before anything is deleted; a session open for writing is refused
    (``SessionLocked``). A spill that another session of the same catalog (the session
    file's directory, or the database) names, live or archived, is archived too but left in
    place (``Archived.spills_kept``): a fork keeps the outputs of its parent."""
    from ._session import Session
    from ._spills import recorded_spills
    from .storage import resolve

    store = store or OverflowStore.default()
    address = resolve(target)
    in_file = address.is_file
    with Session.open(target) as session:  # files: the writer's lock, nobody appends
        session_id = session.id
        path = Path(target) if in_file else None
        if output is not None:
            out = Path(output)
        elif path is not None:
            out = path.with_name(path.name + ARCHIVE_SUFFIX)
        else:
            out = Path(file_name_for(session_id)[: -len(".jsonl")] + ARCHIVE_SUFFIX)
        if out.exists():
            raise SessionExists("an archive is already there", path=str(out))
        folder = _spill_folder(store, session_id)
        owned = ({str(p) for p in folder.iterdir() if p.is_file() and not p.is_symlink()}
                 if folder.is_dir() and not folder.is_symlink() else set())
        recorded = {str(p) for p in recorded_spills(session)
                    if p.parent.name == _session_dirname(session_id) and is_spill_file(p)}
        members: dict[str, Path | bytes] = {
            SESSION_MEMBER: path if path is not None else _lines_of(session)}
        if path is not None and quarantine_path(path).is_file():
            members["quarantine"] = quarantine_path(path)
        for i, spill in enumerate(sorted(owned | recorded)):  # (a zip name must be UTF-8)
            members[f"spills/{i:06d}-{storable_path(Path(spill).name)}"] = Path(spill)
        shared = set()
        if owned | recorded:
            catalog = (DirectoryCatalog(path.parent, cache=False) if path is not None
                       else open_catalog(address.where))  # (no listing cache made by it)
            me = str(path) if path is not None else catalog.target(session_id)
            shared = (owned | recorded) & spills_named_elsewhere(catalog, {me, str(out)})
        manifest: dict[str, Any] = {"format": ARCHIVE_FORMAT, "session_id": session_id,
                                    "origin": "file" if in_file else "database",
                                    "where": storable_path(session.location),
                                    "archived_at": datetime.now(UTC).isoformat(), "files": {}}
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED,
                             compresslevel=6) as z:
            for name, source in members.items():
                manifest["files"][name] = _member(z, name, source)
            import orjson

            z.writestr(MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        try:
            atomic_write(out, buffer.getvalue(), overwrite=False, durable=True)
        except FileExistsError:
            raise SessionExists("an archive is already there", path=str(out)) from None
        try:  # under the lock; refused while another handle of this process writes
            session.storage.delete()
        except BaseException:
            out.unlink(missing_ok=True)
            raise
    for name, source in members.items():
        if name != SESSION_MEMBER and isinstance(source, Path) and str(source) not in shared:
            source.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # gone already, kept for another session, or not only this session's files
    return Archived(out, session_id,
                    {n: str(s.absolute()) if isinstance(s, Path) else n
                     for n, s in members.items()},
                    tuple(sorted(shared)))


def _lines_of(session: Any) -> bytes:
    """A database session as the JSONL file it would be: its header, then every entry in
    the order it was stored (each line as ``encode_line`` writes it, as the database keeps)."""
    from .entries import encode_line

    return b"".join([encode_line(session.header), *(encode_line(e) for e in session.entries())])


def _member(z: zipfile.ZipFile, name: str, source: Path | bytes) -> dict[str, Any]:
    if isinstance(source, bytes):
        data, meta = source, {"path": f"{name}", "mode": 0o600, "mtime_ns": time.time_ns()}
    else:
        data = _read_exact(source)
        st = source.stat()
        meta = {**_path_fields(str(source.absolute())), "mode": st.st_mode & 0o7777,
                "mtime_ns": st.st_mtime_ns}
    z.writestr(name, data)
    return {**meta, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _path_fields(path: str) -> dict[str, str]:
    """A file's place as a manifest holds it: ``path``, and for a name with bytes that are
    not UTF-8 (held as lone surrogates, which JSON cannot carry) ``path`` as a session line
    writes it (``a\\xffb``, to read) and the exact bytes in ``path_bytes`` (base64), which
    ``unarchive`` restores the name from."""
    text = storable_path(path)
    if text == path:
        return {"path": path}
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:  # a surrogate no byte stands for: no such file name
        return {"path": text}
    return {"path": text, "path_bytes": base64.b64encode(raw).decode("ascii")}


def _manifest_path(meta: Any) -> str | None:
    """The place a manifest entry gives (``_path_fields``), exactly as the file was named;
    ``None`` if it gives none that can be read."""
    if not isinstance(meta, dict):
        return None
    raw = meta.get("path_bytes")
    if raw is None:
        path = meta.get("path")
        return path if isinstance(path, str) else None
    if not isinstance(raw, str):
        return None
    try:
        return os.fsdecode(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        return None


def _read_exact(path: Path) -> bytes:
    fd = open_regular_readonly(path)
    with open(fd, "rb") as f:
        return f.read()


def unarchive(path: str | os.PathLike[str], *, store: OverflowStore | None = None,
              into: str | os.PathLike[str] | Catalog | None = None) -> Archived:
    """Restore an archive byte for byte (checked against the manifest's hashes), with each
    file's mode and modification time, then delete the archive: the session file beside the
    archive under its own name, its quarantine file beside it, its spills in ``store``'s
    folder of the session. Only base names are taken from the archive, so a crafted one can
    put nothing elsewhere; a file already at one of those places is never overwritten
    (``SessionExists``; a spill already there with the very bytes archived is left as it
    is: ``archive`` keeps the spills another session names).

    All or nothing: the manifest, the places and every member's bytes are checked before
    anything is written (a member is never inflated past the size the manifest gives it,
    and held in memory only in chunks), and the files written are deleted again if a later
    one fails. A damaged or crafted archive is ``InvalidArgument`` ("the archive is damaged,
    nothing was restored").

    ``into`` (a catalog: a database URL, a directory) creates the session there instead,
    under its id, line for line; an archive of a database session needs it."""
    archive_path = Path(path)
    store = store or OverflowStore.default()
    try:
        z = zipfile.ZipFile(archive_path)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as e:
        raise InvalidArgument(f"{archive_path}: not a contextree archive ({e})") from None
    with z:
        session_id, files = _checked_manifest(z, archive_path, into)
        places = {name: _restore_place(name, meta, archive_path, store, session_id)
                  for name, meta in files.items()
                  if into is None or name != SESSION_MEMBER}
        seen: dict[str, str] = {}
        for name, place in places.items():
            other = seen.setdefault(os.path.abspath(place), name)
            if other != name:
                raise _damaged(archive_path, f"{other} and {name} would both be restored to "
                               f"{place}")
        present = set()
        for name, place in places.items():
            if place.exists() or place.is_symlink():
                if name.startswith("spills/") and _holds(place, files[name]):
                    present.add(name)  # kept for another session: the bytes archived
                    continue
                raise SessionExists("a file is already where the archive would restore one; "
                                    "move it away first", path=str(place))
        for name, meta in files.items():  # every byte checked before anything is written
            for _ in _member_chunks(z, name, meta, archive_path):
                pass
        lines = (b"".join(_member_chunks(z, SESSION_MEMBER, files[SESSION_MEMBER],
                                         archive_path)) if into is not None else b"")
        restored = _restore(z, files, places, present, archive_path,
                            (lambda: _create_in(into, lines, archive_path))
                            if into is not None else None)
    archive_path.unlink()
    return Archived(archive_path, session_id, restored)


def _damaged(archive_path: Path, why: str) -> InvalidArgument:
    return InvalidArgument(f"{archive_path}: {why}; the archive is damaged, nothing was "
                           "restored")


_MAX_MTIME_NS = 2**63  # past it, no file system keeps the time (nor can Python set it)
_ZIP_ERRORS = (KeyError, zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
               NotImplementedError, RuntimeError)  # RuntimeError: an encrypted member


def _checked_manifest(z: zipfile.ZipFile, archive_path: Path,
                      into: object) -> tuple[str, dict[str, dict[str, Any]]]:
    """The session id and the files of the archive's manifest, each entry checked: a size
    the member inflates to exactly (and no more than ``MAX_MEMBER_BYTES``), a hash, and a
    mode and modification time that can be set."""
    try:
        manifest = read_manifest(z)
    except KeyError:
        raise InvalidArgument(f"{archive_path}: not a contextree archive (no "
                              f"{MANIFEST})") from None
    except NotAnArchive as e:
        raise _damaged(archive_path, str(e)) from None
    except _ZIP_ERRORS as e:
        raise _damaged(archive_path, f"its {MANIFEST} cannot be read ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        raise InvalidArgument(f"{archive_path}: not a contextree archive of a format "
                              f"this version reads ({ARCHIVE_FORMAT})")
    session_id = manifest.get("session_id")
    files = manifest.get("files")
    if not isinstance(session_id, str) or not isinstance(files, dict) or (
            SESSION_MEMBER not in files):
        raise InvalidArgument(f"{archive_path}: its manifest names no session")
    if into is None and manifest.get("origin") == "database":
        raise InvalidArgument(f"{archive_path}: this archive holds a session of a database "
                              f"({manifest.get('where')}); restore it with into= (`--into "
                              "URL`), or into a directory of session files")
    for name, meta in files.items():
        problem = member_problem(z, name, meta)
        if problem is None and not (isinstance(meta.get("sha256"), str)
                                    and len(meta["sha256"]) == 64):
            problem = f"its manifest gives {name} no hash"
        mode, mtime = (meta.get("mode"), meta.get("mtime_ns")) if problem is None else (0, 0)
        if mode is not None and type(mode) is not int:
            problem = f"its manifest gives {name} a mode that is not one ({mode!r})"
        if mtime is not None and (type(mtime) is not int
                                  or not 0 <= mtime < _MAX_MTIME_NS):
            problem = f"its manifest gives {name} a modification time out of range ({mtime!r})"
        if problem is not None:
            raise _damaged(archive_path, problem)
    return session_id, files


def _member_chunks(z: zipfile.ZipFile, name: str, meta: dict[str, Any],
                   archive_path: Path) -> Iterator[bytes]:
    """The bytes of a member in chunks, never more than its manifest's size; once they are
    all read, checked against its size and hash (``InvalidArgument`` if they do not match,
    or if the member cannot be read)."""
    size = meta["size"]
    digest = hashlib.sha256()
    total = 0
    try:
        f = z.open(name)
    except _ZIP_ERRORS as e:
        raise _damaged(archive_path, f"{name} cannot be read ({e})") from None
    with f:
        while True:
            try:
                chunk = f.read(min(1 << 20, size - total + 1))
            except _ZIP_ERRORS as e:
                raise _damaged(archive_path, f"{name} cannot be read ({e})") from None
            if not chunk:
                break
            total += len(chunk)
            if total > size:
                raise _damaged(archive_path, f"{name} inflates to more than the {size} "
                               "bytes its manifest says")
            digest.update(chunk)
            yield chunk
    if total != size or digest.hexdigest() != meta["sha256"]:
        raise _damaged(archive_path, f"{name} does not match its hash")


def _holds(place: Path, meta: dict[str, Any]) -> bool:
    """Whether ``place`` is a regular file holding exactly the bytes ``meta`` describes."""
    try:
        fd = open_regular_readonly(place)
    except OSError:
        return False
    with open(fd, "rb") as f:
        if os.fstat(f.fileno()).st_size != meta["size"]:
            return False
        digest = hashlib.sha256()
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return bool(digest.hexdigest() == meta["sha256"])


def _restore(z: zipfile.ZipFile, files: dict[str, dict[str, Any]], places: dict[str, Path],
             present: set[str], archive_path: Path,
             create: Callable[[], str] | None) -> dict[str, str]:
    """Write each member at its place (none there already; ``present`` ones left as they
    are), then ``create`` the session in a catalog if asked: all of it, or, on any error,
    none (what was written and the folders made for it are deleted again)."""
    restored: dict[str, str] = {}
    written: list[Path] = []
    made: list[Path] = []
    try:
        for name, place in places.items():
            restored[name] = str(place)
            if name in present:
                continue
            _make_folders(place.parent, made)
            meta = files[name]
            mode = meta.get("mode")
            try:
                atomic_write(place, _member_chunks(z, name, meta, archive_path),
                             mode=(mode if mode is not None else 0o600) & 0o700,
                             overwrite=False, durable=True)
            except FileExistsError:
                raise SessionExists("a file is already where the archive would restore one; "
                                    "move it away first", path=str(place)) from None
            written.append(place)
            if meta.get("mtime_ns") is not None:
                os.utime(place, ns=(time.time_ns(), meta["mtime_ns"]), follow_symlinks=False)
        if create is not None:
            restored[SESSION_MEMBER] = create()
    except BaseException:
        for place in reversed(written):
            place.unlink(missing_ok=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    return restored


def _make_folders(folder: Path, made: list[Path]) -> None:
    """``folder`` and the missing folders above it, each new one added to ``made``."""
    missing = []
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        try:
            each.mkdir(mode=0o700)
        except FileExistsError:
            continue
        made.append(each)


def _create_in(into: str | os.PathLike[str] | Catalog, lines: bytes, archive_path: Path) -> str:
    """Create the archived session in the catalog ``into`` from its lines; its target."""
    from .entries import LineError, SessionHeader, decode_line

    rows = [raw for raw in lines.split(b"\n") if raw.strip()]
    try:
        decoded = [decode_line(raw) for raw in rows]
    except LineError as e:
        raise InvalidArgument(f"{archive_path}: its session does not decode ({e})") from None
    header, entries = decoded[0] if decoded else None, decoded[1:]
    if not isinstance(header, SessionHeader) or any(isinstance(e, SessionHeader)
                                                    for e in entries):
        raise InvalidArgument(f"{archive_path}: its session has no header line")
    catalog = open_catalog(into) if isinstance(into, str | os.PathLike) else into
    catalog.create(header, entries).close()  # type: ignore[arg-type]
    return catalog.target(header.id)


def _restore_place(name: str, meta: Any, archive_path: Path, store: OverflowStore,
                   session_id: str) -> Path:
    original = _manifest_path(meta)
    base = Path(original).name if original is not None else ""
    if not base or base in (".", "..") or base.startswith(".") or "\x00" in base:
        raise InvalidArgument(f"{archive_path}: {name!r} has no usable file name")
    if name == SESSION_MEMBER:
        return archive_path.with_name(base)
    if name == "quarantine":
        return archive_path.with_name(base)
    if name.startswith("spills/"):
        return _spill_folder(store, session_id) / base
    raise InvalidArgument(f"{archive_path}: unknown member {name!r}")
