"""Export to Claude Code: a session file that ``claude --resume <id>`` continues.

``write(session, at)`` gives the lines of the context the model sees at ``at`` (default: the
leaf), written the way Claude Code 2.1.197 writes them, so that Claude Code sends the same
conversation when it resumes the file:

* one ``assistant`` line per content block (thinking, text, each tool_use), sharing one
  ``message.id``, each the parent of the next; thinking goes only when it carries a signature
  that is not another provider's (a Responses reasoning item, recognizable by its item id, is
  left out: Anthropic would reject its signature);
* one ``user`` line per tool result, whose parent is the line of its own tool_use
  (``sourceToolAssistantUUID``), and the next line hanging from the last result;
* user messages as ``user`` lines (string content stays a string); a compaction summary that
  opens the context becomes a ``compact_boundary`` line and its ``isCompactSummary`` summary;
* an attachment imported from Claude Code (a system message, or since 2.1.3xx a user one) is
  written back as that ``attachment`` line (Claude Code renders it again); any other system
  message becomes an ``isMeta`` user line wrapped in ``<system-reminder>`` tags, the way
  Claude Code injects harness text (Claude Code brings its own system prompt).

Entries imported from Claude Code give back their lines' other fields (``toolUseResult``,
``promptId``...) and uuids. The file's ``sessionId`` is a UUID derived from the session id
and the exported entry (see ``session_uuid``); ``export_to_claude_code_home`` writes the file where
Claude Code looks for it: ``<config dir>/projects/<cwd with every non-alphanumeric character
as '-'>/<sessionId>.jsonl``. The sub-agents linked on the exported branch go beside it as
Claude Code lays them out (``<sessionId>/subagents/agent-<id>.jsonl`` and its ``.meta.json``,
see ``subagent_files``), from ``export_session`` too; a sub-agent imported from Claude Code
keeps its id and meta, another tool's gets an id of Claude Code's shape derived from its own.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid as uuidlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._files import atomic_write
from .._messages import AnyPart, ImagePart, Message, TextPart, ThinkingPart, UnknownPart
from .._session import Session
from ..entries import CompactionEntry, MessageEntry, UnknownEntry, now
from ..errors import SessionExists
from ..markers import CompactionSummaryMarker, Kind
from ..redaction import Redactor
from ._base import Json, dump_lines, dumps, write_beside
from ._claude_code import EXTRA_KEY, claude_home
from ._redacted import as_redactor, redacted_copy
from ._subagents import linked_agents

__all__ = ["TESTED_VERSION", "export_to_claude_code_home", "project_folder", "records", "session_uuid",
           "subagent_files", "write"]

TESTED_VERSION = "2.1.197"
_NAMESPACE = uuidlib.UUID("8e3c1f4a-6b2d-4c1e-9a7f-3d5b8c0e2f61")
_ENVELOPE_DROP = ("uuid", "parentUuid", "sessionId", "message", "logicalParentUuid",
                  "sourceToolAssistantUUID")


def session_uuid(session: Session, at: str | None = None) -> str:
    """The ``sessionId`` of an export: a UUID derived from the session id and the exported
    entry, so each branch exports as its own Claude Code session and never as the original
    one it may have been imported from."""
    return str(uuidlib.uuid5(_NAMESPACE, f"{session.id}:{at or session.leaf_id or ''}"))


def project_folder(cwd: str) -> str:
    """The folder name Claude Code gives a working directory under ``projects``."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def write(session: Session, at: str | None = None) -> bytes:
    """The Claude Code lines of the context at ``at`` (see the module notes)."""
    return dump_lines(records(session, at))


def export_to_claude_code_home(session: Session, *, home: str | os.PathLike[str] | None = None,
                   cwd: str | None = None, session_id: str | None = None,
                   at: str | None = None, overwrite: bool = False,
                   redact: bool | Redactor = True) -> tuple[str, Path]:
    """Write the export where ``claude --resume <id>`` (run in ``cwd``) finds it; returns
    ``(session id, path)``. ``home`` is Claude Code's config dir (default
    ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``); ``cwd`` defaults to the session's. Secrets
    are redacted unless ``redact=False``, as in ``export_session``."""
    redactor = as_redactor(redact)
    session = redacted_copy(session, redactor)  # like export_session: redacted
    where = cwd or session.header.cwd or os.getcwd()
    sid = session_id or session_uuid(session, at)
    path = claude_home(home) / project_folder(where) / f"{sid}.jsonl"
    if path.exists() and not overwrite:
        raise SessionExists("a Claude Code session with this id is already there; pass "
                            "another session_id or allow overwriting", path=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dump_lines(records(session, at, session_id=sid, cwd=where))
    agents = subagent_files(session, at, redactor, session_id=sid, cwd=where)
    write_beside(path, agents, lambda: atomic_write(path, data), overwrite=overwrite)
    return sid, path


def subagent_files(session: Session, at: str | None, redactor: Redactor, *,
                   session_id: str | None = None, cwd: str | None = None) -> dict[str, bytes]:
    """The sidechain files of the sub-agents linked on the branch at ``at``
    (``_subagents.linked_agents``), by their path under the exported file less its suffix:
    ``subagents/agent-<id>.jsonl``, every line ``isSidechain`` with its ``agentId`` under the
    parent's ``sessionId``, and ``agent-<id>.meta.json``, naming the call (``toolUseId``)."""
    sid = session_id or session_uuid(session, at)
    out: dict[str, bytes] = {}
    with linked_agents(session, at, redactor) as agents:
        for agent in agents:
            aid = _agent_id(agent.link.data)
            lines = records(agent.session, agent.leaf, session_id=sid, agent_id=aid,
                            cwd=cwd if cwd is not None else session.header.cwd)
            if lines:
                out[f"subagents/agent-{aid}.jsonl"] = dump_lines(lines)
                out[f"subagents/agent-{aid}.meta.json"] = dumps(_agent_meta(agent.link.data))
    return out


_AGENT_ID = re.compile(r"[0-9a-z]{6,40}")
"""What a Claude Code agent id looks like (``a`` and 16 hex digits since 2.1): safe in a name."""


def _agent_id(link: Json) -> str:
    """Claude Code's id for a linked agent: its own when it came from Claude Code, else one
    of that shape derived from the other tool's."""
    aid = str(link.get("agent_id") or link.get("tool_use_id") or "agent")
    if _AGENT_ID.fullmatch(aid):
        return aid
    return "a" + hashlib.sha256(aid.encode()).hexdigest()[:16]


def _agent_meta(link: Json) -> Json:
    """``agent-<id>.meta.json``: Claude Code's own when the link kept it, else its fields
    from what the other tool said of the agent."""
    meta: Json = dict(link["meta"]) if isinstance(link.get("meta"), dict) else {}
    if "agentType" not in meta:
        kind = meta.get("subagent_type") or meta.get("agent_name")
        meta = {"agentType": str(kind or "general-purpose"),
                "description": str(meta.get("description") or meta.get("prompt") or "")[:200]}
    if isinstance(link.get("tool_use_id"), str):
        meta["toolUseId"] = link["tool_use_id"]
    return meta


class _Writer:
    def __init__(self, session: Session, sid: str, cwd: str | None,
                 agent_id: str | None = None) -> None:
        self.session = session
        self.sid = sid
        self.cwd = cwd
        self.agent_id = agent_id  # a sub-agent's sidechain file: every line says so
        self.out: list[Json] = []
        self.prev: str | None = None  # uuid of the last line of the chain
        self.tool_line: dict[str, str] = {}  # tool_use id -> uuid of its assistant line
        self.results_after: str | None = None  # the assistant line the results answer
        self.used: set[str] = set()
        self.n = 0

    def new_uuid(self, seed: str) -> str:
        self.n += 1
        return str(uuidlib.uuid5(_NAMESPACE, f"{self.sid}:{seed}:{self.n}"))

    def base(self, kind: str, stamp: str, envelope: Json | None, parent: str | None,
             wanted: str | None = None) -> Json:
        line: Json = {"parentUuid": parent, "isSidechain": False}
        if envelope:
            line.update({k: v for k, v in envelope.items() if k not in _ENVELOPE_DROP})
        line.update({"type": kind, "userType": line.get("userType", "external"),
                     "entrypoint": line.get("entrypoint", "sdk-cli")})
        line["isSidechain"] = self.agent_id is not None
        if self.agent_id is not None:
            line["agentId"] = self.agent_id
        else:
            line.pop("agentId", None)
        if self.cwd is not None:
            line["cwd"] = self.cwd
        line.setdefault("version", TESTED_VERSION)
        line["sessionId"] = self.sid
        kept_stamp = (envelope or {}).get("timestamp")
        line["timestamp"] = kept_stamp if isinstance(kept_stamp, str) else stamp or now()
        uid = wanted if wanted and wanted not in self.used else self.new_uuid(kind)
        self.used.add(uid)
        line["uuid"] = uid
        return line

    def emit(self, line: Json) -> str:
        self.out.append(line)
        self.prev = str(line["uuid"])
        return self.prev


def records(session: Session, at: str | None = None, *, session_id: str | None = None,
            cwd: str | None = None, agent_id: str | None = None) -> list[Json]:
    """The lines of the export as JSON objects (``write`` encodes them); with ``agent_id``,
    the sidechain lines of that sub-agent of the session ``session_id``."""
    sid = session_id or session_uuid(session, at)
    ctx = session.build_context(at)
    w = _Writer(session, sid, cwd if cwd is not None else session.header.cwd, agent_id)
    for i, (msg, eid) in enumerate(zip(ctx.messages, ctx.entry_ids, strict=True)):
        entry = session.get_entry(eid) if eid is not None else None
        # The lines an imported entry came from, when this message is that entry's own
        # (not a copy a compaction kept), or the summary of an imported compaction.
        own = (isinstance(entry, MessageEntry) and entry.message == msg) or (
            isinstance(entry, CompactionEntry) and msg.kind == Kind.COMPACTION_SUMMARY)
        kept = entry.extra.get(EXTRA_KEY) if own and entry is not None and not isinstance(
            entry, UnknownEntry) else None
        envelopes = kept.get("records", []) if isinstance(kept, dict) else []
        stamp = entry.timestamp if entry is not None else now()
        _write_message(w, msg, stamp, envelopes, first=i == 0)
    return w.out


def _write_message(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json], *,
                   first: bool) -> None:
    if msg.role == "assistant":
        _assistant(w, msg, stamp, envelopes)
    elif msg.role == "tool":
        _tool_result(w, msg, stamp, envelopes)
    elif msg.kind == Kind.COMPACTION_SUMMARY:
        _summary(w, msg, stamp, envelopes, first=first)
    elif msg.role == "system" or _envelope(envelopes, 0, "attachment") is not None:
        _system(w, msg, stamp, envelopes)
    else:
        _user(w, msg, stamp, envelopes)


def _envelope(envelopes: Sequence[Json], i: int, kind: str) -> Json | None:
    if i < len(envelopes) and envelopes[i].get("type") == kind:
        return envelopes[i]
    return None


_TEXT_EXTRAS = ("citations", "cache_control")
_TOOL_USE_EXTRAS = ("caller", "cache_control")


def _known(extra: Json, keys: Sequence[str]) -> Json:
    """The fields of another tool's part that are Anthropic block fields (an importer keeps
    every field it read; only these may be sent to Anthropic)."""
    return {k: v for k, v in extra.items() if k in keys}


def _content(parts: str | Sequence[AnyPart] | None, *, assistant: bool = False) -> Any:
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    return [b for b in (block_of(p, assistant=assistant) for p in parts) if b is not None]


def block_of(part: AnyPart, *, assistant: bool = False) -> Json | None:
    """A message part as an Anthropic content block (``None``: not sent to Anthropic)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text, **_known(part.extra, _TEXT_EXTRAS)}
    if isinstance(part, ThinkingPart):
        if not assistant or part.signature is None or "id" in part.extra:
            return None  # unsigned, or a Responses reasoning item signed for another API
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.signature}
        return {"type": "thinking", "thinking": part.thinking, "signature": part.signature}
    if isinstance(part, ImagePart):
        if assistant:
            return None
        extra = dict(part.extra)
        source_extra = extra.pop("source_extra", {})
        if part.data is not None:
            source = {"type": "base64", "media_type": part.mime_type or "image/png",
                      "data": part.data}
        elif part.url is not None and part.url.startswith("data:") and ";base64," in part.url:
            media, _, data = part.url[5:].partition(";base64,")
            source = {"type": "base64", "media_type": media or "image/png", "data": data}
        elif part.url is not None:
            source = {"type": "url", "url": part.url}
        else:
            return None
        return {"type": "image", "source": {**source, **source_extra},
                **_known(extra, ("cache_control",))}
    if isinstance(part, UnknownPart):
        return None if is_responses_item(part.type) else dict(part.data)
    return None


def is_responses_item(kind: str) -> bool:
    """Whether a part another importer kept is an OpenAI Responses item or content part
    (never an Anthropic block, so never sent to Anthropic)."""
    return kind.endswith(("_call", "_call_output")) or kind.startswith(
        ("input_", "output_")) or kind in ("compaction", "reasoning", "message")


def _assistant(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json]) -> None:
    content = msg.content
    parts: list[AnyPart] = [TextPart(text=content)] if isinstance(content, str) and content \
        else list(content) if isinstance(content, list) else []
    blocks = [b for b in (block_of(p, assistant=True) for p in parts) if b is not None]
    blocks = [b for b in blocks if b.get("type") != "text" or b.get("text")]
    for call in msg.tool_calls or ():
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": call.arguments, **_known(call.extra, _TOOL_USE_EXTRAS)})
    if not blocks:
        return
    first = envelopes[0] if envelopes and envelopes[0].get("type") == "assistant" else None
    mid = (first or {}).get("message", {}).get("id") or \
        "msg_" + w.new_uuid("m").replace("-", "")[:24]
    usage = _usage(msg)
    matched = len(envelopes) == len(blocks)
    for i, block in enumerate(blocks):
        env = _envelope(envelopes, i, "assistant") if matched else (first if i == 0 else None)
        line = w.base("assistant", stamp, env, w.prev,
                      env.get("uuid") if env else None)
        message: Json = dict(env.get("message", {})) if env else {}
        message.update({"id": mid, "type": "message", "role": "assistant",
                        "model": msg.model or message.get("model") or "claude-sonnet-4-5",
                        "content": [block]})
        message.setdefault("stop_reason", msg.stop_reason)
        message.setdefault("stop_sequence", None)
        if usage is not None:
            message.setdefault("usage", usage)
        line["message"] = message
        uid = w.emit(line)
        if block["type"] == "tool_use":
            w.tool_line[str(block["id"])] = uid
    w.results_after = w.prev


def _usage(msg: Message) -> Json | None:
    u = msg.usage
    if u is None:
        return None
    return {"input_tokens": u.input, "cache_creation_input_tokens": u.cache_write,
            "cache_read_input_tokens": u.cache_read, "output_tokens": u.output}


def _tool_result(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json]) -> None:
    call = msg.tool_call_id or ""
    env = _envelope(envelopes, 0, "user")
    source = w.tool_line.get(call)
    # Each result hangs from the line of its own tool_use; the first may also follow the
    # previous result when the calls came in separate lines already answered.
    parent = source if source is not None else w.prev
    block: Json = {"tool_use_id": call, "type": "tool_result",
                   "content": _content(msg.content)}
    kept_block = msg.extra.get(EXTRA_KEY, {}).get("block", {}) if msg.extra else {}
    block.update({k: v for k, v in kept_block.items() if k != "is_error"})
    if msg.is_error:
        block["is_error"] = True
    elif "is_error" not in kept_block or kept_block.get("is_error") is not None:
        block["is_error"] = False
    line = w.base("user", stamp, env, parent, env.get("uuid") if env else None)
    line["message"] = {"role": "user", "content": [block]}
    if source is not None:
        line["sourceToolAssistantUUID"] = source
    w.out.append(line)
    w.prev = str(line["uuid"])


def _user(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json],
          **more: Any) -> None:
    env = _envelope(envelopes, 0, "user")
    line = w.base("user", stamp, env, w.prev, env.get("uuid") if env else None)
    line["message"] = {"role": "user", "content": _content(msg.content)}
    line.update(more)
    w.emit(line)


def _system(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json]) -> None:
    env = _envelope(envelopes, 0, "attachment")
    if env is not None:  # an attachment Claude Code renders again as this very message
        line = w.base("attachment", stamp, env, w.prev, env.get("uuid"))
        line["attachment"] = env.get("attachment")
        w.emit(line)
        return
    text = f"<system-reminder>\n{msg.text}\n</system-reminder>"
    line = w.base("user", stamp, None, w.prev)
    line["message"] = {"role": "user", "content": text}
    line["isMeta"] = True
    w.emit(line)


def _summary(w: _Writer, msg: Message, stamp: str, envelopes: Sequence[Json], *,
             first: bool) -> None:
    if not first:  # only a boundary at the start keeps what comes before it in view
        _user(w, msg.replace(meta=None, role="user"), stamp, envelopes)
        return
    boundary = _envelope(envelopes, 0, "system") if envelopes else None
    line = w.base("system", stamp, boundary, None, boundary.get("uuid") if boundary else None)
    line.update({"subtype": "compact_boundary", "content": "Conversation compacted",
                 "isMeta": False, "logicalParentUuid": None, "level": "info"})
    mark = msg.marker
    before = mark.tokens_before if isinstance(mark, CompactionSummaryMarker) else None
    line.setdefault("compactMetadata", {"trigger": "manual", "preTokens": before or 0})
    if isinstance(line.get("compactMetadata"), dict):  # its preserved lines are written out
        line["compactMetadata"] = {k: v for k, v in line["compactMetadata"].items()
                                   if k not in ("preservedSegment", "preservedMessages")}
    w.emit(line)
    summary_env = next((e for e in envelopes if e.get("isCompactSummary")), None)
    text = msg.text
    _user(w, Message.user(text), stamp, [summary_env] if summary_env else [],
          isCompactSummary=True, isVisibleInTranscriptOnly=True)
