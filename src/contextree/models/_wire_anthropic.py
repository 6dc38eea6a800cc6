"""Pure conversions between ``Message`` lists and the Anthropic Messages API format.

``to_anthropic(messages)`` gives ``(system, messages)`` for ``messages.create``;
``from_anthropic(system, messages)`` reads them back. No SDK is needed.

The mapping:

* System messages, wherever they are, are joined in order (blank line between; empty ones
  skipped) into the ``system`` parameter; they read back as one system message per system text block, first.
* ``TextPart`` <-> ``text`` block (empty text is not sent: the API rejects it);
  ``ImagePart`` <-> ``image`` block with a ``base64`` source (``url`` source for a plain URL).
* ``ThinkingPart(thinking, signature)`` <-> ``thinking`` block, signature sent back verbatim.
  ``ThinkingPart(redacted=True, signature=data)`` <-> ``redacted_thinking`` block whose opaque
  ``data`` is kept in ``signature`` (``thinking`` is empty). Thinking without a signature
  (from another provider, or written by hand) is not sent: the API would reject it.
* Assistant ``tool_calls`` -> ``tool_use`` blocks after the message's other content.
* Tool messages -> ``tool_result`` blocks (``is_error`` carried); consecutive tool messages
  merge into ONE user message, as the API requires all results of a turn together.
* A compaction summary whose marker carries the Messages API's own ``compaction`` block
  (``ProviderCompaction``) is sent as that block, first in the conversation (in the first
  assistant message), not as system text; any other summary is system text.
* ``UnknownPart`` is sent verbatim (assumed to be an Anthropic block: server tool use, search
  results, documents...); unknown blocks read back as ``UnknownPart``.

Normalizations after a round trip: ``meta``, ``usage``, ``model``, ``provider``,
``stop_reason``, ``name`` and unknown message fields are not sent; a tool result's ``name`` is
restored from the matching ``tool_use``; images inside assistant messages and empty assistant
messages (which the API rejects) are dropped; an assistant message whose content besides
``tool_use`` is a single text block (or nothing) reads back with string content (``""``).
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
    Usage,
)
from contextree._text import shorten
from contextree.markers import CompactionSummaryMarker
from contextree.models._base import ToolSpec
from contextree.models._native import ANTHROPIC_COMPACT_BETA, MESSAGES_API, native_items
from contextree.models._wire_common import (
    Json,
    ToolNames,
    bounded_arguments,
    make_message,
    opt_str,
    parse_data_url,
    role_of,
    tool_definition,
    unknown_part,
)
from contextree.models._wire_ids import unique_call_ids

__all__ = [
    "SYSTEM_SEPARATOR",
    "assistant_from_anthropic",
    "compaction_beta",
    "from_anthropic",
    "to_anthropic",
    "tools_to_anthropic",
    "usage_from_anthropic",
]

SYSTEM_SEPARATOR = "\n\n"
"""Between the texts of system messages joined into the ``system`` parameter."""

# The user turn put first when a conversation starts with the assistant (Anthropic requires
# the first message to be a user one).
CONTINUING = "[continuing the conversation]"


# -- tools and usage -----------------------------------------------------------------------


def tools_to_anthropic(tools: Iterable[ToolSpec]) -> list[Json]:
    """Tools as Anthropic tool definitions (``input_schema``)."""
    return [tool_definition(t, "input_schema") for t in tools]


def usage_from_anthropic(usage: Mapping[str, Any] | None) -> Usage:
    """Anthropic usage: input excludes cache reads and writes, which are reported apart."""
    if not usage:
        return Usage()
    u = {
        k: int(usage.get(k) or 0)
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    }
    return Usage(
        input=u["input_tokens"],
        output=u["output_tokens"],
        cache_read=u["cache_read_input_tokens"],
        cache_write=u["cache_creation_input_tokens"],
        total=sum(u.values()),
    )


# -- Message -> wire -----------------------------------------------------------------------


def to_anthropic(messages: Iterable[Message]) -> tuple[str | None, list[Json]]:
    """``(system, messages)`` for the Messages API (see the module notes).

    The system prompts come first in ``system``, then the system messages contextree made
    (a compaction summary), so a compaction leaves the start of the request as it was (a
    prompt cache keeps holding it). Tool-call ids a provider reused are made unique in the
    request (Anthropic rejects duplicate ``tool_use`` ids), and a conversation that does not start with a user message
    (a branch with only a summary before the assistant's turn) gets a short one first.
    """
    system: list[str] = []
    made: list[str] = []  # system messages contextree made (a compaction summary): last
    out: list[Json] = []
    compacted: list[Json] = []  # the provider's own compaction block, sent first
    results: list[Json] | None = None  # tool_result blocks of the user turn being built
    for msg in unique_call_ids(messages):
        if msg.role == "system":
            mark = msg.marker
            blocks = (native_items(mark.native, MESSAGES_API)
                      if isinstance(mark, CompactionSummaryMarker) else None)
            if blocks is not None:
                compacted = blocks
            elif msg.text:
                (system if msg.kind is None else made).append(msg.text)
            continue
        if msg.role == "tool":
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(_tool_result_block(msg))
            continue
        results = None
        wire = _assistant_to_wire(msg) if msg.role == "assistant" else _user_to_wire(msg)
        if wire is not None:
            out.append(wire)
    if compacted:
        # The compaction block is the first block of the conversation; the API drops
        # nothing else (it summarizes only what came before it).
        if out and out[0]["role"] == "assistant":
            first = out[0]["content"]
            rest = ([{"type": "text", "text": first}] if isinstance(first, str) and first
                    else first if isinstance(first, list) else [])
            out[0] = {"role": "assistant", "content": [*compacted, *rest]}
        else:
            out.insert(0, {"role": "assistant", "content": compacted})
    elif out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": CONTINUING})
    system += made
    return (SYSTEM_SEPARATOR.join(system) if system else None), out


def compaction_beta(messages: Iterable[Message]) -> str | None:
    """The beta (``anthropic-beta`` value) the ``compaction`` block that ``to_anthropic``
    sends for ``messages`` needs, or ``None`` when it sends none: the one stored with the
    block (on-demand compaction's), else threshold compaction's, the only kind stored
    without one."""
    beta: str | None = None
    for msg in messages:
        mark = msg.marker if msg.role == "system" else None
        if isinstance(mark, CompactionSummaryMarker) and native_items(mark.native,
                                                                     MESSAGES_API):
            stored = mark.native.get("beta") if isinstance(mark.native, Mapping) else None
            beta = stored if isinstance(stored, str) and stored else ANTHROPIC_COMPACT_BETA
    return beta


CACHE_CONTROL: Json = {"type": "ephemeral"}
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})


def cache_breakpoints(request: Json) -> Json:
    """``request`` (the keyword arguments of ``messages.create``) with ``cache_control``
    breakpoints where a request extends the one before it: the last tool, the end of the
    system prompt, and the last block of the last message. Between compactions each request
    starts with the previous one's bytes, so the provider reads all of that from its cache
    and writes only what is new (a breakpoint a request does not reach costs nothing).
    Blocks that already carry a ``cache_control`` are left as they are."""
    out = dict(request)
    tools = out.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[-1], dict):
        out["tools"] = [*tools[:-1], {"cache_control": CACHE_CONTROL, **tools[-1]}]
    system = out.get("system")
    if isinstance(system, str) and system:
        out["system"] = [{"type": "text", "text": system, "cache_control": CACHE_CONTROL}]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):
        out["system"] = [*system[:-1], {"cache_control": CACHE_CONTROL, **system[-1]}]
    messages = out.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = dict(messages[-1])
        content = last.get("content")
        if isinstance(content, str) and content:
            content = [{"type": "text", "text": content}]
        if isinstance(content, list) and content and isinstance(content[-1], dict) \
                and content[-1].get("type") not in _UNCACHEABLE:
            last["content"] = [*content[:-1], {"cache_control": CACHE_CONTROL, **content[-1]}]
            out["messages"] = [*messages[:-1], last]
    return out


def _image_block(part: ImagePart) -> Json | None:
    if part.data is not None:
        source: Json = {
            "type": "base64",
            "media_type": part.mime_type or "image/png",
            "data": part.data,
        }
    elif part.url is not None:
        parsed = parse_data_url(part.url)
        source = (
            {"type": "url", "url": part.url}
            if parsed is None
            else {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
        )
    else:
        return None
    return {"type": "image", "source": source}


def _thinking_block(part: ThinkingPart) -> Json | None:
    if part.signature is None:
        return None
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.thinking, "signature": part.signature}


def _block(part: AnyPart, *, assistant: bool) -> Json | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImagePart):
        return None if assistant else _image_block(part)
    if isinstance(part, ThinkingPart):
        return _thinking_block(part) if assistant else None
    return dict(part.data)


def _blocks(parts: Sequence[AnyPart], *, assistant: bool) -> list[Json]:
    return [b for b in (_block(p, assistant=assistant) for p in parts) if b is not None]


def _user_to_wire(msg: Message) -> Json:
    content = msg.content
    if content is None or isinstance(content, str):
        return {"role": msg.role, "content": content or ""}
    return {"role": msg.role, "content": _blocks(content, assistant=False)}


def _assistant_to_wire(msg: Message) -> Json | None:
    content = msg.content
    uses = [_tool_use_block(c) for c in msg.tool_calls or ()]
    if isinstance(content, str) and content and not uses:
        return {"role": "assistant", "content": content}
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}] if content else []
    else:
        blocks = _blocks(content or [], assistant=True)
    blocks.extend(uses)
    return {"role": "assistant", "content": blocks} if blocks else None


def _tool_use_block(call: ToolCall) -> Json:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def _tool_result_block(msg: Message) -> Json:
    block: Json = {"type": "tool_result", "tool_use_id": msg.tool_call_id or ""}
    content = msg.content
    if isinstance(content, list):
        block["content"] = _blocks(content, assistant=False)
    elif content is not None:
        block["content"] = content
    if msg.is_error:
        block["is_error"] = True
    return block


# -- wire -> Message -----------------------------------------------------------------------


def from_anthropic(
    system: str | Iterable[Mapping[str, Any]] | None, messages: Iterable[Mapping[str, Any]]
) -> list[Message]:
    """The ``system`` parameter and ``messages`` as ``Message`` objects (see module notes)."""
    out = _system_messages(system)
    names = ToolNames()
    for d in messages:
        role = role_of(d)
        if role == "assistant":
            msg = assistant_from_anthropic(_as_blocks(d.get("content")))
            names.add(msg.tool_calls or ())
            out.append(msg)
        elif isinstance(d.get("content"), list):
            out.extend(_user_blocks_to_messages(role, d["content"], names))
        elif isinstance(d.get("content"), str):
            out.append(make_message(role, d["content"]))
        else:
            raise ValueError(f"`content` must be a string or a list, got {shorten(repr(d.get('content')), 80)}")
    return out


def _system_messages(system: str | Iterable[Mapping[str, Any]] | None) -> list[Message]:
    if not system:
        return []
    if isinstance(system, str):
        return [Message.system(system)]
    return [Message.system(str(b.get("text", ""))) for b in system if b.get("type") == "text"]


def _as_blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or ())


def assistant_from_anthropic(blocks: Iterable[Mapping[str, Any]]) -> Message:
    """An assistant message from content blocks (a history entry or a response's content)."""
    parts: list[AnyPart] = []
    calls: list[ToolCall] = []
    for b in blocks:
        if b.get("type") == "tool_use":
            calls.append(
                ToolCall(id=str(b.get("id")), name=str(b.get("name")), arguments=_input_of(b))
            )
        else:
            parts.append(_part_from_block(b))
    content: str | list[AnyPart] = parts
    if not parts:
        content = ""
    elif len(parts) == 1 and isinstance(parts[0], TextPart):
        content = parts[0].text
    return make_message("assistant", content, tool_calls=calls or None)


def _input_of(block: Mapping[str, Any]) -> dict[str, Any]:
    value = block.get("input")
    return bounded_arguments(value) if isinstance(value, Mapping) else {}


def _part_from_block(b: Mapping[str, Any]) -> AnyPart:
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        return TextPart(text=b["text"])
    if kind == "thinking":
        return ThinkingPart(
            thinking=str(b.get("thinking", "")), signature=opt_str(b.get("signature"))
        )
    if kind == "redacted_thinking":
        return ThinkingPart(thinking="", signature=opt_str(b.get("data")), redacted=True)
    if kind == "image":
        image = _image_from_source(b.get("source"))
        if image is not None:
            return image
    return unknown_part(b)


def _image_from_source(source: Any) -> ImagePart | None:
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        data, mime = opt_str(source.get("data")), opt_str(source.get("media_type"))
        return ImagePart(data=data, mime_type=mime)
    if source.get("type") == "url":
        return ImagePart(url=opt_str(source.get("url")))
    return None


def _user_blocks_to_messages(
    role: str, blocks: list[Mapping[str, Any]], names: ToolNames
) -> Iterator[Message]:
    """Split a user turn into tool messages (``tool_result``) and user messages (the rest)."""
    if not blocks:
        yield make_message(role, [])
    parts: list[AnyPart] = []
    for b in blocks:
        if b.get("type") != "tool_result":
            parts.append(_part_from_block(b))
            continue
        if parts:
            yield make_message(role, parts)
            parts = []
        yield _tool_message(b, names)
    if parts:
        yield make_message(role, parts)


def _tool_message(b: Mapping[str, Any], names: ToolNames) -> Message:
    raw = b.get("content")
    content: str | list[AnyPart] = (
        [_part_from_block(x) for x in raw] if isinstance(raw, list) else str(raw or "")
    )
    call_id = str(b.get("tool_use_id") or "")
    return make_message(
        "tool",
        content,
        tool_call_id=call_id,
        name=names.get(call_id),
        is_error=bool(b.get("is_error", False)),
    )
