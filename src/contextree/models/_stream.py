"""Streamed replies: deltas as they arrive, then the very ``Message`` that ``complete()`` returns.

An assembler reads one provider's stream chunks (OpenAI ``chat.completion.chunk`` objects,
Anthropic message events) and keeps the pieces in lists, so a reply of any number of deltas is
assembled in linear time. When the stream ends it rebuilds the provider's non-streamed
response body (``choices[0].message`` with ``finish_reason`` and ``usage``; Anthropic
``content`` blocks with ``stop_reason`` and ``usage``) and hands it to the adapter's own
response parser, so a streamed reply and a completed one cannot differ.

``ReplyStream`` (and ``AsyncReplyStream``) is what ``model.stream(...)`` returns: iterate it for
``TextDelta``, ``ThinkingDelta`` and ``ToolCallReady`` (a tool call whose arguments are
complete); then ``message`` is the reply. An event that is not JSON, or not the shape the
provider's API documents, is a ``ModelReplyMalformed`` naming what was sent; the assemblers
check each event before they take anything from it, so ``partial()`` still holds what came
before. ``partial()`` is what arrived so far, for a reply that
is being interrupted, and ``close()`` drops the connection. ``stream_reply`` gives every model a
stream: a model without ``stream`` is completed and its reply replayed as deltas.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, Protocol, Self, runtime_checkable

from contextree._limits import ARGUMENTS_DEPTH, parse_json
from contextree._messages import Message, TextPart, ThinkingPart, ToolCall
from contextree._text import shorten
from contextree.errors import ModelError, ModelReplyMalformed, ModelUnavailable
from contextree.models._base import Model, ToolSpec
from contextree.models._wire_common import RAW_ARGUMENTS_KEY, Json, arguments_from_json

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
    "UnreadableEvent",
    "astream_reply",
    "deltas_of",
    "malformed_reply",
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


class UnreadableEvent(ValueError):
    """A stream event an assembler cannot read: ``reason`` says why, ``event`` is what came."""

    def __init__(self, reason: str, event: Any) -> None:
        self.reason = reason
        self.event = event
        super().__init__(reason)


def _is_object(value: Any) -> bool:
    """True for a JSON object as the SDKs hand it over (a model with ``to_dict``)."""
    return callable(getattr(value, "to_dict", None))


def _typed(value: Any, kind: type, what: str, event: Any) -> Any:
    """``value`` when it is None or a ``kind``, else an ``UnreadableEvent`` naming ``what``."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise UnreadableEvent(f"`{what}` is {_json_type(value)}, not {_json_type(kind)}", event)


def _object(value: Any, what: str, event: Any) -> Any:
    """``value`` when it is None or a JSON object, else an ``UnreadableEvent``."""
    if value is None or _is_object(value):
        return value
    raise UnreadableEvent(f"`{what}` is {_json_type(value)}, not an object", event)


_JSON_TYPES = {str: "a string", int: "a number", float: "a number", bool: "a boolean",
               list: "an array", dict: "an object", type(None): "null"}


def _json_type(value: Any) -> str:
    kind = value if isinstance(value, type) else type(value)
    return _JSON_TYPES.get(kind, "an object" if _is_object(value) else kind.__name__)


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
        if not _is_object(chunk):
            raise UnreadableEvent(f"the event is {_json_type(chunk)}, not an object", chunk)
        model = _typed(chunk.model, str, "model", chunk)
        chunk_id = _typed(chunk.id, str, "id", chunk)
        usage = _object(chunk.usage, "usage", chunk)
        choices = [c for c in _typed(chunk.choices, list, "choices", chunk) or ()
                   if self._first_choice(c, chunk)]
        self._chunks += 1
        if model:
            self._model = model
        if chunk_id:
            self._id = chunk_id
        if usage is not None:
            self._usage = usage.to_dict(mode="json")
        out: list[Delta] = []
        for choice in choices:
            finish = _typed(choice.finish_reason, str, "finish_reason", chunk)
            delta = _object(choice.delta, "delta", chunk)
            if delta is not None:
                self._delta(delta, out, chunk)
            if finish:
                self._finish = finish
                self.done = True
                self._ready_up_to(None, out)
        return out

    @staticmethod
    def _first_choice(choice: Any, chunk: Any) -> bool:
        """True for the choice the reply is read from (index 0; a server that leaves the
        index out sends one choice)."""
        if not _is_object(choice):
            raise UnreadableEvent(f"a choice is {_json_type(choice)}, not an object", chunk)
        return _typed(choice.index, int, "choices[].index", chunk) in (0, None)

    def _delta(self, delta: Any, out: list[Delta], chunk: Any) -> None:
        text = _typed(delta.content, str, "delta.content", chunk)
        refusal = _typed(delta.refusal, str, "delta.refusal", chunk)
        calls = [self._checked_call(tc, chunk)
                 for tc in _typed(delta.tool_calls, list, "delta.tool_calls", chunk) or ()]
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
        if refusal:
            self._refusal.append(refusal)
        for tc, call_id, name, arguments in calls:
            index = self._index_of(tc.index, call_id)
            call = self._calls.get(index)
            if call is None:
                self._ready_up_to(index, out)  # calls stream one after another
                call = self._calls[index] = {"id": "", "name": [], "args": [], "extra": {}}
            if call_id:
                call["id"] = call_id
            if name:
                call["name"].append(name)
            if arguments:
                call["args"].append(arguments)
            if tc.model_extra:
                call["extra"].update(tc.model_extra)

    @staticmethod
    def _checked_call(tc: Any, chunk: Any) -> tuple[Any, str | None, str | None, str | None]:
        """A tool call delta and its id, name and arguments piece, checked."""
        if not _is_object(tc):
            raise UnreadableEvent(f"a tool call is {_json_type(tc)}, not an object", chunk)
        _typed(tc.index, int, "tool_calls[].index", chunk)
        fn = _object(tc.function, "tool_calls[].function", chunk)
        name = arguments = None
        if fn is not None:
            name = _typed(fn.name, str, "tool_calls[].function.name", chunk)
            arguments = _typed(fn.arguments, str, "tool_calls[].function.arguments", chunk)
        return tc, _typed(tc.id, str, "tool_calls[].id", chunk), name, arguments

    def _index_of(self, index: int | None, call_id: str | None) -> int:
        """The call a delta belongs to. A server that leaves ``index`` out sends each call
        with its id first: a new id is the next call, no id continues the last one."""
        if index is not None:
            return index
        last = max(self._calls, default=None)
        if last is None or (call_id and call_id != self._calls[last]["id"]):
            return 0 if last is None else last + 1
        return last

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
        kind = getattr(chunk, "type", None) if _is_object(chunk) else None
        if not isinstance(kind, str):
            what = "has no `type`" if _is_object(chunk) else f"is {_json_type(chunk)}, not an object"
            raise UnreadableEvent(f"the event {what}", chunk)
        if kind == "content_block_delta":
            return self._delta(self._started_block(chunk), chunk)
        if kind == "content_block_stop":
            index = self._started_block(chunk)
            self._events += 1
            return self._stop_block(index)
        if kind == "content_block_start":
            index = _typed(chunk.index, int, "index", chunk)
            block = _object(chunk.content_block, "content_block", chunk)
            data = block.to_dict(mode="json") if block is not None else None
            if index is None or not isinstance(data, dict) or not isinstance(
                    data.get("type"), str):
                raise UnreadableEvent("a block starts without an `index` and a "
                                      "`content_block` with a `type`", chunk)
            self._blocks[index] = data
            self._pieces[index] = []
        elif kind == "message_start":
            message = _object(chunk.message, "message", chunk)
            if message is None:
                raise UnreadableEvent("`message_start` has no `message`", chunk)
            model = _typed(message.model, str, "message.model", chunk)
            self._merge_usage(_object(message.usage, "message.usage", chunk))
            self._model = model
        elif kind == "message_delta":
            delta = _object(chunk.delta, "delta", chunk)
            stop = _typed(delta.stop_reason, str, "delta.stop_reason", chunk) if delta else None
            self._merge_usage(_object(chunk.usage, "usage", chunk))
            if stop:
                self._stop = stop
        elif kind == "message_stop":
            self.done = True
        self._events += 1
        return ()

    def _started_block(self, chunk: Any) -> int:
        """The index of the block an event is about, which must have started."""
        index = _typed(chunk.index, int, "index", chunk)
        if index is None:
            raise UnreadableEvent(f"`{chunk.type}` without an `index`", chunk)
        if index not in self._blocks:
            raise UnreadableEvent(f"`{chunk.type}` for block {index}, which never started",
                                  chunk)
        return int(index)

    def _merge_usage(self, usage: Any) -> None:
        if usage is not None:
            self._usage.update({k: v for k, v in usage.to_dict(mode="json").items()
                                if v is not None})

    _DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking",
                     "input_json_delta": "partial_json", "signature_delta": "signature"}

    def _delta(self, index: int, chunk: Any) -> Sequence[Delta]:
        delta = _object(chunk.delta, "delta", chunk)
        kind = getattr(delta, "type", None)
        if not isinstance(kind, str):
            raise UnreadableEvent("a `content_block_delta` without a `delta` that has a "
                                  "`type`", chunk)
        field = self._DELTA_FIELDS.get(kind)
        piece = _typed(getattr(delta, field), str, f"delta.{field}", chunk) if field else None
        citation = (_object(delta.citation, "delta.citation", chunk)
                    if kind == "citations_delta" else None)
        self._events += 1
        if kind == "text_delta" and piece:
            self._pieces[index].append(piece)
            return (TextDelta(piece),)
        if kind == "thinking_delta" and piece:
            self._pieces[index].append(piece)
            return (ThinkingDelta(piece),)
        if kind == "input_json_delta" and piece:
            self._pieces[index].append(piece)
        elif kind == "signature_delta" and piece:
            self._signatures.setdefault(index, []).append(piece)
        elif citation is not None:
            self._blocks[index].setdefault("citations", []).append(
                citation.to_dict(mode="json"))
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
            block["input"] = _tool_input(joined)
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


def malformed_reply(provider: str, exc: BaseException, *, source: str | None = None,
                    api: str | None = None, streamed: bool = True) -> ModelReplyMalformed | None:
    """A failure to read what a stream sent (a ``data:`` line that is not JSON, an event
    that is not the API's shape) as a ``ModelReplyMalformed`` that quotes it; None for any
    other exception. ``source`` is the server, ``api`` the protocol it should speak;
    ``streamed=False``: ``exc.event`` is a whole response body."""
    if isinstance(exc, UnreadableEvent):
        what = "an event" if streamed else "a body"
        what = f"{what} contextree cannot read ({exc.reason}): {_quoted(exc.event)}"
    elif isinstance(exc, json.JSONDecodeError):  # orjson's error is one too
        doc = getattr(exc, "doc", None)
        sent = f": {shorten(repr(doc), 200)}" if isinstance(doc, str) else ""
        what = f"a `data:` line that is not JSON ({exc}){sent}"
    elif isinstance(exc, ValueError):  # not UTF-8, and the like
        what = f"data that cannot be read ({type(exc).__name__}: {exc})"
    elif isinstance(exc, RecursionError):  # the SDK's JSON parser on hostile nesting
        what = "JSON nested too deeply to read"
    else:
        return None
    where = (" stream" if streamed else "") + (f" from {source}" if source else "")
    server = f"{source} is a server of the {api}" if source and api else (
        "the server speaks the provider's streaming API")
    return ModelReplyMalformed(
        f"{provider}: the reply{where} {'sent' if streamed else 'is'} {what}. Retrying may help if it was cut "
        f"off or garbled on the way; if it keeps happening, check that {server}")


def _quoted(event: Any) -> str:
    """What an event held, as JSON, shortened."""
    data = event
    if _is_object(event):
        try:
            data = event.to_dict(mode="json", warnings=False)
        except Exception:  # a model the SDK built from odd data may not convert back
            data = repr(event)
    try:
        text = json.dumps(data, ensure_ascii=False, default=repr)
    except ValueError:
        text = repr(data)
    return shorten(text, 300)


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
        self._pending: deque[Delta] = deque()
        self._close: Callable[[], object] | None = None

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
        """Take one chunk; an event the assembler cannot read is a ``ModelReplyMalformed``."""
        try:
            with self._lock:
                if self._closed:
                    return
                try:
                    deltas = self._assembler.feed(chunk)
                except UnreadableEvent:
                    raise
                except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
                    raise UnreadableEvent(f"{type(e).__name__}: {e}", chunk) from e
                self._pending.extend(deltas)
        except UnreadableEvent as e:
            raise self._mapped(e) from e

    def _ready(self, stop: type[Exception]) -> Delta | None:
        """The next delta that arrived, or None when a chunk must be read first; ``stop``
        (the iteration's end) once the reply is complete or the stream closed."""
        if self._pending:
            return self._pending.popleft()
        if self._message is not None or self._closed:
            raise stop
        return None

    def _read_failed(self, e: Exception, stop: type[Exception]) -> NoReturn:
        """Reading the next chunk raised ``e``: the chunks ran out (``stop``: the reply is
        assembled), a ``ModelError`` passes, anything else is mapped to one."""
        try:
            if isinstance(e, stop):
                self._end()
                raise e
            if isinstance(e, ModelError):
                raise e
            raise self._mapped(e) from e
        finally:
            del e  # else the traceback, through this frame, holds the exception: a cycle

    def _release(self) -> object:
        """Mark the stream closed and call the connection's ``close`` (what it returned: an
        awaitable for an async one). Closing a broken connection may fail again; it is
        closed all the same."""
        with self._lock:
            self._closed = True
        if self._close is None:
            return None
        try:
            return self._close()
        except Exception:
            return None

    def _end(self) -> None:
        with self._lock:
            if not self._assembler.done:
                raise ModelUnavailable(f"{self._provider}: {_CUT}")
            body = self._assembler.body()
            try:
                self._message = self._finish(body)
            except ModelError:
                raise
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
                failure = UnreadableEvent(
                    f"the events do not add up to a reply: {type(e).__name__}: {e}", body)
                raise self._mapped(failure) from e

    def _mapped(self, e: BaseException) -> BaseException:
        mapped = self._errors(e, self._assembler.started())
        if mapped is None:
            mapped = malformed_reply(self._provider, e)
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
        while (delta := self._ready(StopIteration)) is None:
            try:
                chunk = next(self._chunks)
            except Exception as e:
                self._read_failed(e, StopIteration)
            self._feed(chunk)
        return delta

    def close(self) -> None:
        """Stop reading and release the connection (``partial()`` still works)."""
        self._release()

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
        while (delta := self._ready(StopAsyncIteration)) is None:
            try:
                chunk = await anext(self._chunks)
            except Exception as e:
                self._read_failed(e, StopAsyncIteration)
            self._feed(chunk)
        return delta

    async def aclose(self) -> None:
        """Stop reading and release the connection."""
        result = self._release()
        if inspect.isawaitable(result):
            try:
                await result
            except Exception:  # as in ``_release``: the connection is closed all the same
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
    """A model that can stream its reply (``OpenAIChat``, ``OpenAIResponses``,
    ``AnthropicMessages``, ``ScriptedModel``)."""

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


def _tool_input(joined: str) -> Json:
    """A streamed tool input: its JSON object, or the text as the model sent it when that is
    not one (not JSON, nested too deeply): the tool then says what is wrong with it."""
    try:
        value = parse_json(joined, exact=True, limit=ARGUMENTS_DEPTH)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: joined}
