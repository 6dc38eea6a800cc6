"""Writing a contextree session as a pi (version 3) session file: the whole tree.

pi has no leaf entry: it resumes at the last entry, so the leaf is written last. What pi
cannot represent travels under the ``"contextree"`` key (see ``contextree.formats._pi``).

For pi 1.x (the default, ``pi="1"``) a compaction's ``cleared`` tool results are also written
as ``context_edit`` lines just after it (pi then shows the placeholders, as contextree does;
import folds them back), and a compaction that keeps no entry names itself as
``firstKeptEntryId`` (pi 1.x's retain-none). ``pi="0.73"`` writes neither: pi 0.73 knows no
``context_edit`` and shows the full results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    UnknownPart,
    Usage,
)
from ..._session import Session
from ...entries import (
    CALLS_TYPE,
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)
from ...errors import InvalidArgument
from .._base import Json, dump_lines, iso_to_ms
from .schema import (
    CLEARED_BY,
    EXT,
    PI_ERAS,
    PI_MESSAGE,
    PI_VERSION,
    SYSTEM_TYPE,
    default_api,
    default_cost,
)

__all__ = ["entry_to_pi", "message_to_pi", "write"]

_STOP_REASONS = {"stop", "length", "toolUse", "error", "aborted"}
_STOP_MAP = {"tool_use": "toolUse", "tool_calls": "toolUse", "end_turn": "stop",
             "max_tokens": "length", "stop_sequence": "stop", "refusal": "stop"}


def write(session: Session, at: str | None = None, pi: str = PI_ERAS[0]) -> bytes:
    """The session as a pi (version 3) session file; the leaf (or ``at``) is the last entry.

    ``pi`` is the pi release to write for: ``"1"`` (pi 1.x, the default) or ``"0.73"``.
    """
    if pi not in PI_ERAS:
        raise InvalidArgument(f"pi {pi!r} is not a pi release export writes for; choose one "
                              f"of: {', '.join(PI_ERAS)}")
    hdr = session.header
    head: Json = {"type": "session", "version": PI_VERSION, "id": hdr.id,
                  "timestamp": hdr.created_at, "cwd": hdr.cwd or ""}
    if hdr.parent_session:
        head["parentSession"] = hdr.parent_session
    entries: list[AnyEntry] = [e for e in session.entries() if not isinstance(e, LeafEntry)]
    models = _models_in_force(entries)
    leaf = at if at is not None else session.leaf_id
    entries = _leaf_last(entries, leaf)
    names: dict[str, str] = {}
    out: list[Json] = [head]
    parents: dict[str, str] = {}  # a compaction -> the last context_edit written after it
    for entry in entries:
        if isinstance(entry, MessageEntry):
            for call in entry.message.tool_calls or ():
                names[call.id] = call.name
        line = entry_to_pi(entry, names, models.get(entry.parent_id or ""))
        if line.get("parentId") in parents:
            line["parentId"] = parents[line["parentId"]]
        out.append(line)
        if pi == "1" and isinstance(entry, CompactionEntry):
            if entry.first_kept_entry_id is None:
                line["firstKeptEntryId"] = entry.id  # retain-none
            edits = _cleared_edits(entry)
            out += edits
            if edits:
                parents[entry.id] = edits[-1]["id"]
    return dump_lines(out)


def _cleared_edits(comp: CompactionEntry) -> list[Json]:
    """pi 1.x ``context_edit`` lines showing the tool results ``comp`` cleared as their
    placeholder text, one after the other below ``comp`` (marked, for import to fold back)."""
    out: list[Json] = []
    parent = comp.id
    for i, (target, text) in enumerate((comp.cleared or {}).items()):
        eid = f"{comp.id}.cleared.{i}"
        out.append({"type": "context_edit", "id": eid, "parentId": parent,
                    "timestamp": comp.timestamp, "targetId": target,
                    "replacement": {"content": [{"type": "text", "text": text}]},
                    EXT: {CLEARED_BY: comp.id}})
        parent = eid
    return out


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
        _summary_usage(out, {}, entry.usage)
        return out
    if isinstance(entry, CustomEntry):
        if entry.custom_type == PI_MESSAGE and isinstance(entry.data, dict):
            return {"type": "message", "message": entry.data.get("message")}
        if entry.custom_type == CALLS_TYPE and {"kind", "usage"} <= entry.extra.keys():
            return {"type": "usage"}  # pi 1.x's own line: its fields are in the extra
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
    if isinstance(entry, ContextEditEntry):
        content = entry.content
        replacement = None if content is None else {
            "content": content if isinstance(content, str) else _blocks_to_pi(content)}
        return {"targetId": entry.target_id, "replacement": replacement}
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
    if entry.receipt is not None:
        ext["receipt"] = entry.receipt.to_dict()
    _summary_usage(out, ext, entry.usage)  # which also puts ``ext`` in place
    return out


def _summary_usage(out: Json, ext: Json, usage: Usage | None) -> None:
    """A summary's usage: pi's own field for one read from pi 1.x, else contextree's (in
    ``EXT``, with the other contextree fields ``ext``)."""
    if usage is not None and usage.extra.get("piUsage"):
        out["usage"] = _usage_to_pi(usage)
    elif usage is not None:
        ext["usage"] = _usage_dict(usage)
    if ext:
        out[EXT] = ext


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
    api = extra.pop("api", None) or default_api(provider)
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
        cost = default_cost(u.cost or 0.0)  # pi writes 0 for a price it does not know
    total = u.total or (u.input + u.output + u.cache_read + u.cache_write)
    more = {k: v for k, v in u.extra.items() if k not in ("piCost", "piUsage")}
    return {"input": u.input, "output": u.output, "cacheRead": u.cache_read,
            "cacheWrite": u.cache_write, "totalTokens": total, "cost": cost, **more}


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
