"""Export to opencode: the JSON that ``opencode export`` writes and ``opencode import`` reads.

opencode resumes sessions from its database, and ``opencode import FILE`` puts one there from
this file: ``{"info": session, "messages": [{"info": message, "parts": [part, ...]}]}``, as
1.18.33 writes it. The context at the leaf becomes one user message per user (or summary)
message, with a text part, and one assistant message per reply (reasoning, text and tool parts,
each tool part holding its result, as opencode stores them; the reply's usage as ``tokens``).
A compaction imported from opencode is written back in its shape: the question as a
``compaction`` part, its answer as the ``summary`` message, so opencode resumes from there.
Ids are opencode's: ``ses_``, ``msg_``, ``prt_`` followed by a time-ordered hex stamp, since
opencode orders messages and parts by id. The system prompt is left out: opencode builds its
own for every request.
"""

from __future__ import annotations

import hashlib
import os
from itertools import pairwise
from pathlib import Path
from typing import Any

from .._messages import Message
from .._session import Session
from ..markers import SUMMARIES, CompactionSummaryMarker
from ._base import Json, dumps, iso_to_ms
from ._opencode import COMPACTION_PROMPT

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class _Ids:
    """opencode-style ids: a prefix, 12 hex digits of time (ascending, or inverted for a
    session), 14 characters derived from the session so that an export is reproducible."""

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self.counter = 0

    def make(self, prefix: str, ms: int, *, descending: bool = False) -> str:
        self.counter += 1
        stamp = ms * 0x1000 + self.counter
        if descending:
            stamp = ~stamp & 0xFFFFFFFFFFFF
        digest = hashlib.sha256(f"{self.seed}:{prefix}:{self.counter}".encode()).digest()
        tail = "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:14])
        return f"{prefix}_{stamp & 0xFFFFFFFFFFFF:012x}{tail}"


def write(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf (or ``at``) as opencode's session JSON (see the module notes)."""
    return dumps(document(session, at))


def document(session: Session, at: str | None = None, *, cwd: str | None = None) -> Json:
    """The ``opencode import`` document, as JSON data."""
    ctx = session.build_context(at)
    start = iso_to_ms(session.header.created_at) or 0
    ids = _Ids(f"{session.id}:{at or session.leaf_id or ''}")
    sid = ids.make("ses", start, descending=True)
    where = cwd or session.header.cwd or os.getcwd()
    model = next(((m.provider, m.model) for m in reversed(ctx.messages) if m.model), None)
    messages: list[Json] = []
    user_id: str | None = None
    results: dict[str, Json] = {}  # tool call id -> its tool part
    last_ms = start
    asks = _summary_requests(ctx.messages)
    for n, (msg, eid) in enumerate(zip(ctx.messages, ctx.entry_ids, strict=False)):
        entry = session.get_entry(eid) if eid is not None else None
        ms = max(iso_to_ms(entry.timestamp) or last_ms if entry is not None else last_ms,
                 last_ms)
        last_ms = ms
        if msg.role == "tool":
            part = results.get(msg.tool_call_id or "")
            if part is not None:
                part["state"].update(_state(msg, ms))
            continue
        if msg.role == "system" and msg.kind not in SUMMARIES:
            continue  # opencode builds its own system prompt
        if msg.role in ("user", "system"):
            mid = ids.make("msg", ms)
            user_id = mid
            info: Json = {"id": mid, "sessionID": sid, "role": "user", "time": {"created": ms},
                          "agent": "build"}
            if model is not None:
                info["model"] = {"providerID": model[0] or "", "modelID": model[1] or ""}
            fields = asks.get(n, {"type": "text", "text": msg.text})
            messages.append({"info": info, "parts": [
                {"id": ids.make("prt", ms), "sessionID": sid, "messageID": mid, **fields}]})
            continue
        mid = ids.make("msg", ms)
        parts, results = _assistant_parts(msg, ids, sid, mid, ms)
        agent = "compaction" if n - 1 in asks else "build"
        info = {"id": mid, "sessionID": sid, "role": "assistant", "parentID": user_id or mid,
                "mode": agent, "agent": agent, "path": {"cwd": where, "root": "/"},
                "cost": (msg.usage.cost or 0) if msg.usage is not None else 0,
                "tokens": _tokens(msg), "modelID": msg.model or (model[1] if model else ""),
                "providerID": msg.provider or (model[0] if model else "") or "",
                "time": {"created": ms, "completed": ms},
                "finish": "tool-calls" if msg.tool_calls else "stop"}
        if n - 1 in asks:
            info["summary"] = True  # the answer to a compaction part: opencode's summary
        messages.append({"info": info, "parts": parts})
    title = next((m["parts"][0]["text"] for m in messages if m["info"]["role"] == "user"
                  and m["parts"][0]["type"] == "text"), "")
    info = {"id": sid, "slug": sid[4:16].lower(), "projectID": "global", "directory": where,
            "title": title.strip()[:80] or "contextree export", "version": "1.18.33",
            "time": {"created": start, "updated": last_ms}}
    return {"info": info, "messages": messages}


def _summary_requests(messages: list[Message]) -> dict[int, Json]:
    """The user messages that asked opencode for a summary (its question, answered by a
    message marked as the summary), by index: each one's ``compaction`` part, as opencode
    wrote it when the session came from opencode, so that it resumes the session as
    compacted there."""
    out: dict[int, Json] = {}
    for n, (ask, answer) in enumerate(pairwise(messages)):
        if (ask.role == "user" and ask.text == COMPACTION_PROMPT and answer.role == "assistant"
                and isinstance(answer.marker, CompactionSummaryMarker)):
            kept = [p for p in ask.extra.get("opencode_parts", ())
                    if isinstance(p, dict) and p.get("type") == "compaction"]
            fields = {k: v for k, v in kept[0].items() if k != "id"} if kept else {}
            out[n] = {"type": "compaction", "auto": bool(fields.get("auto")),
                      "overflow": bool(fields.get("overflow")),
                      **{k: v for k, v in fields.items() if k not in ("type", "auto",
                                                                      "overflow")}}
    return out


def _assistant_parts(msg: Message, ids: _Ids, sid: str, mid: str,
                     ms: int) -> tuple[list[Json], dict[str, Json]]:
    def part(kind: str, **fields: Any) -> Json:
        return {"id": ids.make("prt", ms), "sessionID": sid, "messageID": mid, "type": kind,
                **fields}

    parts = [part("step-start")]
    thinking = "".join(p.thinking for p in msg.thinking)
    if thinking:
        parts.append(part("reasoning", text=thinking, time={"start": ms, "end": ms}))
    if msg.text:
        parts.append(part("text", text=msg.text, time={"start": ms, "end": ms}))
    results: dict[str, Json] = {}
    for call in msg.tool_calls or ():
        tool = part("tool", tool=call.name, callID=call.id,
                    state={"status": "pending", "input": call.arguments})
        parts.append(tool)
        results[call.id] = tool
    parts.append(part("step-finish", reason="tool-calls" if msg.tool_calls else "stop",
                      tokens=_tokens(msg), cost=0))
    return parts, results


def _state(msg: Message, ms: int) -> Json:
    if msg.is_error:
        return {"status": "error", "error": msg.text, "time": {"start": ms, "end": ms}}
    return {"status": "completed", "output": msg.text, "title": msg.name or "",
            "metadata": {}, "time": {"start": ms, "end": ms}}


def _tokens(msg: Message) -> Json:
    u = msg.usage
    if u is None:
        return {"total": 0, "input": 0, "output": 0, "reasoning": 0,
                "cache": {"read": 0, "write": 0}}
    return {"total": u.total, "input": u.input, "output": u.output, "reasoning": 0,
            "cache": {"read": u.cache_read, "write": u.cache_write}}


def session_of(path: Path) -> str:
    """The session id in an exported file (what ``opencode run --session`` takes)."""
    from .._limits import parse_json

    doc = parse_json(path.read_bytes())
    if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict):
        raise ValueError(f"{path}: not an opencode session export")
    return str(doc["info"]["id"])
