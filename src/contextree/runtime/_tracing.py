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

A turn's events are noted as it runs; its spans are built from them and made with the SDK
off the turn's thread, in batches, with the times noted (see ``Tracing``);
``Tracing.flush()`` makes them at once.

The ``otel`` extra installs ``opentelemetry-api`` and ``opentelemetry-sdk``; without it,
building a ``Tracing`` raises an ``ImportError`` naming ``pip install 'contextree[otel]'``.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from .._messages import Usage
from .._pricing import cost_of
from ..errors import missing_extra
from ..redaction import Redactor
from ._background import Background
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

BATCH_SECONDS = 0.2
"""How long after a turn ended its spans wait to be made: the turns that end meanwhile are
made in the same burst, while the SDK's code is warm (about half the CPU per span)."""


class _Pending:
    """A span being built from a turn's events: name, kind, attributes, times, status and
    events, until the span maker makes the real span of it (same times)."""

    __slots__ = ("attributes", "end_time", "error", "events", "kind", "name", "start_time")

    def __init__(self, name: str, kind: Any, attributes: dict[str, Any], start: int) -> None:
        self.name, self.kind, self.attributes = name, kind, attributes
        self.start_time = start  # time.time_ns(): the clock the SDK stamps spans with
        self.end_time: int | None = None
        self.error: str | None = None  # the description of an ERROR status
        self.events: list[tuple[str, dict[str, Any], int]] | None = None  # few spans have any

    def fail(self, description: str) -> None:
        self.error = description

    def add_event(self, name: str, attributes: dict[str, Any], stamp: int) -> None:
        if self.events is None:
            self.events = []
        self.events.append((name, attributes, stamp))

    def end(self, stamp: int) -> None:
        if self.end_time is None:
            self.end_time = stamp


class _Turn:
    """What a turn's thread records of it (one ``Env``): when it started, and its events,
    each a tuple of when, the payload, the turn's usage then and what else its span needs
    from that moment (``Tracing._extra``). Its spans are built from them later, off the
    turn's thread."""

    __slots__ = ("env", "events", "leaf_id", "request", "session_id", "start")

    def __init__(self, env: Env) -> None:
        self.start = time.time_ns()
        self.env = env  # its model is read when the spans are built (it does not change)
        self.events: list[tuple[int, Any, Usage, Any]] = []
        self.request: SentRequest | None = None  # of the model call about to start
        self.session_id: str | None = None  # set at the turn's end, with the session's leaf
        self.leaf_id: str | None = None

    def sent(self, request: SentRequest) -> None:
        """``env.on_request``'s listener: the request of the model call about to start."""
        self.request = request


class _Spans:
    """A turn's spans as they are built from its events: the turn's, its children in the
    order they started, and those still open."""

    __slots__ = ("children", "compaction", "compaction_usage", "model", "model_start",
                 "reply_id", "span", "tools", "turn")

    def __init__(self, turn: _Turn, span: _Pending) -> None:
        self.turn, self.span = turn, span
        self.children: list[_Pending] = []
        self.model: _Pending | None = None  # the model call's span
        self.model_start: Usage | None = None  # the turn's usage when the model call started
        self.tools: dict[str, _Pending] = {}  # call id -> span
        self.compaction: _Pending | None = None
        self.compaction_usage: Usage | None = None
        self.reply_id: str | None = None  # the entry the model call's reply was stored as


_MAKER = Background("contextree-tracing", delay=BATCH_SECONDS)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_MAKER.reset)
# At exit, the queued spans are made before any provider shuts down: threading's exit hooks
# (what concurrent.futures uses) run before atexit's, where the SDK's providers shut down.
getattr(threading, "_register_atexit", atexit.register)(_MAKER.drain)


class Tracing:
    """Turn the agent's events into OpenTelemetry spans (see the module notes): add it with
    ``agent.on("*", Tracing())``. ``tracer_provider``: where the spans go (default: the
    global one); ``capture_content``: also record message content (off by default, as the
    conventions ask), redacted like every exit unless ``redact=False`` (or your own
    ``Redactor``); ``agent_name``: ``gen_ai.agent.name`` of the turn spans.

    The turn's thread only notes each event (when, the payload, the turn's usage then); a
    daemon thread builds the turn's spans from them and makes them with the SDK, with the
    times they had, ``BATCH_SECONDS`` (0.2 s) after the turn ended, together with the turns
    that ended meanwhile: a burst of that work costs about half what the same spans cost
    made one turn at a time (``bench/bench_tracing.py``). ``flush()`` (or ``close()``, or
    leaving a ``with`` block) makes the queued spans at once and has the provider export
    them; at interpreter exit they are made before the SDK's providers shut down. Call
    ``flush()`` before calling ``provider.shutdown()`` yourself: the spans still queued then
    are lost."""

    def __init__(self, *, tracer_provider: Any = None, capture_content: bool = False,
                 agent_name: str = "contextree", redact: bool | Redactor = True) -> None:
        try:
            from opentelemetry import trace
            from opentelemetry.trace import SpanKind, Status, StatusCode
        except ImportError:
            raise missing_extra(OTEL_EXTRA, "opentelemetry") from None
        self._trace = trace
        self._in_context = trace.set_span_in_context
        self._client, self._internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self._status, self._code = Status, StatusCode
        self._provider = tracer_provider
        self.tracer = trace.get_tracer("contextree", tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self._content = CapturedContent(redact)  # used by the span maker only: one thread
        self.agent_name = agent_name
        self._turn_name = f"invoke_agent {agent_name}"
        # One turn per env; dict and list operations are atomic, so tools that run in
        # parallel threads need no lock.
        self._turns: dict[int, _Turn] = {}
        # What builds the spans from each event noted (deltas are not).
        self._builders: dict[type[Payload], Callable[[_Spans, int, Any, Usage, Any], None]] = {
            ModelStartPayload: self._model_start, ModelReplyPayload: self._model_reply,
            CommittedPayload: self._committed, ToolStartPayload: self._tool_start,
            ToolEndPayload: self._tool_end, CompactionStartPayload: self._compaction_start,
            CompactedPayload: self._compacted, CompactionFailedPayload: self._compaction_failed,
            InterruptedPayload: self._interrupted, RetryPayload: self._retry,
            TurnEndPayload: self._turn_end,
        }

    def __call__(self, env: Env, payload: Payload) -> None:
        """Note one event (``agent.on("*", tracing)`` calls this): a tuple appended."""
        kind = type(payload)
        if kind in self._builders:  # deltas are not: back at once
            turn = self._turns.get(id(env))
            if turn is None:
                return
            extra = self._extra(env, turn, kind)
            turn.events.append((time.time_ns(), payload, env.turn_usage, extra))
            if kind is TurnEndPayload:
                self._turns.pop(id(env), None)
                _MAKER.submit(functools.partial(self._make, turn))
        elif kind is TurnStartPayload:
            turn = _Turn(env)
            self._turns[id(env)] = turn
            env.on_request(turn.sent)

    def _extra(self, env: Env, turn: _Turn, kind: type[Payload]) -> Any:
        """What an event's span needs from the moment it happened besides its payload and
        the turn's usage: the request and the context of a model call, the turn's cost
        at an interruption; the session's id and leaf at the turn's end."""
        if kind is ModelStartPayload:
            return turn.request, (env.messages if self.capture_content else None)
        if kind is InterruptedPayload:
            return env.turn_cost
        if kind is TurnEndPayload:
            session = env.session
            if session is not None:
                turn.session_id, turn.leaf_id = session.id, session.leaf_id or ""
        return None

    def flush(self, timeout_millis: int = 30_000) -> bool:
        """Make the spans of every turn that has ended, now, and have the provider export
        them (its ``force_flush``, when it has one, as the SDK's does): what it returns."""
        _MAKER.drain()
        provider = self._provider or self._trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        return bool(force_flush(timeout_millis)) if force_flush is not None else True

    def close(self) -> None:
        """``flush()``: nothing recorded is left behind (the provider is not shut down)."""
        self.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- building the spans (the span maker's thread) -----------------------------------------
    def _make(self, turn: _Turn) -> None:
        """Build the turn's spans from its events and make them with the SDK, children
        first (as they ended first)."""
        spans = _Spans(turn, _Pending(self._turn_name, self._internal, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent_name},
            turn.start))
        builders = self._builders
        for stamp, payload, usage, extra in turn.events:
            builders[type(payload)](spans, stamp, payload, usage, extra)
        root = spans.span
        start = self.tracer.start_span
        real = start(root.name, kind=root.kind, attributes=root.attributes,
                     start_time=root.start_time)
        context = self._in_context(real)
        for child in spans.children:
            self._finish(start(child.name, context=context, kind=child.kind,
                               attributes=child.attributes, start_time=child.start_time),
                         child)
        self._finish(real, root)

    def _finish(self, real: Any, span: _Pending) -> None:
        if span.events is not None:
            for name, attributes, stamp in span.events:
                real.add_event(name, attributes, timestamp=stamp)
        if span.error is not None:
            real.set_status(self._status(self._code.ERROR, span.error))
        real.end(end_time=span.end_time)

    def _child(self, spans: _Spans, name: str, kind: Any, attributes: dict[str, Any],
               stamp: int) -> _Pending:
        span = _Pending(name, kind, attributes, stamp)
        spans.children.append(span)
        return span

    def _turn_end(self, spans: _Spans, stamp: int, p: TurnEndPayload, usage: Usage,
                  extra: None) -> None:
        for open_span in (spans.model, spans.compaction, *spans.tools.values()):
            if open_span is not None:
                open_span.end(stamp)
        span, turn = spans.span, spans.turn
        attributes = span.attributes
        attributes["contextree.iterations"] = p.iterations
        if p.stopped is not None:
            attributes["contextree.stopped"] = str(p.stopped)
        if p.error is not None:
            span.fail(p.error)
            attributes["error.type"] = p.error.split(":", 1)[0]
        if turn.session_id is not None:
            attributes["gen_ai.conversation.id"] = turn.session_id
            attributes["contextree.leaf_id"] = turn.leaf_id or ""
        _usage_attributes(attributes, p.usage, p.cost)
        span.end(stamp)

    def _model_start(self, spans: _Spans, stamp: int, p: ModelStartPayload, usage: Usage,
                     extra: tuple[SentRequest | None, Any]) -> None:
        if spans.model is not None:  # a call that raised (and was retried): ended as failed
            spans.model.fail("the call failed")
            spans.model.end(stamp)
        turn = spans.turn
        provider = getattr(turn.env.model, "provider", None) or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.request.model": p.model, "contextree.iteration": p.iteration,
            "contextree.context_tokens": p.tokens}
        request, messages = extra
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
        if turn.session_id is not None:
            attributes["gen_ai.conversation.id"] = turn.session_id
        if messages is not None:
            attributes["gen_ai.input.messages"] = self._content.messages_json(messages)
        spans.model = self._child(spans, f"chat {p.model}", self._client, attributes, stamp)
        spans.model_start = usage

    def _model_reply(self, spans: _Spans, stamp: int, p: ModelReplyPayload, usage: Usage,
                     extra: None) -> None:
        span, spans.model = spans.model, None
        if span is None:
            return
        m = p.message
        attributes = span.attributes
        if spans.reply_id is not None:
            attributes["contextree.entry_id"], spans.reply_id = spans.reply_id, None
        if m.model:
            attributes["gen_ai.response.model"] = m.model
        if m.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = (m.stop_reason,)
        if self.capture_content:
            attributes["gen_ai.output.messages"] = self._content.messages_json([m])
        _usage_attributes(attributes, m.usage, cost_of(m))
        span.end(stamp)

    def _committed(self, spans: _Spans, stamp: int, p: CommittedPayload, usage: Usage,
                   extra: None) -> None:
        if p.entry_id is None:
            return
        m = p.message
        if m.role == "assistant" and spans.model is not None:
            spans.reply_id = p.entry_id  # set with the reply's other attributes
        elif m.role == "tool" and m.tool_call_id in spans.tools:
            span = spans.tools.pop(m.tool_call_id or "")
            span.attributes["contextree.entry_id"] = p.entry_id
            span.end(stamp)  # a tool's span ends once its result is stored

    def _tool_start(self, spans: _Spans, stamp: int, p: ToolStartPayload, usage: Usage,
                    extra: None) -> None:
        call = p.call
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": call.name,
                                      "gen_ai.tool.call.id": call.id,
                                      "gen_ai.tool.type": "function"}
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = self._content.json(call.arguments)
        spans.tools[call.id] = self._child(spans, f"execute_tool {call.name}", self._internal,
                                           attributes, stamp)

    def _tool_end(self, spans: _Spans, stamp: int, p: ToolEndPayload, usage: Usage,
                  extra: None) -> None:
        span = spans.tools.get(p.call.id)
        if span is None:
            return
        if p.result.is_error:
            span.fail("the tool reported an error")
            span.attributes["error.type"] = "tool_error"
        if self.capture_content:
            span.attributes["gen_ai.tool.call.result"] = self._content.text(
                str(p.result.content))

    def _compaction_start(self, spans: _Spans, stamp: int, p: CompactionStartPayload,
                          usage: Usage, extra: None) -> None:
        spans.compaction_usage = usage
        spans.compaction = self._child(spans, "contextree.compaction", self._internal, {
            "contextree.window": p.window, "contextree.tokens_before": p.tokens,
            "contextree.leaf_id": p.leaf_id or ""}, stamp)

    def _end_compaction(self, spans: _Spans, usage: Usage) -> _Pending | None:
        span, spans.compaction = spans.compaction, None
        if span is not None and spans.compaction_usage is not None:
            spent = _minus(usage, spans.compaction_usage)  # the summarizer's calls
            _usage_attributes(span.attributes, spent, spent.cost)
        return span

    def _compacted(self, spans: _Spans, stamp: int, p: CompactedPayload, usage: Usage,
                   extra: None) -> None:
        span = self._end_compaction(spans, usage)
        if span is None:
            return
        span.attributes["contextree.tokens_after"] = p.tokens_after
        span.attributes["contextree.stages"] = [s.name for s in p.stages if s.applied]
        if p.entry_id is not None:
            span.attributes["contextree.entry_id"] = p.entry_id
        span.end(stamp)

    def _compaction_failed(self, spans: _Spans, stamp: int, p: CompactionFailedPayload,
                           usage: Usage, extra: None) -> None:
        if p.stage is not None:  # one stage failed; the ladder goes on
            if spans.compaction is not None:
                spans.compaction.add_event("stage_failed", {"stage": p.stage,
                                                            "error": p.error or ""}, stamp)
            return
        span = self._end_compaction(spans, usage)
        if span is not None:
            span.fail(p.reason)
            span.end(stamp)

    def _interrupted(self, spans: _Spans, stamp: int, p: InterruptedPayload, usage: Usage,
                     turn_cost: float | None) -> None:
        span, spans.model = spans.model, None
        if span is None:
            return
        span.fail("interrupted")
        attributes = span.attributes
        attributes["error.type"] = "interrupted"
        if spans.reply_id is not None:  # what had arrived, stored
            attributes["contextree.entry_id"], spans.reply_id = spans.reply_id, None
        spent = (_minus(usage, spans.model_start) if spans.model_start is not None
                 else None)  # what the turn counted for the call (estimated)
        _usage_attributes(attributes, spent, None if turn_cost is None or spent is None
                          else spent.cost)
        span.end(stamp)

    def _retry(self, spans: _Spans, stamp: int, p: RetryPayload, usage: Usage,
               extra: None) -> None:
        span, spans.model = spans.model, None
        if span is None:
            return
        span.fail(p.error)
        span.attributes["error.type"] = str(p.status) if p.status else "model_error"
        span.end(stamp)


_REQUEST_PARAMS = {
    "temperature": "gen_ai.request.temperature", "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
}


def _usage_attributes(attributes: dict[str, Any], usage: Usage | None,
                      cost: float | None) -> None:
    """Set the token and cost attributes of ``usage`` in a span's ``attributes``."""
    if usage is None:
        return
    attributes["gen_ai.usage.input_tokens"] = usage.input + usage.cache_read + usage.cache_write
    attributes["gen_ai.usage.output_tokens"] = usage.output
    if usage.cache_read:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
    if usage.cache_write:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
    if cost is None:
        attributes["contextree.cost_unknown"] = True
    else:
        attributes["contextree.cost_usd"] = cost


def _minus(after: Usage, before: Usage) -> Usage:
    cost = None if after.cost is None else after.cost - (before.cost or 0.0)
    return Usage(input=after.input - before.input, output=after.output - before.output,
                 cache_read=after.cache_read - before.cache_read,
                 cache_write=after.cache_write - before.cache_write, cost=cost)
