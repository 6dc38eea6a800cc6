"""A session archive read in place: the session lines inside ``contextree archive``'s zip,
without restoring anything, so that search still finds what an archived session said.

An archive (``<file>.jsonl.archive.zip``, made by ``contextree.retention.archive``) holds the
session as the member ``session.jsonl``, byte for byte, besides its spills and a manifest.
``ArchivedSession`` opens that member for reading (the archive opened without following a
symbolic link and without blocking on a FIFO, as a session file is); a file that is not
such an archive raises ``NotAnArchive`` with the reason.

A member is never inflated past the size its archive's manifest gives it (a zip member's
output is held to the size its zip entry declares, and that is checked against the manifest
before anything is read): a crafted archive whose few megabytes inflate to gigabytes is
refused as damaged, in bounded memory. ``read_manifest`` and ``member_problem`` are the
checks ``unarchive`` makes too.
"""

from __future__ import annotations

import os
from typing import IO, Any

from .._files import open_regular_readonly
from .._limits import parse_json

__all__ = ["ARCHIVE_SUFFIX", "MANIFEST", "MANIFEST_LIMIT", "MAX_MEMBER_BYTES", "SESSION_MEMBER",
           "ArchivedSession", "NotAnArchive", "is_archive", "member_problem", "read_manifest"]

ARCHIVE_SUFFIX = ".archive.zip"
SESSION_MEMBER = "session.jsonl"
MANIFEST = "manifest.json"
MANIFEST_LIMIT = 64 << 20
"""The most bytes a manifest may inflate to (one spill takes about 300 bytes of it)."""
MAX_MEMBER_BYTES = 64 << 30
"""The most bytes one member of an archive may inflate to, whatever its manifest says."""


class NotAnArchive(Exception):
    """The file is not a readable session archive; the message says why."""


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is named as a session archive is."""
    return os.fspath(path).endswith(ARCHIVE_SUFFIX)


def read_manifest(z: Any) -> Any:
    """The parsed manifest of the open ``zipfile.ZipFile`` ``z``, read in bounded memory:
    ``KeyError`` if it has none, ``NotAnArchive`` if it is too big or not JSON (a damaged
    member: the zip's own errors, ``zipfile.BadZipFile``, ``zlib.error``, ``OSError``)."""
    info = z.getinfo(MANIFEST)
    if info.file_size > MANIFEST_LIMIT:
        raise NotAnArchive(f"its {MANIFEST} would inflate to {info.file_size} bytes, more "
                           f"than a manifest takes ({MANIFEST_LIMIT}): a damaged archive")
    with z.open(info) as f:
        data = f.read(MANIFEST_LIMIT + 1)
    if len(data) > MANIFEST_LIMIT:
        raise NotAnArchive(f"its {MANIFEST} is too big: a damaged archive")
    try:
        return parse_json(data)
    except ValueError as e:  # JSONError, TooDeep
        raise NotAnArchive(f"its {MANIFEST} is not JSON ({e}): a damaged archive") from None


def member_problem(z: Any, name: str, meta: Any) -> str | None:
    """Why the member ``name`` of the open zip ``z`` cannot be read as its manifest entry
    ``meta`` describes it (absent, or declared bigger or smaller than the manifest's
    ``size``, or over ``MAX_MEMBER_BYTES``); ``None`` if it can. Nothing is inflated."""
    size = meta.get("size") if isinstance(meta, dict) else None
    if type(size) is not int or not 0 <= size <= MAX_MEMBER_BYTES:
        return f"its manifest gives {name} no size this version reads ({size!r})"
    try:
        info = z.getinfo(name)
    except KeyError:
        return f"it has no {name}, which its manifest names"
    if info.file_size != size:
        return (f"its {name} would inflate to {info.file_size} bytes where its manifest "
                f"says {size}")
    return None


class ArchivedSession:
    """The session member of one archive, open for reading: ``stream`` is its bytes (a
    seekable binary stream); close it (or use ``with``) to close the archive."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import zipfile  # here, not at start-up: listing a directory names archives only

        try:
            fd = open_regular_readonly(path)
        except OSError as e:
            raise NotAnArchive(f"cannot be read ({e.strerror})") from None
        self._file = open(fd, "rb")  # noqa: SIM115 - closed by close()
        try:
            self._zip = zipfile.ZipFile(self._file)
            self._zip.getinfo(SESSION_MEMBER)
        except KeyError:
            self._file.close()
            raise NotAnArchive(f"an archive without {SESSION_MEMBER}, not a contextree "
                               "session archive") from None
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as e:
            self._file.close()
            raise NotAnArchive(f"not a readable zip archive ({e})") from None
        try:
            self.stream: IO[bytes] = self._open_session()
        except NotAnArchive:
            self._zip.close()
            self._file.close()
            raise

    def _open_session(self) -> IO[bytes]:
        """The session member, once the manifest says it inflates to what the zip says."""
        import zipfile
        import zlib

        try:
            manifest = read_manifest(self._zip)
        except KeyError:
            raise NotAnArchive(f"an archive without {MANIFEST}, not a contextree session "
                               "archive") from None
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError,
                NotImplementedError, RuntimeError) as e:  # RuntimeError: encrypted
            raise NotAnArchive(f"a damaged archive ({e})") from None
        files = manifest.get("files") if isinstance(manifest, dict) else None
        meta = files.get(SESSION_MEMBER) if isinstance(files, dict) else None
        problem = member_problem(self._zip, SESSION_MEMBER, meta)
        if problem is not None:
            raise NotAnArchive(f"a damaged archive: {problem}")
        try:
            return self._zip.open(SESSION_MEMBER)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError,
                RuntimeError) as e:
            raise NotAnArchive(f"a damaged archive ({e})") from None

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of the session from ``offset`` (a damaged member: ``b""``)."""
        import zipfile
        import zlib

        try:
            self.stream.seek(offset)
            return self.stream.read(length)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error):
            return b""

    def close(self) -> None:
        """Close the member, the archive and its file."""
        try:
            self.stream.close()
            self._zip.close()
        finally:
            self._file.close()

    def __enter__(self) -> ArchivedSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
