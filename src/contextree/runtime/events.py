"""The events an agent emits, each with one payload type.

``agent.on(Event.COMPACTED, handler)`` (or the plain string ``"compacted"``) registers
``handler(env, payload)``; ``"*"`` receives every event. A payload is a ``TypedDict`` (so
``payload["tokens_before"]`` reads as it always did) that also carries its ``event`` name.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

from ..messages import Message, ToolCall

__all__ = [
    "PAYLOADS",
    "CompactedPayload",
    "CompactionFailedPayload",
    "CompactionStartPayload",
    "DoomLoopPayload",
    "Event",
    "MaxIterationsPayload",
    "ModelReplyPayload",
    "Payload",
    "RetryPayload",
    "ToolEndPayload",
    "ToolStartPayload",
    "TruncatedPayload",
]


class Event(StrEnum):
    """Every event name the runtime emits."""

    MODEL_REPLY = "model_reply"
    TOOL_START = "tool_start"
    TOOL_END = "tool_end"
    TRUNCATED = "truncated"
    COMPACTION_START = "compaction_start"
    COMPACTED = "compacted"
    COMPACTION_FAILED = "compaction_failed"
    RETRY = "retry"
    MAX_ITERATIONS = "max_iterations"
    DOOM_LOOP = "doom_loop"


class _Base(TypedDict):
    event: str


class ModelReplyPayload(_Base):
    """A model call returned ``message`` (already added to the conversation)."""

    message: Message


class ToolStartPayload(_Base):
    """A tool call is about to run."""

    call: ToolCall


class ToolEndPayload(_Base):
    """A tool call finished; ``result`` is what goes back to the model."""

    call: ToolCall
    result: Any  # contextree.tools.ToolResult


class TruncatedPayload(_Base):
    """A tool result was cut; the original is at ``saved_path`` (``None``: nothing lost)."""

    call: ToolCall
    saved_path: str | None
    total_bytes: int | None
    total_lines: int | None


class CompactionStartPayload(_Base):
    """Compaction is about to run on a context of ``tokens`` tokens."""

    leaf_id: str | None
    window: int
    tokens: int


class CompactedPayload(_Base):
    """A compaction was applied (``CompactionResult.payload()``)."""

    tokens_before: int
    tokens_after: int
    target: int
    stages: list[dict[str, Any]]
    cleared: list[str]
    dropped: list[str]
    summarized: list[str]
    summary: str
    entry_id: str | None
    reached_target: bool
    reason: str


class CompactionFailedPayload(_Base):
    """A stage failed (``stage`` and ``error`` set; the ladder went on), or the whole ladder
    could not make the context smaller (``stage`` is ``None``)."""

    reason: str
    tokens: int
    stage: str | None
    error: str | None


class RetryPayload(_Base):
    """A retryable model error; the call is retried after ``delay`` seconds."""

    attempt: int
    delay: float
    error: str
    status: int | None


class MaxIterationsPayload(_Base):
    """The turn stopped after ``limit`` model calls."""

    limit: int


class DoomLoopPayload(_Base):
    """The model repeated the same calls ``times`` times in a row; the turn stopped."""

    calls: list[Any]
    times: int


Payload = (ModelReplyPayload | ToolStartPayload | ToolEndPayload | TruncatedPayload
           | CompactionStartPayload | CompactedPayload | CompactionFailedPayload | RetryPayload
           | MaxIterationsPayload | DoomLoopPayload)

PAYLOADS: dict[Event, type[Any]] = {
    Event.MODEL_REPLY: ModelReplyPayload,
    Event.TOOL_START: ToolStartPayload,
    Event.TOOL_END: ToolEndPayload,
    Event.TRUNCATED: TruncatedPayload,
    Event.COMPACTION_START: CompactionStartPayload,
    Event.COMPACTED: CompactedPayload,
    Event.COMPACTION_FAILED: CompactionFailedPayload,
    Event.RETRY: RetryPayload,
    Event.MAX_ITERATIONS: MaxIterationsPayload,
    Event.DOOM_LOOP: DoomLoopPayload,
}
