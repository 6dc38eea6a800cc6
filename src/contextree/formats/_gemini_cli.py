"""Gemini CLI chat files (``@google/gemini-cli`` 0.61): ``~/.gemini/tmp/<project>/chats/
session-<time>-<id>.jsonl``.

A file is a log of records, each a JSON line, replayed in order the way the CLI does it when it
resumes one:

* the first holds the metadata (``sessionId``, ``projectHash``, ``startTime``, ``kind``);
* a message record (``id``, ``timestamp``, ``type``: ``user``, ``gemini``, ``info``, ``error``
  or ``warning``, ``content``) adds a message, or replaces the one with the same ``id`` (a
  reply is written when it ends, then again with its ``toolCalls`` and their results);
* ``{"$set": {...}}`` updates the metadata (``lastUpdated``, ``summary``...), and a ``messages``
  list in it replaces every message;
* ``{"$rewindTo": id}`` takes that message and all after it out of the conversation.

Import makes the messages a chain in that order: a ``user`` record is a user message, except
that its ``functionResponse`` parts are tool results; a ``gemini`` record is an assistant
message (its ``thoughts`` as thinking, ``toolCalls`` as tool calls, ``tokens`` as usage), and
the results of calls that no user record answers follow it. A rewind leaves the messages it
took out on a branch of their own, and the conversation goes on from the message before them;
so does a ``$set.messages`` that writes a different conversation: when the CLI compresses the
history, the new one (its ``<state_snapshot>`` summary, marked as a compaction summary, and
what was kept) starts a branch from the root, and the old one stays as it was; a compaction
entry holding that summary goes before it (the setup text before it kept in the context).
``info``/``error``/``warning`` records (shown to the user, never sent to the model) are kept as
custom entries; record fields contextree has no place for stay on the message. The system
prompt is not in the file (the CLI builds it anew each run), so the context starts with the
first user message: the ``<session_context>`` setup text that the CLI sends first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from ..entries import AnyEntry, CompactionEntry, CustomEntry, MessageEntry
from ..markers import CompactionSummaryMarker
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    file_time,
    find_by_id,
    first_line_says,
    header,
    imported_metadata,
    input_error,
    read_json_lines,
)
from ._subagents import SubagentRef, place

FORMAT = "gemini-cli"
SESSION_CONTEXT = "<session_context>"
"""How the setup text the CLI sends before the first prompt begins."""
SNAPSHOT = "<state_snapshot>"
"""How the summary of the CLI's compression begins (a user message, answered "Got it")."""
_SHOWN_ONLY = {"info", "error", "warning"}
_GEMINI_FIELDS = {"id", "timestamp", "type", "content", "thoughts", "toolCalls", "tokens",
                  "model"}


@dataclass
class _Instance:
    """One message as the log leaves it: its latest record and the message before it."""

    record: Json
    parent: int | None
    line: int
    entry_ids: list[str] = field(default_factory=list)


# -- reading the log ---------------------------------------------------------------------


def replay(path: Path, progress: Progress | None = None) -> tuple[Json, list[_Instance], list[int]]:
    """The metadata, every message instance in order of first appearance, and the live
    conversation (indices into the instances) after replaying the log as the CLI does."""
    meta: Json = {}
    instances: list[_Instance] = []
    live: list[int] = []
    for n, obj in read_json_lines(path, progress):
        if not isinstance(obj, dict):
            raise input_error(path, n, f"expected a JSON object, got {type(obj).__name__}")
        if not meta and not looks_like_gemini_cli(obj):
            raise input_error(path, n, _not_gemini(path))
        if isinstance(obj.get("$rewindTo"), str):
            ids = [instances[k].record["id"] for k in live]
            live = live[:ids.index(obj["$rewindTo"])] if obj["$rewindTo"] in ids else []
        elif isinstance(obj.get("id"), str):
            _upsert(obj, n, instances, live)
        elif isinstance(obj.get("$set"), dict):
            update = obj["$set"]
            if isinstance(update.get("messages"), list):
                live = _replace(update["messages"], n, instances, live)
            meta.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(obj.get("sessionId"), str):
            meta.update({k: v for k, v in obj.items() if k != "messages"})
            for msg in obj.get("messages") or ():  # the 0.3x-era whole-file form
                if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                    _upsert(msg, n, instances, live)
        else:
            raise input_error(path, n, "not a Gemini CLI chat record (no `id`, `$set`, "
                              "`$rewindTo` or `sessionId`)")
    if not meta:
        raise input_error(path, None, _not_gemini(path))
    return meta, instances, live


def _upsert(record: Json, n: int, instances: list[_Instance], live: list[int]) -> None:
    for k in reversed(live):
        if instances[k].record["id"] == record["id"]:
            instances[k].record = record
            return
    instances.append(_Instance(record, live[-1] if live else None, n))
    live.append(len(instances) - 1)


def _replace(messages: list[Any], n: int, instances: list[_Instance],
             live: list[int]) -> list[int]:
    """The live conversation after ``$set.messages``: a message already logged with the same
    id after the same message is that one (its record updated), any other is new. (On resume
    the CLI writes the conversation again this way, as it will send it.)"""
    known = {(inst.record["id"], inst.parent): k for k, inst in enumerate(instances)}
    new: list[int] = []
    for msg in messages:
        if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
            continue
        parent = new[-1] if new else None
        k = known.get((msg["id"], parent))
        if k is not None:
            instances[k].record = {**instances[k].record, **msg}
        else:
            instances.append(_Instance(msg, parent, n))
            k = len(instances) - 1
            known[(msg["id"], parent)] = k
        new.append(k)
    return new


def _not_gemini(path: Path) -> str:
    from ._detect import detected_other  # it imports the format table, which imports us

    other = detected_other(path, FORMAT)
    if other is not None:
        return (f"this is not a Gemini CLI chat file (it does not begin with a record holding "
                f"`sessionId` and `projectHash`); it looks like {other}: import it as {other} "
                f"(`contextree import {other} ...`, or `auto`)")
    return ("this is not a Gemini CLI chat file: it does not begin with a record holding "
            "`sessionId` and `projectHash`")


def looks_like_gemini_cli(first: object) -> bool:
    """Whether the first record of a JSON Lines file is a Gemini CLI chat's metadata."""
    return (isinstance(first, dict) and isinstance(first.get("sessionId"), str)
            and isinstance(first.get("projectHash"), str))


def detect(path: Path) -> bool:
    """The ``import auto`` hook: the first line is a chat's metadata record."""
    return first_line_says(path, b'"projectHash"', looks_like_gemini_cli)


# -- import ------------------------------------------------------------------------------


def read(path: Path, progress: Progress | None = None, *,
         subagent_sessions: dict[str, str] | None = None) -> Imported:
    """Read a Gemini CLI chat file (see the module notes) with its sub-agents' chats
    (``subagents``): each one a root of its own in the session, linked after the result of
    the ``invoke_agent`` call, or, with ``subagent_sessions`` (agent id -> session), linked
    to the session it was imported into."""
    imported, refs = _read_one(path, progress)
    place(imported, FORMAT, refs, lambda p: _read_one(p)[0], subagent_sessions)
    return imported


def subagents(path: Path) -> list[SubagentRef]:
    """The sub-agents of a chat: each ``invoke_agent`` call whose record names an
    ``agentId``, whose own chat the CLI writes to ``chats/<this session's id>/<agent id>.jsonl``
    (a chat of ``kind`` ``subagent``; its sub-agents, if any, beside it)."""
    meta, instances, _ = replay(path)
    return _refs(path, meta, instances)


def _refs(path: Path, meta: Json, instances: list[_Instance]) -> list[SubagentRef]:
    if meta.get("kind") == "subagent":
        folder = path.parent
    else:
        folder = path.parent / str(meta.get("sessionId"))
    refs: dict[str, SubagentRef] = {}
    for inst in instances:
        for call in inst.record.get("toolCalls") or ():
            agent = call.get("agentId") if isinstance(call, dict) else None
            if not isinstance(agent, str) or not agent or agent in refs:
                continue
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            refs[agent] = SubagentRef(str(call.get("id") or "") or None, agent,
                                      folder / f"{agent}.jsonl",
                                      {"agent_name": args.get("agent_name"),
                                       "prompt": args.get("prompt")})
    return [r for r in refs.values() if r.source.is_file()]


def _read_one(path: Path, progress: Progress | None = None
              ) -> tuple[Imported, list[SubagentRef]]:
    """One chat file (a sub-agent's chat links to its parent's session id), and the
    sub-agents it names."""
    meta, instances, live = replay(path, progress)
    answered = {r["id"] for inst in instances for r in _responses(inst.record)}
    ids = Ids()
    entries: list[AnyEntry] = []
    stamp = file_time(path)
    counts: dict[str, int] = {}
    tokens_before = 0  # what the context held, by the last reply's usage
    for inst in instances:
        parent = _last_entry(instances, inst.parent)
        record = inst.record
        kind = str(record.get("type"))
        counts[kind] = counts.get(kind, 0) + 1
        when = str(record.get("timestamp") or stamp)
        for i, item in enumerate(_items(record, answered)):
            eid = record["id"] if i == 0 and ids.claim(record["id"]) else ids.new()
            if isinstance(item, Message):
                if i == 0:
                    item = item.set_extra({"gemini_cli_id": record["id"]})
                if item.usage is not None:
                    tokens_before = item.usage.context_tokens
                if isinstance(item.marker, CompactionSummaryMarker):
                    parent = _compaction(item, eid, parent, when, tokens_before,
                                         _first_entry(instances, inst.parent), ids, entries)
                entries.append(MessageEntry(eid, parent, when, message=item))
            else:
                entries.append(CustomEntry(eid, parent, when, custom_type="gemini_cli_" + kind,
                                           data=item))
            inst.entry_ids.append(eid)
            parent = eid
        if not inst.entry_ids:  # nothing to say (an empty record): keep its place anyway
            eid = ids.new()
            entries.append(CustomEntry(eid, parent, when, custom_type="gemini_cli_empty",
                                       data=record))
            inst.entry_ids.append(eid)
    leaf = _last_entry(instances, live[-1]) if live else None
    sub = meta.get("kind") == "subagent"
    dirs = meta.get("directories")
    cwd = (str(dirs[0]) if sub and isinstance(dirs, list) and dirs
           else _cwd_of(path.parent if sub else path))
    link = {"parent_session_id": path.parent.name, "agent_id": meta["sessionId"]} if sub \
        else None
    hdr = header(str(meta["sessionId"]), str(meta.get("startTime") or stamp), cwd=cwd,
                 metadata={**imported_metadata(FORMAT, path, subagent=link),
                           "gemini_cli": meta},
                 parent_session=path.parent.name if sub else None)
    report = {"records": counts, "messages": len(live), "rewound": len(instances) - len(live)}
    return Imported(hdr, entries, leaf_id=leaf, report=report), _refs(path, meta, instances)


def _compaction(summary: Message, eid: str, parent: str | None, when: str, tokens_before: int,
                first_kept: str | None, ids: Ids, entries: list[AnyEntry]) -> str:
    """Append the compaction entry of the CLI's compression before its summary message
    ``eid``; returns its id. It holds the summary and names that message
    (``summary_entry``), which sends it once; what the new history holds before the summary
    (the setup text) stays in the context (``first_kept_entry_id``)."""
    comp = CompactionEntry(ids.new(), parent, when, summary=summary.text,
                           first_kept_entry_id=first_kept, tokens_before=tokens_before,
                           details={"source": FORMAT, "summary_entry": eid})
    entries.append(comp)
    return comp.id


def _first_entry(instances: list[_Instance], k: int | None) -> str | None:
    """The first entry of the conversation that ends with instance ``k``."""
    first = None
    while k is not None:
        first = instances[k].entry_ids[0] if instances[k].entry_ids else first
        k = instances[k].parent
    return first


def _last_entry(instances: list[_Instance], k: int | None) -> str | None:
    while k is not None:
        if instances[k].entry_ids:
            return instances[k].entry_ids[-1]
        k = instances[k].parent
    return None


def _items(record: Json, answered: set[str]) -> Iterator[Message | Json]:
    kind = record.get("type")
    if kind in _SHOWN_ONLY:
        yield record
    elif kind == "user":
        yield from _user_messages(record)
    elif kind == "gemini":
        yield _assistant(record)
        for call in record.get("toolCalls") or ():
            if isinstance(call, dict) and call.get("id") not in answered:
                yield from _call_results(call)
    else:
        yield record


def _responses(record: Json) -> list[Json]:
    if record.get("type") != "user" or not isinstance(record.get("content"), list):
        return []
    return [p["functionResponse"] for p in record["content"]
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
            and isinstance(p["functionResponse"].get("id"), str)]


def _user_messages(record: Json) -> Iterator[Message]:
    content = record.get("content")
    parts = content if isinstance(content, list) else [{"text": str(content or "")}]
    rest = {k: v for k, v in record.items() if k not in ("id", "timestamp", "type", "content")}
    other: list[Any] = []
    for part in parts:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            yield _tool_message(response)
        else:
            other.append(part)
    if other or not parts:
        text = "".join(str(p.get("text", "")) for p in other if isinstance(p, dict))
        msg = Message(role="user", content=_content(other))
        extra: Json = dict(rest)
        if text.lstrip().startswith(SESSION_CONTEXT):
            extra["gemini_cli_role"] = "session_context"
        elif text.lstrip().startswith(SNAPSHOT):  # what the CLI's compression left
            msg = msg.marked(CompactionSummaryMarker(summary=text, source=FORMAT))
        if not isinstance(content, list):
            extra["gemini_cli_content"] = content
        yield msg.set_extra(extra)


def _content(parts: list[Any]) -> str | list[Any]:
    out: list[Any] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            out.append(TextPart(text=part["text"]))
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            out.append(ImagePart(data=str(data.get("data") or ""),
                                 mime_type=str(data.get("mimeType") or "") or None))
        else:
            out.append(TextPart(text="").set_extra({"gemini_part": part}))
    if all(isinstance(p, TextPart) and not p.extra for p in out):
        return "".join(p.text for p in out)
    return out


def _tool_message(response: Json) -> Message:
    body = response.get("response")
    is_error = isinstance(body, dict) and "error" in body and "output" not in body
    if isinstance(body, dict) and isinstance(body.get("output" if not is_error else "error"),
                                             str) and len(body) == 1:
        text = body["output" if not is_error else "error"]
        extra: Json = {}
    else:
        import orjson

        text = orjson.dumps(body).decode() if body is not None else ""
        extra = {"gemini_cli_response": body}
    rest = {k: v for k, v in response.items() if k not in ("id", "name", "response")}
    if rest:
        extra["gemini_cli_function_response"] = rest
    return Message(role="tool", content=text, tool_call_id=str(response.get("id") or ""),
                   name=str(response.get("name") or "") or None,
                   is_error=is_error).set_extra(extra)


def _call_results(call: Json) -> Iterator[Message]:
    result = call.get("result")
    if isinstance(result, str):
        yield _tool_message({"id": call.get("id"), "name": call.get("name"),
                             "response": {"output": result}})
        return
    for part in result if isinstance(result, list) else ():
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            yield _tool_message(part["functionResponse"])


def _assistant(record: Json) -> Message:
    content = record.get("content")
    parts: list[Any] = []
    for thought in record.get("thoughts") or ():
        if isinstance(thought, dict):
            subject, text = thought.get("subject"), str(thought.get("description") or "")
            parts.append(ThinkingPart(thinking=f"**{subject}** {text}" if subject else text))
    if isinstance(content, list):
        body = _content([p for p in content if isinstance(p, dict)
                         and not isinstance(p.get("functionCall"), dict)])
        parts.extend([TextPart(text=body)] if isinstance(body, str) and body
                     else body if isinstance(body, list) else [])
    elif content:
        parts.append(TextPart(text=str(content)))
    calls = [ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""),
                      arguments=c["args"] if isinstance(c.get("args"), dict) else {})
             .set_extra({"gemini_cli": {k: v for k, v in c.items()
                                        if k not in ("id", "name", "args", "result")}})
             for c in record.get("toolCalls") or () if isinstance(c, dict)]
    have = {c.id for c in calls}
    for p in content if isinstance(content, list) else ():  # as written again on resume
        call = p.get("functionCall") if isinstance(p, dict) else None
        if isinstance(call, dict) and str(call.get("id") or "") not in have:
            calls.append(ToolCall(id=str(call.get("id") or ""), name=str(call.get("name") or ""),
                                  arguments=call["args"] if isinstance(call.get("args"), dict)
                                  else {}))
    only_text = all(isinstance(p, TextPart) for p in parts)
    msg = Message(role="assistant",
                  content="".join(p.text for p in parts) if only_text else parts,
                  tool_calls=calls or None, usage=_usage(record.get("tokens")),
                  model=str(record["model"]) if record.get("model") else None,
                  provider="google")
    extra = {k: v for k, v in record.items() if k not in _GEMINI_FIELDS}
    if isinstance(record.get("tokens"), dict):
        extra["gemini_cli_tokens"] = record["tokens"]
    return msg.set_extra(extra)


def _usage(tokens: object) -> Usage | None:
    if not isinstance(tokens, dict):
        return None

    def n(key: str) -> int:
        v = tokens.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    cached = n("cached")
    return Usage(input=max(n("input") - cached, 0), output=n("output") + n("thoughts"),
                 cache_read=cached, total=n("total"))


# -- where the CLI keeps them ------------------------------------------------------------


@dataclass(frozen=True)
class GeminiChat:
    """A chat file found under Gemini CLI's home."""

    id: str
    path: Path
    modified: float
    cwd: str | None
    first_prompt: str | None


def gemini_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Gemini CLI's folder: ``home`` if given, else ``$GEMINI_CLI_HOME/.gemini`` or
    ``~/.gemini``."""
    if home is not None:
        return Path(home).expanduser()
    base = os.environ.get("GEMINI_CLI_HOME")
    return (Path(base).expanduser() if base else Path.home()) / ".gemini"


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[GeminiChat]:
    """Every chat under ``<home>/tmp/*/chats/``, newest first."""
    root = gemini_home(home) / "tmp"
    rows: list[GeminiChat] = []
    for path in sorted(root.glob("*/chats/session-*.json*")) if root.is_dir() else ():
        if path.suffix not in (".json", ".jsonl") or not path.is_file():
            continue
        sid, prompt = _peek(path)
        if sid is None:
            continue
        rows.append(GeminiChat(sid, path, path.stat().st_mtime, _cwd_of(path), prompt))
    rows.sort(key=lambda r: r.modified, reverse=True)
    return rows


def find_session(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The chat file whose session id (or file name) is ``key`` or starts with it."""
    return find_by_id(key, lambda: list_sessions(home), "Gemini CLI session",
                      gemini_home(home) / "tmp")


def _peek(path: Path) -> tuple[str | None, str | None]:
    sid: str | None = None
    try:
        for _, obj in read_json_lines(path):
            if not isinstance(obj, dict):
                continue
            if sid is None and isinstance(obj.get("sessionId"), str):
                sid = obj["sessionId"]
            if obj.get("type") == "user":
                text = "".join(str(p.get("text", "")) for p in obj.get("content") or ()
                               if isinstance(p, dict)) if isinstance(obj.get("content"), list) \
                    else str(obj.get("content") or "")
                if text.strip() and not text.lstrip().startswith(SESSION_CONTEXT):
                    return sid, text.strip()[:200]
    except Exception:
        return sid, None
    return sid, None


def _cwd_of(path: Path) -> str | None:
    """The working directory of a chat: ``.project_root`` in its project folder."""
    marker = path.parent.parent / ".project_root"
    try:
        return marker.read_text().strip() or None
    except OSError:
        return None
