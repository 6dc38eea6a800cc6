"""Streamed replies: deltas as they arrive, then the very ``Message`` that ``complete()`` returns.

An assembler reads one provider's stream chunks (OpenAI ``chat.completion.chunk`` objects,
Anthropic message events) and keeps the pieces in lists, so a reply of any number of deltas is
assembled in linear time. When the stream ends it rebuilds the provider's non-streamed
response body (``choices[0].message`` with ``finish_reason`` and ``usage``; Anthropic
``content`` blocks with ``stop_reason`` and ``usage``) and hands it to the adapter's own
response parser, so a streamed reply and a completed one cannot differ.

``ReplyStream`` (and ``AsyncReplyStream``) is what ``model.stream(...)`` returns: iterate it for
``TextDelta``, ``ThinkingDelta`` and ``ToolCallReady`` (a tool call whose arguments are
complete); then ``message`` is the reply. ``partial()`` is what arrived so far, for a reply that
is being interrupted, and ``close()`` drops the connection. ``stream_reply`` gives every model a
stream: a model without ``stream`` is completed and its reply replayed as deltas.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from contextree._messages import Message, TextPart, ThinkingPart, ToolCall
from contextree.errors import ModelError, ModelUnavailable
from contextree.models._base import Model, ToolSpec
from contextree.models._wire_common import Json, arguments_from_json

__all__ = [
    "AnthropicAssembler",
    "Assembler",
    "AsyncCompletedStream",
    "AsyncReplyStream",
    "ChatAssembler",
    "CompletedStream",
    "Delta",
    "DeltaAssembler",
    "ReplyStream",
    "StreamingModel",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallReady",
    "astream_reply",
    "deltas_of",
    "message_of_body",
    "stream_reply",
]


# -- deltas --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text of the reply."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """More of the model's reasoning."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call whose arguments are complete (as it will be in the reply)."""

    call: ToolCall


Delta = TextDelta | ThinkingDelta | ToolCallReady


def deltas_of(message: Message) -> list[Delta]:
    """The deltas that would have streamed ``message``: its thinking and text in order, then
    its tool calls (how a model that cannot stream is replayed)."""
    out: list[Delta] = []
    content = message.content
    if isinstance(content, str):
        if content:
            out.append(TextDelta(content))
    elif content:
        for part in content:
            if isinstance(part, ThinkingPart) and part.thinking:
                out.append(ThinkingDelta(part.thinking))
            elif isinstance(part, TextPart) and part.text:
                out.append(TextDelta(part.text))
    out.extend(ToolCallReady(c) for c in message.tool_calls or ())
    return out


# -- assemblers ----------------------------------------------------------------------------

Finish = Callable[[Json], Message]
"""The adapter's parser of a non-streamed response body (the same one ``complete`` uses)."""


class Assembler(Protocol):
    """Reads one provider's stream chunks into the response body ``complete`` would get."""

    done: bool
    """True once the provider said the reply is complete."""

    def feed(self, chunk: Any) -> Sequence[Delta]:
        """Take one chunk; return the deltas it completes."""
        ...

    def body(self, *, partial: bool = False) -> Json:
        """The non-streamed response body for what arrived (``partial``: only the parts that
        are complete enough to keep: text so far, finished tool calls)."""
        ...

    def started(self) -> bool:
        """True once anything of the reply arrived."""
        ...


class ChatAssembler:
    """OpenAI Chat Completions chunks (the ``openai`` SDK's ``ChatCompletionChunk``)."""

    def __init__(self) -> None:
        self.done = False
        self._model: str | None = None
        self._id: str | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_field = "reasoning_content"
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}  # index -> id, name, args pieces, extra
        self._ready: set[int] = set()
        self._finish: str | None = None
        self._usage: Json | None = None
        self._chunks = 0

    def started(self) -> bool:
        return self._chunks > 0

    def feed(self, chunk: Any) -> Sequence[Delta]:
        self._chunks += 1
        if chunk.model:
            self._model = chunk.model
        if chunk.id:
            self._id = chunk.id
        if chunk.usage is not None:
            self._usage = chunk.usage.to_dict(mode="json")
        out: list[Delta] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                self._delta(delta, out)
            if choice.finish_reason:
                self._finish = choice.finish_reason
                self.done = True
                self._ready_up_to(None, out)
        return out

    def _delta(self, delta: Any, out: list[Delta]) -> None:
        text = delta.content
        if text:
            self._text.append(text)
            out.append(TextDelta(text))
        extra = delta.model_extra
        if extra:
            for key in ("reasoning_content", "reasoning"):
                value = extra.get(key)
                if isinstance(value, str) and value:
                    self._reasoning_field = key
                    self._reasoning.append(value)
                    out.append(ThinkingDelta(value))
                    break
        if delta.refusal:
            self._refusal.append(delta.refusal)
        for tc in delta.tool_calls or ():
            index = tc.index
            call = self._calls.get(index)
            if call is None:
                self._ready_up_to(index, out)  # calls stream one after another
                call = self._calls[index] = {"id": "", "name": [], "args": [], "extra": {}}
            if tc.id:
                call["id"] = tc.id
            fn = tc.function
            if fn is not None:
                if fn.name:
                    call["name"].append(fn.name)
                if fn.arguments:
                    call["args"].append(fn.arguments)
            if tc.model_extra:
                call["extra"].update(tc.model_extra)

    def _ready_up_to(self, index: int | None, out: list[Delta]) -> None:
        """Announce the calls before ``index`` (all of them for ``None``) as complete."""
        for i in sorted(self._calls):
            if (index is None or i < index) and i not in self._ready:
                self._ready.add(i)
                out.append(ToolCallReady(self._tool_call(i)))

    def _tool_call(self, i: int) -> ToolCall:
        wire = self._wire_call(i)
        return ToolCall(id=wire["id"], name=wire["function"]["name"],
                        arguments=arguments_from_json(wire["function"]["arguments"]))

    def _wire_call(self, i: int) -> Json:
        call = self._calls[i]
        return {**call["extra"], "id": call["id"], "type": "function",
                "function": {"name": "".join(call["name"]), "arguments": "".join(call["args"])}}

    def body(self, *, partial: bool = False) -> Json:
        calls = [self._wire_call(i) for i in sorted(self._calls)
                 if not partial or i in self._ready]
        text = "".join(self._text)
        message: Json = {"role": "assistant", "content": text if text or not calls else None}
        if self._reasoning:
            message[self._reasoning_field] = "".join(self._reasoning)
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if calls:
            message["tool_calls"] = calls
        body: Json = {"choices": [{"index": 0, "message": message,
                                   "finish_reason": None if partial else self._finish}]}
        if self._model:
            body["model"] = self._model
        if self._usage is not None:
            body["usage"] = self._usage
        return body


class AnthropicAssembler:
    """Anthropic Messages stream events (the ``anthropic`` SDK's raw stream events)."""

    def __init__(self) -> None:
        self.done = False
        self._model: str | None = None
        self._blocks: dict[int, Json] = {}
        self._pieces: dict[int, list[str]] = {}
        self._signatures: dict[int, list[str]] = {}
        self._closed: set[int] = set()
        self._stop: str | None = None
        self._usage: Json = {}
        self._events = 0

    def started(self) -> bool:
        return self._events > 0

    def feed(self, chunk: Any) -> Sequence[Delta]:
        self._events += 1
        kind = chunk.type
        if kind == "content_block_delta":
            return self._delta(chunk.index, chunk.delta)
        if kind == "content_block_start":
            self._blocks[chunk.index] = chunk.content_block.to_dict(mode="json")
            self._pieces[chunk.index] = []
        elif kind == "content_block_stop":
            return self._stop_block(chunk.index)
        elif kind == "message_start":
            message = chunk.message
            self._model = message.model
            self._merge_usage(message.usage)
        elif kind == "message_delta":
            if chunk.delta.stop_reason:
                self._stop = chunk.delta.stop_reason
            self._merge_usage(chunk.usage)
        elif kind == "message_stop":
            self.done = True
        return ()

    def _merge_usage(self, usage: Any) -> None:
        if usage is not None:
            self._usage.update({k: v for k, v in usage.to_dict(mode="json").items()
                                if v is not None})

    def _delta(self, index: int, delta: Any) -> Sequence[Delta]:
        kind = delta.type
        if kind == "text_delta":
            self._pieces[index].append(delta.text)
            return (TextDelta(delta.text),)
        if kind == "thinking_delta":
            self._pieces[index].append(delta.thinking)
            return (ThinkingDelta(delta.thinking),)
        if kind == "input_json_delta":
            self._pieces[index].append(delta.partial_json)
        elif kind == "signature_delta":
            self._signatures.setdefault(index, []).append(delta.signature)
        elif kind == "citations_delta":
            self._blocks[index].setdefault("citations", []).append(
                delta.citation.to_dict(mode="json"))
        return ()

    def _stop_block(self, index: int) -> Sequence[Delta]:
        self._closed.add(index)
        block = self._block(index)
        if block.get("type") == "tool_use":
            arguments = block.get("input")
            return (ToolCallReady(ToolCall(id=str(block.get("id")), name=str(block.get("name")),
                                           arguments=dict(arguments)
                                           if isinstance(arguments, dict) else {})),)
        return ()

    def _block(self, index: int) -> Json:
        """Block ``index`` as the non-streamed response has it."""
        block = dict(self._blocks[index])
        joined = "".join(self._pieces.get(index) or ())
        kind = block.get("type")
        if kind == "text":
            block["text"] = block.get("text", "") + joined
        elif kind == "thinking":
            block["thinking"] = block.get("thinking", "") + joined
            signature = "".join(self._signatures.get(index) or ())
            if signature:
                block["signature"] = signature
            elif not block.get("signature"):
                block["signature"] = None
        elif kind in ("tool_use", "server_tool_use") and joined:
            try:
                block["input"] = json.loads(joined)
            except ValueError:
                block["input"] = {}
        return block

    def body(self, *, partial: bool = False) -> Json:
        blocks = []
        for i in sorted(self._blocks):
            if partial and i not in self._closed:
                kind = self._blocks[i].get("type")
                if kind not in ("text", "thinking"):
                    continue  # a half-received tool call is dropped
            blocks.append(self._block(i))
        body: Json = {"content": blocks, "stop_reason": None if partial else self._stop,
                      "usage": dict(self._usage)}
        if self._model:
            body["model"] = self._model
        return body


# -- streams -------------------------------------------------------------------------------

ErrorMap = Callable[[BaseException, bool], BaseException | None]
"""``(exception, started)`` -> the ``ModelError`` to raise instead, or None to let it be."""

_CUT = "the reply stream ended before the reply was complete (retrying may help)"


class _StreamBase:
    """What the sync and async streams share: the assembler, the lock, the reply."""

    def __init__(self, assembler: Assembler, finish: Finish, errors: ErrorMap,
                 provider: str) -> None:
        self._assembler = assembler
        self._finish = finish
        self._errors = errors
        self._provider = provider
        self._lock = threading.Lock()
        self._message: Message | None = None
        self._closed = False
        self._pending: list[Delta] = []

    @property
    def message(self) -> Message:
        """The complete reply (once the stream has been read to its end)."""
        if self._message is None:
            raise ModelError(f"{self._provider}: the reply is not complete yet; read the "
                             "stream to its end first (or take partial())")
        return self._message

    def partial(self) -> Message | None:
        """What arrived so far, as an assistant message without a stop reason (None when
        nothing did). Safe to call from another thread while the stream is read."""
        with self._lock:
            if self._message is not None:
                return self._message
            if not self._assembler.started():
                return None
            return self._finish(self._assembler.body(partial=True))

    def _feed(self, chunk: Any) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending.extend(self._assembler.feed(chunk))

    def _end(self) -> None:
        with self._lock:
            if not self._assembler.done:
                raise ModelUnavailable(f"{self._provider}: {_CUT}")
            self._message = self._finish(self._assembler.body())

    def _mapped(self, e: BaseException) -> BaseException:
        mapped = self._errors(e, self._assembler.started())
        return mapped if mapped is not None else e


class ReplyStream(_StreamBase):
    """A reply as it streams: iterate for deltas, then read ``message``.

    Use it as a context manager (or call ``close()``) so the connection is released when the
    stream is left early.
    """

    def __init__(self, chunks: Iterator[Any], assembler: Assembler, finish: Finish, *,
                 errors: ErrorMap, provider: str,
                 close: Callable[[], object] | None = None) -> None:
        super().__init__(assembler, finish, errors, provider)
        self._chunks = chunks
        self._close = close

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Delta:
        while not self._pending:
            if self._message is not None or self._closed:
                raise StopIteration
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self._end()
                raise
            except ModelError:
                raise
            except Exception as e:
                raise self._mapped(e) from e
            self._feed(chunk)
        return self._pending.pop(0) if len(self._pending) > 1 else self._pending.pop()

    def close(self) -> None:
        """Stop reading and release the connection (``partial()`` still works)."""
        with self._lock:
            self._closed = True
        if self._close is not None:
            try:
                self._close()
            except Exception:  # closing a broken connection may fail again; it is closed
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncReplyStream(_StreamBase):
    """The async ``ReplyStream``: ``async for delta in stream``, then ``message``."""

    def __init__(self, chunks: AsyncIterator[Any], assembler: Assembler, finish: Finish, *,
                 errors: ErrorMap, provider: str,
                 close: Callable[[], Any] | None = None) -> None:
        super().__init__(assembler, finish, errors, provider)
        self._chunks = chunks
        self._close = close

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Delta:
        while not self._pending:
            if self._message is not None or self._closed:
                raise StopAsyncIteration
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._end()
                raise
            except ModelError:
                raise
            except Exception as e:
                raise self._mapped(e) from e
            self._feed(chunk)
        return self._pending.pop(0) if len(self._pending) > 1 else self._pending.pop()

    async def aclose(self) -> None:
        """Stop reading and release the connection."""
        with self._lock:
            self._closed = True
        if self._close is not None:
            try:
                result = self._close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


class DeltaAssembler:
    """Assembles deltas themselves (a model that produces ``Delta`` objects, such as
    ``ScriptedModel``): the reply is ``final``; a partial reply is the deltas so far."""

    done = True

    def __init__(self, final: Message) -> None:
        self._final = final
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._fed = 0

    def started(self) -> bool:
        return self._fed > 0

    def feed(self, chunk: Any) -> Sequence[Delta]:
        self._fed += 1
        if isinstance(chunk, TextDelta):
            self._text.append(chunk.text)
        elif isinstance(chunk, ThinkingDelta):
            self._thinking.append(chunk.text)
        elif isinstance(chunk, ToolCallReady):
            self._calls.append(chunk.call)
        return (chunk,)

    def body(self, *, partial: bool = False) -> Json:
        if not partial:
            return {"message": self._final}
        text = "".join(self._text)
        content: Any = text
        if self._thinking:
            content = [ThinkingPart(thinking="".join(self._thinking)), TextPart(text=text)]
        return {"message": self._final.replace(content=content, tool_calls=self._calls or None,
                                               stop_reason=None, usage=None)}


def message_of_body(body: Json) -> Message:
    """The finish function of a ``DeltaAssembler``."""
    message: Message = body["message"]
    return message


def _not_mapped(e: BaseException, started: bool) -> None:
    return None


class CompletedStream(ReplyStream):
    """The stream of a reply that is already complete (a model that cannot stream)."""

    def __init__(self, message: Message) -> None:
        super().__init__(iter(()), _Done(), lambda body: message, errors=_not_mapped,
                         provider=message.provider or "model")
        self._message = message
        self._rest = deltas_of(message)[::-1]

    def __next__(self) -> Delta:
        if self._rest and not self._closed:
            return self._rest.pop()
        raise StopIteration


class AsyncCompletedStream(AsyncReplyStream):
    """The async stream of a reply that is already complete."""

    def __init__(self, message: Message) -> None:
        super().__init__(_no_chunks(), _Done(), lambda body: message, errors=_not_mapped,
                         provider=message.provider or "model")
        self._message = message
        self._rest = deltas_of(message)[::-1]

    async def __anext__(self) -> Delta:
        if self._rest and not self._closed:
            return self._rest.pop()
        raise StopAsyncIteration


async def _no_chunks() -> AsyncIterator[Any]:
    return
    yield  # pragma: no cover


class _Done:
    """The assembler of a completed stream: nothing to assemble."""

    done = True

    def feed(self, chunk: Any) -> Sequence[Delta]:
        return ()

    def body(self, *, partial: bool = False) -> Json:
        return {}

    def started(self) -> bool:
        return True


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can stream its reply (``OpenAIChat``, ``AnthropicMessages``,
    ``ScriptedModel``)."""

    def stream(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
               **options: Any) -> ReplyStream:
        """Start one completion and return its stream."""
        ...


def stream_reply(model: Model, messages: Sequence[Message], *,
                 tools: Sequence[ToolSpec] = (), **options: Any) -> ReplyStream:
    """``model.stream(...)`` when the model streams, else its ``complete(...)`` replayed as
    deltas, so every caller reads replies one way."""
    stream = getattr(model, "stream", None)
    if callable(stream) and not inspect.iscoroutinefunction(stream):
        result: ReplyStream = stream(messages, tools=tools, **options)
        return result
    return CompletedStream(model.complete(messages, tools=tools, **options))


async def astream_reply(model: Model, messages: Sequence[Message], *,
                        tools: Sequence[ToolSpec] = (), **options: Any) -> AsyncReplyStream:
    """Async ``stream_reply``: ``await model.astream(...)`` when there is one, else the
    reply of ``acomplete(...)`` replayed as deltas."""
    astream = getattr(model, "astream", None)
    if callable(astream):
        result: AsyncReplyStream = await astream(messages, tools=tools, **options)
        return result
    return AsyncCompletedStream(await model.acomplete(messages, tools=tools, **options))
