"""Export to Gemini CLI: a chat file that ``gemini --resume`` continues.

The file is what Gemini CLI 0.61 writes (see ``_gemini_cli``): a metadata line (``sessionId``,
``projectHash`` = SHA-256 of the working directory, times, ``kind: "main"``), then one record per
message of the context at the leaf: ``user`` records (text and inline images), ``gemini`` records
(text, ``thoughts``, ``tokens``, ``model``) whose ``toolCalls`` carry the tool results, as the CLI
replays them on resume. A tool result whose call is not in the reply before it is a ``user``
record of ``functionResponse`` parts. The system prompt is left out, since the CLI writes its own
for every run; a compaction summary (a system message in contextree) goes as a user message, so
the resumed model still reads what came before.

``export_to_gemini_cli_home(session)`` also puts it where the CLI looks: ``<home>/tmp/<project>/
chats/``, registering the working directory in ``<home>/projects.json`` as the CLI does.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid as uuidlib
from pathlib import Path
from typing import Any

from .._files import atomic_write
from .._limits import parse_json
from .._messages import ImagePart, Message, TextPart
from .._session import Session
from ..entries import now
from ..errors import SessionExists
from ..markers import SUMMARIES
from ._base import Json, dump_lines, dumps
from ._gemini_cli import gemini_home

_NAMESPACE = uuidlib.UUID("6f1f8a4e-4d0b-4b8a-9a57-2c8b6ee3c0de")


def chat_id(session: Session, at: str | None = None) -> str:
    """The ``sessionId`` of an export: a UUID of the session and the exported entry, so each
    branch exports as a chat of its own."""
    return str(uuidlib.uuid5(_NAMESPACE, f"{session.id}:{at or session.leaf_id or ''}"))


def project_hash(cwd: str) -> str:
    """What Gemini CLI records as a chat's ``projectHash``: SHA-256 of the project root."""
    return hashlib.sha256(cwd.encode()).hexdigest()


def write(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf (or ``at``) as a Gemini CLI chat file (see the module notes)."""
    return dump_lines(records(session, at))


def records(session: Session, at: str | None = None, *, cwd: str | None = None) -> list[Json]:
    """The lines of the chat file, as JSON data."""
    ctx = session.build_context(at)
    stamp = now()
    where = cwd or session.header.cwd or ""
    out: list[Json] = [{"sessionId": chat_id(session, at), "projectHash": project_hash(where),
                        "startTime": session.header.created_at, "lastUpdated": stamp,
                        "kind": "main"}]
    calls: dict[str, Json] = {}  # tool call id -> its entry in the last gemini record
    for n, (msg, eid) in enumerate(zip(ctx.messages, ctx.entry_ids, strict=False)):
        entry = session.get_entry(eid) if eid is not None else None
        when = entry.timestamp if entry is not None else stamp
        rid = str(uuidlib.uuid5(_NAMESPACE, f"{session.id}:{eid}:{n}"))
        if msg.role == "tool":
            call = calls.get(msg.tool_call_id or "")
            part = _response(msg)
            if call is not None:
                call.setdefault("result", []).append(part)
                if msg.is_error:
                    call["status"] = "error"
            else:
                out.append({"id": rid, "timestamp": when, "type": "user", "content": [part]})
            continue
        if msg.role == "system" and msg.kind not in SUMMARIES:
            continue  # the CLI sends a system prompt of its own
        if msg.role == "assistant":
            record = _gemini(rid, when, msg)
            calls = {c["id"]: c for c in record.get("toolCalls", ())}
            out.append(record)
        else:
            out.append({"id": rid, "timestamp": when, "type": "user", "content": _parts(msg)})
            calls = {}
    return out


def _parts(msg: Message) -> list[Json]:
    if isinstance(msg.content, str) or msg.content is None:
        return [{"text": msg.content or ""}]
    parts: list[Json] = []
    for p in msg.content:
        if isinstance(p, TextPart):
            parts.append({"text": p.text})
        elif isinstance(p, ImagePart) and p.data:
            parts.append({"inlineData": {"mimeType": p.mime_type or "image/png",
                                         "data": p.data}})
    return parts or [{"text": ""}]


def _gemini(rid: str, when: str, msg: Message) -> Json:
    record: Json = {"id": rid, "timestamp": when, "type": "gemini", "content": msg.text,
                    "thoughts": [{"subject": "", "description": p.thinking, "timestamp": when}
                                 for p in msg.thinking if p.thinking]}
    if msg.usage is not None:
        u = msg.usage
        record["tokens"] = {"input": u.input + u.cache_read + u.cache_write, "output": u.output,
                            "cached": u.cache_read, "thoughts": 0, "tool": 0, "total": u.total}
    if msg.model:
        record["model"] = msg.model
    if msg.tool_calls:
        record["toolCalls"] = [{"id": c.id, "name": c.name, "args": c.arguments,
                                "status": "success", "timestamp": when}
                               for c in msg.tool_calls]
    return record


def _response(msg: Message) -> Json:
    kept = msg.extra.get("gemini_cli_response")
    body: Any = kept if kept is not None else (
        {"error": msg.text} if msg.is_error else {"output": msg.text})
    return {"functionResponse": {"id": msg.tool_call_id or "", "name": msg.name or "",
                                 "response": body}}


def project_slug(home: Path, cwd: str) -> str:
    """The folder under ``<home>/tmp`` that Gemini CLI uses for ``cwd``: the one
    ``projects.json`` names, else a new one (the directory's name, made safe), registered."""
    registry = home / "projects.json"
    data: Json = {}
    if registry.is_file():
        loaded = parse_json(registry.read_bytes())
        data = loaded if isinstance(loaded, dict) else {}
    projects = data.setdefault("projects", {})
    if not isinstance(projects, dict):
        projects = data["projects"] = {}
    slug = projects.get(cwd)
    if not isinstance(slug, str) or not slug:
        base = re.sub(r"[^A-Za-z0-9-]", "-", Path(cwd).name or "project").lower()
        taken = set(projects.values())
        slug, n = base, 1
        while slug in taken:
            n += 1
            slug = f"{base}-{n}"
        projects[cwd] = slug
        home.mkdir(parents=True, exist_ok=True)
        atomic_write(registry, dumps(data), overwrite=True)
    return slug


def export_to_gemini_cli_home(session: Session, *, home: str | os.PathLike[str] | None = None,
                              cwd: str | None = None, at: str | None = None,
                              overwrite: bool = False) -> tuple[str, Path]:
    """Write the export where ``gemini --resume <id>`` (run in ``cwd``) finds it; returns
    ``(session id, path)``. ``home`` is Gemini CLI's folder (default ``~/.gemini``); ``cwd``
    defaults to the session's."""
    where = cwd or session.header.cwd or os.getcwd()
    root = gemini_home(home)
    slug = project_slug(root, where)
    project = root / "tmp" / slug
    project.mkdir(parents=True, exist_ok=True)
    marker = project / ".project_root"
    if not marker.exists():
        marker.write_text(where)
    sid = chat_id(session, at)
    stamp = now()[:16].replace(":", "-")
    chats = project / "chats"
    existing = sorted(chats.glob(f"session-*-{sid[:8]}.jsonl")) if chats.is_dir() else []
    if existing and not overwrite:
        raise SessionExists("a Gemini CLI chat with this id is already there; allow "
                            "overwriting it", path=str(existing[0]))
    path = existing[0] if existing else chats / f"session-{stamp}-{sid[:8]}.jsonl"
    chats.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_lines(records(session, at, cwd=where)), overwrite=True)
    return sid, path
