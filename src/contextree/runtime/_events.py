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

from .._messages import Message, ToolCall, Usage
from ..errors import InvalidArgument
from ..tools._result import ToolResult

__all__ = [
    "ALL_EVENTS",
    "PAYLOADS",
    "BudgetPayload",
    "CommittedPayload",
    "CompactedPayload",
    "CompactionFailedPayload",
    "CompactionStartPayload",
    "DoomLoopPayload",
    "Event",
    "InterruptedPayload",
    "MaxIterationsPayload",
    "ModelReplyPayload",
    "ModelStartPayload",
    "Payload",
    "RetryPayload",
    "TextDeltaPayload",
    "ThinkingDeltaPayload",
    "ToolCallPayload",
    "ToolEndPayload",
    "ToolStartPayload",
    "TruncatedPayload",
    "TurnEndPayload",
    "TurnStartPayload",
    "as_payload",
    "event_named",
]

ALL_EVENTS = "*"
"""The name that subscribes a handler to every event."""


class Event(StrEnum):
    """Every event name the runtime emits, in the order a turn meets them."""

    TURN_START = "turn_start"
    MODEL_START = "model_start"
    THINKING_DELTA = "thinking_delta"
    TEXT_DELTA = "text_delta"
    TOOL_CALL = "tool_call"
    MODEL_REPLY = "model_reply"
    COMMITTED = "committed"
    TOOL_START = "tool_start"
    TOOL_END = "tool_end"
    TRUNCATED = "truncated"
    COMPACTION_START = "compaction_start"
    COMPACTED = "compacted"
    COMPACTION_FAILED = "compaction_failed"
    RETRY = "retry"
    MAX_ITERATIONS = "max_iterations"
    DOOM_LOOP = "doom_loop"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"
    TURN_END = "turn_end"


class TurnStartPayload(TypedDict):
    """A turn begins; ``input`` is the message it answers (``None``: resume)."""

    event: Literal[Event.TURN_START]
    input: Message | None


class ModelStartPayload(TypedDict):
    """A model call is about to be made on a context of ``tokens`` tokens (reported usage
    plus an estimate of what came after) in ``messages`` messages."""

    event: Literal[Event.MODEL_START]
    model: str
    iteration: int
    tokens: int
    messages: int


class TextDeltaPayload(TypedDict):
    """More text of the reply being streamed."""

    event: Literal[Event.TEXT_DELTA]
    text: str


class ThinkingDeltaPayload(TypedDict):
    """More reasoning of the reply being streamed."""

    event: Literal[Event.THINKING_DELTA]
    text: str


class ToolCallPayload(TypedDict):
    """The reply being streamed asks for ``call``; its arguments are complete. It runs once
    the reply is (``tool_start``)."""

    event: Literal[Event.TOOL_CALL]
    call: ToolCall


class CommittedPayload(TypedDict):
    """``message`` is part of the conversation; with a session it is stored (durably, when
    the session is) as entry ``entry_id``: this is sent only after the write returned.
    ``entry_id`` is ``None`` where the storage has no ids (``SessionLog``) or there is none."""

    event: Literal[Event.COMMITTED]
    message: Message
    entry_id: str | None


class BudgetPayload(TypedDict):
    """The next model call would take ``limit`` (``"cost"`` in USD or ``"tokens"``) past
    ``maximum`` over the ``per`` scope: ``spent`` so far, ``next_call`` estimated. The turn
    stopped before the call."""

    event: Literal[Event.BUDGET]
    limit: Literal["cost", "tokens"]
    per: Literal["turn", "session"]
    maximum: float
    spent: float
    next_call: float


class InterruptedPayload(TypedDict):
    """The turn was interrupted (Ctrl-C, task cancellation, ``stream.close()``):
    ``partial`` is the reply as far as it arrived (saved, marked ``interrupted_reply``; None
    when nothing arrived) and ``calls`` the ids of the tool calls given an "interrupted"
    result."""

    event: Literal[Event.INTERRUPTED]
    partial: Message | None
    calls: list[str]


class TurnEndPayload(TypedDict):
    """The turn ended. ``usage`` sums its model calls (compaction summaries included);
    ``cost`` is their cost in USD, ``None`` when a call's price is unknown; ``stopped`` says
    why it ended early (``None``: the model answered), ``error`` what failed, if anything."""

    event: Literal[Event.TURN_END]
    usage: Usage
    cost: float | None
    iterations: int
    stopped: str | None
    error: str | None


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


Payload = (TurnStartPayload | ModelStartPayload | TextDeltaPayload | ThinkingDeltaPayload
           | ToolCallPayload | ModelReplyPayload | CommittedPayload | ToolStartPayload
           | ToolEndPayload | TruncatedPayload | CompactionStartPayload | CompactedPayload
           | CompactionFailedPayload | RetryPayload | MaxIterationsPayload | DoomLoopPayload
           | BudgetPayload | InterruptedPayload | TurnEndPayload)

PAYLOADS: dict[Event, type[Any]] = {
    Event.TURN_START: TurnStartPayload,
    Event.MODEL_START: ModelStartPayload,
    Event.TEXT_DELTA: TextDeltaPayload,
    Event.THINKING_DELTA: ThinkingDeltaPayload,
    Event.TOOL_CALL: ToolCallPayload,
    Event.COMMITTED: CommittedPayload,
    Event.BUDGET: BudgetPayload,
    Event.INTERRUPTED: InterruptedPayload,
    Event.TURN_END: TurnEndPayload,
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
