"""Every error contextree raises, as one tree of classes: catch at the level you care about.

::

    ContextreeError
    ├── SessionError                  a session could not be read, written or navigated
    │   ├── SessionNotFound           no such session (also FileNotFoundError)
    │   ├── SessionExists             a session is already there (also FileExistsError)
    │   ├── EntryNotFound             no such entry in the session (also LookupError)
    │   ├── SessionLocked             another writer holds the session
    │   ├── ReadOnlySession           a write to a session opened read-only
    │   ├── LeafConflict              the leaf moved since the caller looked (expected_leaf)
    │   ├── StorageFailure            the disk or the database failed (also OSError)
    │   ├── CorruptSession            stored data that cannot be read as a session
    │   │   ├── CorruptLine           a line that is not JSON (or not UTF-8)
    │   │   ├── TornLine              the last line was cut off mid-write
    │   │   └── InvalidHeader         no header, a second header, a newer format version
    │   └── InvalidEntry              an entry that breaks the session's rules (also ValueError)
    │       ├── DuplicateId           its id is taken
    │       ├── MissingParent         its parent (or a label's / leaf move's target) is missing
    │       └── ParentCycle           its parent links form a cycle
    ├── InvalidArgument               a call the library refuses (also ValueError)
    │   ├── UnknownOption             a keyword a middleware does not take (also TypeError)
    │   └── UnknownFormat             a format name not registered, a file of no known format
    ├── CompactionError               compaction could not produce a smaller valid context
    ├── ToolError                     a tool refused its input or failed (shown to the model)
    └── ModelError                    a model provider call failed
        ├── ModelRateLimited          429: retry after ``retry_after`` seconds
        ├── ModelUnavailable          5xx, timeouts, connection failures: a retry may help
        ├── ModelRequestRejected      any other 4xx: fix the request or the credentials
        └── ModelReplyMalformed       a reply that is not JSON or not the API's shape

Each class has a ``code`` (for ``--json`` output); a code means one thing. Messages say what
happened, where (``path:line``) and what to do.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CompactionError",
    "ContextreeError",
    "CorruptLine",
    "CorruptSession",
    "DuplicateId",
    "EntryNotFound",
    "InvalidArgument",
    "InvalidEntry",
    "InvalidHeader",
    "LeafConflict",
    "MissingParent",
    "ModelError",
    "ModelRateLimited",
    "ModelReplyMalformed",
    "ModelRequestRejected",
    "ModelUnavailable",
    "ParentCycle",
    "ReadOnlySession",
    "SessionError",
    "SessionExists",
    "SessionLocked",
    "SessionNotFound",
    "StorageFailure",
    "ToolError",
    "TornLine",
    "UnknownFormat",
    "UnknownOption",
    "missing_extra",
    "model_error_for_status",
]


class ContextreeError(Exception):
    """Base class of all contextree errors; ``path`` and ``line`` say where, when known.

    ``reason`` is the message without the ``path:line:`` prefix.
    """

    code: ClassVar[str] = "error"

    def __init__(self, message: str = "", *, path: str | None = None,
                 line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")

    def __str__(self) -> str:
        # FileNotFoundError and friends would otherwise print "[Errno None] ..."
        return str(self.args[0]) if self.args else ""


class SessionError(ContextreeError):
    """A session could not be read, written or navigated.

    The message always ends with what the user can do about it.
    """

    code: ClassVar[str] = "session"


class SessionNotFound(SessionError, FileNotFoundError):
    """There is no session at that path, URL or id."""

    code = "not_found"


class SessionExists(SessionError, FileExistsError):
    """A session (or another file) is already where a new one was to be created."""

    code = "exists"


class EntryNotFound(SessionError, LookupError):
    """The session has no entry with that id (or label)."""

    code = "entry_not_found"


class SessionLocked(SessionError):
    """Another writer has the session open; the message names it."""

    code = "locked"


class ReadOnlySession(SessionError):
    """A write was attempted on a session opened read-only."""

    code = "readonly"


class LeafConflict(SessionError):
    """The leaf is not where the caller expected it (``expected_leaf=``): someone else wrote."""

    code = "conflict"


class StorageFailure(SessionError, OSError):
    """The disk or the database failed; the session is as it was before the call."""

    code = "storage"


class CorruptSession(SessionError):
    """Stored data that cannot be read as a session (``contextree repair`` can help)."""

    code = "corrupt"


class CorruptLine(CorruptSession):
    """A line that is not valid JSON, or not UTF-8."""

    code = "corrupt_line"


class TornLine(CorruptSession):
    """The last line was cut off by a crash mid-write."""

    code = "torn_line"


class InvalidHeader(CorruptSession):
    """A missing or malformed header, a second header, or a newer format version."""

    code = "invalid_session"


class InvalidEntry(SessionError, ValueError):
    """An entry (read from storage or about to be appended) breaks the session's rules."""

    code = "invalid_entry"


class DuplicateId(InvalidEntry):
    """The entry's id is already used in the session."""

    code = "duplicate_id"


class MissingParent(InvalidEntry):
    """The entry's parent, or the target of a label or leaf move, does not exist."""

    code = "missing_parent"


class ParentCycle(InvalidEntry):
    """Parent links form a cycle."""

    code = "cycle"


class InvalidArgument(ContextreeError, ValueError):
    """The library refuses a call's arguments; the message says what it accepts."""

    code = "invalid_argument"


class UnknownOption(InvalidArgument, TypeError):
    """A keyword option a middleware does not take; the message names the ones it does."""

    code = "unknown_option"


class UnknownFormat(InvalidArgument):
    """A session format that is not known: a name that is not registered (the message lists
    those that are), or a file whose format cannot be told."""

    code = "unknown_format"


class CompactionError(ContextreeError):
    """Compaction could not produce a smaller valid context."""

    code = "compaction"


class ToolError(ContextreeError):
    """A tool refused its input or failed; the message is shown to the model."""

    code = "tool"


class ModelError(ContextreeError):
    """A model provider call failed.

    ``retryable`` says whether the same call may succeed later; ``retry_after`` is the delay
    in seconds the provider asked for, when it said; ``status`` the HTTP status, if any.
    """

    code = "model"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        self.status = status
        self.retry_after = retry_after
        super().__init__(message)


class ModelRateLimited(ModelError):
    """The provider rate-limited the call (429); wait ``retry_after`` seconds."""

    code = "rate_limited"
    retryable = True


class ModelUnavailable(ModelError):
    """A server error, a timeout or a failed connection: a retry may succeed."""

    code = "unavailable"
    retryable = True


class ModelRequestRejected(ModelError):
    """The provider refused the request (4xx other than 429): retrying will not help."""

    code = "rejected"


class ModelReplyMalformed(ModelError):
    """The provider sent a reply that cannot be read: an event that is not JSON (a
    ``data:`` line cut off), or JSON that is not the shape its API documents.

    Retryable: it is mostly a garbled or cut-off stream (a proxy, an aggregator's upstream),
    which the next call does not repeat; the message names the server to check when it does.
    """

    code = "malformed_reply"
    retryable = True


def model_error_for_status(status: int | None) -> type[ModelError]:
    """The one rule for which HTTP statuses are worth a retry: 408, 409, 429 and 5xx."""
    if status == 429:
        return ModelRateLimited
    if status is None:
        return ModelError
    if status in (408, 409) or status >= 500:
        return ModelUnavailable
    return ModelRequestRejected if 400 <= status < 500 else ModelError


def missing_extra(extra: str, module: str) -> ImportError:
    """The ImportError raised when an optional dependency is not installed."""
    return ImportError(
        f"{module} is not installed; it is part of the optional extra "
        f"'{extra}': pip install 'contextree[{extra}]'"
    )
