"""Export to GitHub Copilot CLI: a session ``copilot --resume <id>`` continues.

The export is an ``events.jsonl`` as Copilot CLI 1.0.102 writes one (see ``_copilot``), of the
context at the leaf: ``session.start``, then per message ``user.message`` (the text as sent),
``assistant.message`` (text, reasoning, ``toolRequests``) or ``tool.execution_complete`` (the
result), each with a new ``id`` and its ``parentId`` the event before it. The system prompt is
left out (the CLI writes its own for every run); a compaction summary goes as a user message.
``export_to_copilot_home(session)`` writes it, with the ``workspace.yaml`` the CLI lists
sessions by, under ``<home>/session-state/<id>/``.
"""

from __future__ import annotations

import os
import uuid as uuidlib
from pathlib import Path
from typing import Any

from .._files import atomic_write
from .._messages import Message
from .._session import Session
from ..entries import now
from ..errors import SessionExists
from ..markers import SUMMARIES
from ._base import Json, dump_lines
from ._copilot import copilot_home

_NAMESPACE = uuidlib.UUID("1c0f3e55-2b61-4d6e-8a3c-6b0f5d9e7a21")


def session_id(session: Session, at: str | None = None) -> str:
    """The id of an export: a UUID of the session and the exported entry."""
    return str(uuidlib.uuid5(_NAMESPACE, f"{session.id}:{at or session.leaf_id or ''}"))


def write(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf (or ``at``) as a Copilot CLI ``events.jsonl``."""
    return dump_lines(events(session, at))


def events(session: Session, at: str | None = None, *, cwd: str | None = None) -> list[Json]:
    """The events of the export, as JSON data."""
    ctx = session.build_context(at)
    sid = session_id(session, at)
    stamp = now()
    where = cwd or session.header.cwd or ""
    out: list[Json] = []
    model = next((m.model for m in reversed(ctx.messages) if m.model), None)

    def add(kind: str, data: Json, when: str) -> None:
        n = len(out)
        out.append({"type": kind, "data": data,
                    "id": str(uuidlib.uuid5(_NAMESPACE, f"{sid}:{n}")), "timestamp": when,
                    "parentId": out[-1]["id"] if out else None})

    add("session.start", {"sessionId": sid, "version": 1, "producer": "copilot-agent",
                          "copilotVersion": "1.0.102", "startTime": session.header.created_at,
                          "selectedModel": model, "context": {"cwd": where}}, stamp)
    user_id: str | None = None
    for n, (msg, eid) in enumerate(zip(ctx.messages, ctx.entry_ids, strict=False)):
        entry = session.get_entry(eid) if eid is not None else None
        when = entry.timestamp if entry is not None else stamp
        mid = str(uuidlib.uuid5(_NAMESPACE, f"{sid}:m{n}"))
        if msg.role == "system" and msg.kind not in SUMMARIES:
            continue  # the CLI sends a system prompt of its own
        if msg.role in ("user", "system"):
            user_id = mid
            typed = msg.extra.get("copilot_data", {}).get("content") if msg.role == "user" \
                else None
            add("user.message", {"content": typed if isinstance(typed, str) else msg.text,
                                 "transformedContent": msg.text, "messageId": mid}, when)
        elif msg.role == "assistant":
            data: Json = {"messageId": mid, "originatingMessageId": user_id or mid,
                          "model": msg.model or model, "content": msg.text,
                          "toolRequests": [_request(c.id, c.name, c.arguments)
                                           for c in msg.tool_calls or ()]}
            thinking = "".join(p.thinking for p in msg.thinking)
            if thinking:
                data["reasoningText"] = thinking
            add("assistant.message", data, when)
        elif msg.role == "tool":
            add("tool.execution_complete", _result(msg), when)
    return out


def _request(call_id: str, name: str, arguments: dict[str, Any]) -> Json:
    return {"toolCallId": call_id, "name": name, "arguments": arguments, "type": "function"}


def _result(msg: Message) -> Json:
    return {"toolCallId": msg.tool_call_id or "", "success": not msg.is_error,
            "result": {"content": msg.text}}


def workspace_yaml(sid: str, cwd: str, name: str, created: str) -> bytes:
    """The ``workspace.yaml`` Copilot CLI keeps beside a session's events."""
    clean = name.replace("\n", " ").replace('"', "'")[:80]
    return (f'id: {sid}\ncwd: {cwd}\nclient_name: github/cli\nname: "{clean}"\n'
            f"user_named: false\nsummary_count: 0\nfork_count: 0\ncreated_at: {created}\n"
            f"updated_at: {now()}\n").encode()


def export_to_copilot_home(session: Session, *, home: str | os.PathLike[str] | None = None,
                           cwd: str | None = None, at: str | None = None,
                           overwrite: bool = False) -> tuple[str, Path]:
    """Write the export where ``copilot --resume <id>`` finds it; returns ``(session id,
    path of events.jsonl)``. ``home`` is Copilot CLI's folder (default ``~/.copilot``)."""
    where = cwd or session.header.cwd or os.getcwd()
    sid = session_id(session, at)
    folder = copilot_home(home) / "session-state" / sid
    path = folder / "events.jsonl"
    if path.exists() and not overwrite:
        raise SessionExists("a Copilot CLI session with this id is already there; allow "
                            "overwriting it", path=str(path))
    folder.mkdir(parents=True, exist_ok=True)
    lines = events(session, at, cwd=where)
    first = next((e["data"]["content"] for e in lines if e["type"] == "user.message"), "")
    atomic_write(path, dump_lines(lines), overwrite=True)
    atomic_write(folder / "workspace.yaml",
                 workspace_yaml(sid, where, str(first), session.header.created_at),
                 overwrite=True)
    return sid, path
