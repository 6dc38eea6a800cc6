"""``Tracing``: OpenTelemetry spans for a turn, its model calls, tool calls and compactions.

An event handler (``agent.on("*", Tracing())``) that follows the OpenTelemetry GenAI
semantic conventions: an ``invoke_agent`` span per turn, a ``chat {model}`` span (kind
CLIENT) per model call, an ``execute_tool {name}`` span per tool call, and a
``contextree.compaction`` span per compaction, each a child of its turn's. They carry the
session id (``gen_ai.conversation.id``) and the entry ids the session stored
(``contextree.entry_id``), the tokens (``gen_ai.usage.*``) and the cost in USD
(``contextree.cost_usd``; ``contextree.cost_unknown`` where no price is known). Message
content is left out unless ``capture_content=True`` (``gen_ai.system_instructions``: the
system prompt, a text or the texts of several system messages; ``gen_ai.input.messages``,
``gen_ai.output.messages``, tool arguments and results), and what is recorded then is
redacted (``[REDACTED:aws-key:1]``, see docs/redaction.md) unless ``redact=False``.

A turn's spans are made when it ends (see ``Tracing``), with the times recorded as it ran.

The ``otel`` extra installs ``opentelemetry-api`` and ``opentelemetry-sdk``; without it,
building a ``Tracing`` raises an ``ImportError`` naming ``pip install 'contextree[otel]'``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._messages import Usage
from .._pricing import cost_of
from ..errors import missing_extra
from ..redaction import Redactor
from ._env import Env, SentRequest
from ._events import (
    CommittedPayload,
    CompactedPayload,
    CompactionFailedPayload,
    CompactionStartPayload,
    InterruptedPayload,
    ModelReplyPayload,
    ModelStartPayload,
    Payload,
    RetryPayload,
    ToolEndPayload,
    ToolStartPayload,
    TurnEndPayload,
    TurnStartPayload,
)
from ._trace_content import CapturedContent

__all__ = ["OTEL_EXTRA", "Tracing"]

OTEL_EXTRA = "otel"
"""The extra that installs OpenTelemetry: ``pip install 'contextree[otel]'``."""

class _Pending:
    """A span as its turn runs: name, kind, attributes, times, status and events, kept
    until the turn ends and ``Tracing`` makes the real span of it (same times)."""

    __slots__ = ("attributes", "end_time", "error", "events", "kind", "name", "start_time")

    def __init__(self, name: str, kind: Any, attributes: dict[str, Any]) -> None:
        self.name, self.kind, self.attributes = name, kind, attributes
        self.start_time = time.time_ns()  # the clock the SDK stamps spans with
        self.end_time: int | None = None
        self.error: str | None = None  # the description of an ERROR status
        self.events: list[tuple[str, dict[str, Any], int]] = []

    def fail(self, description: str) -> None:
        self.error = description

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        self.events.append((name, attributes, time.time_ns()))

    def end(self) -> None:
        if self.end_time is None:
            self.end_time = time.time_ns()


@dataclass
class _Turn:
    """The spans of one turn (one ``Env``): the turn's, its children in the order they
    started, and those still open."""

    span: _Pending
    children: list[_Pending] = field(default_factory=list)
    model: _Pending | None = None  # the model call's span
    model_start: Usage | None = None  # the turn's usage when the model call started
    tools: dict[str, _Pending] = field(default_factory=dict)  # call id -> span
    compaction: _Pending | None = None
    compaction_usage: Usage | None = None
    request: SentRequest | None = None
    reply_id: str | None = None  # the entry the model call's reply was stored as


class Tracing:
    """Turn the agent's events into OpenTelemetry spans (see the module notes): add it with
    ``agent.on("*", Tracing())``. ``tracer_provider``: where the spans go (default: the
    global one); ``capture_content``: also record message content (off by default, as the
    conventions ask), redacted like every exit unless ``redact=False`` (or your own
    ``Redactor``); ``agent_name``: ``gen_ai.agent.name`` of the turn spans.

    A turn's spans are recorded as it runs (times, attributes, status) and handed to the
    SDK together when the turn ends, with the times they had: one burst of SDK work per turn
    costs less than half as much as the same work spread over its events
    (``bench/bench_tracing.py``). So an exporter receives a turn's spans once it ended."""

    def __init__(self, *, tracer_provider: Any = None, capture_content: bool = False,
                 agent_name: str = "contextree", redact: bool | Redactor = True) -> None:
        try:
            from opentelemetry import trace
            from opentelemetry.trace import SpanKind, Status, StatusCode
        except ImportError:
            raise missing_extra(OTEL_EXTRA, "opentelemetry") from None
        self._in_context = trace.set_span_in_context
        self._client, self._internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self._status, self._code = Status, StatusCode
        self.tracer = trace.get_tracer("contextree", tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self._content = CapturedContent(redact)  # what content is recorded goes through it
        self.agent_name = agent_name
        # One turn per env; dict and list operations are atomic, so tools that run in
        # parallel threads need no lock.
        self._turns: dict[int, _Turn] = {}
        self._handlers: dict[type[Payload], Callable[[Env, _Turn, Any], None]] = {
            ModelStartPayload: self._model_start, ModelReplyPayload: self._model_reply,
            CommittedPayload: self._committed, ToolStartPayload: self._tool_start,
            ToolEndPayload: self._tool_end, CompactionStartPayload: self._compaction_start,
            CompactedPayload: self._compacted, CompactionFailedPayload: self._compaction_failed,
            InterruptedPayload: self._interrupted, RetryPayload: self._retry,
            TurnEndPayload: self._turn_end,
        }

    def __call__(self, env: Env, payload: Payload) -> None:
        """Handle one event (``agent.on("*", tracing)`` calls this)."""
        handler = self._handlers.get(type(payload))  # deltas have none: back at once
        if handler is None:
            if type(payload) is TurnStartPayload:
                self._turn_start(env)
            return
        turn = self._turns.get(id(env))
        if turn is not None:
            handler(env, turn, payload)

    # -- spans -------------------------------------------------------------------------------
    def _child(self, turn: _Turn, name: str, kind: Any, attributes: dict[str, Any]) -> _Pending:
        span = _Pending(name, kind, attributes)
        turn.children.append(span)
        return span

    def _turn_start(self, env: Env) -> None:
        turn = _Turn(_Pending(f"invoke_agent {self.agent_name}", self._internal,
                              {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.agent.name": self.agent_name}))
        self._turns[id(env)] = turn

        def sent(request: SentRequest) -> None:
            turn.request = request

        env.on_request(sent)

    def _turn_end(self, env: Env, turn: _Turn, p: TurnEndPayload) -> None:
        self._turns.pop(id(env), None)
        for open_span in [turn.model, turn.compaction, *turn.tools.values()]:
            if open_span is not None:
                open_span.end()
        span = turn.span
        more: dict[str, Any] = {"contextree.iterations": p.iterations}
        if p.stopped is not None:
            more["contextree.stopped"] = str(p.stopped)
        if p.error is not None:
            span.fail(p.error)
            more["error.type"] = p.error.split(":", 1)[0]
        if env.session is not None:
            more["gen_ai.conversation.id"] = env.session.id
            more["contextree.leaf_id"] = env.session.leaf_id or ""
        _usage_attributes(span, p.usage, p.cost, **more)
        span.end()
        self._export(turn)

    def _export(self, turn: _Turn) -> None:
        """Make the turn's spans with the SDK, children first (as they ended first)."""
        root = turn.span
        real = self.tracer.start_span(root.name, kind=root.kind, attributes=root.attributes,
                                      start_time=root.start_time)
        context = self._in_context(real)
        for child in turn.children:
            self._finish(self.tracer.start_span(
                child.name, context=context, kind=child.kind, attributes=child.attributes,
                start_time=child.start_time), child)
        self._finish(real, root)

    def _finish(self, real: Any, span: _Pending) -> None:
        for name, attributes, stamp in span.events:
            real.add_event(name, attributes, timestamp=stamp)
        if span.error is not None:
            real.set_status(self._status(self._code.ERROR, span.error))
        real.end(end_time=span.end_time)

    def _model_start(self, env: Env, turn: _Turn, p: ModelStartPayload) -> None:
        if turn.model is not None:  # a call that raised (and was retried): ended as failed
            turn.model.fail("the call failed")
            turn.model.end()
        provider = getattr(env.model, "provider", None) or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.request.model": p.model, "contextree.iteration": p.iteration,
            "contextree.context_tokens": p.tokens}
        request = turn.request
        if request is not None:
            if request.params:
                for key, value in request.params.items():
                    name = _REQUEST_PARAMS.get(key)
                    if name is not None and isinstance(value, int | float) and not isinstance(
                            value, bool):
                        attributes[name] = value
            if self.capture_content and request.system is not None:
                system = request.system
                attributes["gen_ai.system_instructions"] = (
                    self._content.text(system) if isinstance(system, str)
                    else tuple(self._content.text(t) for t in system))
        session = env.session
        if session is not None:
            attributes["gen_ai.conversation.id"] = session.id
        if self.capture_content:
            attributes["gen_ai.input.messages"] = self._content.messages_json(env.messages)
        turn.model = self._child(turn, f"chat {p.model}", self._client, attributes)
        turn.model_start = env.turn_usage

    def _model_reply(self, env: Env, turn: _Turn, p: ModelReplyPayload) -> None:
        span, turn.model = turn.model, None
        if span is None:
            return
        m = p.message
        more: dict[str, Any] = {}
        if turn.reply_id is not None:
            more["contextree.entry_id"], turn.reply_id = turn.reply_id, None
        if m.model:
            more["gen_ai.response.model"] = m.model
        if m.stop_reason:
            more["gen_ai.response.finish_reasons"] = [m.stop_reason]
        if self.capture_content:
            more["gen_ai.output.messages"] = self._content.messages_json([m])
        _usage_attributes(span, m.usage, cost_of(m), **more)
        span.end()

    def _committed(self, env: Env, turn: _Turn, p: CommittedPayload) -> None:
        if p.entry_id is None:
            return
        m = p.message
        if m.role == "assistant" and turn.model is not None:
            turn.reply_id = p.entry_id  # set with the reply's other attributes
        elif m.role == "tool" and m.tool_call_id in turn.tools:
            span = turn.tools.pop(m.tool_call_id or "")
            span.attributes["contextree.entry_id"] = p.entry_id
            span.end()  # a tool's span ends once its result is stored

    def _tool_start(self, env: Env, turn: _Turn, p: ToolStartPayload) -> None:
        call = p.call
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": call.name,
                                      "gen_ai.tool.call.id": call.id,
                                      "gen_ai.tool.type": "function"}
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = self._content.json(call.arguments)
        turn.tools[call.id] = self._child(turn, f"execute_tool {call.name}", self._internal,
                                          attributes)

    def _tool_end(self, env: Env, turn: _Turn, p: ToolEndPayload) -> None:
        span = turn.tools.get(p.call.id)
        if span is None:
            return
        if p.result.is_error:
            span.fail("the tool reported an error")
            span.attributes["error.type"] = "tool_error"
        if self.capture_content:
            span.attributes["gen_ai.tool.call.result"] = self._content.text(
                str(p.result.content))

    def _compaction_start(self, env: Env, turn: _Turn, p: CompactionStartPayload) -> None:
        turn.compaction_usage = env.turn_usage
        turn.compaction = self._child(turn, "contextree.compaction", self._internal, {
            "contextree.window": p.window, "contextree.tokens_before": p.tokens,
            "contextree.leaf_id": p.leaf_id or ""})

    def _end_compaction(self, env: Env, turn: _Turn) -> _Pending | None:
        span, turn.compaction = turn.compaction, None
        if span is not None and turn.compaction_usage is not None:
            spent = _minus(env.turn_usage, turn.compaction_usage)  # the summarizer's calls
            _usage_attributes(span, spent, spent.cost)
        return span

    def _compacted(self, env: Env, turn: _Turn, p: CompactedPayload) -> None:
        span = self._end_compaction(env, turn)
        if span is None:
            return
        span.attributes["contextree.tokens_after"] = p.tokens_after
        span.attributes["contextree.stages"] = [s.name for s in p.stages if s.applied]
        if p.entry_id is not None:
            span.attributes["contextree.entry_id"] = p.entry_id
        span.end()

    def _compaction_failed(self, env: Env, turn: _Turn, p: CompactionFailedPayload) -> None:
        if p.stage is not None:  # one stage failed; the ladder goes on
            if turn.compaction is not None:
                turn.compaction.add_event("stage_failed", {"stage": p.stage,
                                                           "error": p.error or ""})
            return
        span = self._end_compaction(env, turn)
        if span is not None:
            span.fail(p.reason)
            span.end()

    def _interrupted(self, env: Env, turn: _Turn, p: InterruptedPayload) -> None:
        span, turn.model = turn.model, None
        if span is None:
            return
        span.fail("interrupted")
        more: dict[str, Any] = {"error.type": "interrupted"}
        if turn.reply_id is not None:  # what had arrived, stored
            more["contextree.entry_id"], turn.reply_id = turn.reply_id, None
        spent = (_minus(env.turn_usage, turn.model_start) if turn.model_start is not None
                 else None)  # what the turn counted for the call (estimated)
        _usage_attributes(span, spent, None if env.turn_cost is None or spent is None
                          else spent.cost, **more)
        span.end()

    def _retry(self, env: Env, turn: _Turn, p: RetryPayload) -> None:
        span, turn.model = turn.model, None
        if span is None:
            return
        span.fail(p.error)
        span.attributes["error.type"] = str(p.status) if p.status else "model_error"
        span.end()


_REQUEST_PARAMS = {
    "temperature": "gen_ai.request.temperature", "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
}


def _usage_attributes(span: _Pending, usage: Usage | None, cost: float | None,
                      **more: Any) -> None:
    """Set the token and cost attributes of ``usage`` (and ``more``) in one call."""
    attributes: dict[str, Any] = more
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = (usage.input + usage.cache_read
                                                   + usage.cache_write)
        attributes["gen_ai.usage.output_tokens"] = usage.output
        if usage.cache_read:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
        if usage.cache_write:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
        if cost is None:
            attributes["contextree.cost_unknown"] = True
        else:
            attributes["contextree.cost_usd"] = cost
    span.attributes.update(attributes)


def _minus(after: Usage, before: Usage) -> Usage:
    cost = None if after.cost is None else after.cost - (before.cost or 0.0)
    return Usage(input=after.input - before.input, output=after.output - before.output,
                 cache_read=after.cache_read - before.cache_read,
                 cache_write=after.cache_write - before.cache_write, cost=cost)
