"""The events an agent emits, each with one payload class, and why a turn stops.

``agent.on(Event.COMPACTED, handler)`` (or the plain string ``"compacted"``) registers
``handler(env, payload)``; ``"*"`` receives every event; ``agent.on(CompactedPayload,
handler)`` does the same with ``payload`` typed as the class. A payload is a frozen
dataclass (``payload.tokens_before``) that also reads as a read-only mapping
(``payload["tokens_before"]``, ``dict(payload)``), and carries its ``event`` name. The
runtime emits one by building it, ``env.emit(ToolStartPayload(call=call))``, so a type
checker holds every emitter to the payload's fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from .._messages import Message, ToolCall, Usage
from ..compaction._ladder import CompactionResult, StageReport
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
    "EventPayload",
    "InterruptedPayload",
    "MaxIterationsPayload",
    "ModelReplyPayload",
    "ModelStartPayload",
    "Payload",
    "RetryPayload",
    "StopReason",
    "TextDeltaPayload",
    "ThinkingDeltaPayload",
    "ToolCallPayload",
    "ToolEndPayload",
    "ToolStartPayload",
    "TruncatedPayload",
    "TurnEndPayload",
    "TurnStartPayload",
    "as_payload",
    "event_key",
    "event_named",
    "stop_reason",
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


class StopReason(StrEnum):
    """Why a turn ended early (``TurnResult.stopped``, ``turn_end``'s ``stopped``); a value
    compares equal to its string (``turn.stopped == "budget"``)."""

    MAX_ITERATIONS = "max_iterations"
    """``MaxIterations``: the tool loop reached its limit of model calls."""
    DOOM_LOOP = "doom_loop"
    """``DoomLoop``: the model repeated the same tool calls."""
    BUDGET = "budget"
    """``Budget``: the next model call would go past the budget."""
    INTERRUPTED = "interrupted"
    """Ctrl-C, task cancellation or ``stream.close()``."""
    NOTHING_TO_ANSWER = "nothing_to_answer"
    """``start(None)`` on a conversation that ends with the assistant's reply."""
    ERROR = "error"
    """A middleware or the model raised (``turn_end``'s ``error`` says what)."""
    MIDDLEWARE = "middleware"
    """A middleware of yours ended the turn (``env.stop``; its notice says why)."""


def stop_reason(value: StopReason | str) -> StopReason:
    """The ``StopReason`` called ``value``; ``InvalidArgument`` naming every one otherwise."""
    try:
        return StopReason(value)
    except ValueError:
        known = ", ".join(r.value for r in StopReason)
        raise InvalidArgument(
            f"unknown stop reason {value!r}; the reasons are: {known} (a middleware of "
            f"yours stops with StopReason.MIDDLEWARE)") from None


@dataclass(frozen=True, kw_only=True, eq=False)
class EventPayload(Mapping[str, Any]):
    """What every payload is: a frozen dataclass naming its ``event``, that also reads as
    a read-only mapping of its fields (as payloads were dicts before)."""

    event: Event

    def __getitem__(self, key: str) -> Any:
        if key in self.__dataclass_fields__:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dataclass_fields__)

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)


@dataclass(frozen=True, kw_only=True, eq=False)
class TurnStartPayload(EventPayload):
    """A turn begins; ``input`` is the message it answers (``None``: resume)."""

    event: Literal[Event.TURN_START] = Event.TURN_START
    input: Message | None


@dataclass(frozen=True, kw_only=True, eq=False)
class ModelStartPayload(EventPayload):
    """A model call is about to be made on a context of ``tokens`` tokens (reported usage
    plus an estimate of what came after) in ``messages`` messages."""

    event: Literal[Event.MODEL_START] = Event.MODEL_START
    model: str
    iteration: int
    tokens: int
    messages: int


@dataclass(frozen=True, kw_only=True, eq=False)
class TextDeltaPayload(EventPayload):
    """More text of the reply being streamed."""

    event: Literal[Event.TEXT_DELTA] = Event.TEXT_DELTA
    text: str


@dataclass(frozen=True, kw_only=True, eq=False)
class ThinkingDeltaPayload(EventPayload):
    """More reasoning of the reply being streamed."""

    event: Literal[Event.THINKING_DELTA] = Event.THINKING_DELTA
    text: str


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolCallPayload(EventPayload):
    """The reply being streamed asks for ``call``; its arguments are complete. It runs once
    the reply is (``tool_start``)."""

    event: Literal[Event.TOOL_CALL] = Event.TOOL_CALL
    call: ToolCall


@dataclass(frozen=True, kw_only=True, eq=False)
class CommittedPayload(EventPayload):
    """``message`` is part of the conversation; with a session it is stored (durably, when
    the session is) as entry ``entry_id``: this is sent only after the write returned.
    ``entry_id`` is ``None`` where the storage has no ids (``SessionLog``) or there is none."""

    event: Literal[Event.COMMITTED] = Event.COMMITTED
    message: Message
    entry_id: str | None


@dataclass(frozen=True, kw_only=True, eq=False)
class BudgetPayload(EventPayload):
    """The next model call would take ``limit`` (``"cost"`` in USD or ``"tokens"``) past
    ``maximum`` over the ``per`` scope: ``spent`` so far, ``next_call`` estimated. The turn
    stopped before the call."""

    event: Literal[Event.BUDGET] = Event.BUDGET
    limit: Literal["cost", "tokens"]
    per: Literal["turn", "session"]
    maximum: float
    spent: float
    next_call: float


@dataclass(frozen=True, kw_only=True, eq=False)
class InterruptedPayload(EventPayload):
    """The turn was interrupted (Ctrl-C, task cancellation, ``stream.close()``):
    ``partial`` is the reply as far as it arrived (saved, marked ``interrupted_reply``; None
    when nothing arrived) and ``calls`` the ids of the tool calls given an "interrupted"
    result."""

    event: Literal[Event.INTERRUPTED] = Event.INTERRUPTED
    partial: Message | None
    calls: list[str]


@dataclass(frozen=True, kw_only=True, eq=False)
class TurnEndPayload(EventPayload):
    """The turn ended. ``usage`` sums its model calls (compaction summaries included);
    ``cost`` is their cost in USD, ``None`` when a call's price is unknown; ``stopped`` says
    why it ended early (``None``: the model answered), ``error`` what failed, if anything."""

    event: Literal[Event.TURN_END] = Event.TURN_END
    usage: Usage
    cost: float | None
    iterations: int
    stopped: StopReason | None
    error: str | None


@dataclass(frozen=True, kw_only=True, eq=False)
class ModelReplyPayload(EventPayload):
    """A model call returned ``message`` (already added to the conversation)."""

    event: Literal[Event.MODEL_REPLY] = Event.MODEL_REPLY
    message: Message


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolStartPayload(EventPayload):
    """A tool call is about to run."""

    event: Literal[Event.TOOL_START] = Event.TOOL_START
    call: ToolCall


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolEndPayload(EventPayload):
    """A tool call finished; ``result`` is what goes back to the model."""

    event: Literal[Event.TOOL_END] = Event.TOOL_END
    call: ToolCall
    result: ToolResult


@dataclass(frozen=True, kw_only=True, eq=False)
class TruncatedPayload(EventPayload):
    """A tool result was cut; the original is at ``saved_path`` (``None``: nothing lost)."""

    event: Literal[Event.TRUNCATED] = Event.TRUNCATED
    call: ToolCall
    saved_path: str | None
    total_bytes: int | None
    total_lines: int | None


@dataclass(frozen=True, kw_only=True, eq=False)
class CompactionStartPayload(EventPayload):
    """Compaction is about to run on a context of ``tokens`` tokens."""

    event: Literal[Event.COMPACTION_START] = Event.COMPACTION_START
    leaf_id: str | None
    window: int
    tokens: int


@dataclass(frozen=True, kw_only=True, eq=False)
class CompactedPayload(EventPayload):
    """A compaction was applied: the context went from ``tokens_before`` to
    ``tokens_after`` tokens (aiming at ``target``) through ``stages``; the entries whose
    results were ``cleared`` stay in view as placeholders, ``dropped`` ones left the
    context, and ``summarized`` ones are folded into ``summary``, entry ``entry_id``;
    ``note`` says when a forced run aimed below the target; ``receipt`` is what it did to
    each entry (``CompactionReceipt.to_dict()``)."""

    event: Literal[Event.COMPACTED] = Event.COMPACTED
    tokens_before: int
    tokens_after: int
    target: int
    stages: list[StageReport]
    cleared: list[str]
    dropped: list[str]
    summarized: list[str]
    summary: str
    entry_id: str | None
    reached_target: bool
    reason: str
    note: str = ""
    receipt: dict[str, list[str]] | None = None

    @classmethod
    def of(cls, result: CompactionResult) -> CompactedPayload:
        """The payload that reports ``result``."""
        return cls(tokens_before=result.tokens_before, tokens_after=result.tokens_after,
                   target=result.target, stages=list(result.stages),
                   cleared=list(result.cleared), dropped=list(result.dropped),
                   summarized=list(result.summarized), summary=result.summary,
                   entry_id=result.entry_id, reached_target=result.reached_target,
                   reason=result.reason, note=result.note,
                   receipt=result.receipt.to_dict() if result.receipt is not None else None)


@dataclass(frozen=True, kw_only=True, eq=False)
class CompactionFailedPayload(EventPayload):
    """A stage failed (``stage`` and ``error`` set; the ladder went on), or the whole ladder
    could not make the context smaller (``stage`` is ``None``)."""

    event: Literal[Event.COMPACTION_FAILED] = Event.COMPACTION_FAILED
    reason: str
    tokens: int
    stage: str | None
    error: str | None


@dataclass(frozen=True, kw_only=True, eq=False)
class RetryPayload(EventPayload):
    """A retryable model error; the call is retried after ``delay`` seconds."""

    event: Literal[Event.RETRY] = Event.RETRY
    attempt: int
    delay: float
    error: str
    status: int | None


@dataclass(frozen=True, kw_only=True, eq=False)
class MaxIterationsPayload(EventPayload):
    """The turn stopped after ``limit`` model calls."""

    event: Literal[Event.MAX_ITERATIONS] = Event.MAX_ITERATIONS
    limit: int


@dataclass(frozen=True, kw_only=True, eq=False)
class DoomLoopPayload(EventPayload):
    """The model repeated the same calls ``times`` times in a row; the turn stopped.
    ``calls`` holds ``[name, arguments]`` for each call of the repeated reply."""

    event: Literal[Event.DOOM_LOOP] = Event.DOOM_LOOP
    calls: list[list[Any]]
    times: int


Payload = (TurnStartPayload | ModelStartPayload | TextDeltaPayload | ThinkingDeltaPayload
           | ToolCallPayload | ModelReplyPayload | CommittedPayload | ToolStartPayload
           | ToolEndPayload | TruncatedPayload | CompactionStartPayload | CompactedPayload
           | CompactionFailedPayload | RetryPayload | MaxIterationsPayload | DoomLoopPayload
           | BudgetPayload | InterruptedPayload | TurnEndPayload)
"""Any one payload: narrow it with ``isinstance`` or on ``payload.event``."""

PAYLOADS: dict[Event, type[EventPayload]] = {
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




_EVENT_OF: dict[type[EventPayload], Event] = {cls: event for event, cls in PAYLOADS.items()}


def event_named(name: Event | str) -> Event:
    """The ``Event`` called ``name``; ``InvalidArgument`` naming every event otherwise."""
    try:
        return Event(name)
    except ValueError:
        known = ", ".join(e.value for e in Event)
        raise InvalidArgument(
            f"unknown event {name!r}; the events are: {known} (or {ALL_EVENTS!r} for all)"
        ) from None


def event_key(event: Event | str | type[EventPayload]) -> str:
    """The name handlers of ``event`` (an ``Event``, its name, ``"*"`` or a payload class)
    are kept under; ``InvalidArgument`` for anything else."""
    if isinstance(event, type):
        if event not in _EVENT_OF:
            raise InvalidArgument(f"{event.__name__} is not an event payload class; pass one "
                                  "of PAYLOADS' values, an Event or an event name")
        return _EVENT_OF[event].value
    return ALL_EVENTS if event == ALL_EVENTS else event_named(event).value


def as_payload(event: Event | str, fields: Mapping[str, Any]) -> Payload:
    """The payload of ``event`` from loose ``fields``: the bridge for callbacks that report
    ``(name, dict)``, such as the compaction ladder's ``emit``."""
    cls = PAYLOADS[event_named(event)]
    names = {f.name for f in dataclasses.fields(cls)} - {"event"}
    given = {k: v for k, v in fields.items() if k != "event"}
    if set(given) != names:
        raise InvalidArgument(f"the {cls.__name__} of {event!r} has the fields "
                              f"{', '.join(sorted(names))}; got {', '.join(sorted(given))}")
    payload: Payload = cls(**given)  # type: ignore[assignment]
    return payload
