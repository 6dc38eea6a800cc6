"""GitHub Copilot CLI sessions (``@github/copilot`` 1.0): ``~/.copilot/session-state/<id>/
events.jsonl``.

Each line is an event ``{"type", "data", "id", "timestamp", "parentId"}``, written in order:
``session.start`` (session id, version, cwd, model), ``system.message`` (the system prompt as
sent), ``user.message`` (``content`` as typed, ``transformedContent`` as sent),
``assistant.message`` (``content``, ``reasoningText``, ``toolRequests``), ``tool.execution_start``
/ ``tool.execution_complete`` (``result.content``, ``success``), ``session.usage_record`` (the
usage of the model call whose reply follows), turn, shutdown and resume events, and
``session.compaction_start`` / ``session.compaction_complete`` (``summaryContent``).

Import makes the messages a chain in file order, but for the system prompt, which the CLI
writes after the user message of its turn and sends first (it is kept again only where it
changed): each user message as sent, each reply with its usage, each tool result (an error when
``success`` is false). An applied compaction becomes a compaction entry where it started (the
messages after it were kept) holding the summary the model wrote, followed by the user message
the CLI sends in place of the history: its text, every message the user typed so far and the
summary (the context sends that message, not contextree's own rendering of the summary). Every
other event is kept as a custom entry, in place, so that nothing is lost and the context holds
what the model saw. A sub-agent's events (see ``owners``) are a session of their own: a root
in the same session, linked after the ``task`` call's result (``_subagents``).
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._limits import parse_json
from .._messages import Message, TextPart, ThinkingPart, ToolCall, Usage
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
    split_selector,
)
from ._subagents import SubagentRef, place, report

FORMAT = "copilot"
_SUMMARY_HEAD = ("Some of the conversation history has been summarized to free up context.\n\n"
                 "You were originally given instructions from a user over one or more turns. "
                 "Here were the user messages:\n")
_MESSAGE_EVENTS = {"system.message", "user.message", "assistant.message",
                   "tool.execution_complete"}


def summary_text(user_messages: list[str], summary: str) -> str:
    """The user message Copilot CLI 1.0 sends in place of a compacted history."""
    quoted = "".join(f"<user_message>\n{m}\n</user_message>\n" for m in user_messages)
    return (f"{_SUMMARY_HEAD}{quoted}\nHere is a summary of the prior context:\n<summary>\n"
            f"{summary}\n</summary>\n")


def looks_like_copilot(first: object) -> bool:
    """Whether the first event of a JSON Lines file starts a Copilot CLI session."""
    return (isinstance(first, dict) and first.get("type") == "session.start"
            and isinstance(first.get("data"), dict)
            and first["data"].get("producer") == "copilot-agent")


def detect(path: Path) -> bool:
    """The ``import auto`` hook: the first line is Copilot's ``session.start``."""
    return first_line_says(path, b'"session.start"', looks_like_copilot)


def read(path: Path, progress: Progress | None = None, *,
         subagent_sessions: dict[str, str] | None = None) -> Imported:
    """Read a Copilot CLI ``events.jsonl`` (see the module notes), or one sub-agent of it
    (``events.jsonl#TOOL_CALL_ID``), with its sub-agents (``subagents``): each one a root of
    its own in the session, linked after the result of the ``task`` call, or, with
    ``subagent_sessions`` (agent id -> session), linked to the session it was imported
    into."""
    imported, refs = _read_one(path, progress)
    place(imported, FORMAT, refs, lambda p: _read_one(p)[0], subagent_sessions)
    return imported


def subagents(path: Path) -> list[SubagentRef]:
    """The sub-agents of a session: one per ``subagent.started`` event (its ``toolCallId``
    is the ``task`` call), whose events are in the same file: those that name the call as
    ``parentToolCallId``, or belong to an interaction that one of those began."""
    return _read_one(path)[1]


def owners(events: list[tuple[int, Json]]) -> list[str | None]:
    """Whose each event is: the ``toolCallId`` of the sub-agent it belongs to, ``None`` for
    the session's own. 1.0.102 marks each of a sub-agent's events with the ``agentId`` its
    ``subagent.started`` event has, which tells sub-agents running side by side apart. Else
    an event names its sub-agent (``parentToolCallId``) or shares an ``interactionId`` with
    one that does; an event naming neither, while a sub-agent runs, is the latest one's if
    its interaction is not the session's (its prompt and system message, the model change
    it makes)."""
    out: list[str | None] = []
    running: list[str] = []
    agents: set[str] = set()
    by_agent_id: dict[str, str] = {}  # the agentId of a subagent.started -> its toolCallId
    interaction: dict[str, str | None] = {}
    for _, event in events:
        data: Json = event["data"] if isinstance(event.get("data"), dict) else {}
        kind, call = event["type"], data.get("toolCallId")
        if kind == "subagent.started" and isinstance(call, str):
            running.append(call)
            agents.add(call)
            if isinstance(event.get("agentId"), str):
                by_agent_id[event["agentId"]] = call
            out.append(None)
            continue
        if kind in ("subagent.completed", "subagent.failed") and isinstance(call, str):
            if call in running:
                running.remove(call)
            out.append(None)
            continue
        parent, iid = data.get("parentToolCallId"), data.get("interactionId")
        if isinstance(event.get("agentId"), str) and event["agentId"] in by_agent_id:
            who: str | None = by_agent_id[event["agentId"]]
        elif isinstance(parent, str) and parent in agents:
            who = parent
        elif isinstance(iid, str) and iid in interaction:
            who = interaction[iid]
        else:
            who = running[-1] if running else None
        if isinstance(iid, str):
            interaction.setdefault(iid, who)
        out.append(who)
    return out


def _read_one(path: Path, progress: Progress | None = None
              ) -> tuple[Imported, list[SubagentRef]]:
    """The session's own events (or, for ``FILE#CALL``, that sub-agent's) as a session, and
    the sub-agents it started."""
    src, agent = split_selector(path)
    events: list[tuple[int, Json]] = []
    for n, obj in read_json_lines(src, progress):
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise input_error(src, n, "expected an event: a JSON object with a string `type`")
        if not events and not looks_like_copilot(obj):
            raise input_error(src, n, _not_copilot(src))
        events.append((n, obj))
    if not events:
        raise input_error(src, None, "this Copilot CLI session file is empty")
    whose = owners(events)
    if agent is not None and agent not in whose:
        raise input_error(src, None, f"no sub-agent {agent!r} in this Copilot CLI session "
                          "(a sub-agent is named by the toolCallId of its task call)")
    first = events[0]
    mine = [e for e, w in zip(events, whose, strict=True) if w == agent]
    refs = [] if agent is not None else [
        _ref(src, e["data"]) for _, e in mine if e["type"] == "subagent.started"
        and isinstance(e.get("data"), dict) and isinstance(e["data"].get("toolCallId"), str)]
    imported = _build(src, first, _results_in_call_order(mine), agent)
    if agent is None:
        _add_forks(imported, src, events)
    return imported, refs


def _results_in_call_order(events: list[tuple[int, Json]]) -> list[tuple[int, Json]]:
    """``events`` with each reply's ``tool.execution_complete`` events in the order of its
    calls, where the last of them was written: the CLI sends the results so, while the file
    has them as they finished (two sub-agents run side by side and finish in any order). A
    result still missing when the next message comes leaves the others where they are then."""
    out: list[tuple[int, Json]] = []
    calls: list[str] = []  # the tool calls of the last reply
    held: dict[str, tuple[int, Json]] = {}

    def flush() -> None:
        out.extend(held.pop(c) for c in calls if c in held)

    for item in events:
        kind, data = item[1]["type"], item[1].get("data")
        data = data if isinstance(data, dict) else {}
        if kind == "tool.execution_complete" and data.get("toolCallId") in calls:
            held[data["toolCallId"]] = item
            if len(held) == len(calls):
                flush()
                calls = []
            continue
        if kind in ("assistant.message", "user.message"):
            flush()
            calls = [str(r.get("toolCallId")) for r in data.get("toolRequests") or ()
                     if isinstance(r, dict) and r.get("toolCallId")]
        out.append(item)
    flush()
    return out


_FORKED_INTO = re.compile(r"Forked this session into .*\(([0-9A-Za-z-]+)\)\.?$")
"""The message of the ``session.info`` event (``infoType: fork``) that ``/fork`` writes in the
session it forked, naming the new session's id last."""


def _add_forks(imported: Imported, src: Path, events: list[tuple[int, Json]]) -> None:
    """Each fork of the session (``/fork``: a new session whose events begin with copies of
    this one's, ids and all) as a branch from the last event it copied: its own events,
    starting with its ``session.info`` that says where it came from."""
    forks = []
    for _, e in events:
        data: Json = e["data"] if isinstance(e.get("data"), dict) else {}
        m = _FORKED_INTO.search(str(data.get("message") or "")) if data.get(
            "infoType") == "fork" else None
        if m is not None:
            forks.append(m.group(1))
    if not forks:
        return
    if imported.leaf_id is None and imported.entries:
        imported.leaf_id = imported.entries[-1].id  # the session's own leaf
    taken = {e.id for e in imported.entries}
    found: list[Json] = []
    missing: list[Json] = []
    for fork_id in forks:
        path = _session_file(src.parent.parent, fork_id)
        if path is None:
            missing.append({"session": fork_id,
                            "error": "its events.jsonl is not beside this session's folder"})
            continue
        fork, _ = _read_one(path)
        own = [e for e in fork.entries if e.id not in taken and e.parent_id is not None]
        imported.entries.extend(own)
        taken |= {e.id for e in own}
        found.append({"session": fork_id, "file": str(path), "entries": len(own)})
    report(imported, {"forks": found, **({"fork_errors": missing} if missing else {})})


def _session_file(root: Path, session_id: str) -> Path | None:
    """The ``events.jsonl`` of session ``session_id`` under ``root`` (a ``session-state``
    folder): in the folder of that name, else in the one whose ``session.start`` says so."""
    named = root / session_id / "events.jsonl"
    if named.is_file():
        return named
    for events in sorted(root.glob("*/events.jsonl")):
        with open(events, "rb") as f:
            line = f.readline(1 << 20)
        try:
            first = parse_json(line)
        except ValueError:
            continue
        if looks_like_copilot(first) and first["data"].get("sessionId") == session_id:
            return events
    return None


def _ref(src: Path, data: Json) -> SubagentRef:
    meta: Json = {k: data[k] for k in ("agentName", "agentDisplayName", "agentDescription",
                                 "agentType", "model", "executionMode") if k in data}
    call = str(data["toolCallId"])
    return SubagentRef(call, call, Path(f"{src}#{call}"), meta)


def _build(path: Path, first_event: tuple[int, Json], events: list[tuple[int, Json]],
           agent: str | None) -> Imported:
    applied = {e["data"].get("compactionAttemptId"): e["data"] for _, e in events
               if e["type"] == "session.compaction_complete"
               and isinstance(e.get("data"), dict) and e["data"].get("outcome") == "applied"}
    ids = Ids()
    entries: list[AnyEntry] = []
    parent: str | None = None
    system: tuple[str, str] | None = None  # (entry id, content) of the system prompt in force
    usage: Usage | None = None
    users: list[str] = []
    stamp = file_time(path)

    def add(entry_id: str | None, when: str, msg: Message | None, kind: str, data: Any) -> str:
        nonlocal parent
        eid = entry_id if entry_id is not None and ids.claim(entry_id) else ids.new()
        entries.append(MessageEntry(eid, parent, when, message=msg) if msg is not None
                       else CustomEntry(eid, parent, when, custom_type=kind, data=data))
        parent = eid
        return eid

    for _, event in _system_first(events):
        kind = str(event["type"])
        data: Json = event["data"] if isinstance(event.get("data"), dict) else {}
        when = str(event.get("timestamp") or stamp)
        eid = event.get("id") if isinstance(event.get("id"), str) else None
        own = {k: v for k, v in event.items() if k not in ("type", "data", "timestamp")}
        if kind == "system.message" and isinstance(data.get("content"), str):
            if system is not None and system[1] == data["content"]:
                add(eid, when, None, "copilot_" + kind, event)  # the same prompt again
                continue
            msg = Message(role="system", content=data["content"])
            system = (add(eid, when, msg.set_extra(_extra(own, data, {"role", "content"})),
                          kind, None), data["content"])
        elif kind == "user.message":
            sent = data.get("transformedContent", data.get("content"))
            users.append(str(data.get("content") or ""))
            msg = Message(role="user", content=str(sent or ""))
            add(eid, when, msg.set_extra(_extra(own, data, {"transformedContent"})), kind, None)
        elif kind == "assistant.message":
            add(eid, when, _assistant(data, usage).set_extra(
                _extra(own, data, {"content", "reasoningText", "toolRequests", "model"})),
                kind, None)
            usage = None
        elif kind == "tool.execution_complete":
            add(eid, when, _tool_result(data).set_extra(_extra(own, data, {"toolCallId"})),
                kind, None)
        elif kind == "session.usage_record":
            usage = _usage(data.get("usage"))
            add(eid, when, None, "copilot_" + kind, event)
        elif kind == "session.compaction_start" and data.get("compactionAttemptId") in applied:
            start = add(eid, when, None, "copilot_" + kind, event)
            done = applied[data["compactionAttemptId"]]
            summary = str(done.get("summaryContent") or "")
            comp = CompactionEntry(ids.new(), parent, when, summary=summary,
                                   first_kept_entry_id=start,
                                   tokens_before=int(done.get("preCompactionTokens") or 0),
                                   tokens_after=done.get("postCompactionTokens"),
                                   pinned=[system[0]] if system is not None else None,
                                   details={"source": FORMAT, "summary": summary,
                                            "compactionAttemptId": data["compactionAttemptId"]})
            entries.append(comp)
            parent = comp.id
            text = summary_text(users, summary)
            # the summary is sent as the CLI sent it: this message, not contextree's own
            comp.details["summary_entry"] = add(None, when, Message(
                role="user", content=text).marked(CompactionSummaryMarker(
                    summary=summary, source=FORMAT, tokens_before=comp.tokens_before)),
                kind, None)
        else:
            add(eid, when, None, "copilot_" + kind, event)
    first = first_event[1]
    begun: Json = first["data"] if isinstance(first.get("data"), dict) else {}
    where = begun.get("context")
    cwd = str(where["cwd"]) if isinstance(where, dict) and where.get("cwd") else None
    sid = str(begun.get("sessionId") or "") or None
    link = None
    if agent is not None:  # a sub-agent: an id of its own, linked to the session
        link = {"agent_id": agent, "tool_use_id": agent, "parent_session_id": sid,
                "parent_file": str(path)}
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"copilot:{sid}#{agent}"))
    meta = {**imported_metadata(FORMAT, path, subagent=link), "copilot": begun,
            "copilot_workspace": _workspace(path.parent / "workspace.yaml")}
    hdr = header(sid, str(begun.get("startTime") or stamp), cwd=cwd, metadata=meta,
                 parent_session=link["parent_session_id"] if link else None)
    counts: dict[str, int] = {}
    for _, e in events:
        counts[e["type"]] = counts.get(e["type"], 0) + 1
    return Imported(hdr, entries, report={"events": counts})


def _system_first(events: list[tuple[int, Json]]) -> list[tuple[int, Json]]:
    """The events with each ``system.message`` before the ``user.message`` just before it:
    the CLI writes the prompt it builds for a turn after the turn's user message, and sends
    it first."""
    out = list(events)
    for i in range(1, len(out)):
        if out[i][1]["type"] == "system.message" and out[i - 1][1]["type"] == "user.message":
            out[i - 1], out[i] = out[i], out[i - 1]
    return out


def _extra(own: Json, data: Json, used: set[str]) -> Json:
    """What a message keeps of its event: the event's own fields and the data not used."""
    return {"copilot_event": own, "copilot_data": {k: v for k, v in data.items()
                                                   if k not in used}}


def _assistant(data: Json, usage: Usage | None) -> Message:
    parts: list[Any] = []
    if isinstance(data.get("reasoningText"), str) and data["reasoningText"]:
        parts.append(ThinkingPart(thinking=data["reasoningText"]))
    text = str(data.get("content") or "")
    calls = [ToolCall(id=str(r.get("toolCallId") or ""), name=str(r.get("name") or ""),
                      arguments=r["arguments"] if isinstance(r.get("arguments"), dict) else {})
             .set_extra({k: v for k, v in r.items()
                         if k not in ("toolCallId", "name", "arguments")})
             for r in data.get("toolRequests") or () if isinstance(r, dict)]
    content: str | list[Any] = text
    if parts:
        content = [*parts, *([TextPart(text=text)] if text else [])]
    return Message(role="assistant", content=content, tool_calls=calls or None, usage=usage,
                   model=str(data["model"]) if data.get("model") else None)


def _tool_result(data: Json) -> Message:
    result: Json = data["result"] if isinstance(data.get("result"), dict) else {}
    error = data.get("error")
    text = result.get("content")
    if text is None and error is not None:
        text = error.get("message") if isinstance(error, dict) else error
    return Message(role="tool", content=str(text or ""), tool_call_id=str(
        data.get("toolCallId") or ""), is_error=data.get("success") is False)


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None

    def n(key: str) -> int:
        v = raw.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0

    read_, written = n("cacheReadTokens"), n("cacheWriteTokens")
    cost = raw.get("cost")
    return Usage(input=max(n("inputTokens") - read_ - written, 0), output=n("outputTokens"),
                 cache_read=read_, cache_write=written,
                 total=n("inputTokens") + n("outputTokens"),
                 cost=float(cost) if isinstance(cost, int | float) else None)


def _workspace(path: Path) -> dict[str, str] | None:
    """``workspace.yaml`` beside the events (flat ``key: value`` lines), or ``None``."""
    try:
        text = path.read_text()
    except OSError:
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "-", "#")):
            out[key.strip()] = value.strip()
    return out


def _not_copilot(path: Path) -> str:
    from ._detect import detected_other  # it imports the format table, which imports us

    other = detected_other(path, FORMAT)
    if other is not None:
        return (f"this is not a Copilot CLI session (it does not begin with its "
                f"`session.start` event); it looks like {other}: import it as {other} "
                f"(`contextree import {other} ...`, or `auto`)")
    return ("this is not a Copilot CLI session: its first line is not a `session.start` event "
            "of producer copilot-agent")


# -- where the CLI keeps them ------------------------------------------------------------


@dataclass(frozen=True)
class CopilotSession:
    """A session found under Copilot CLI's home."""

    id: str
    path: Path
    modified: float
    cwd: str | None
    first_prompt: str | None


def copilot_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Copilot CLI's folder: ``home`` if given, else ``$COPILOT_HOME`` or ``~/.copilot``."""
    if home is not None:
        return Path(home).expanduser()
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot").expanduser()


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[CopilotSession]:
    """Every session under ``<home>/session-state/``, newest first."""
    root = copilot_home(home) / "session-state"
    rows: list[CopilotSession] = []
    for events in sorted(root.glob("*/events.jsonl")) if root.is_dir() else ():
        meta = _workspace(events.parent / "workspace.yaml") or {}
        prompt = None
        try:
            for _, obj in read_json_lines(events):
                if isinstance(obj, dict) and obj.get("type") == "user.message":
                    data: Json = obj["data"] if isinstance(obj.get("data"), dict) else {}
                    prompt = str(data.get("content") or "").strip()[:200] or None
                    break
        except Exception:
            prompt = None
        rows.append(CopilotSession(meta.get("id") or events.parent.name, events,
                                   events.stat().st_mtime, meta.get("cwd"), prompt))
    rows.sort(key=lambda r: r.modified, reverse=True)
    return rows


def find_session(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The ``events.jsonl`` of the session whose id is ``key`` or starts with it."""
    return find_by_id(key, lambda: list_sessions(home), "Copilot CLI session",
                      copilot_home(home) / "session-state")
