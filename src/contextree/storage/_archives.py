"""A session archive read in place: the session lines inside ``contextree archive``'s zip,
without restoring anything, so that search still finds what an archived session said.

An archive (``<file>.jsonl.archive.zip``, made by ``contextree.retention.archive``) holds the
session as the member ``session.jsonl``, byte for byte, besides its spills and a manifest.
``ArchivedSession`` opens that member for reading (the archive opened without following a
symbolic link and without blocking on a FIFO, as a session file is); a file that is not
such an archive raises ``NotAnArchive`` with the reason.
"""

from __future__ import annotations

import os
from typing import IO

from .._files import open_regular_readonly

__all__ = ["ARCHIVE_SUFFIX", "SESSION_MEMBER", "ArchivedSession", "NotAnArchive", "is_archive"]

ARCHIVE_SUFFIX = ".archive.zip"
SESSION_MEMBER = "session.jsonl"


class NotAnArchive(Exception):
    """The file is not a readable session archive; the message says why."""


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is named as a session archive is."""
    return os.fspath(path).endswith(ARCHIVE_SUFFIX)


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
            self.stream: IO[bytes] = self._zip.open(SESSION_MEMBER)
        except KeyError:
            self._file.close()
            raise NotAnArchive(f"an archive without {SESSION_MEMBER}, not a contextree "
                               "session archive") from None
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as e:
            self._file.close()
            raise NotAnArchive(f"not a readable zip archive ({e})") from None

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
