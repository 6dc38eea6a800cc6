"""``ModelCall``: the innermost app. One model call, streamed, and interruptible.

The call runs in a helper thread that talks to the model (the SDK read may block on the
network) and emits the deltas as events, while the turn's thread waits for the reply and wakes
at once when the turn is interrupted. Then the reply is kept as far as it arrived,
marked ``interrupted_reply``, and each of its tool calls gets an "interrupted" result, so the
session stays valid and the next turn continues from it. The helper thread, if still blocked,
is abandoned: it holds a connection, never the session.

A stream that fails part-way (cut off, garbled) raises its ``ModelError``; what had arrived
is held on the env, and if the error ends the turn the persistence middleware keeps it the
same way (``keep_failed_reply``), so the session stays valid and the next turn continues.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Sequence
from typing import Any

import orjson

from .._context import interrupted_result
from .._messages import Message, Usage, storable
from .._pricing import cost_of, table_cost
from ..entries import CallRecord
from ..errors import ModelError
from ..markers import InterruptedReplyMarker, Kind
from ..models._base import Model, ToolSpec
from ..models._stream import (
    CompletedStream,
    ReplyStream,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    stream_reply,
)
from ..tokens import EstimateCounter, TokenCounter, count_context
from ._env import Env, SentRequest
from ._events import (
    Event,
    InterruptedPayload,
    ModelReplyPayload,
    ModelStartPayload,
    StopReason,
    TextDeltaPayload,
    ThinkingDeltaPayload,
    ToolCallPayload,
)

__all__ = ["INTERRUPTED_NOTICE", "NOTHING_TO_ANSWER", "ModelCall", "interrupt_turn",
           "keep_failed_reply"]

INTERRUPTED_NOTICE = ("Interrupted: what had arrived of the reply is saved (marked "
                      "interrupted); start() again to continue.")
NOTHING_TO_ANSWER = ("Nothing to answer: the conversation ends with the assistant's reply; "
                     "give start() the next user message.")

_END = object()
_WAKE = object()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class ModelCall:
    """Send the conversation and tool schemas, stream the reply as events, add the reply.

    ``stream=False`` asks the model for a completed reply (``complete``) instead, replayed
    as deltas; a model without ``stream`` is always called so.
    """

    def __init__(self, model: Model, loop: asyncio.AbstractEventLoop | None = None, *,
                 stream: bool = True, counter: TokenCounter | None = None) -> None:
        self.model = model
        self.loop = loop
        self.stream = stream
        self.counter = counter or EstimateCounter()

    def __call__(self, env: Env) -> Env:
        if env.cancelled:
            env.stop(StopReason.INTERRUPTED, INTERRUPTED_NOTICE)
            return env
        if not _needs_answer(env.messages):
            env.stop(StopReason.NOTHING_TO_ANSWER, NOTHING_TO_ANSWER)
            return env
        specs: list[ToolSpec] = [t.spec() if hasattr(t, "spec") else t for t in env.tools]
        options = env.metadata.get("model_options", {})
        env.request_sent(SentRequest.of(self.model, env.messages, specs, options,
                                        stream=self._streams()))
        env.emit(ModelStartPayload(
            event=Event.MODEL_START, model=self.model.name, iteration=env.iteration,
            tokens=count_context(env.messages, self.counter, fresh_from=env.fresh_from),
            messages=len(env.messages)))
        reply = self._call(env, env.messages, specs, options)
        if reply is None:
            return env
        reply = storable(reply)
        env.add(reply)
        env.count(reply.usage, cost_of(reply))
        env.emit(ModelReplyPayload(event=Event.MODEL_REPLY, message=reply))
        return env

    # -- the call --------------------------------------------------------------------------
    def _streams(self) -> bool:
        """Whether the call asks for a streamed reply (the body then says ``stream``)."""
        if self.loop is not None and _is_async_only(self.model):
            return False
        return self.stream and callable(getattr(self.model, "stream", None))

    def _open(self, messages: Sequence[Message], specs: Sequence[ToolSpec],
              options: dict[str, Any]) -> ReplyStream:
        """The reply's stream (called in the helper thread)."""
        if self.loop is not None and _is_async_only(self.model):
            future = asyncio.run_coroutine_threadsafe(
                self.model.acomplete(messages, tools=specs, **options), self.loop)
            return CompletedStream(future.result())
        if self.stream:
            return stream_reply(self.model, messages, tools=specs, **options)
        return CompletedStream(self.model.complete(messages, tools=specs, **options))

    def _call(self, env: Env, messages: Sequence[Message], specs: Sequence[ToolSpec],
              options: dict[str, Any]) -> Message | None:
        """The reply, with its deltas emitted; None when the turn was interrupted.

        The helper thread emits the deltas itself (one thread hop less to the reader) under
        a lock the turn's thread takes to stop it, so no delta follows an interruption.
        """
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        opened: list[ReplyStream] = []
        lock = threading.Lock()
        stopped = [False]

        def pump() -> None:
            try:
                stream = self._open(messages, specs, options)
                opened.append(stream)
                for delta in stream:
                    with lock:
                        if stopped[0]:
                            return
                        _emit_delta(env, delta)
                done.put(_END)
            except BaseException as e:  # handed to the turn's thread, raised there
                done.put(_Failed(e))

        forget = env.on_interrupt(lambda: done.put(_WAKE))
        try:
            threading.Thread(target=pump, name="contextree-model-call", daemon=True).start()
            item = done.get()
            if item is _WAKE or env.cancelled:
                with lock:
                    stopped[0] = True
                    stream = opened[0] if opened else None
                    partial = stream.partial() if stream is not None else None
                if stream is not None:
                    stream.close()
                if partial is None or not _worth_keeping(partial):
                    # The request went out and is billed, though nothing of it is kept.
                    env.call_made(self._lost_call(env, messages, specs))
                interrupt_turn(env, partial)
                return None
            if isinstance(item, _Failed):
                partial = opened[0].partial() if opened else None
                if isinstance(item.error, ModelError) and partial is not None:
                    env.hold_failed_reply(item.error, partial)
                raise item.error
            return opened[0].message
        finally:
            forget()


    def _lost_call(self, env: Env, messages: Sequence[Message],
                   specs: Sequence[ToolSpec]) -> CallRecord:
        """The record of a call interrupted before anything of its reply arrived: its input
        estimated, priced by the table (or unknown)."""
        usage = Usage(input=_sent_tokens(messages, specs))
        provider = getattr(self.model, "provider", None)
        usage = usage.replace(cost=table_cost(usage, provider, self.model.name))
        return CallRecord(provider=provider, model=self.model.name, usage=usage,
                          estimated=True, outcome="interrupted")


def _sent_tokens(messages: Sequence[Message], tools: Sequence[Any]) -> int:
    """An estimate of the input tokens of a request: its messages and tool schemas."""
    counter = EstimateCounter()
    schemas = orjson.dumps([dict(t) for t in tools], default=str).decode() if tools else ""
    return counter.count_messages(messages) + (counter.count_text(schemas) if schemas else 0)


def _estimated_usage(env: Env, partial: Message) -> Usage | None:
    """The usage of a reply cut short when the provider reported none of its input (or of
    its output, when some arrived): estimated from what was sent and what arrived, priced
    by the table (``cost`` None when it does not know the model). ``None``: the reported
    usage stands."""
    reported = partial.usage or Usage()
    sent = reported.input + reported.cache_read + reported.cache_write
    if sent and reported.output:
        return None
    counter = EstimateCounter()
    sent_tokens = _sent_tokens(env.messages, [t.spec() if hasattr(t, "spec") else t
                                             for t in env.tools])
    usage = reported.replace(input=reported.input if sent else sent_tokens,
                             output=reported.output or counter.count_message(partial),
                             cost=None)
    usage = usage.replace(total=usage.input + usage.output + usage.cache_read
                          + usage.cache_write)
    return usage.replace(cost=table_cost(usage, partial.provider, partial.model))


def _emit_delta(env: Env, delta: Any) -> None:
    if isinstance(delta, TextDelta):
        env.emit(TextDeltaPayload(event=Event.TEXT_DELTA, text=delta.text))
    elif isinstance(delta, ThinkingDelta):
        env.emit(ThinkingDeltaPayload(event=Event.THINKING_DELTA, text=delta.text))
    elif isinstance(delta, ToolCallReady):
        env.emit(ToolCallPayload(event=Event.TOOL_CALL, call=delta.call))


def interrupt_turn(env: Env, partial: Message | None, *,
                   calls: Sequence[str] = ()) -> None:
    """Keep ``partial`` (marked ``interrupted_reply``) and give each of its tool calls an
    "interrupted" result, then stop the turn; with nothing arrived, nothing is added.
    ``calls``: ids of tool calls already given their "interrupted" result."""
    calls = [*calls, *_keep_partial(env, partial)]
    if partial is not None and not _worth_keeping(partial):
        partial = None
    env.emit(InterruptedPayload(event=Event.INTERRUPTED, partial=partial, calls=calls))
    env.stop(StopReason.INTERRUPTED, INTERRUPTED_NOTICE)


def keep_failed_reply(env: Env, error: BaseException) -> None:
    """Keep what had arrived of a reply whose stream ``error`` cut short, as an interruption
    keeps it (persistence middleware calls this when ``error`` ends the turn)."""
    _keep_partial(env, env.take_failed_reply(error))


def _worth_keeping(partial: Message) -> bool:
    return bool(partial.text or partial.tool_calls or partial.thinking)


def _keep_partial(env: Env, partial: Message | None) -> list[str]:
    """Add ``partial`` marked ``interrupted_reply`` and an "interrupted" result for each of
    its tool calls; returns their ids."""
    if partial is None or not _worth_keeping(partial):
        return []
    estimate = _estimated_usage(env, partial)
    if estimate is None:
        marked = partial.marked(Kind.INTERRUPTED_REPLY)
    else:
        marked = partial.replace(usage=estimate).marked(
            InterruptedReplyMarker(usage_estimated=True))
    marked = storable(marked)
    env.add(marked)
    env.count(marked.usage, cost_of(marked))
    calls = []
    for call in marked.tool_calls or ():
        env.add(interrupted_result(call.id, call.name))
        calls.append(call.id)
    return calls


def _needs_answer(messages: Sequence[Message]) -> bool:
    """True when the conversation ends with something for the model to answer: a user
    message or a tool result (system messages aside)."""
    for m in reversed(messages):
        if m.role == "system":
            continue
        return m.role in ("user", "tool")
    return False


def _is_async_only(model: Model) -> bool:
    complete = getattr(model, "complete", None)
    return complete is None or inspect.iscoroutinefunction(complete)
