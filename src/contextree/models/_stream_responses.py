"""``ResponsesAssembler``: the OpenAI Responses API's stream events into the response body a
completed call returns.

The API streams typed events: ``response.created``, per output item
``response.output_item.added``, its deltas (``response.output_text.delta``,
``response.reasoning_summary_text.delta`` / ``response.reasoning_text.delta``,
``response.function_call_arguments.delta``) and ``response.output_item.done`` with the
whole item, then ``response.completed`` (or ``response.incomplete``) carrying the whole
response with its usage. The assembler yields the text and reasoning deltas as they come and
each function call once its item is done; the body it hands to the adapter's parser is the
final response itself (its output rebuilt from the done items when a server leaves it
empty), so a streamed reply equals a completed one. A partial reply (an interrupted
turn) holds the done items and the text and reasoning of those still arriving, with the ids
they were announced with; a function call still arriving is left out. An ``error`` event or
``response.failed`` is a ``ModelError`` of the status its code stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextree.errors import ModelError
from contextree.models._base import status_error
from contextree.models._stream import (
    Delta,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    UnreadableEvent,
    _is_object,
    _json_type,
    _object,
    _typed,
)
from contextree.models._wire_common import Json
from contextree.models._wire_openai import from_openai_responses

__all__ = ["ResponsesAssembler"]

REASONING_SEPARATOR = "\n\n"
"""Between the summary (or content) parts of one reasoning item, as the wire parser joins
them."""

_ENDS = frozenset({"response.completed", "response.incomplete"})
_REASONING = {"response.reasoning_summary_text.delta": "summary_index",
              "response.reasoning_text.delta": "content_index"}


class ResponsesAssembler:
    """Responses stream events (the ``openai`` SDK's ``ResponseStreamEvent`` objects)."""

    def __init__(self, provider: str) -> None:
        self.done = False
        self._provider = provider
        self._events = 0
        self._model: str | None = None
        self._final: Json | None = None  # the response of response.completed / incomplete
        self._added: dict[int, Json] = {}  # output_index -> the item as it was announced
        self._items: dict[int, Json] = {}  # output_index -> the item, once done
        self._text: dict[int, list[str]] = {}  # output_index -> text of a message so far
        self._reasoning: dict[int, dict[int, list[str]]] = {}  # output_index -> part -> text

    def started(self) -> bool:
        return self._events > 0

    def feed(self, chunk: Any) -> Sequence[Delta]:
        kind = getattr(chunk, "type", None) if _is_object(chunk) else None
        if not isinstance(kind, str):
            what = ("has no `type`" if _is_object(chunk)
                    else f"is {_json_type(chunk)}, not an object")
            raise UnreadableEvent(f"the event {what}", chunk)
        if kind == "response.output_text.delta":
            index, delta = self._delta(chunk)
            self._events += 1
            self._text.setdefault(index, []).append(delta)
            return [TextDelta(delta)] if delta else []
        if kind in _REASONING:
            index, delta = self._delta(chunk)
            part = _typed(getattr(chunk, _REASONING[kind], None), int, _REASONING[kind],
                          chunk) or 0
            self._events += 1
            parts = self._reasoning.setdefault(index, {})
            out: list[Delta] = []
            if part not in parts and any(parts.values()) and delta:
                out.append(ThinkingDelta(REASONING_SEPARATOR))
            parts.setdefault(part, []).append(delta)
            if delta:
                out.append(ThinkingDelta(delta))
            return out
        if kind in ("response.output_item.added", "response.output_item.done"):
            index, item = self._item(chunk)
            self._events += 1
            if kind == "response.output_item.added":
                self._added[index] = item
                return []
            self._items[index] = item
            if item["type"] != "function_call":
                return []
            return [ToolCallReady(call) for m in from_openai_responses([item])
                    for call in m.tool_calls or ()]
        if kind in _ENDS:
            self._final = self._response(chunk)
            self._events += 1
            self.done = True
            return []
        if kind == "error":
            raise self._failure(_typed(getattr(chunk, "code", None), str, "code", chunk),
                                _typed(getattr(chunk, "message", None), str, "message",
                                       chunk))
        if kind == "response.failed":
            error = self._response(chunk).get("error")
            error = error if isinstance(error, dict) else {}
            raise self._failure(error.get("code"), error.get("message"))
        if kind in ("response.created", "response.in_progress", "response.queued"):
            model = self._response(chunk).get("model")
            if isinstance(model, str) and model:
                self._model = model
        self._events += 1  # argument deltas, parts added and done: the items carry them
        return []

    @staticmethod
    def _delta(chunk: Any) -> tuple[int, str]:
        """The output index and the text of a delta event, checked."""
        index = _typed(chunk.output_index, int, "output_index", chunk)
        delta = _typed(chunk.delta, str, "delta", chunk)
        if index is None:
            raise UnreadableEvent("a delta without an `output_index`", chunk)
        return index, delta or ""

    @staticmethod
    def _response(chunk: Any) -> Json:
        response = _object(getattr(chunk, "response", None), "response", chunk)
        data = response.to_dict(mode="json", warnings=False) if response is not None else None
        if not isinstance(data, dict):
            raise UnreadableEvent(f"`{chunk.type}` has no `response` object", chunk)
        return data

    @staticmethod
    def _item(chunk: Any) -> tuple[int, Json]:
        """The output index and the item of an item event, checked."""
        index = _typed(chunk.output_index, int, "output_index", chunk)
        item = _object(chunk.item, "item", chunk)
        data = item.to_dict(mode="json", warnings=False) if item is not None else None
        if index is None or not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise UnreadableEvent("an item event without an `output_index` and an `item` "
                                  "with a `type`", chunk)
        return index, data

    def _failure(self, code: Any, message: Any) -> ModelError:
        """The error an ``error`` event or a failed response stands for."""
        code = str(code or "")
        status = _STATUS.get(code, 400 if code.startswith("invalid") else 500)
        detail = f"{message or 'the response failed'}" + (f" ({code})" if code else "")
        return status_error(self._provider, status, detail)

    def _output(self, *, partial: bool) -> list[Json]:
        """The output items: those that are done, and (``partial``) the text and reasoning
        of the ones still arriving; a function call still arriving is left out."""
        out: list[Json] = []
        for index in sorted({*self._items, *self._text, *self._reasoning}):
            if index in self._items:
                out.append(self._items[index])
            elif not partial:
                continue
            elif index in self._text:
                out.append({**self._announced_id(index), "type": "message",
                            "role": "assistant", "content": [
                                {"type": "output_text", "text": "".join(self._text[index])}]})
            else:
                parts = self._reasoning[index]
                out.append({**self._announced_id(index), "type": "reasoning", "summary": [
                    {"type": "summary_text", "text": "".join(parts[p])} for p in sorted(parts)]})
        return out

    def _announced_id(self, index: int) -> Json:
        """``{"id": ...}`` of the item at ``index`` as it was announced (the API needs a
        reasoning item's id when it is sent back), or nothing."""
        item_id = self._added.get(index, {}).get("id")
        return {"id": item_id} if isinstance(item_id, str) and item_id else {}

    def body(self, *, partial: bool = False) -> Json:
        if not partial and self._final is not None:
            body = dict(self._final)
            if not body.get("output"):  # a server that sends the items only as events
                body["output"] = self._output(partial=False)
            return body
        body = {"output": self._output(partial=True), "status": None}
        if self._model:
            body["model"] = self._model
        return body


# The status an error code in the stream stands for (the HTTP status was 200).
_STATUS = {
    "rate_limit_exceeded": 429, "insufficient_quota": 429, "server_error": 500,
    "context_length_exceeded": 400, "invalid_prompt": 400, "invalid_request_error": 400,
    "vector_store_timeout": 500,
}
