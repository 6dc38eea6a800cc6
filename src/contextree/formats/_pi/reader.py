"""Reading pi session files (versions 1 to 3) into contextree entries.

pi's entries map one to one onto contextree's; what pi cannot represent comes back from the
``"contextree"`` key export writes (see ``contextree.formats._pi``). pi's own message kinds
with no contextree equivalent (``bashExecution``, ``branchSummary``, ``compactionSummary``,
``custom``) become the user message pi would send for them, marked as such
(``contextree.markers``), with the original kept (``piMessage``) for export.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._messages import (
    AnyPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
)
from ..._text import shorten
from ...entries import (
    CALLS_TYPE,
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CallRecord,
    CompactionEntry,
    CompactionReceipt,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    now,
)
from ...errors import SessionError
from ...markers import CustomMessageMarker, ForeignMarker
from ...models._wire_common import arguments_from_json
from .._base import (
    Imported,
    Json,
    Progress,
    header,
    imported_metadata,
    input_error,
    iso_to_ms,
    read_json_lines,
    text_of_blocks,
)
from .migrate import Migration
from .schema import CLEARED_BY, EXT, PI_MESSAGE, SYSTEM_TYPE, default_api, default_cost

__all__ = ["message_from_pi", "read"]

COMPACTION_PREFIX = ("The conversation history before this point was compacted into the "
                     "following summary:\n\n<summary>\n")
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = ("The following is a summary of a branch that this conversation came back "
                 "from:\n\n<summary>\n")
BRANCH_SUFFIX = "</summary>"


def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read a pi session file (version 1 to 3), in bounded memory.

    A first pass checks every line and collects the ids; the entries are then made in a
    second pass, as ``import_session`` writes them (``Imported.stream``).
    """
    scan = _scan(path, progress)
    meta = imported_metadata("pi", path, version=scan.version, pi=scan.era)
    head = scan.head
    hdr = header(head["id"], _str(head.get("timestamp")), cwd=_str(head.get("cwd")),
                 metadata=meta, parent_session=_str(head.get("parentSession")))
    return Imported(hdr, leaf_id=scan.leaf, stream=lambda: _entries(path, scan, progress),
                    used_ids=scan.ids)


@dataclass
class _Scan:
    """What the first pass over a pi file keeps: the header, the ids, the last id."""

    head: Json
    version: int
    lines: int  # entry lines, header excluded
    ids: set[str]
    leaf: str | None
    era: str  # "1.x" when the file holds what only pi 1.x writes, else "0.73"


def _scan(path: Path, progress: Progress | None) -> _Scan:
    """Parse every line and check the file's shape; the first problem is raised once every
    line is known to be JSON (a line that is not JSON is reported first)."""
    problem: SessionError | None = None
    head: Any = None
    first_line = 0
    ids: set[str] = set()
    lines = 0
    last: Any = None
    era = "0.73"
    for n, obj in read_json_lines(path, _half(progress, first=True)):
        if not first_line:
            first_line, head = n, obj
            if not (isinstance(head, dict) and head.get("type") == "session"
                    and isinstance(head.get("id"), str)):
                problem = input_error(path, n, 'the first line is not a pi session header '
                                      '({"type":"session","id":...}); is this a pi session '
                                      "file?")
            else:
                version = head.get("version", 1)
                if not isinstance(version, int) or version < 1:
                    problem = input_error(path, n, f"unknown pi session version {version!r}")
            continue
        lines += 1
        if problem is not None:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            problem = input_error(path, n, "expected a JSON object with a string `type`")
        elif obj["type"] == "session":
            problem = input_error(path, n, "a second session header in the middle of the file")
        else:
            last = obj.get("id")
            if isinstance(last, str) and last:
                ids.add(last)
            cleared_by = _cleared_by(obj)
            if cleared_by is not None:
                last = cleared_by  # written for a contextree compaction: it stands for it
            if era == "0.73" and is_pi1_line(obj):
                era = "1.x"
    if not first_line:
        raise input_error(path, None, "the file is empty; it is not a pi session")
    if problem is not None:
        raise problem
    version = head.get("version", 1)
    leaf = last if version >= 2 and isinstance(last, str) else None  # v1: the last is the leaf
    return _Scan(head, version, lines, ids, leaf, era)


def is_pi1_line(obj: Json) -> bool:
    """Whether an entry line is one only pi 1.x writes: a ``context_edit`` or ``usage``
    entry, a compaction with a ``systemMessage`` checkpoint or that keeps nothing (its own
    id as ``firstKeptEntryId``), or a ``system`` message (pi 1.x keeps the prompt in the
    session)."""
    kind = obj.get("type")
    if kind in ("context_edit", "usage"):
        return True
    if kind == "compaction":
        return "systemMessage" in obj or obj.get("firstKeptEntryId") == obj.get("id")
    message = obj.get("message")
    return kind == "message" and isinstance(message, dict) and message.get("role") == "system"


def _cleared_by(obj: Json) -> str | None:
    """The compaction a ``context_edit`` line was written for (from its ``cleared``), if so."""
    if obj.get("type") != "context_edit":
        return None
    ext = obj.get(EXT)
    value = ext.get(CLEARED_BY) if isinstance(ext, dict) else None
    return value if isinstance(value, str) else None


def _half(progress: Progress | None, *, first: bool) -> Progress | None:
    """Progress of one of the two passes, as half of the whole."""
    if progress is None:
        return None
    if first:
        return lambda done, total: progress(done // 2, total)
    return lambda done, total: progress(total - (total - done) // 2, total)


def _entries(path: Path, scan: _Scan, progress: Progress | None) -> Iterator[AnyEntry]:
    """The entries of the file, in file order (the second pass)."""
    migration = Migration(scan.version, scan.lines)
    known = scan.ids
    seen: set[str] = set()
    lines = read_json_lines(path, _half(progress, first=False))
    next(lines)  # the header
    # only the lines the first pass saw: what pi appends meanwhile waits for the next import
    stands_for: dict[str, str] = {}  # context_edit written for a compaction's `cleared`
    for n, obj in itertools.islice(lines, scan.lines):
        migration(obj)
        cleared_by = _cleared_by(obj)
        if cleared_by is not None and isinstance(obj.get("id"), str):
            stands_for[obj["id"]] = stands_for.get(cleared_by, cleared_by)
            continue  # the compaction's `cleared` holds it
        if obj.get("parentId") in stands_for:
            obj["parentId"] = stands_for[obj["parentId"]]
        entry = _entry_from_pi(obj, path, n)
        if entry.id in seen:
            raise input_error(path, n, f"entry id {entry.id!r} is used twice")
        seen.add(entry.id)
        if scan.version < 2:
            known.add(entry.id)
        _orphan_to_root(entry, known)
        yield entry


def _orphan_to_root(e: AnyEntry, known: set[str]) -> None:
    """pi shows an entry whose parent is missing as a root; so does the import."""
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
        raise input_error(path, n, f"`parentId` must be a string or null, got {shorten(repr(parent), 40)}")
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
        raise ValueError(f"`{key}` must be a string, got {shorten(repr(value), 40)}")
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
            usage=_summary_usage(d, ext), from_hook=_from_hook(d),
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
    if kind == "context_edit":
        replacement = d.pop("replacement")
        if replacement is not None and not isinstance(replacement, dict):
            raise ValueError("`replacement` must be null or an object with `content`")
        content = None if replacement is None else _content_from_pi(replacement["content"])
        return ContextEditEntry(eid, parent, ts, target_id=_pop_str(d, "targetId"),
                                content=content)
    if kind == "usage":
        return _usage_entry_from_pi(eid, parent, ts, d)
    return None


def _usage_entry_from_pi(eid: str, parent: str | None, ts: str, d: Json) -> CustomEntry:
    """pi 1.x's ``usage`` entry (a model call outside the context: a cache warm-up) as the
    entry contextree counts such calls by: a ``contextree.calls`` custom entry of one call.
    pi's own fields stay in the entry's extra (``kind``, ``provider``, ``model``, ``usage``,
    ``note``), so that export writes the same line back."""
    raw = d.get("usage")
    if not isinstance(raw, dict):
        raise ValueError("`usage` must be an object")
    kind = d.get("kind")
    if not isinstance(kind, str):
        raise ValueError("`kind` must be a string")
    provider, model = _str(d.get("provider")), _str(d.get("model"))
    call = CallRecord(provider=provider, model=model, usage=_usage_from_pi(raw), outcome=kind)
    return CustomEntry(eid, parent, ts, custom_type=CALLS_TYPE,
                       data={"calls": [call.to_dict()]})


def _compaction_from_pi(eid: str, parent: str | None, ts: str, d: Json) -> CompactionEntry:
    ext = d.pop(EXT, None) or {}
    first = d.pop("firstKeptEntryId", None)
    tail = ext.get("retained_tail")
    tokens_before = d.pop("tokensBefore", 0)
    return CompactionEntry(
        eid, parent, ts,
        summary=_pop_str(d, "summary", ""),
        # pi 1.x's retain-none compaction names itself: no earlier entry is kept
        first_kept_entry_id=first if isinstance(first, str) and first != eid else None,
        tokens_before=int(tokens_before or 0),
        tokens_after=ext.get("tokens_after"),
        retained_tail=[Message.from_dict(m) for m in tail] if isinstance(tail, list) else None,
        cleared=ext.get("cleared"),
        pinned=ext.get("pinned"),
        details=d.pop("details", None),
        usage=_summary_usage(d, ext),
        from_hook=_from_hook(d),
        receipt=CompactionReceipt.from_dict(ext["receipt"]) if "receipt" in ext else None,
    )


def _custom_message_from_pi(eid: str, parent: str | None, ts: str, d: Json) -> AnyEntry:
    content = d.pop("content", "")
    entry = CustomMessageEntry(
        eid, parent, ts, custom_type=_pop_str(d, "customType"),
        content=content if isinstance(content, str) else _content_from_pi(content),
        details=d.pop("details", None), display=bool(d.pop("display", True)),
    )
    if not isinstance(content, str):
        entry.set_extra({"piContent": content})
    return entry


def _from_hook(d: Json) -> bool:
    """pi's ``fromHook``; an explicit ``false`` (pi 1.x writes one) stays in ``d`` to be
    written back."""
    if d.get("fromHook") is False:
        return False
    return bool(d.pop("fromHook", False))


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
        kind = CustomMessageMarker if role == "custom" else ForeignMarker
        custom = m.get("customType")
        mark = kind(pi_role=role, custom_type=custom if isinstance(custom, str) else None)
        msg = Message(role="user", content=text, meta=mark.to_meta())
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
    if msg.role == "assistant" and d.get("api") == default_api(provider or "unknown"):
        d.pop("api")
    if msg.usage is not None:
        cost = msg.usage.extra.get("piCost")
        if cost == default_cost(msg.usage.cost or 0.0):
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


def _number(value: Any) -> bool:
    """A non-zero JSON number (not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value != 0


def _usage_from_pi(u: Json) -> Usage:
    cost = u.get("cost")
    usage = Usage(
        input=int(u.get("input") or 0),
        output=int(u.get("output") or 0),
        cache_read=int(u.get("cacheRead") or 0),
        cache_write=int(u.get("cacheWrite") or 0),
        total=int(u.get("totalTokens") or 0),
        # pi prices calls by its own table and writes 0 when it has no price: unknown
        cost=float(cost["total"]) if isinstance(cost, dict) and _number(cost.get("total"))
        else None,
    )
    more = {k: v for k, v in u.items() if k not in _PI_USAGE_KEYS}  # cacheWrite1h...
    return usage.set_extra({"piCost": cost, **more} if isinstance(cost, dict) else more)


_PI_USAGE_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"})


def _summary_usage(d: Json, ext: Json) -> Usage | None:
    """The usage of a compaction or branch summary: pi 1.x's (``usage``, as on a message) or
    contextree's (under ``EXT``)."""
    pi_usage = d.pop("usage", None)
    if isinstance(pi_usage, dict):
        return _usage_from_pi(pi_usage).set_extra({"piUsage": True})
    return _usage_from_ext(ext.get("usage"))




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
