"""The vocabulary of synthetic messages: what contextree adds to a context, and how it says so.

A message that contextree made (a compaction summary, a cleared or interrupted tool result, a
branch summary...) carries a marker in ``Message.meta``: ``{"kind": <Kind>, ...}``. A tool
result that was cut carries a :class:`TruncationRecord` under ``"truncated"``. This module is
the only place those keys and values are spelled; everything else reads them through
``Message.kind`` and ``Message.truncation``. ``meta`` is never sent to a provider.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

import msgspec

__all__ = [
    "COMPACTED",
    "KIND_KEY",
    "SUMMARIES",
    "TRUNCATION_KEY",
    "Kind",
    "TruncationRecord",
    "kind_of",
    "marker",
    "truncation_of",
]

KIND_KEY = "kind"
TRUNCATION_KEY = "truncated"


class Kind(StrEnum):
    """What a synthetic message is. The values are what session files store."""

    COMPACTION_SUMMARY = "compaction_summary"
    """The summary a compaction put in place of the turns it folded (a system message)."""
    BRANCH_SUMMARY = "branch_summary"
    """The summary of a branch the conversation returned from (a system message)."""
    CLEARED_TOOL_RESULT = "cleared_tool_result"
    """A tool result whose content compaction replaced by a placeholder."""
    INTERRUPTED = "interrupted"
    """The stand-in result of a tool call that never returned one."""
    INTERRUPTED_REPLY = "interrupted_reply"
    """An assistant reply cut short (Ctrl-C, task cancellation, ``stream.close()``): its
    content is what had arrived; the model wrote it, contextree only marked it."""
    CUSTOM_MESSAGE = "custom_message"
    """A ``custom_message`` entry shown to the model as a user message."""
    FOREIGN = "pi"
    """A message of another tool's role with no equivalent here (pi's bash executions...)."""


# Kinds whose presence means a list of messages is a compacted view of the conversation.
COMPACTED: frozenset[Kind] = frozenset((Kind.COMPACTION_SUMMARY, Kind.CLEARED_TOOL_RESULT))
# Kinds that are summaries of something no longer in view.
SUMMARIES: frozenset[Kind] = frozenset((Kind.COMPACTION_SUMMARY, Kind.BRANCH_SUMMARY))

_KINDS: dict[str, Kind] = {k.value: k for k in Kind}


class TruncationRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a tool result was cut: the model sees ``shown_lines`` of ``total_lines``.

    ``saved_path`` is where the original went (``None`` when nothing was lost, e.g. the
    ``read`` tool paging a file that holds the rest); ``by`` names the tool that cut its own
    output, so it is not cut again.
    """

    total_lines: int
    total_bytes: int
    shown_lines: int
    direction: Literal["head", "tail", "middle"] = "head"
    saved_path: str | None = None
    by: str | None = None
    first_line: int | None = None
    cut_lines: int | None = None

    def to_meta(self) -> dict[str, Any]:
        """The ``Message.meta`` entry that records this truncation."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        data.setdefault("saved_path", None)
        return {TRUNCATION_KEY: data}


def marker(kind: Kind, **info: Any) -> dict[str, Any]:
    """The ``meta`` of a synthetic message of ``kind`` (``info``: kind-specific details)."""
    return {KIND_KEY: kind.value, **info}


def kind_of(meta: dict[str, Any] | None) -> Kind | None:
    """The marker's kind in ``meta``, or ``None`` for a message a person or model wrote."""
    if not meta:
        return None
    value = meta.get(KIND_KEY)
    return _KINDS.get(value) if isinstance(value, str) else None


def truncation_of(meta: dict[str, Any] | None) -> TruncationRecord | None:
    """The truncation recorded in ``meta``, or ``None`` if the result was not cut."""
    if not meta:
        return None
    data = meta.get(TRUNCATION_KEY)
    if not isinstance(data, dict):
        return None
    try:
        return msgspec.convert(data, TruncationRecord)
    except msgspec.ValidationError:
        return None
