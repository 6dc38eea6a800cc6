"""One exception hierarchy: every error contextree raises is a ``ContextreeError``."""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal[
    "not_found",
    "exists",
    "invalid_session",
    "invalid_entry",
    "corrupt_line",
    "duplicate_id",
    "missing_parent",
    "cycle",
    "invalid_fork_target",
    "locked",
    "readonly",
    "conflict",
    "storage",
]


class ContextreeError(Exception):
    """Base class of all contextree errors."""


class SessionError(ContextreeError):
    """A session could not be read, written or navigated.

    ``code`` says what kind of problem it is; ``path`` and ``line`` say where, when known.
    The message always ends with what the user can do about it.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.code: ErrorCode = code
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")


class CompactionError(ContextreeError):
    """Compaction could not produce a smaller valid context."""


class ToolError(ContextreeError):
    """A tool refused its input or failed; the message is shown to the model."""


class ModelError(ContextreeError):
    """A model provider call failed.

    ``retryable`` is true for rate limits and server errors; ``retry_after`` is the delay in
    seconds the provider asked for, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(message)


def missing_extra(extra: str, module: str) -> ImportError:
    """The ImportError raised when an optional dependency is not installed."""
    return ImportError(
        f"{module} is not installed; it is part of the optional extra "
        f"'{extra}': pip install 'contextree[{extra}]'"
    )
