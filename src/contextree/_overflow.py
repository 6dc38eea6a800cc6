"""Overflow store: where the full text of a truncated tool result is kept on disk.

Truncation shows the model a preview and saves the original here, so nothing is lost: the
model can ``read`` any section back. Files are private to the user (directories 0700, files
0600), written atomically, named so that no label or session id can escape the store, and
pruned by age and total size. A directory that is already there is used only if it is a real
directory (not a symlink) owned by the user and not writable by everyone: another user could
otherwise swap or read what is saved in it.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contextree._files import TEMP_SUFFIX, atomic_write
from contextree.errors import StorageFailure

__all__ = ["GcReport", "OverflowStore"]

DEFAULT_MAX_AGE = 7 * 86400.0
DEFAULT_MAX_TOTAL_BYTES = 500 * 2**20
DEFAULT_GC_INTERVAL = 60.0

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_LABEL = 40
_MAX_SESSION = 64
_SESSION_PREFIX = "s-"
_TMP_PREFIX = ".tmp-"  # temp files of versions before atomic_write (gc still removes them)
_TMP_MAX_AGE = 3600.0
_SUFFIX = ".txt"

# Per directory, when this process last ran the automatic gc (throttles it across instances).
_last_gc: dict[str, float] = {}
_last_gc_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class GcReport:
    """What a gc run removed (or, with ``dry_run``, would remove) and what it kept."""

    removed: int
    bytes_freed: int
    kept: int
    kept_bytes: int
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Spill:
    path: Path
    size: int
    mtime: float


def user_home() -> Path:
    """The per-user contextree directory: ``$CONTEXTREE_HOME``, else the platform's user data
    directory; it holds the overflow store and the chats of ``contextree chat``."""
    home = os.environ.get("CONTEXTREE_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs  # here: only a store without a home set needs it

    return Path(platformdirs.user_data_dir("contextree"))


def _sanitize(value: str, cap: int) -> str:
    """``value`` reduced to ``[A-Za-z0-9_-]``, at most ``cap`` characters ("" if nothing left)."""
    return _SAFE.sub("", value)[:cap]


def _label_part(label: str) -> str:
    return _sanitize(label, _MAX_LABEL) or "output"


def _session_dirname(session_id: str) -> str:
    """A directory name for a session that is safe and distinct for distinct ids.

    Ids that are already safe and short are used as they are; any other id gets a hash of
    the original appended, so ``a/b`` and ``ab`` do not share a directory.
    """
    clean = _sanitize(session_id, _MAX_SESSION)
    if clean == session_id and clean:
        return _SESSION_PREFIX + clean
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_SESSION_PREFIX}{clean}-{digest}" if clean else f"{_SESSION_PREFIX}{digest}"


def _unique_name(label: str) -> str:
    """Timestamp (sortable, UTC) + random, then the sanitized label."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    millis = int((now % 1) * 1000)
    return f"{stamp}{millis:03d}-{secrets.token_hex(5)}-{_label_part(label)}{_SUFFIX}"


def _make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with the leaf set to 0700 when this call creates it; a
    leaf that is already there must pass ``_check_private_dir``."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        _check_private_dir(path)
        return
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            _check_private_dir(path)
            return
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


def _check_private_dir(path: Path) -> None:
    """Refuse (``StorageFailure``) a directory another user could swap or write into: a
    symlink, something that is not a directory, one owned by someone else or writable by all."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # gone again (a concurrent gc); the caller's write recreates or fails clearly
    where = str(path)
    if stat.S_ISLNK(st.st_mode):
        raise StorageFailure(
            f"the overflow store directory is a symlink (to {os.readlink(path)}); refusing to "
            "save tool output through it. Point the store at a real directory "
            "(OverflowStore(path) or $CONTEXTREE_HOME) or remove the link", path=where)
    if not stat.S_ISDIR(st.st_mode):
        raise StorageFailure(
            "the overflow store path is not a directory; remove it or point the store "
            "elsewhere (OverflowStore(path) or $CONTEXTREE_HOME)", path=where)
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise StorageFailure(
            f"the overflow store directory belongs to another user (uid {st.st_uid}), who "
            "could read or replace saved output; point the store at a directory of your own "
            "(OverflowStore(path) or $CONTEXTREE_HOME)", path=where)
    if st.st_mode & stat.S_IWOTH:
        raise StorageFailure(
            f"the overflow store directory is writable by every user (mode "
            f"{stat.S_IMODE(st.st_mode):04o}), so anyone could replace saved output; make it "
            f"private (chmod 700 {where}) or point the store elsewhere", path=where)


class OverflowStore:
    """A directory of saved tool outputs, pruned by age and total size.

    Layout: ``<directory>/<name>.txt`` for outputs without a session and
    ``<directory>/s-<session>/<name>.txt`` for a session's outputs, so a session's spills
    can be removed together. ``save`` runs a gc at most once per ``gc_interval`` seconds per
    directory per process (``gc_interval=None`` turns that off).
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        gc_interval: float | None = DEFAULT_GC_INTERVAL,
    ) -> None:
        if max_age < 0:
            raise ValueError(f"max_age must be >= 0 seconds, got {max_age!r}")
        if max_total_bytes < 0:
            raise ValueError(f"max_total_bytes must be >= 0, got {max_total_bytes!r}")
        if gc_interval is not None and gc_interval < 0:
            raise ValueError(f"gc_interval must be >= 0 seconds or None, got {gc_interval!r}")
        self.directory = Path(directory).expanduser().absolute()
        self.max_age = float(max_age)
        self.max_total_bytes = int(max_total_bytes)
        self.gc_interval = gc_interval

    def __repr__(self) -> str:
        return f"OverflowStore({str(self.directory)!r})"

    @classmethod
    def default(cls) -> OverflowStore:
        """The per-user store: ``$CONTEXTREE_HOME/tool-output``, else the platform data dir."""
        return cls(user_home() / "tool-output")

    # -- writing -------------------------------------------------------------------------
    def save(
        self, data: bytes | str, *, session_id: str | None = None, label: str = "output"
    ) -> Path:
        """Write ``data`` to a new private file and return its absolute path.

        Strings are stored as UTF-8, bytes verbatim. The file appears complete or not at all
        (``atomic_write``); it is not synced to disk, since a spill is a cache, not a record.
        """
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        folder = self._folder(session_id)
        try:
            path = self._write(folder, raw, label)
        except FileNotFoundError:  # a concurrent gc removed the empty session folder
            path = self._write(folder, raw, label)
        self._maybe_gc(protect=path)
        return path

    def session_directory(self, session_id: str | None) -> Path:
        """Where ``save`` puts a session's outputs (the store's own directory for none)."""
        if session_id is None:
            return self.directory
        return self.directory / _session_dirname(session_id)

    def _folder(self, session_id: str | None) -> Path:
        _make_private_dir(self.directory)
        folder = self.session_directory(session_id)
        if folder != self.directory:
            _make_private_dir(folder)
        return folder

    def _write(self, folder: Path, raw: bytes, label: str) -> Path:
        _make_private_dir(folder)
        return atomic_write(folder / _unique_name(label), raw, mode=0o600, durable=False)

    # -- reading and deleting ------------------------------------------------------------
    def contains(self, path: str | Path) -> bool:
        """True when ``path`` resolves to a location strictly inside this store."""
        try:
            resolved = Path(path).expanduser().resolve()
            root = self.directory.resolve()
        except (OSError, RuntimeError):
            return False
        return resolved != root and resolved.is_relative_to(root)

    def _checked(self, path: str | Path) -> Path:
        if not self.contains(path):
            raise ValueError(
                f"{str(path)!r} is not inside the overflow store {str(self.directory)!r}"
            )
        return Path(path).expanduser().resolve()

    def read(self, path: str | Path) -> bytes:
        """The saved bytes at ``path``; raises ValueError if the path is outside the store."""
        return self._checked(path).read_bytes()

    def delete(self, path: str | Path) -> bool:
        """Delete one saved file; False if it was already gone. Paths must be in the store."""
        target = self._checked(path)
        if target.is_dir():
            raise ValueError(f"{str(path)!r} is a directory; use delete_session to remove one")
        try:
            target.unlink()
        except FileNotFoundError:
            return False
        return True

    def delete_session(self, session_id: str) -> int:
        """Remove every file saved for ``session_id``; returns how many were removed."""
        folder = self.directory / _session_dirname(session_id)
        if not folder.is_dir():
            return 0
        count = sum(1 for p in folder.iterdir() if p.is_file())
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def files(self) -> list[Path]:
        """All saved files, oldest first."""
        return [s.path for s in sorted(self._spills(), key=lambda s: (s.mtime, s.path.name))]

    # -- retention -----------------------------------------------------------------------
    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Delete files older than ``max_age``, then the oldest until the total fits.

        With ``dry_run`` nothing is deleted; the report says what would be.
        """
        return self._gc(dry_run=dry_run, protect=None)

    def _maybe_gc(self, protect: Path) -> None:
        if self.gc_interval is None:
            return
        key = str(self.directory)
        now = time.monotonic()
        with _last_gc_lock:
            last = _last_gc.get(key)
            if last is not None and now - last < self.gc_interval:
                return
            _last_gc[key] = now
        try:
            self._gc(dry_run=False, protect=protect)
        except OSError:
            pass  # retention is best effort; the next save tries again

    def _gc(self, *, dry_run: bool, protect: Path | None) -> GcReport:
        now = time.time()
        self._remove_stale_temps(now, dry_run)
        spills = sorted(self._spills(), key=lambda s: (s.mtime, s.path.name))
        doomed = [s for s in spills if now - s.mtime > self.max_age and s.path != protect]
        gone = {s.path for s in doomed}
        keep = [s for s in spills if s.path not in gone]
        total = sum(s.size for s in keep)
        survivors: list[_Spill] = []
        for spill in keep:  # oldest first
            if total > self.max_total_bytes and spill.path != protect:
                doomed.append(spill)
                total -= spill.size
            else:
                survivors.append(spill)
        freed = 0
        removed: list[str] = []
        for spill in doomed:
            if dry_run or _unlink(spill.path):
                freed += spill.size
                removed.append(str(spill.path))
        if not dry_run:
            self._remove_empty_session_dirs()
        return GcReport(len(removed), freed, len(survivors), total, tuple(removed))

    def _folders(self) -> Iterator[Path]:
        if not self.directory.is_dir():
            return
        _check_private_dir(self.directory)  # never prune through a link or a shared directory
        yield self.directory
        for entry in os.scandir(self.directory):
            if entry.name.startswith(_SESSION_PREFIX) and entry.is_dir(follow_symlinks=False):
                yield Path(entry.path)

    def _spills(self) -> Iterator[_Spill]:
        for folder in self._folders():
            for entry in os.scandir(folder):
                if not entry.name.endswith(_SUFFIX) or entry.name.startswith("."):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if entry.is_file(follow_symlinks=False):
                    yield _Spill(Path(entry.path), st.st_size, st.st_mtime)

    def _remove_stale_temps(self, now: float, dry_run: bool) -> None:
        """Temp files left by a crashed writer; fresh ones may be a write in progress."""
        if dry_run:
            return
        for folder in self._folders():
            for entry in os.scandir(folder):
                if not _is_temp(entry.name):
                    continue
                try:
                    if now - entry.stat(follow_symlinks=False).st_mtime > _TMP_MAX_AGE:
                        _unlink(Path(entry.path))
                except FileNotFoundError:
                    continue

    def _remove_empty_session_dirs(self) -> None:
        for folder in self._folders():
            if folder != self.directory:
                try:
                    folder.rmdir()
                except OSError:
                    pass  # not empty, or already gone


def _is_temp(name: str) -> bool:
    """A writer's temp file (``atomic_write``'s ``.NAME.RANDOM.tmp``, or an older ``.tmp-*``)."""
    return name.startswith(_TMP_PREFIX) or (name.startswith(".") and name.endswith(TEMP_SUFFIX))


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
