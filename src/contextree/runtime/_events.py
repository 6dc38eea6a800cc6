"""The events an agent emits, each with one payload type.

``agent.on(Event.COMPACTED, handler)`` (or the plain string ``"compacted"``) registers
``handler(env, payload)``; ``"*"`` receives every event. A payload is a ``TypedDict`` (so
``payload["tokens_before"]`` reads as it always did) that also carries its ``event`` name.
The runtime emits one by building it, ``env.emit(ToolStartPayload(event=Event.TOOL_START,
call=call))``, so a type checker holds every emitter to the payload's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, TypedDict, cast

from .._messages import Message, ToolCall
from ..errors import InvalidArgument
from ..tools._result import ToolResult

__all__ = [
    "ALL_EVENTS",
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
    "as_payload",
    "event_named",
]

ALL_EVENTS = "*"
"""The name that subscribes a handler to every event."""


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


class ModelReplyPayload(TypedDict):
    """A model call returned ``message`` (already added to the conversation)."""

    event: Literal[Event.MODEL_REPLY]
    message: Message


class ToolStartPayload(TypedDict):
    """A tool call is about to run."""

    event: Literal[Event.TOOL_START]
    call: ToolCall


class ToolEndPayload(TypedDict):
    """A tool call finished; ``result`` is what goes back to the model."""

    event: Literal[Event.TOOL_END]
    call: ToolCall
    result: ToolResult


class TruncatedPayload(TypedDict):
    """A tool result was cut; the original is at ``saved_path`` (``None``: nothing lost)."""

    event: Literal[Event.TRUNCATED]
    call: ToolCall
    saved_path: str | None
    total_bytes: int | None
    total_lines: int | None


class CompactionStartPayload(TypedDict):
    """Compaction is about to run on a context of ``tokens`` tokens."""

    event: Literal[Event.COMPACTION_START]
    leaf_id: str | None
    window: int
    tokens: int


class CompactedPayload(TypedDict):
    """A compaction was applied (``CompactionResult.payload()``)."""

    event: Literal[Event.COMPACTED]
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


class CompactionFailedPayload(TypedDict):
    """A stage failed (``stage`` and ``error`` set; the ladder went on), or the whole ladder
    could not make the context smaller (``stage`` is ``None``)."""

    event: Literal[Event.COMPACTION_FAILED]
    reason: str
    tokens: int
    stage: str | None
    error: str | None


class RetryPayload(TypedDict):
    """A retryable model error; the call is retried after ``delay`` seconds."""

    event: Literal[Event.RETRY]
    attempt: int
    delay: float
    error: str
    status: int | None


class MaxIterationsPayload(TypedDict):
    """The turn stopped after ``limit`` model calls."""

    event: Literal[Event.MAX_ITERATIONS]
    limit: int


class DoomLoopPayload(TypedDict):
    """The model repeated the same calls ``times`` times in a row; the turn stopped.
    ``calls`` holds ``[name, arguments]`` for each call of the repeated reply."""

    event: Literal[Event.DOOM_LOOP]
    calls: list[list[Any]]
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


def event_named(name: Event | str) -> Event:
    """The ``Event`` called ``name``; ``InvalidArgument`` naming every event otherwise."""
    try:
        return Event(name)
    except ValueError:
        known = ", ".join(e.value for e in Event)
        raise InvalidArgument(
            f"unknown event {name!r}; the events are: {known} (or {ALL_EVENTS!r} for all)"
        ) from None


def as_payload(event: Event | str, fields: Mapping[str, Any]) -> Payload:
    """The payload of ``event`` from loose ``fields``: the bridge for callbacks that report
    ``(name, dict)``, such as the compaction ladder's ``emit``."""
    return cast(Payload, {**fields, "event": event_named(event)})
