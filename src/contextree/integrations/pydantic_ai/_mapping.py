"""pydantic-ai messages as contextree entries, and back.

Each pydantic-ai message is stored as a short chain of contextree ``message`` entries (a
*group*): one per part that contextree has a shape for (a tool result, a user or system
prompt), or one assistant message for a response, so that contextree's context building and
compaction see ordinary messages with correctly paired tool calls. The last entry of a group
has the pydantic-ai entry id as its own id and carries the message's JSON text exactly as
``ModelMessagesTypeAdapter`` writes it (``Message.extra["pydantic_ai"]["json"]``), which is
what is read back: response state, tool-return outcomes, binary content, metadata and every
field pydantic-ai adds later survive unchanged. The other entries of a group are
``<id>~<n>`` and name the group they belong to.

A lone surrogate (a file name ``os.listdir`` could not decode, half of a cut emoji), which no
UTF-8 file can hold, is stored as U+FFFD wherever it is: a message that holds one is stored,
and loads back, with each replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pydantic_core
from pydantic_ai import messages as pm

from ..._messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
    _replace_surrogates,
    storable,
)
from ..._session import Session
from ...entries import AnyEntry, MessageEntry, now

KEY = "pydantic_ai"
"""The key of ``Message.extra`` that holds the pydantic-ai side of a stored message."""

ADAPTER = pm.ModelMessagesTypeAdapter


def dump(messages: Sequence[pm.ModelMessage]) -> list[str]:
    """Each message as ``ModelMessagesTypeAdapter`` writes it in a JSON list (a lone
    surrogate, which JSON in UTF-8 cannot hold, written as U+FFFD)."""
    out = []
    for m in messages:
        try:
            out.append(ADAPTER.dump_json([m])[1:-1].decode())
        except pydantic_core.PydanticSerializationError:
            out.append(_valid_json(m))
    return out


def _valid_json(message: pm.ModelMessage) -> str:
    """``dump``'s text for a message that holds a lone surrogate: each replaced by U+FFFD."""
    data = _replace_surrogates(ADAPTER.dump_python([message], mode="json"))
    return pydantic_core.to_json(data)[1:-1].decode()


def valid_message(message: pm.ModelMessage) -> pm.ModelMessage:
    """``message`` as the store loads it back: itself, or when it holds a lone surrogate, a
    copy with each replaced by U+FFFD."""
    try:
        ADAPTER.dump_json([message])
    except pydantic_core.PydanticSerializationError:
        return load([_valid_json(message)])[0]
    return message


def load(data: Sequence[str]) -> list[pm.ModelMessage]:
    """Messages back from ``dump``'s text, in one validation of the JSON list."""
    return ADAPTER.validate_json("[" + ",".join(data) + "]")


def info(entry: AnyEntry | None) -> dict[str, Any] | None:
    """The pydantic-ai data of a message entry that belongs to a group, else ``None``."""
    if not isinstance(entry, MessageEntry):
        return None
    value = entry.message.extra.get(KEY)
    return value if isinstance(value, dict) else None


def is_final(entry: AnyEntry | None) -> bool:
    """Whether ``entry`` is the last entry of a group: it holds a whole pydantic-ai message."""
    data = info(entry)
    return data is not None and "json" in data


def nearest_final(session: Session, entry_id: str | None) -> str | None:
    """The pydantic-ai entry at or above ``entry_id``: the message it continues."""
    while entry_id is not None:
        entry = session.get_entry(entry_id)
        if entry is None:
            return None
        if is_final(entry):
            return entry_id
        entry_id = entry.parent_id
    return None


def group_of(entry_id: str, data: dict[str, Any]) -> str:
    """The pydantic-ai entry id of the group an entry belongs to."""
    of = data.get("of")
    return of if isinstance(of, str) else entry_id


def group_entries(
    items: Iterable[tuple[str, pm.ModelMessage, str | None]], parent: str | None
) -> list[MessageEntry]:
    """The entries that store ``(entry id, message, dumped message)`` items, chained from
    ``parent``; the last entry of each group has the item's id (and the dumped message,
    ``None`` for a working copy that keeps the message object elsewhere)."""
    out: list[MessageEntry] = []
    stamp = now()
    for pid, message, data in items:
        shapes = to_messages(message)
        last = len(shapes) - 1
        for n, (parts, m) in enumerate(shapes):
            if n == last:
                m.set_extra({KEY: {"parts": parts, "json": data}})
                eid = pid
            else:
                m.set_extra({KEY: {"parts": parts, "of": pid}})
                eid = f"{pid}~{n}"
            out.append(MessageEntry(eid, parent, stamp, message=m))
            parent = eid
    return out


# -- pydantic-ai -> contextree shapes ---------------------------------------------------------

def to_messages(message: pm.ModelMessage) -> list[tuple[list[int], Message]]:
    """contextree messages for one pydantic-ai message, each with the indices of the parts it
    shows; tool results come first, as providers require after a tool call. Each is
    storable: a lone surrogate in any text becomes U+FFFD."""
    if isinstance(message, pm.ModelResponse):
        return [(list(range(len(message.parts))), storable(_response(message)))]
    tools: list[tuple[list[int], Message]] = []
    others: list[tuple[list[int], Message]] = []
    for i, part in enumerate(message.parts):
        if isinstance(part, pm.BaseToolReturnPart) and not isinstance(part, pm.NativeToolReturnPart):
            tools.append(([i], Message.tool(
                _tool_text(part), tool_call_id=part.tool_call_id, name=part.tool_name,
                is_error=part.outcome in pm.ERROR_OUTCOMES)))
        elif isinstance(part, pm.SystemPromptPart):
            others.append(([i], Message.system(part.content)))
        elif isinstance(part, pm.UserPromptPart):
            others.append(([i], Message.user(_user_content(part.content))))  # type: ignore[arg-type]
        elif isinstance(part, pm.RetryFeedbackPart):
            others.append(([i], Message.user(part.model_response())))
        elif isinstance(part, pm.RetryPromptPart):  # legacy, only in hand-built messages
            if part.tool_name is not None:
                tools.append(([i], Message.tool(part.model_response(), tool_call_id=part.tool_call_id,
                                                name=part.tool_name, is_error=True)))
            else:
                others.append(([i], Message.user(part.model_response())))
        # Bookkeeping parts (instruction and tool-set deltas, provider compactions) have no
        # contextree shape: they travel in the stored JSON and come back with their message.
    out = tools + others
    return [(parts, storable(m)) for parts, m in out] or [([], Message.user(""))]


def _tool_text(part: pm.BaseToolReturnPart[Any]) -> str:
    try:
        return part.model_response_str()
    except Exception:  # a content that does not render: its repr still tells the model something
        return repr(part.content)


def result_text(part: pm.ModelRequestPart) -> str:
    """The text of a tool result the model is shown, before pydantic-ai wraps an error in
    ``{"error": ...}``: a non-str content as pydantic-ai serializes it."""
    if isinstance(part, pm.RetryPromptPart):
        return part.content if isinstance(part.content, str) else part.model_response()
    assert isinstance(part, pm.BaseToolReturnPart)
    try:
        return part.model_response_str(wrap_if_error=False)
    except Exception:
        return repr(part.content)


def _user_content(content: str | Sequence[pm.UserContent]) -> str | list[Part]:
    if isinstance(content, str):
        return content
    parts: list[Part] = []
    for item in content:
        if isinstance(item, str):
            parts.append(TextPart(text=item))
        elif isinstance(item, pm.TextContent):
            parts.append(TextPart(text=item.content))
        elif isinstance(item, pm.BinaryContent):
            if item.is_image:
                parts.append(ImagePart(data=item.base64, mime_type=item.media_type))
            else:
                parts.append(TextPart(text=f"[{item.media_type} file, {len(item.data)} bytes]"))
        elif isinstance(item, pm.ImageUrl):
            parts.append(ImagePart(url=item.url))
        elif isinstance(item, pm.FileUrl):
            parts.append(TextPart(text=f"[{item.kind}: {item.url}]"))
        elif isinstance(item, pm.CachePoint):
            continue
        else:
            parts.append(TextPart(text=f"[{type(item).__name__}]"))
    return parts


def _arguments(part: pm.BaseToolCallPart[Any]) -> dict[str, Any]:
    args = part.args
    if isinstance(args, dict):
        return {str(k): v for k, v in args.items()}
    if not args:
        return {}
    try:
        value = pydantic_core.from_json(args)
    except ValueError:
        return {"_raw": args}
    return value if isinstance(value, dict) else {"_value": value}


def _response(message: pm.ModelResponse) -> Message:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for part in message.parts:
        if isinstance(part, pm.TextPart):
            parts.append(TextPart(text=part.content))
        elif isinstance(part, pm.ThinkingPart):
            parts.append(ThinkingPart(thinking=part.content, signature=part.signature))
        elif isinstance(part, pm.BaseToolCallPart) and not isinstance(part, pm.NativeToolCallPart):
            calls.append(ToolCall(id=part.tool_call_id, name=part.tool_name,
                                  arguments=_arguments(part)))
        elif isinstance(part, pm.FilePart) and part.content.is_image:
            parts.append(ImagePart(data=part.content.base64, mime_type=part.content.media_type))
        # Native (provider-side) tool calls and returns, speech and provider compactions
        # are kept in the stored JSON only.
    content: str | list[Part]
    if all(isinstance(p, TextPart) for p in parts):
        content = "".join(p.text for p in parts if isinstance(p, TextPart))
    else:
        content = parts
    u = message.usage
    usage = None
    if u.input_tokens or u.output_tokens or u.cache_read_tokens or u.cache_write_tokens:
        fresh = max(u.input_tokens - u.cache_read_tokens - u.cache_write_tokens, 0)
        usage = Usage(input=fresh, output=u.output_tokens, cache_read=u.cache_read_tokens,
                      cache_write=u.cache_write_tokens, total=u.input_tokens + u.output_tokens)
    return Message.assistant(content, tool_calls=calls or None, usage=usage,  # type: ignore[arg-type]
                             model=message.model_name, provider=message.provider_name,
                             stop_reason=message.finish_reason)
