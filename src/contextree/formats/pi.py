"""The pi coding agent's session files (``~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl``).

pi writes one JSON object per line: a header ``{"type": "session", "version": 3, "id",
"timestamp", "cwd", "parentSession"?}``, then entries with ``id``, ``parentId`` and
``timestamp`` and camelCase fields (``thinkingLevel``, ``modelId``, ``firstKeptEntryId``,
``tokensBefore``, ``fromId``, ``fromHook``, ``customType``, ``targetId``). These are the same
eleven-ish entry types contextree has, so branches, labels, compactions, branch summaries and
model and thinking changes carry over one to one.

Versions: v1 files have no ids (each entry follows the one before; a compaction names its first
kept entry by ``firstKeptEntryIndex``, an index into the file's lines); v2 adds ids; v3 renames
the ``hookMessage`` message role to ``custom``. Older files are migrated the way pi does it.

pi has no leaf entry: when it opens a file, the current leaf is the last entry. Export writes
the current leaf last (its later siblings, if any, before it) so pi resumes where contextree
was. What pi cannot represent:

* contextree's compaction extras (``tokens_after``, ``retained_tail``, ``cleared``,
  ``pinned``, ``usage``) are written under one ``"contextree"`` key that pi ignores and import
  reads back. pi itself therefore shows full tool results, does not pin entries, and keeps only
  entries from ``firstKeptEntryId``.
* System messages become ``custom`` messages of type ``contextree.system`` (pi keeps the system
  prompt outside the session); they read back as system messages.
* pi places tool calls among the text and thinking blocks; contextree keeps them apart, so an
  exported assistant message lists its tool calls after its other content.
* pi's ``bashExecution``, ``branchSummary`` and ``compactionSummary`` messages are imported as
  the user message pi would send for them, with the original kept (``piMessage``) for export.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..entries import (
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    now,
)
from ..messages import (
    AnyPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
)
from ..models.wire_openai import arguments_from_json
from .base import (
    Ids,
    Imported,
    Json,
    Progress,
    dump_lines,
    header,
    imported_metadata,
    input_error,
    iso_to_ms,
    read_json_lines,
    text_of_blocks,
)

PI_VERSION = 3
SYSTEM_TYPE = "contextree.system"
EXT = "contextree"  # the key under which contextree-only fields travel through pi files
PI_MESSAGE = "pi.message"  # custom type of entries holding a pi message no model sees

COMPACTION_PREFIX = ("The conversation history before this point was compacted into the "
                     "following summary:\n\n<summary>\n")
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = ("The following is a summary of a branch that this conversation came back "
                 "from:\n\n<summary>\n")
BRANCH_SUFFIX = "</summary>"

_STOP_REASONS = {"stop", "length", "toolUse", "error", "aborted"}
_STOP_MAP = {"tool_use": "toolUse", "tool_calls": "toolUse", "end_turn": "stop",
             "max_tokens": "length", "stop_sequence": "stop", "refusal": "stop"}
_API_BY_PROVIDER = {"anthropic": "anthropic-messages", "openai": "openai-responses",
                    "google": "google-generative-ai"}


# == import ================================================================================

def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read a pi session file (version 1 to 3)."""
    lines = list(read_json_lines(path, progress))
    if not lines:
        raise input_error(path, None, "the file is empty; it is not a pi session")
    first_line, head = lines[0]
    if not (isinstance(head, dict) and head.get("type") == "session"
            and isinstance(head.get("id"), str)):
        raise input_error(path, first_line, 'the first line is not a pi session header '
                          '({"type":"session","id":...}); is this a pi session file?')
    version = head.get("version", 1)
    if not isinstance(version, int) or version < 1:
        raise input_error(path, first_line, f"unknown pi session version {version!r}")
    body: list[tuple[int, Json]] = []
    for n, obj in lines[1:]:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise input_error(path, n, "expected a JSON object with a string `type`")
        if obj["type"] == "session":
            raise input_error(path, n, "a second session header in the middle of the file")
        body.append((n, obj))
    if version < 2:
        _migrate_v1(body)
    if version < 3:
        _migrate_v2(body)
    entries: list[AnyEntry] = []
    seen: set[str] = set()
    for n, obj in body:
        entry = _entry_from_pi(obj, path, n)
        if entry.id in seen:
            raise input_error(path, n, f"entry id {entry.id!r} is used twice")
        seen.add(entry.id)
        entries.append(entry)
    _orphans_to_roots(entries)
    meta = imported_metadata("pi", path, version=version)
    hdr = header(head["id"], _str(head.get("timestamp")), cwd=_str(head.get("cwd")),
                 metadata=meta, parent_session=_str(head.get("parentSession")))
    leaf = entries[-1].id if entries else None
    return Imported(hdr, entries, leaf)


def _migrate_v1(body: list[tuple[int, Json]]) -> None:
    """Give v1 entries ids, each the child of the one before (pi's own v1 -> v2 migration).

    A compaction's ``firstKeptEntryIndex`` counts the file's lines from the header (index 0).
    """
    ids = Ids()
    prev: str | None = None
    assigned: list[str] = []
    for _, obj in body:
        obj["id"] = ids.new()
        obj["parentId"] = prev
        prev = obj["id"]
        assigned.append(prev)
        index = obj.pop("firstKeptEntryIndex", None)
        if obj["type"] == "compaction" and isinstance(index, int) and 1 <= index <= len(body):
            obj["firstKeptEntryId"] = assigned[index - 1] if index - 1 < len(assigned) else None


def _migrate_v2(body: list[tuple[int, Json]]) -> None:
    """v2 -> v3: the ``hookMessage`` message role is now ``custom``."""
    for _, obj in body:
        message = obj.get("message")
        if obj["type"] == "message" and isinstance(message, dict) \
                and message.get("role") == "hookMessage":
            message["role"] = "custom"


def _orphans_to_roots(entries: list[AnyEntry]) -> None:
    """pi shows an entry whose parent is missing as a root; so does the import."""
    known = {e.id for e in entries}
    for e in entries:
        if e.parent_id is not None and (e.parent_id not in known or e.parent_id == e.id):
            e.parent_id = None
            if isinstance(e, UnknownEntry):
                e.data["parent_id"] = None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _entry_from_pi(obj: Json, path: Path, n: int) -> AnyEntry:
    d = dict(obj)
    kind = d.pop("type")
    eid = d.pop("id", None)
    parent = d.pop("parentId", None)
    if not isinstance(eid, str) or not eid:
        raise input_error(path, n, f"the {kind!r} entry has no string `id`")
    if parent is not None and not isinstance(parent, str):
        raise input_error(path, n, f"`parentId` must be a string or null, got {parent!r:.40}")
    ts = d.pop("timestamp", None)
    ts = ts if isinstance(ts, str) else now()
    try:
        entry = _typed_entry(kind, eid, parent, ts, d)
    except (KeyError, TypeError, ValueError) as e:
        raise input_error(path, n, f"invalid pi {kind!r} entry ({type(e).__name__}: {e})") from None
    if entry is None:
        data = {"type": kind, "id": eid, "parent_id": parent, "timestamp": ts, **d}
        return UnknownEntry(data)
    if not isinstance(entry, UnknownEntry):
        entry.set_extra(d)
    return entry


def _pop_str(d: Json, key: str, default: str | None = None) -> str:
    value = d.pop(key, default)
    if not isinstance(value, str):
        raise ValueError(f"`{key}` must be a string, got {value!r:.40}")
    return value


def _typed_entry(kind: str, eid: str, parent: str | None, ts: str, d: Json) -> AnyEntry | None:
    """The contextree entry for one pi entry; consumed keys are removed from ``d``."""
    if kind == "message":
        raw = d.pop("message")
        if not isinstance(raw, dict):
            raise ValueError("`message` must be an object")
        msg = message_from_pi(raw, iso_to_ms(ts))
        if msg is None:
            return CustomEntry(eid, parent, ts, custom_type=PI_MESSAGE, data={"message": raw})
        return MessageEntry(eid, parent, ts, message=msg)
    if kind == "thinking_level_change":
        return ThinkingLevelChangeEntry(eid, parent, ts, thinking_level=_pop_str(d, "thinkingLevel"))
    if kind == "model_change":
        return ModelChangeEntry(eid, parent, ts, provider=_pop_str(d, "provider"),
                                model_id=_pop_str(d, "modelId"))
    if kind == "active_tools_change":  # contextree's own type, kept through pi files
        names = d.pop("activeToolNames")
        return ActiveToolsChangeEntry(eid, parent, ts, active_tool_names=[str(x) for x in names])
    if kind == "compaction":
        return _compaction_from_pi(eid, parent, ts, d)
    if kind == "branch_summary":
        ext = d.pop(EXT, None) or {}
        return BranchSummaryEntry(
            eid, parent, ts, from_id=_pop_str(d, "fromId", "root"),
            summary=_pop_str(d, "summary", ""), details=d.pop("details", None),
            usage=_usage_from_ext(ext.get("usage")), from_hook=bool(d.pop("fromHook", False)),
        )
    if kind == "custom":
        return CustomEntry(eid, parent, ts, custom_type=_pop_str(d, "customType"),
                           data=d.pop("data", None))
    if kind == "custom_message":
        return _custom_message_from_pi(eid, parent, ts, d)
    if kind == "label":
        label = d.pop("label", None)
        return LabelEntry(eid, parent, ts, target_id=_pop_str(d, "targetId"),
                          label=label if isinstance(label, str) and label else None)
    if kind == "session_info":
        name = d.pop("name", None)
        return SessionInfoEntry(eid, parent, ts, name=name if isinstance(name, str) else None)
    return None


def _compaction_from_pi(eid: str, parent: str | None, ts: str, d: Json) -> CompactionEntry:
    ext = d.pop(EXT, None) or {}
    first = d.pop("firstKeptEntryId", None)
    tail = ext.get("retained_tail")
    tokens_before = d.pop("tokensBefore", 0)
    return CompactionEntry(
        eid, parent, ts,
        summary=_pop_str(d, "summary", ""),
        first_kept_entry_id=first if isinstance(first, str) else None,
        tokens_before=int(tokens_before or 0),
        tokens_after=ext.get("tokens_after"),
        retained_tail=[Message.from_dict(m) for m in tail] if isinstance(tail, list) else None,
        cleared=ext.get("cleared"),
        pinned=ext.get("pinned"),
        details=d.pop("details", None),
        usage=_usage_from_ext(ext.get("usage")),
        from_hook=bool(d.pop("fromHook", False)),
    )


def _custom_message_from_pi(eid: str, parent: str | None, ts: str, d: Json) -> AnyEntry:
    content = d.pop("content", "")
    entry = CustomMessageEntry(
        eid, parent, ts, custom_type=_pop_str(d, "customType"),
        content=content if isinstance(content, str) else text_of_blocks(content),
        details=d.pop("details", None), display=bool(d.pop("display", True)),
    )
    if not isinstance(content, str):
        entry.set_extra({"piContent": content})
    return entry


def _usage_from_ext(value: Any) -> Usage | None:
    return Usage(**value) if isinstance(value, dict) else None


# -- messages ------------------------------------------------------------------------------

def message_from_pi(m: Json, entry_ms: int | None = None) -> Message | None:
    """A pi message as a contextree ``Message`` (``None`` for one no model ever sees).

    ``entry_ms`` is the time of the entry holding it: a message ``timestamp`` equal to it
    is not kept, since export writes it back from the entry.
    """
    d = dict(m)
    role = d.pop("role", None)
    meta = d.pop("meta", None)
    if role == "user":
        msg = Message(role="user", content=_content_from_pi(d.pop("content", "")))
    elif role == "assistant":
        msg = _assistant_from_pi(d)
    elif role == "toolResult":
        msg = Message(
            role="tool",
            content=_simplify(_content_from_pi(d.pop("content", []))),
            tool_call_id=str(d.pop("toolCallId", "")),
            name=_str(d.pop("toolName", None)),
            is_error=bool(d.pop("isError", False)),
        )
    elif role == "custom" and m.get("customType") == SYSTEM_TYPE:
        d.pop("customType")
        d.pop("display", None)
        msg = Message(role="system", content=text_of_blocks(d.pop("content", "")))
    else:
        text = _llm_text(m)
        if text is None:
            return None
        kind = "custom_message" if role == "custom" else "pi"
        msg = Message(role="user", content=text,
                      meta={"kind": kind, "pi_role": role, **({"custom_type": m["customType"]}
                            if isinstance(m.get("customType"), str) else {})})
        return msg.set_extra({"piMessage": m})
    if isinstance(meta, dict):
        msg.meta = meta
    _drop_derived(msg, d, entry_ms, _str(m.get("provider")))
    return msg.set_extra(d)


def _simplify(content: Any) -> Any:
    """A lone plain text block as a string, no blocks as ``""`` (how contextree writes them)."""
    if isinstance(content, list):
        if not content:
            return ""
        if len(content) == 1 and isinstance(content[0], TextPart) and not content[0].extra:
            return content[0].text
    return content


def _drop_derived(msg: Message, d: Json, entry_ms: int | None, provider: str | None) -> None:
    """Forget pi fields that export derives anyway, so contextree -> pi -> contextree is exact.

    ``provider`` is the one the pi message named (before a contextree extension reset it).
    """
    if d.get("timestamp") == entry_ms:
        d.pop("timestamp")
    if msg.role == "assistant" and d.get("api") == _default_api(provider or "unknown"):
        d.pop("api")
    if msg.usage is not None:
        cost = msg.usage.extra.get("piCost")
        if cost == _default_cost(msg.usage.cost):
            msg.usage = Usage(input=msg.usage.input, output=msg.usage.output,
                              cache_read=msg.usage.cache_read,
                              cache_write=msg.usage.cache_write, total=msg.usage.total,
                              cost=msg.usage.cost)


def _assistant_from_pi(d: Json) -> Message:
    parts: list[AnyPart] = []
    calls: list[ToolCall] = []
    for block in d.pop("content", None) or []:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            b = dict(block)
            b.pop("type")
            args = b.pop("arguments", None)
            call = ToolCall(id=str(b.pop("id", "")), name=str(b.pop("name", "")),
                            arguments=args if isinstance(args, dict) else arguments_from_json(args))
            calls.append(call.set_extra(b))
        else:
            parts.append(_part_from_pi(block))
    usage_raw = d.pop("usage", None)
    msg = Message(
        role="assistant",
        content=_simplify(parts),
        tool_calls=calls or None,
        usage=_usage_from_pi(usage_raw) if isinstance(usage_raw, dict) else None,
        model=_str(d.pop("model", None)),
        provider=_str(d.pop("provider", None)),
        stop_reason=_str(d.pop("stopReason", None)),
    )
    ext = d.pop(EXT, None)
    if isinstance(ext, dict):  # fields contextree did not have when it exported the message
        for key in ("provider", "model", "usage", "stop_reason"):
            if key in ext and ext[key] is None:
                setattr(msg, key, None)
        if isinstance(ext.get("stop_reason"), str):
            msg.stop_reason = ext["stop_reason"]
    return msg


def _content_from_pi(content: Any) -> Any:
    if isinstance(content, str) or content is None:
        return content
    return [_part_from_pi(b) for b in content]


def _part_from_pi(block: Any) -> AnyPart:
    if not isinstance(block, dict):
        return TextPart(text=str(block))
    b = dict(block)
    kind = b.pop("type", None)
    if kind == "text" and isinstance(b.get("text"), str):
        return TextPart(text=b.pop("text")).set_extra(b)
    if kind == "thinking":
        part = ThinkingPart(thinking=str(b.pop("thinking", "")),
                            signature=_str(b.pop("thinkingSignature", None)),
                            redacted=bool(b.pop("redacted", False)))
        return part.set_extra(b)
    if kind == "image" and isinstance(b.get("data"), str):
        image = ImagePart(data=b.pop("data"), mime_type=_str(b.pop("mimeType", None)))
        return image.set_extra(b)
    return UnknownPart(dict(block))


def _usage_from_pi(u: Json) -> Usage:
    cost = u.get("cost")
    usage = Usage(
        input=int(u.get("input") or 0),
        output=int(u.get("output") or 0),
        cache_read=int(u.get("cacheRead") or 0),
        cache_write=int(u.get("cacheWrite") or 0),
        total=int(u.get("totalTokens") or 0),
        cost=float(cost.get("total") or 0.0) if isinstance(cost, dict) else 0.0,
    )
    return usage.set_extra({"piCost": cost} if isinstance(cost, dict) else {})




def _llm_text(m: Json) -> str | None:
    """The user text pi sends to the model for one of its own message kinds."""
    role = m.get("role")
    if role == "custom":
        return text_of_blocks(m.get("content", ""))
    if role == "branchSummary":
        return BRANCH_PREFIX + str(m.get("summary", "")) + BRANCH_SUFFIX
    if role == "compactionSummary":
        return COMPACTION_PREFIX + str(m.get("summary", "")) + COMPACTION_SUFFIX
    if role == "bashExecution" and not m.get("excludeFromContext"):
        return _bash_text(m)
    return None


def _bash_text(m: Json) -> str:
    output = m.get("output")
    text = f"Ran `{m.get('command', '')}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    code = m.get("exitCode")
    if m.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif code not in (None, 0):
        text += f"\n\nCommand exited with code {code}"
    if m.get("truncated") and m.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {m['fullOutputPath']}]"
    return text


# == export ================================================================================

def write(session: Any, at: str | None = None) -> bytes:
    """The session as a pi (version 3) session file; the leaf (or ``at``) is the last entry."""
    hdr = session.header
    head: Json = {"type": "session", "version": PI_VERSION, "id": hdr.id,
                  "timestamp": hdr.created_at, "cwd": hdr.cwd or ""}
    if hdr.parent_session:
        head["parentSession"] = hdr.parent_session
    entries = [e for e in session.storage.entries() if not isinstance(e, LeafEntry)]
    models = _models_in_force(entries)
    leaf = at if at is not None else session.leaf_id
    entries = _leaf_last(entries, leaf)
    names: dict[str, str] = {}
    out: list[Json] = [head]
    for entry in entries:
        if isinstance(entry, MessageEntry):
            for call in entry.message.tool_calls or ():
                names[call.id] = call.name
        out.append(entry_to_pi(entry, names, models.get(entry.parent_id or "")))
    return dump_lines(out)


def _models_in_force(entries: list[AnyEntry]) -> dict[str, tuple[str, str]]:
    """For each entry, the (provider, model) in force after it on its path.

    pi takes the model to resume with from the last assistant message, so an assistant
    message contextree stored without one is written with the model in force there.
    """
    models: dict[str, tuple[str, str]] = {}
    for e in entries:  # parents come before children in a session's append order
        current = models.get(e.parent_id or "")
        if isinstance(e, ModelChangeEntry):
            current = (e.provider, e.model_id)
        elif isinstance(e, MessageEntry) and e.message.provider and e.message.model:
            current = (e.message.provider, e.message.model)
        if current is not None:
            models[e.id] = current
    return models


def _leaf_last(entries: list[AnyEntry], leaf: str | None) -> list[AnyEntry]:
    if leaf is None or not entries or entries[-1].id == leaf:
        return entries
    moved = [e for e in entries if e.id == leaf]
    return [e for e in entries if e.id != leaf] + moved


def entry_to_pi(entry: AnyEntry, names: dict[str, str] | None = None,
                model: tuple[str, str] | None = None) -> Json:
    """One contextree entry as a pi entry line (``model``: the one in force before it)."""
    if isinstance(entry, UnknownEntry):
        data = dict(entry.data)
        data["parentId"] = data.pop("parent_id", None)
        return data
    out: Json = {"type": entry.type, "id": entry.id, "parentId": entry.parent_id,
                 "timestamp": entry.timestamp}
    out.update(_fields_to_pi(entry, names or {}, model))
    for k, v in entry.extra.items():
        out.setdefault(k, v)
    return out


def _fields_to_pi(entry: AnyEntry, names: dict[str, str],
                  model: tuple[str, str] | None) -> Json:
    if isinstance(entry, MessageEntry):
        return {"message": message_to_pi(entry.message, entry.timestamp, names, model)}
    if isinstance(entry, ThinkingLevelChangeEntry):
        return {"thinkingLevel": entry.thinking_level}
    if isinstance(entry, ModelChangeEntry):
        return {"provider": entry.provider, "modelId": entry.model_id}
    if isinstance(entry, ActiveToolsChangeEntry):
        return {"activeToolNames": list(entry.active_tool_names)}
    if isinstance(entry, CompactionEntry):
        return _compaction_to_pi(entry)
    if isinstance(entry, BranchSummaryEntry):
        out: Json = {"fromId": entry.from_id, "summary": entry.summary}
        _optional(out, entry.details, entry.from_hook)
        if entry.usage is not None:
            out[EXT] = {"usage": _usage_dict(entry.usage)}
        return out
    if isinstance(entry, CustomEntry):
        if entry.custom_type == PI_MESSAGE and isinstance(entry.data, dict):
            return {"type": "message", "message": entry.data.get("message")}
        out = {"customType": entry.custom_type}
        if entry.data is not None:
            out["data"] = entry.data
        return out
    if isinstance(entry, CustomMessageEntry):
        out = {"customType": entry.custom_type,
               "content": entry.extra.get("piContent", entry.content), "display": entry.display}
        if entry.details is not None:
            out["details"] = entry.details
        return out
    if isinstance(entry, LabelEntry):
        return {"targetId": entry.target_id, **({"label": entry.label} if entry.label else {})}
    if isinstance(entry, SessionInfoEntry):
        return {"name": entry.name} if entry.name is not None else {}
    return {}


def _optional(out: Json, details: Any, from_hook: bool) -> None:
    if details is not None:
        out["details"] = details
    if from_hook:
        out["fromHook"] = True


def _compaction_to_pi(entry: CompactionEntry) -> Json:
    out: Json = {"summary": entry.summary, "firstKeptEntryId": entry.first_kept_entry_id,
                 "tokensBefore": entry.tokens_before}
    _optional(out, entry.details, entry.from_hook)
    ext: Json = {}
    if entry.tokens_after is not None:
        ext["tokens_after"] = entry.tokens_after
    if entry.retained_tail is not None:
        ext["retained_tail"] = [m.to_dict() for m in entry.retained_tail]
    if entry.cleared:
        ext["cleared"] = dict(entry.cleared)
    if entry.pinned:
        ext["pinned"] = list(entry.pinned)
    if entry.usage is not None:
        ext["usage"] = _usage_dict(entry.usage)
    if ext:
        out[EXT] = ext
    return out


def _usage_dict(u: Usage) -> Json:
    return {"input": u.input, "output": u.output, "cache_read": u.cache_read,
            "cache_write": u.cache_write, "total": u.total, "cost": u.cost}


def message_to_pi(m: Message, entry_timestamp: str, names: dict[str, str],
                  model: tuple[str, str] | None = None) -> Json:
    """A contextree message as the pi message of a ``message`` entry.

    ``model`` (provider, model id) fills in an assistant message that names none.
    """
    original = m.extra.get("piMessage")
    if isinstance(original, dict):
        return original
    ts = m.extra.get("timestamp")
    if not isinstance(ts, int):
        ts = iso_to_ms(entry_timestamp) or 0
    extra = {k: v for k, v in m.extra.items() if k not in ("piMessage", "timestamp")}
    if m.role == "assistant":
        out = _assistant_to_pi(m, extra, model)
    elif m.role == "tool":
        out = {"role": "toolResult", "toolCallId": m.tool_call_id or "",
               "toolName": m.name or names.get(m.tool_call_id or "", ""),
               "content": _blocks_to_pi(m.content), "isError": m.is_error}
    elif m.role == "user":
        content = m.content if isinstance(m.content, str) else _blocks_to_pi(m.content)
        out = {"role": "user", "content": content}
    else:
        out = {"role": "custom", "customType": SYSTEM_TYPE if m.role == "system"
               else f"contextree.{m.role}", "content": m.text, "display": False}
    out.update({k: v for k, v in extra.items() if k not in out})
    if m.meta:
        out["meta"] = m.meta
    out["timestamp"] = ts
    return out


def _assistant_to_pi(m: Message, extra: Json, model: tuple[str, str] | None) -> Json:
    blocks = _blocks_to_pi(m.content)
    for call in m.tool_calls or ():
        block: Json = {"type": "toolCall", "id": call.id, "name": call.name,
                       "arguments": call.arguments}
        block.update({k: v for k, v in call.extra.items() if k not in block})
        blocks.append(block)
    provider = m.provider or (model[0] if model else "unknown")
    api = extra.pop("api", None) or _default_api(provider)
    out: Json = {"role": "assistant", "content": blocks, "api": api, "provider": provider,
                 "model": m.model or (model[1] if model else "unknown"),
                 "usage": _usage_to_pi(m.usage), "stopReason": _stop_reason(m)}
    # What pi requires but contextree did not have: the originals, so import restores them.
    invented: Json = {k: None for k, v in (("provider", m.provider), ("model", m.model),
                                           ("usage", m.usage)) if v is None}
    if out["stopReason"] != m.stop_reason:
        invented["stop_reason"] = m.stop_reason
    if invented:
        out[EXT] = invented
    return out


def _default_api(provider: str) -> str:
    return _API_BY_PROVIDER.get(provider, "openai-completions")


def _default_cost(total: float) -> Json:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": total}


def _stop_reason(m: Message) -> str:
    reason = m.stop_reason
    if reason in _STOP_REASONS:
        return str(reason)
    if reason in _STOP_MAP:
        return _STOP_MAP[str(reason)]
    return "toolUse" if m.tool_calls else "stop"


def _usage_to_pi(u: Usage | None) -> Json:
    u = u or Usage()
    cost = u.extra.get("piCost")
    if not isinstance(cost, dict):
        cost = _default_cost(u.cost)
    total = u.total or (u.input + u.output + u.cache_read + u.cache_write)
    return {"input": u.input, "output": u.output, "cacheRead": u.cache_read,
            "cacheWrite": u.cache_write, "totalTokens": total, "cost": cost}


def _blocks_to_pi(content: str | Sequence[Any] | None) -> list[Json]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[Json] = []
    for part in content:
        block = _block_to_pi(part)
        if block is not None:
            out.append(block)
    return out


def _block_to_pi(part: Any) -> Json | None:
    if isinstance(part, UnknownPart):
        return dict(part.data)
    if isinstance(part, TextPart):
        block: Json = {"type": "text", "text": part.text}
    elif isinstance(part, ThinkingPart):
        block = {"type": "thinking", "thinking": part.thinking}
        if part.signature is not None:
            block["thinkingSignature"] = part.signature
        if part.redacted:
            block["redacted"] = True
    elif isinstance(part, ImagePart):
        if part.data is None:  # pi images are inline data only
            return {"type": "text", "text": f"[image: {part.url}]"} if part.url else None
        block = {"type": "image", "data": part.data, "mimeType": part.mime_type or "image/png"}
    else:
        return None
    block.update({k: v for k, v in part.extra.items() if k not in block})
    return block
