"""Export to Codex: a rollout that ``codex exec resume <id>`` continues.

``write(session, at)`` gives the lines of a Codex 0.171.0 rollout holding the context the
model sees at ``at`` (default: the leaf):

* a ``session_meta`` line: a new thread id (see ``thread_uuid``), the cwd, and the first
  system message of the context as ``base_instructions`` (Codex sends them first);
* one ``response_item`` per item, in order: other system messages as ``developer`` messages,
  user messages (``input_text``/``input_image``), and for each assistant message its
  reasoning (only thinking that came from the Responses API: it has an item id and
  ``encrypted_content``), its text, then its calls (``function_call`` with JSON arguments,
  or ``custom_tool_call`` for a call imported as one, such as ``apply_patch``); tool results
  as ``function_call_output`` (or ``custom_tool_call_output``). Codex has no error flag for
  an output; a contextree error result is sent as its text.

A compaction summary keeps its role: one imported from Codex or Claude Code stays a user
message (Codex itself puts its summaries in the history that way), contextree's own (a
system message) becomes a developer message. ``export_to_codex_home`` writes the rollout where
Codex finds it by id:
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid as uuidlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._files import atomic_write
from .._messages import AnyPart, ImagePart, Message, TextPart, ThinkingPart, UnknownPart
from .._session import Session
from ..entries import now
from ..errors import SessionExists
from ..redaction import Redactor
from ._base import Json, dump_lines, iso_to_ms
from ._claude_code_export import is_responses_item
from ._codex import CUSTOM_TOOL, codex_home
from ._redacted import as_redactor, redacted_copy

__all__ = ["TESTED_VERSION", "export_to_codex_home", "items", "lines", "thread_uuid", "write"]

TESTED_VERSION = "0.171.0"


def thread_uuid(session: Session, at: str | None = None, *, stamp_ms: int | None = None) -> str:
    """A UUIDv7-shaped thread id: the time of the export, then bits derived from the session
    id and the exported entry (each branch is its own Codex thread, never the one it came
    from)."""
    ms = stamp_ms if stamp_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
    digest = hashlib.sha256(f"{session.id}:{at or session.leaf_id or ''}:{ms}".encode()).digest()
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(digest[:10], "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuidlib.UUID(int=value))


def write(session: Session, at: str | None = None) -> bytes:
    """The rollout lines of the context at ``at`` (see the module notes)."""
    return dump_lines(lines(session, at))


def export_to_codex_home(session: Session, *, home: str | os.PathLike[str] | None = None,
                   thread_id: str | None = None, at: str | None = None,
                   model_provider: str | None = None,
                   overwrite: bool = False,
                   redact: bool | Redactor = True) -> tuple[str, Path]:
    """Write the rollout under ``<home>/sessions`` (default ``$CODEX_HOME`` or ``~/.codex``)
    so that ``codex exec resume <id>`` finds it; returns ``(thread id, path)``.

    Codex resumes a thread with the model provider its rollout names, which must be
    configured: ``model_provider`` defaults to the one ``<home>/config.toml`` selects, else
    ``openai``. Secrets are redacted unless ``redact=False``, as in ``export_session``."""
    session = redacted_copy(session, as_redactor(redact))  # like export_session: redacted
    stamp = datetime.now(UTC)
    provider = model_provider or configured_provider(codex_home(home)) or "openai"
    tid = thread_id or thread_uuid(session, at, stamp_ms=int(stamp.timestamp() * 1000))
    day = codex_home(home) / "sessions" / stamp.strftime("%Y/%m/%d")
    path = day / f"rollout-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}-{tid}.jsonl"
    existing = list(day.glob(f"rollout-*-{tid}.jsonl")) if day.is_dir() else []
    if existing and not overwrite:
        raise SessionExists("a Codex rollout of this thread is already there; pass another "
                            "thread_id or allow overwriting", path=str(existing[0]))
    day.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_lines(lines(session, at, thread_id=tid, model_provider=provider)))
    return tid, path


def configured_provider(home: Path) -> str | None:
    """The ``model_provider`` that ``<home>/config.toml`` selects, if any."""
    import tomllib

    try:
        config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        return None
    value = config.get("model_provider")
    return value if isinstance(value, str) else None


def lines(session: Session, at: str | None = None, *, thread_id: str | None = None,
          model_provider: str | None = None) -> list[Json]:
    """The rollout as JSON objects: ``session_meta``, then one ``response_item`` per item."""
    ctx = session.build_context(at)
    messages: list[Message] = list(ctx.messages)
    stamps = [_stamp(session, eid) for eid in ctx.entry_ids]
    started = now()
    meta_stamp = session.header.created_at or started
    tid = thread_id or thread_uuid(session, at, stamp_ms=iso_to_ms(started))
    base: str | None = None
    if messages and messages[0].role == "system" and not messages[0].kind:
        base = messages[0].text
        messages, stamps = messages[1:], stamps[1:]
    imported = (session.header.metadata or {}).get("imported_from") or {}
    payload: Json = {
        "id": tid, "session_id": tid, "timestamp": meta_stamp, "cwd": session.header.cwd or "",
        "originator": "contextree", "cli_version": TESTED_VERSION, "source": "exec",
        "model_provider": model_provider or _imported_provider(session, imported) or "openai",
    }
    if base is not None:
        payload["base_instructions"] = {"text": base}
    out: list[Json] = [{"timestamp": meta_stamp, "ordinal": 0, "type": "session_meta",
                        "payload": payload}]
    for item, stamp in zip(*_items_with_stamps(messages, stamps), strict=True):
        out.append({"timestamp": stamp, "ordinal": len(out), "type": "response_item",
                    "payload": item})
    return out


def _stamp(session: Session, eid: str | None) -> str:
    entry = session.get_entry(eid) if eid is not None else None
    return entry.timestamp if entry is not None else now()


def _imported_provider(session: Session, imported: Json) -> str | None:
    """The provider of a thread imported from Codex (what its rollout named)."""
    if imported.get("format") != "codex":
        return None
    for entry in session.entries():
        for record in entry.extra.get("codex", {}).get("records", ()) if hasattr(
                entry, "extra") else ():
            payload = record.get("payload") if isinstance(record, dict) else None
            if record.get("type") == "session_meta" and isinstance(payload, dict):
                provider = payload.get("model_provider")
                return provider if isinstance(provider, str) else None
    return None


def _items_with_stamps(messages: list[Message], stamps: list[str]
                       ) -> tuple[list[Json], list[str]]:
    out: list[Json] = []
    out_stamps: list[str] = []
    custom_calls: set[str] = set()
    for msg, stamp in zip(messages, stamps, strict=True):
        for item in message_items(msg, custom_calls):
            out.append(item)
            out_stamps.append(stamp)
    return out, out_stamps


def items(messages: list[Message]) -> list[Json]:
    """Messages as Responses items, the way Codex writes them in a rollout."""
    custom_calls: set[str] = set()
    return [i for m in messages for i in message_items(m, custom_calls)]


def message_items(msg: Message, custom_calls: set[str]) -> list[Json]:
    """One message as the response items Codex writes for it."""
    if msg.role == "tool":
        call = msg.tool_call_id or ""
        custom = call in custom_calls or msg.extra.get("codex_type") == "custom_tool_call_output"
        output: Any = msg.content if isinstance(msg.content, str) else _output_parts(msg)
        return [{"type": "custom_tool_call_output" if custom else "function_call_output",
                 "call_id": call, "output": output}]
    if msg.role == "assistant":
        return _assistant_items(msg, custom_calls)
    role = "developer" if msg.role == "system" else "user"
    content = _input_parts(msg.content)
    if not content:
        return []
    return [{"type": "message", "role": role, "content": content}]


def _parts(content: str | Sequence[AnyPart] | None) -> list[AnyPart]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    return list(content)


def _input_parts(content: Any) -> list[Json]:
    out: list[Json] = []
    for p in _parts(content):
        if isinstance(p, TextPart):
            out.append({"type": "input_text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = p.url or (f"data:{p.mime_type or 'image/png'};base64,{p.data}"
                            if p.data is not None else None)
            if url is not None:
                out.append({"type": "input_image", "image_url": url})
        elif isinstance(p, UnknownPart) and str(p.type).startswith("input_"):
            out.append(dict(p.data))
    return out


def _output_parts(msg: Message) -> Any:
    parts = _input_parts(msg.content)
    if all(p["type"] == "input_text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _assistant_items(msg: Message, custom_calls: set[str]) -> list[Json]:
    out: list[Json] = []
    text: list[Json] = []
    for p in _parts(msg.content):
        if isinstance(p, ThinkingPart):
            if p.signature is not None and isinstance(p.extra.get("id"), str):
                summary = [{"type": "summary_text", "text": p.thinking}] if p.thinking else []
                out.append({"type": "reasoning", "id": p.extra["id"], "summary": summary,
                            "content": p.extra.get("content"),
                            "encrypted_content": p.signature})
        elif isinstance(p, TextPart):
            if p.text:
                text.append({"type": "output_text", "text": p.text, "annotations": []})
        elif isinstance(p, UnknownPart) and is_responses_item(p.type):
            out.append(dict(p.data))  # an item Codex wrote that contextree does not model
    if text:
        out.append({"type": "message", "role": "assistant", "content": text})
    for call in msg.tool_calls or ():
        if call.extra.get("codex_type") == CUSTOM_TOOL and set(call.arguments) == {"input"}:
            custom_calls.add(call.id)
            item: Json = {"type": CUSTOM_TOOL, "status": "completed", "call_id": call.id,
                          "name": call.name, "input": call.arguments["input"]}
        else:
            raw = call.extra.get("codex_arguments")
            item = {"type": "function_call", "status": "completed", "name": call.name,
                    "arguments": raw if isinstance(raw, str) else json.dumps(call.arguments),
                    "call_id": call.id}
        if isinstance(call.extra.get("codex_id"), str):
            item["id"] = call.extra["codex_id"]
        out.append(item)
    return out
