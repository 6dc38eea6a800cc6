"""Pure conversions between ``Message`` lists and OpenAI's wire formats.

Two formats: Chat Completions ``messages`` (``to_openai_chat`` / ``from_openai_chat``) and
Responses API input items (``to_openai_responses`` / ``from_openai_responses``). No SDK is
needed; adapters and import/export both use these.

What the wire cannot carry, and so comes back normalized after a round trip:

* ``meta``, ``usage``, ``model``, ``provider``, ``stop_reason`` and unknown message fields are
  contextree's own and are never sent.
* ``is_error`` on tool results is not part of either format and reads back as ``False``.
* A tool result's ``name`` is not sent; it is restored from the assistant tool call with the
  same id when there is one.
* Tool call arguments travel as a JSON string. A string that is not a JSON object (a model's
  malformed output) is kept as ``{RAW_ARGUMENTS_KEY: "<the string>"}`` (``wire_common``) and sent back verbatim;
  an empty string reads as ``{}``.
* ``developer`` messages read as ``system`` messages.
* Image ``detail`` is dropped; images read back as base64 ``data`` + ``mime_type`` when they
  travelled as a base64 data URL, else as ``url``. Inline data without a ``mime_type`` is sent
  as ``image/png``. An ``ImagePart`` with neither data nor url is dropped.
* Parts of types contextree does not know (``UnknownPart``) are sent verbatim, as they are
  assumed to be native to the format they were read from.

Chat Completions specifics:

* Thinking travels in an assistant ``reasoning_content`` field (the name vLLM, DeepSeek and
  llama.cpp use; ``reasoning``, as OpenRouter and Ollama send it, is read too). All thinking
  parts of a message merge into one ``ThinkingPart`` placed first; signatures and redacted
  thinking are dropped. Pass ``reasoning_field=None`` to leave thinking out entirely.
* Tool messages take text only: images in a tool result move to a user message sent right
  after the run of tool messages (text ``(see attached image)`` stands in when the result had
  no text). This is lossy by design, so providers see the image at all.
* ``extra_content`` on a tool call (Gemini's thought signatures) is kept in ``ToolCall.extra``
  and sent back.

Responses specifics:

* Each ``ThinkingPart`` is a ``reasoning`` item: text in ``summary``, ``signature`` in
  ``encrypted_content``, item id in ``ThinkingPart.extra["id"]``. ``redacted`` is not kept.
* ``function_call`` item ids are kept in ``ToolCall.extra["item_id"]``.
* A compaction summary whose marker carries the output of ``/responses/compact``
  (``ProviderCompaction``) is sent as those items (the user messages and the encrypted
  ``compaction`` item) in its place; any other summary is a system message.
* Consecutive assistant items (reasoning, message, function_call, and unknown item types as
  ``UnknownPart``) form one assistant message, so consecutive assistant messages merge; its content is the single message item's content
  as sent (string or parts) when that is all there is, else the parts in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from contextree._messages import (
    AnyPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
)
from contextree._text import shorten
from contextree.markers import CompactionSummaryMarker
from contextree.models._base import ToolSpec
from contextree.models._native import RESPONSES_API, native_items
from contextree.models._wire_common import (
    Json,
    ToolNames,
    arguments_from_json,
    arguments_to_json,
    make_message,
    opt_str,
    parse_data_url,
    parts_of,
    role_of,
    tool_definition,
    unknown_part,
)
from contextree.models._wire_ids import unique_call_ids

__all__ = [
    "assistant_from_openai_chat",
    "from_openai_chat",
    "from_openai_responses",
    "image_from_url",
    "image_url",
    "to_openai_chat",
    "to_openai_responses",
    "tools_to_openai_chat",
    "tools_to_openai_responses",
    "usage_from_openai_chat",
]

_CHAT_TOOL_CALL_EXTRAS = ("extra_content",)
_IMAGE_PLACEHOLDER = "(see attached image)"
_IMAGES_FROM_TOOLS = "Attached image(s) from tool result:"


# -- images --------------------------------------------------------------------------------


def image_url(part: ImagePart) -> str | None:
    """The URL to send for an image: a base64 data URL for inline data, else its ``url``."""
    if part.data is not None:
        return f"data:{part.mime_type or 'image/png'};base64,{part.data}"
    return part.url


def image_from_url(url: str) -> ImagePart:
    """An ``ImagePart`` from a URL, unpacking base64 data URLs into ``data`` + ``mime_type``."""
    parsed = parse_data_url(url)
    if parsed is None:
        return ImagePart(url=url)
    return ImagePart(data=parsed[1], mime_type=parsed[0])


def _text_of(content: Any) -> str:
    """Plain text of wire content: a string, or the ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


# -- tools and usage -----------------------------------------------------------------------


def tools_to_openai_chat(tools: Iterable[ToolSpec]) -> list[Json]:
    """Tools as Chat Completions ``function`` tools."""
    return [{"type": "function", "function": tool_definition(t)} for t in tools]


def tools_to_openai_responses(tools: Iterable[ToolSpec]) -> list[Json]:
    """Tools as Responses API ``function`` tools (flat, not nested under ``function``)."""
    return [{"type": "function", **tool_definition(t)} for t in tools]


def usage_from_openai_chat(usage: Mapping[str, Any] | None) -> Usage:
    """Chat Completions usage; ``input`` excludes cached reads and cache writes."""
    if not usage:
        return Usage()
    details = usage.get("prompt_tokens_details") or {}
    cache_read = int(details.get("cached_tokens") or 0)
    cache_write = int(details.get("cache_write_tokens") or 0)
    prompt = int(usage.get("prompt_tokens") or 0)
    output = int(usage.get("completion_tokens") or 0)
    return Usage(
        input=max(prompt - cache_read - cache_write, 0),
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total=int(usage.get("total_tokens") or prompt + output),
    )


# -- Chat Completions: Message -> wire -----------------------------------------------------


def to_openai_chat(
    messages: Iterable[Message], *, reasoning_field: str | None = "reasoning_content"
) -> list[Json]:
    """Messages as Chat Completions ``messages``; system messages stay where they are.
    Tool-call ids a provider reused are made unique in the request."""
    out: list[Json] = []
    pending_images: list[Json] = []
    for msg in unique_call_ids(messages):
        if msg.role != "tool" and pending_images:
            out.append(_images_message(pending_images))
            pending_images = []
        if msg.role == "tool":
            tool_msg, images = _tool_to_chat(msg)
            out.append(tool_msg)
            pending_images.extend(images)
        elif msg.role == "assistant":
            out.append(_assistant_to_chat(msg, reasoning_field))
        else:
            out.append(_plain_to_chat(msg))
    if pending_images:
        out.append(_images_message(pending_images))
    return out


def _part_to_chat(part: AnyPart) -> Json | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = image_url(part)
        return {"type": "image_url", "image_url": {"url": url}} if url else None
    if isinstance(part, UnknownPart):
        return dict(part.data)
    return None  # thinking travels separately


def _content_to_chat(content: str | Sequence[AnyPart] | None) -> str | list[Json] | None:
    if content is None or isinstance(content, str):
        return content
    return [d for d in map(_part_to_chat, content) if d is not None]


def _plain_to_chat(msg: Message) -> Json:
    out: Json = {"role": msg.role, "content": _content_to_chat(msg.content)}
    if msg.name is not None:
        out["name"] = msg.name
    return out


def _assistant_to_chat(msg: Message, reasoning_field: str | None) -> Json:
    content = _content_to_chat(msg.content)
    if isinstance(content, list) and not content and msg.content:
        content = None if msg.tool_calls else ""  # only thinking was there
    out: Json = {"role": "assistant", "content": content}
    if msg.name is not None:
        out["name"] = msg.name
    thinking = "".join(p.thinking for p in msg.thinking if not p.redacted)
    if reasoning_field and thinking:
        out[reasoning_field] = thinking
    if msg.tool_calls:
        out["tool_calls"] = [_tool_call_to_chat(c) for c in msg.tool_calls]
    return out


def _tool_call_to_chat(call: ToolCall) -> Json:
    out: Json = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_to_json(call.arguments)},
    }
    for key in _CHAT_TOOL_CALL_EXTRAS:
        if key in call.extra:
            out[key] = call.extra[key]
    return out


def _tool_to_chat(msg: Message) -> tuple[Json, list[Json]]:
    """A tool message, and the image parts it cannot carry."""
    content: str | list[Json] | None
    images: list[Json] = []
    if isinstance(msg.content, list):
        parts = [_part_to_chat(p) for p in msg.content if not isinstance(p, ThinkingPart)]
        images = [p for p in parts if p is not None and p.get("type") == "image_url"]
        content = [p for p in parts if p is not None and p.get("type") != "image_url"]
        if images and not content:
            content = _IMAGE_PLACEHOLDER
    else:
        content = msg.content if msg.content is not None else ""
    return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": content}, images


def _images_message(images: list[Json]) -> Json:
    return {"role": "user", "content": [{"type": "text", "text": _IMAGES_FROM_TOOLS}, *images]}


# -- Chat Completions: wire -> Message -----------------------------------------------------


def from_openai_chat(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Chat Completions ``messages`` as ``Message`` objects (see the module notes)."""
    names = ToolNames()
    out: list[Message] = []
    for d in messages:
        role = role_of(d)
        if role == "assistant":
            msg = assistant_from_openai_chat(d)
            names.add(msg.tool_calls or ())
        elif role in ("tool", "function"):
            call_id = opt_str(d.get("tool_call_id"))
            content = _content_from_chat(d.get("content"))
            msg = make_message(
                "tool",
                content if content is not None else "",
                tool_call_id=call_id or "",
                name=opt_str(d.get("name")) or names.get(call_id),
            )
        else:
            msg = make_message(
                "system" if role == "developer" else role,
                _content_from_chat(d.get("content")),
                name=opt_str(d.get("name")),
            )
        out.append(msg)
    return out


def assistant_from_openai_chat(d: Mapping[str, Any]) -> Message:
    """An assistant message (a request's history entry or a response's ``message``)."""
    content = _content_from_chat(d.get("content"))
    refusal = d.get("refusal")
    if not content and isinstance(refusal, str) and refusal:
        content = refusal
    reasoning = d.get("reasoning_content") or d.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        content = [ThinkingPart(thinking=reasoning), *parts_of(content)]
    calls = [_tool_call_from_chat(c) for c in d.get("tool_calls") or ()]
    legacy = d.get("function_call")
    if isinstance(legacy, Mapping):
        calls.append(_tool_call_from_chat({"id": "", "function": legacy}))
    return make_message("assistant", content, tool_calls=calls or None, name=opt_str(d.get("name")))


def _tool_call_from_chat(d: Mapping[str, Any]) -> ToolCall:
    fn = d.get("function") or {}
    call = ToolCall(
        id=str(d.get("id") or ""),
        name=str(fn.get("name") or ""),
        arguments=arguments_from_json(fn.get("arguments")),
    )
    return call.set_extra({k: d[k] for k in _CHAT_TOOL_CALL_EXTRAS if k in d})


def _content_from_chat(content: Any) -> str | list[AnyPart] | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part_from_chat(p) for p in content]
    raise ValueError(f"`content` must be a string, a list or null, got {shorten(repr(content), 80)}")


def _part_from_chat(p: Any) -> AnyPart:
    if isinstance(p, str):
        return TextPart(text=p)
    kind = p.get("type")
    if kind == "text" and isinstance(p.get("text"), str):
        return TextPart(text=p["text"])
    if kind == "image_url":
        spec = p.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if isinstance(url, str):
            return image_from_url(url)
    return unknown_part(p)


# -- Responses: Message -> input items -----------------------------------------------------


def to_openai_responses(messages: Iterable[Message]) -> list[Json]:
    """Messages as Responses API input items (see the module notes); tool-call ids a
    provider reused are made unique in the request."""
    out: list[Json] = []
    for msg in unique_call_ids(messages):
        mark = msg.marker
        native = (native_items(mark.native, RESPONSES_API)
                  if isinstance(mark, CompactionSummaryMarker) else None)
        if native is not None:
            out.extend(native)  # what /responses/compact returned, sent back as it came
        elif msg.role == "assistant":
            out.extend(_assistant_to_items(msg))
        elif msg.role == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": msg.tool_call_id or "",
                    "output": _content_to_responses(msg.content, "input_text"),
                }
            )
        else:
            out.append(
                {
                    "type": "message",
                    "role": msg.role,
                    "content": _content_to_responses(msg.content, "input_text"),
                }
            )
    return out


def _part_to_responses(part: AnyPart, text_type: str) -> Json | None:
    if isinstance(part, TextPart):
        out: Json = {"type": text_type, "text": part.text}
        if text_type == "output_text":
            out["annotations"] = []
        return out
    if isinstance(part, ImagePart):
        url = image_url(part)
        return {"type": "input_image", "image_url": url, "detail": "auto"} if url else None
    if isinstance(part, UnknownPart):
        return dict(part.data)
    return None


def _content_to_responses(
    content: str | Sequence[AnyPart] | None, text_type: str
) -> str | list[Json]:
    if content is None or isinstance(content, str):
        return content or ""
    parts = (_part_to_responses(p, text_type) for p in content)
    return [p for p in parts if p is not None]


def _assistant_to_items(msg: Message) -> list[Json]:
    items: list[Json] = []
    if isinstance(msg.content, list):
        items.extend(_assistant_parts_to_items(msg.content))
    elif msg.content:
        items.append({"type": "message", "role": "assistant", "content": msg.content})
    for call in msg.tool_calls or ():
        item: Json = {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": arguments_to_json(call.arguments),
        }
        if "item_id" in call.extra:
            item["id"] = call.extra["item_id"]
        items.append(item)
    if not items:
        items.append({"type": "message", "role": "assistant", "content": ""})
    return items


def _assistant_parts_to_items(parts: Sequence[AnyPart]) -> Iterator[Json]:
    """Thinking -> reasoning items, runs of text/images -> message items, unknown -> items."""
    run: list[Json] = []
    for part in parts:
        if isinstance(part, (TextPart, ImagePart)):
            d = _part_to_responses(part, "output_text")
            if d is not None:
                run.append(d)
            continue
        if run:
            yield {"type": "message", "role": "assistant", "content": run}
            run = []
        if isinstance(part, ThinkingPart):
            yield _reasoning_item(part)
        elif isinstance(part, UnknownPart):
            yield dict(part.data)
    if run:
        yield {"type": "message", "role": "assistant", "content": run}


def _reasoning_item(part: ThinkingPart) -> Json:
    item: Json = {"type": "reasoning"}
    if "id" in part.extra:
        item["id"] = part.extra["id"]
    item["summary"] = [{"type": "summary_text", "text": part.thinking}] if part.thinking else []
    if part.signature is not None:
        item["encrypted_content"] = part.signature
    return item


# -- Responses: input items -> Message -----------------------------------------------------


class _AssistantGroup:
    """Consecutive assistant items being gathered into one assistant message."""

    def __init__(self) -> None:
        self.contents: list[str | list[AnyPart]] = []  # per item, as it was sent
        self.calls: list[ToolCall] = []

    def add_content(self, content: str | list[AnyPart]) -> None:
        self.contents.append(content)

    def message(self) -> Message:
        if len(self.contents) == 1:
            content: str | list[AnyPart] = self.contents[0]
        else:
            content = [p for c in self.contents for p in parts_of(c)]
            if not content:
                content = ""
        return make_message("assistant", content, tool_calls=self.calls or None)


def from_openai_responses(items: str | Iterable[Mapping[str, Any]]) -> list[Message]:
    """Responses API input items as ``Message`` objects (see the module notes)."""
    if isinstance(items, str):
        return [Message.user(items)]
    out: list[Message] = []
    names = ToolNames()
    group: _AssistantGroup | None = None
    for item in items:
        kind = item.get("type") or ("message" if "role" in item else "")
        role = item.get("role")
        if (kind == "message" and role != "assistant") or kind == "function_call_output":
            if group is not None:
                out.append(group.message())
                group = None
            out.append(_non_assistant_item(item, names))
            continue
        group = group or _AssistantGroup()
        _add_assistant_item(group, item, kind, names)
    if group is not None:
        out.append(group.message())
    return out


def _non_assistant_item(item: Mapping[str, Any], names: ToolNames) -> Message:
    if item.get("type") == "function_call_output":
        call_id = str(item.get("call_id") or "")
        content = _content_from_responses(item.get("output"))
        return make_message("tool", content, tool_call_id=call_id, name=names.get(call_id))
    role = role_of(item)
    return make_message(
        "system" if role == "developer" else role, _content_from_responses(item.get("content"))
    )


def _add_assistant_item(
    group: _AssistantGroup, item: Mapping[str, Any], kind: str, names: ToolNames
) -> None:
    if kind == "message":
        group.add_content(_content_from_responses(item.get("content")))
    elif kind == "reasoning":
        group.add_content([_thinking_from_reasoning(item)])
    elif kind == "function_call":
        call = ToolCall(
            id=str(item.get("call_id") or ""),
            name=str(item.get("name") or ""),
            arguments=arguments_from_json(item.get("arguments")),
        )
        if item.get("id") is not None:
            call.set_extra({"item_id": item["id"]})
        group.calls.append(call)
        names.add([call])
    else:
        group.add_content([unknown_part(item)])


def _thinking_from_reasoning(item: Mapping[str, Any]) -> ThinkingPart:
    texts = [_text_of([s]) for s in item.get("summary") or ()]
    if not texts:
        texts = [_text_of([c]) for c in item.get("content") or ()]
    part = ThinkingPart(
        thinking="\n\n".join(texts), signature=opt_str(item.get("encrypted_content"))
    )
    if item.get("id") is not None:
        part.set_extra({"id": item["id"]})
    return part


def _content_from_responses(content: Any) -> str | list[AnyPart]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part_from_responses(p) for p in content]
    raise ValueError(f"`content` must be a string, a list or null, got {shorten(repr(content), 80)}")


def _part_from_responses(p: Mapping[str, Any]) -> AnyPart:
    kind = p.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(p.get("text"), str):
        return TextPart(text=p["text"])
    if kind == "input_image" and isinstance(p.get("image_url"), str):
        return image_from_url(p["image_url"])
    return unknown_part(p)
