"""Imports of sessions written by the real Claude Code 2.1.197 and Codex 0.171.0 CLIs.

The fixtures (``tests/data/formats/real``, see its README) hold each session file and every
request the CLI sent to a fake model server. For every fixture file:

* the imported active branch holds every conversation message of the file, in order (role,
  text, tool calls with ids and arguments, results with call ids and error flags, thinking
  with signatures), read here straight from the JSON lines;
* ``build_context()`` equals what the CLI sent in its last request for that file, followed by
  the reply to it;
* nothing in the file is lost: every line is kept by an entry (``claude_code.records`` /
  ``codex.records``, without the content that became the message), as a custom entry, or as a
  counted rewrite of a line written twice.

How the request is compared with the context (both are reduced to a flat list of items, so
that merging consecutive user lines into one API message does not matter):

* Claude Code: a ``<system-reminder>`` block with the current date, which Claude Code puts in
  front of the first prompt of every request, is not in the file and is left out; rendered
  attachments are ``system`` messages on both sides; the compaction summary is a user message
  on both sides; consecutive user lines are sent as one message whose texts but the last end
  with a newline (the comparison adds those newlines to the context).
* Codex: ``developer`` messages (the base instructions first) are system messages; within one
  response the reasoning and text come before the tool calls (contextree keeps them apart);
  Codex tool outputs have no error flag.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_fixtures import Item, Json, json_lines, manifest, requests
from contextree import ImagePart, Message, Session, TextPart, ThinkingPart
from contextree.entries import AnyEntry, CompactionEntry, CustomEntry, MessageEntry
from contextree.errors import SessionExists, SessionNotFound
from contextree.formats import _claude_code as claude_code
from contextree.formats import _codex as codex
from contextree.formats import import_session
from contextree.markers import CustomMessageMarker
from helpers import FORMATS_DATA, ROOT

REAL = FORMATS_DATA / "real"
CC = REAL / "claude_code"
CX = REAL / "codex"
lines_of = json_lines


def final_request(scenario: Path, session_id: str, key: str) -> int:
    """Index in requests.json of the last request sent for ``session_id``."""
    m = manifest(scenario)
    ids = m[key]
    if isinstance(ids, list) or "last_request_of_run" not in m:
        return int(m["final_main_request"])
    runs = [run for run, sid in ids.items() if sid == session_id]
    return max(int(m["last_request_of_run"][run]) for run in runs)


CC_FILES = sorted(p.relative_to(CC) for p in CC.glob("*/session-*.jsonl"))
# Files of the newest Claude Code (2.1.332): attachments carry what they were rendered as.
CC_NEW = REAL / "claude_code_2.1.332"
CC_NEW_FILES = sorted(CC_NEW.glob("*/session-*.jsonl"))
# A sub-agent transcript imported on its own is checked the same way.
CC_AGENT_FILES = sorted(REAL.glob("claude_code*/*/session-*/subagents/agent-*.jsonl"))
CC_ALL = [CC / p for p in CC_FILES] + CC_NEW_FILES + CC_AGENT_FILES


def cc_id(path: Path) -> str:
    return str(path.relative_to(REAL))
CX_FILES = sorted(p.relative_to(CX) for p in CX.glob("*/rollout-*.jsonl"))


def test_every_scenario_is_covered() -> None:
    assert {p.parent.name for p in CC_FILES} == {
        "simple", "tools", "resume", "compact_manual", "compact_auto", "compact_reactive",
        "subagent"}
    assert {p.parent.name for p in CX_FILES} == {"simple", "tools", "resume", "compact"}
    assert len(CC_FILES) == 8 and len(CX_FILES) == 5
    assert {p.parent.name for p in CC_NEW_FILES} == {
        "simple", "tools", "resume", "compact_manual", "compact_auto", "subagent",
        "attachments"}
    assert len(CC_NEW_FILES) == 8 and len(CC_AGENT_FILES) == 2


@pytest.fixture
def imported(tmp_path: Path) -> Any:
    opened: list[Session] = []

    def load(fmt: str, src: Path) -> Session:
        s = import_session(fmt, src, tmp_path / f"{len(opened)}.jsonl", durable=False)
        opened.append(s)
        return s

    yield load
    for s in opened:
        s.close()


# -- normalized items -----------------------------------------------------------------------

def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if b.get("type") == "text")


def anthropic_items(role: str, content: Any) -> list[Item]:
    """Claude Code JSON (a file line's message or a request message) as items."""
    if isinstance(content, str):
        return [(role if role != "assistant" else "text", content)] if content or \
            role != "assistant" else []
    out: list[Item] = []
    for b in content:
        kind = b.get("type")
        if kind == "text":
            out.append((role if role != "assistant" else "text", b["text"]))
        elif kind == "thinking":
            out.append(("thinking", b["thinking"], b.get("signature")))
        elif kind == "tool_use":
            out.append(("tool_use", b["id"], b["name"], b["input"]))
        elif kind == "tool_result":
            out.append(("tool_result", b["tool_use_id"], text_of(b.get("content")),
                        bool(b.get("is_error", False))))
        elif kind == "image":
            out.append(("image", b["source"].get("media_type"), b["source"].get("data")))
        else:
            out.append(("block", kind))
    return out


def message_items(m: Message) -> list[Item]:
    """A contextree message as the same items."""
    if m.role == "tool":
        return [("tool_result", m.tool_call_id, m.text, m.is_error)]
    if m.role == "system":
        return [("system", m.text)]
    out: list[Item] = []
    parts = [TextPart(text=m.content)] if isinstance(m.content, str) else list(m.content or [])
    for p in parts:
        if isinstance(p, TextPart):
            if m.role == "assistant":
                if p.text:
                    out.append(("text", p.text))
            else:
                out.append((m.role, p.text))
        elif isinstance(p, ThinkingPart):
            out.append(("thinking", p.thinking, p.signature))
        elif isinstance(p, ImagePart):
            out.append(("image", p.mime_type, p.data))
        else:
            out.append(("block", p.type))
    out += [("tool_use", c.id, c.name, c.arguments) for c in m.tool_calls or ()]
    return out


def branch_messages(session: Session, leaf: str | None = None) -> list[Message]:
    """The messages on the branch as written: message entries, and the summary a compaction
    entry holds (its retained copies of earlier messages are not new messages)."""
    out: list[Message] = []
    for e in session.branch(leaf):
        if isinstance(e, MessageEntry):
            out.append(e.message)
        elif isinstance(e, CompactionEntry):
            out += [m for m in e.retained_tail or () if m.kind == "compaction_summary"]
    return out


ASSISTANT_ITEMS = ("text", "thinking", "tool_use", "reasoning", "assistant", "call")


# -- Claude Code ----------------------------------------------------------------------------

def cc_file_items(path: Path) -> list[Item]:
    """The conversation of a Claude Code file, read from its lines: user and assistant lines
    in file order (a uuid written twice counts once; API error notices are not sent)."""
    seen: set[str] = set()
    out: list[Item] = []
    for d in lines_of(path):
        if d.get("type") not in ("user", "assistant") or d["uuid"] in seen:
            continue
        seen.add(d["uuid"])
        if d.get("isApiErrorMessage"):
            continue
        out += anthropic_items(d["message"]["role"], d["message"]["content"])
    return out


def cc_request_items(body: Json) -> list[Item]:
    out: list[Item] = []
    for i, m in enumerate(body["messages"]):
        content = m["content"]
        if i == 0 and isinstance(content, list) and content and content[0].get(
                "type") == "text" and content[0]["text"].startswith(
                "<system-reminder>\nAs you answer the user's questions"):
            content = content[1:]  # the current date, added to every request
        if m["role"] == "system":
            out.append(("system", text_of(content)))
        else:
            out += anthropic_items(m["role"], content)
    return out


def cc_context_items(session: Session, leaf: str | None = None) -> list[Item]:
    """The context as items. Claude Code sends consecutive user messages as one, ending the
    text of each but the last with a newline; that is done here too."""
    msgs = session.build_context(leaf).messages
    out: list[Item] = []
    for i, m in enumerate(msgs):
        items = message_items(m)
        if m.role == "user" and i + 1 < len(msgs) and msgs[i + 1].role == "user":
            last = max((k for k, x in enumerate(items) if x[0] == "user"), default=None)
            if last is not None:
                items[last] = ("user", items[last][1] + "\n")
        out += items
    return out


def is_harness(m: Message) -> bool:
    """A message rendered from an ``attachment`` line (system, or user since 2.1.3xx)."""
    mark = m.marker
    return m.role == "system" or (isinstance(mark, CustomMessageMarker)
                                  and mark.custom_type == "claude-code/attachment")


def without_system(items: list[Item]) -> list[Item]:
    return [i for i in items if i[0] != "system"]


@pytest.mark.parametrize("path", CC_ALL, ids=cc_id)
def test_claude_code_branch_holds_every_message_in_order(path: Path, imported: Any) -> None:
    s = imported("claude-code", path)
    got = [i for m in branch_messages(s) if not is_harness(m) for i in message_items(m)]
    assert got == cc_file_items(path)
    assert any(i[0] == "tool_use" for i in got) and any(i[0] == "tool_result" for i in got)


@pytest.mark.parametrize("rel", CC_FILES, ids=str)
def test_claude_code_context_is_what_claude_code_sent(rel: Path, imported: Any) -> None:
    path = CC / rel
    s = imported("claude-code", path)
    sid = lines_of(path)[-1]["sessionId"]
    body = requests(path.parent)[final_request(path.parent, sid, "session_ids")]["body"]
    sent = cc_request_items(body)
    ctx = cc_context_items(s)
    assert ctx[:len(sent)] == sent
    reply = ctx[len(sent):]  # the answer to that request, the last thing in the file
    assert reply and all(i[0] in ASSISTANT_ITEMS for i in reply)


# Claude Code 2.1.332 moves the harness context it renders from attachment lines when it
# builds a request: the user-role pieces of a turn go before the prompt, the system-role ones
# are joined into one system message (blank lines between), hoisted above a compaction's
# preserved messages. So the comparison is in two parts: the conversation (prompts, summary,
# replies, tool calls and results) in order, and the harness texts as a multiset (each system
# message sent must be made of the context's system texts and blank lines only).
# The sub-agent scenario is compared at the main request before the sub-agent's report: that
# report comes back as a <task-notification> line, which Claude Code rewrites when it sends it.
CC_NEW_REQUEST = {"subagent": 1}


def cc_split(items: list[Item]) -> tuple[list[Item], list[str], list[str]]:
    """(conversation items, harness user texts, system texts) of already split items."""
    conv: list[Item] = []
    users: list[str] = []
    systems: list[str] = []
    for i in items:
        if i[0] == "system":
            systems.append(i[1])
        elif i[0] == "harness":
            users.append(i[1].rstrip("\n"))
        else:
            conv.append(("user", i[1].rstrip("\n")) if i[0] == "user" else i)
    return conv, users, systems


@pytest.mark.parametrize("path", CC_NEW_FILES, ids=cc_id)
def test_claude_code_2_1_332_context_is_what_claude_code_sent(path: Path, imported: Any) -> None:
    s = imported("claude-code", path)
    scenario = path.parent
    sid = lines_of(path)[-1]["sessionId"]
    index = CC_NEW_REQUEST.get(scenario.name) or final_request(scenario, sid, "session_ids")
    assert_sent_by_2_1_332(s.build_context().messages, requests(scenario)[index]["body"])


def assert_sent_by_2_1_332(msgs: list[Message], body: Json) -> None:
    """``msgs`` (a context) is what Claude Code 2.1.332 sent as ``body``, then the reply."""
    ctx_items = [(("harness", x[1]) if is_harness(m) and x[0] == "user" else x)
                 for m in msgs for x in message_items(m)]
    ctx_conv, ctx_users, ctx_systems = cc_split(ctx_items)
    harness = set(ctx_users)
    sent = [(("harness", x[1]) if x[0] == "user" and x[1].rstrip("\n") in harness else x)
            for x in cc_request_items(body)]
    conv, users, systems = cc_split(sent)
    assert ctx_conv[:len(conv)] == conv
    reply = ctx_conv[len(conv):]
    assert reply and all(i[0] in ASSISTANT_ITEMS for i in reply[:1])
    # The harness context up to the reply: every piece sent, and nothing else.
    seen, cut = 0, len(msgs)
    for k, m in enumerate(msgs):
        if seen >= len(conv) and m.role == "assistant":
            cut = k  # the reply to the request
            break
        if not is_harness(m):
            seen += len(message_items(m))
    before = [(("harness", x[1]) if is_harness(m) and x[0] == "user" else x)
              for m in msgs[:cut] for x in message_items(m)]
    _, want_users, want_systems = cc_split(before)
    assert sorted(users) == sorted(want_users)
    assert users, "the fixture sends harness context as user text"
    rest = "\n\n".join(systems)
    for text in sorted(want_systems, key=len, reverse=True):
        assert text in rest, f"not sent: {text[:80]!r}"
        rest = rest.replace(text, "", 1)
    assert not rest.strip(), f"sent but not in the context: {rest.strip()[:200]!r}"
    assert ctx_systems


def cc_kept(entries: list[AnyEntry]) -> Counter[str]:
    """Every Claude Code line an entry keeps (duplicates rebuilt from their notes)."""
    out: Counter[str] = Counter()
    for e in entries:
        if isinstance(e, CustomEntry) and e.custom_type != "claude-code/subagent":
            out[json.dumps(e.data, sort_keys=True)] += 1
        kept = e.extra.get("claude_code", {}) if not isinstance(e, CustomEntry) else {}
        for r in kept.get("records", ()):
            out[json.dumps(r, sort_keys=True)] += 1
    return out


def cc_strip(d: Json) -> Json:
    if isinstance(d.get("message"), dict):
        return {**d, "message": {k: v for k, v in d["message"].items() if k != "content"}}
    return d


@pytest.mark.parametrize("path", CC_ALL, ids=cc_id)
def test_claude_code_nothing_in_the_file_is_lost(path: Path, imported: Any) -> None:
    s = imported("claude-code", path)
    files = [path, *claude_code.subagent_files(path)]
    records = [d for f in files for d in lines_of(f)]
    first: dict[str, Json] = {}
    expected: Counter[str] = Counter()
    expected_forms: list[set[str]] = []
    rewrites = 0
    for d in records:
        if "uuid" in d and d["uuid"] in first:
            rewrites += 1  # written again around a compaction: kept as a note of the change
            changed = {k: v for k, v in d.items() if first[d["uuid"]].get(k) != v}
            notes = [n for e in s.entries() for n in e.extra.get("claude_code", {}).get(
                "rewritten", ()) if n["uuid"] == d["uuid"]]
            assert {"uuid": d["uuid"], "changed": changed} in notes
            continue
        if "uuid" in d:
            first[d["uuid"]] = d
        expected_forms.append({json.dumps(d, sort_keys=True),
                               json.dumps(cc_strip(d), sort_keys=True)})
    entries = list(s.entries())
    kept = cc_kept(entries)
    for forms in expected_forms:  # a message line is kept without its content, others whole
        match = next((f for f in forms if kept[f] > expected[f]), None)
        assert match is not None, f"line not kept: {sorted(forms)[0][:200]}"
        expected[match] += 1
    entries = list(s.entries())
    assert cc_kept(entries) == expected
    report = (s.header.metadata or {})["imported_from"]["report"]
    assert sum(report["records"].values()) == len(records)
    assert sum(f["duplicates"] for f in report["files"]) == rewrites
    assert sum(report["custom_entries"].values()) == sum(
        isinstance(e, CustomEntry) for e in entries)
    # Only the first prompt (and a sub-agent's) starts the tree: every line is linked in.
    roots = [e for e in entries if e.parent_id is None]
    assert len(roots) == len(files)


def test_claude_code_parallel_results_follow_their_call(imported: Any) -> None:
    s = imported("claude-code", CC / "tools" / "session-1.jsonl")
    roles = [(m.role, m.tool_call_id) for m in s.build_context().messages]
    assert roles[1:4] == [("assistant", None), ("tool", "toolu_fx_read"),
                          ("tool", "toolu_fx_fail")]
    failed = s.build_context().messages[3]
    assert failed.is_error and "No such file" in failed.text
    first = s.build_context().messages[1]
    assert [p.signature for p in first.thinking] == ["c2lnLWZpeHR1cmUtMQ=="]
    # One entry for the four lines of the first response, keeping all four.
    entry = s.get_entry(s.build_context().entry_ids[1] or "")
    assert isinstance(entry, MessageEntry)
    assert entry.extra["claude_code"]["blocks"] == [1, 1, 1, 1]


def test_claude_code_compaction_keeps_what_the_model_saw(imported: Any) -> None:
    s = imported("claude-code", CC / "compact_reactive" / "session-1.jsonl")
    (comp,) = s.find(CompactionEntry)
    assert comp.tokens_before == 293 and comp.details["trigger"] == "auto"
    tail = comp.retained_tail or []
    assert tail[0].kind == "compaction_summary" and tail[0].role == "user"
    assert [m.tool_call_id for m in tail[1:] if m.role == "tool"] == ["toolu_fx_cat",
                                                                      "toolu_fx_wc"]
    # The turns before it stay on the branch, out of the context.
    first_prompt = "List the files in this directory."
    assert any(m.text == first_prompt for m in branch_messages(s))
    assert all(m.text != first_prompt for m in s.build_context().messages)


def test_claude_code_subagent_transcript_is_linked_to_its_call(imported: Any) -> None:
    path = CC / "subagent" / "session-1.jsonl"
    s = imported("claude-code", path)
    (link,) = [e for e in s.find(CustomEntry) if e.custom_type == "claude-code/subagent"]
    assert link.data["tool_use_id"] == "toolu_fx_agent"
    assert link.data["agent_id"] == "ab7c6e8b44209fbd4"
    assert link.data["meta"]["agentType"] == "general-purpose"
    assert link.id in {e.id for e in s.branch()}  # on the main branch, after the result
    parent = s.get_entry(link.parent_id or "")
    assert isinstance(parent, MessageEntry) and parent.message.tool_call_id == "toolu_fx_agent"
    # The transcript is its own root: its context is what the sub-agent saw.
    agent_file = claude_code.subagent_files(path)[0]
    sub = branch_messages(s, link.data["last_entry_id"])
    assert [i for m in sub for i in message_items(m)] == cc_file_items(agent_file)
    assert s.branch(link.data["last_entry_id"])[0].id == link.data["first_entry_id"]
    body = requests(path.parent)[manifest(path.parent)["final_subagent_request"]]["body"]
    sent = without_system(cc_request_items(body))
    assert without_system(cc_context_items(s, link.data["last_entry_id"]))[:len(sent)] == sent


def test_claude_code_attachments_export_as_themselves(imported: Any, tmp_path: Path) -> None:
    from contextree.formats._claude_code_export import records

    path = CC_NEW / "attachments" / "session-1.jsonl"
    s = imported("claude-code", path)
    rendered = {d["uuid"] for d in lines_of(path) if d["type"] == "attachment" and d.get(
        "rendered")}
    out = records(s)
    written = {d["uuid"] for d in out if d["type"] == "attachment"}
    assert written == rendered  # the user-role ones too, not as user lines
    assert all(d.get("rendered") for d in out if d["type"] == "attachment")
    users = [d["message"]["content"] for d in out if d["type"] == "user"]
    assert not any("<system-reminder>" in str(c) for c in users)
    # Read back, the export gives the same context.
    from contextree.formats import export_session

    back = imported("claude-code", export_session("claude-code", s, tmp_path / "export.jsonl"))
    assert [(m.role, m.text, m.kind) for m in back.build_context().messages] == \
        [(m.role, m.text, m.kind) for m in s.build_context().messages]


SUBAGENT_SCENARIOS = [CC / "subagent", CC_NEW / "subagent"]


@pytest.mark.parametrize("scenario", SUBAGENT_SCENARIOS, ids=cc_id)
def test_claude_code_subagent_file_imports_as_its_own_session(scenario: Path,
                                                              imported: Any) -> None:
    parent = scenario / "session-1.jsonl"
    (agent_file,) = claude_code.subagent_files(parent)
    s = imported("claude-code", agent_file)
    link = (s.header.metadata or {})["imported_from"]["subagent"]
    assert s.header.parent_session == str(parent.resolve()) == link["parent_file"]
    assert link["resolved"] is True and "note" not in link
    assert link["tool_use_id"] == "toolu_fx_agent"
    assert link["parent_session_id"] == lines_of(parent)[-1]["sessionId"]
    assert link["agent_id"] == lines_of(agent_file)[0]["agentId"]
    assert s.header.id != link["parent_session_id"]
    # Every message of the transcript, in order, and the context it sent last.
    assert [i for m in branch_messages(s) if not is_harness(m)
            for i in message_items(m)] == cc_file_items(agent_file)
    body = requests(scenario)[manifest(scenario)["final_subagent_request"]]["body"]
    if scenario.parent == CC_NEW:
        assert_sent_by_2_1_332(s.build_context().messages, body)
    else:
        sent = without_system(cc_request_items(body))
        assert without_system(cc_context_items(s))[:len(sent)] == sent


@pytest.mark.parametrize("linked", [False, True], ids=["root", "with-subagents"])
@pytest.mark.parametrize("scenario", SUBAGENT_SCENARIOS, ids=cc_id)
def test_claude_code_export_writes_the_subagent_beside_the_session(scenario: Path, linked: bool,
                                                                   tmp_path: Path) -> None:
    """The sub-agent of the exported branch (a root in the session, or a session of its own
    with ``with_subagents``) is written as Claude Code lays it out, and read back, it is the
    same sub-agent linked to the same call."""
    from contextree.formats import export_session

    parent = scenario / "session-1.jsonl"
    (agent_file,) = claude_code.subagent_files(parent)
    aid = lines_of(agent_file)[0]["agentId"]
    with import_session("claude-code", parent, tmp_path / "parent.jsonl", durable=False,
                        with_subagents=linked) as s, \
            import_session("claude-code", agent_file, tmp_path / "alone.jsonl",
                           durable=False) as alone:
        out = export_session("claude-code", s, tmp_path / "export.jsonl")
        (written,) = claude_code.subagent_files(out)
        assert written == tmp_path / "export" / "subagents" / f"agent-{aid}.jsonl"
        sid = lines_of(out)[0]["sessionId"]
        assert all(d["isSidechain"] is True and d["agentId"] == aid and d["sessionId"] == sid
                   for d in lines_of(written))
        meta = json.loads(written.with_suffix(".meta.json").read_text())
        assert meta["toolUseId"] == "toolu_fx_agent" and meta["agentType"] == "general-purpose"
        back = import_session("claude-code", out, tmp_path / "back.jsonl", durable=False)
        (link,) = [e for e in back.find(CustomEntry) if e.custom_type == "claude-code/subagent"]
        assert link.data["tool_use_id"] == "toolu_fx_agent" and link.data["agent_id"] == aid
        assert cc_context_items(back, link.data["last_entry_id"]) == cc_context_items(alone)
        back.close()


def test_claude_code_export_refuses_a_sidechain_already_there(tmp_path: Path) -> None:
    """All or nothing: a sub-agent file in the way stops the export before the session file
    is written; with overwrite both are written."""
    from contextree.formats import export_session

    parent = CC_NEW / "subagent" / "session-1.jsonl"
    aid = lines_of(claude_code.subagent_files(parent)[0])[0]["agentId"]
    out = tmp_path / "export.jsonl"
    there = tmp_path / "export" / "subagents" / f"agent-{aid}.meta.json"
    there.parent.mkdir(parents=True)
    there.write_text("{}")
    with import_session("claude-code", parent, tmp_path / "p.jsonl", durable=False) as s:
        with pytest.raises(SessionExists) as err:
            export_session("claude-code", s, out)
        assert str(there) in str(err.value) and not out.exists()
        assert not there.with_name(f"agent-{aid}.jsonl").exists()
        export_session("claude-code", s, out, overwrite=True)
    assert out.exists() and json.loads(there.read_text())["toolUseId"] == "toolu_fx_agent"


@pytest.mark.parametrize("redact", [True, False], ids=["redacted", "no-redact"])
def test_claude_code_export_redacts_a_linked_subagent_session(redact: bool,
                                                              tmp_path: Path) -> None:
    """``contextree export`` redacts the sub-agent session an import linked, as it redacts
    the parent (and leaves both alone with --no-redact)."""
    from helpers import run

    key = "AKIA" + "Q" * 16
    parent = CC_NEW / "subagent" / "session-1.jsonl"
    dest = tmp_path / "parent.jsonl"
    import_session("claude-code", parent, dest, with_subagents=True, durable=False).close()
    with Session.open(tmp_path / "parent.agent-1.jsonl") as sub:
        sub.append_message(Message.user(f"Use the key {key}."))
    out = tmp_path / "export.jsonl"
    run("export", "claude-code", dest, "-o", out, *([] if redact else ["--no-redact"]))
    (written,) = claude_code.subagent_files(out)
    text = written.read_text()
    assert (key in text) is not redact and ("[REDACTED:aws-key:" in text) is redact
    assert f"Use the key {'[REDACTED' if redact else key}" in text


@pytest.mark.parametrize("fmt, src", [
    ("copilot", REAL / "copilot" / "subagent" / "session-1" / "events.jsonl"),
    # opencode's message ids look random: the redacted copy the export reads kept them
    ("opencode", REAL / "opencode" / "subagent" / "opencode.db"),
], ids=["copilot", "opencode"])
def test_claude_code_export_of_another_tools_subagent(fmt: str, src: Path,
                                                      tmp_path: Path) -> None:
    """Another tool's sub-agent exported to Claude Code: a sidechain file with an id of
    Claude Code's shape, linked to the call that started it, holding the sub-agent's
    conversation."""
    from agent_fixtures import subagent_links, subtree_leaf
    from contextree.formats import export_session

    with import_session(fmt, src, tmp_path / "parent.jsonl", durable=False) as s:
        (link,) = subagent_links(s, fmt)
        out = export_session("claude-code", s, tmp_path / "export.jsonl")
        (written,) = claude_code.subagent_files(out)
        assert re.fullmatch(r"agent-a[0-9a-f]{16}\.jsonl", written.name)
        back = import_session("claude-code", out, tmp_path / "back.jsonl", durable=False)
        (back_link,) = subagent_links(back, "claude-code")
        assert back_link.data["tool_use_id"] == link.data["tool_use_id"]
        sub = s.build_context(subtree_leaf(s, link.data["first_entry_id"])).messages
        want = [(m.role, m.text) for m in sub if m.role != "system"]
        prompts = 1 if any(m.role == "system" for m in sub) else 0
        got = [(m.role, m.text) for m in back.build_context(
            back_link.data["last_entry_id"]).messages]
        # its system prompt goes the way the export writes harness text: a system reminder
        assert [x for x in got if not x[1].startswith("<system-reminder>")] == want
        assert len(want) >= 3 and len(got) == len(want) + prompts
        back.close()


@pytest.mark.parametrize("scenario", SUBAGENT_SCENARIOS, ids=cc_id)
def test_claude_code_with_subagents_imports_each_beside_the_parent(scenario: Path,
                                                                   tmp_path: Path) -> None:
    parent = scenario / "session-1.jsonl"
    (agent_file,) = claude_code.subagent_files(parent)
    dest = tmp_path / "parent.jsonl"
    with import_session("claude-code", parent, dest, with_subagents=True,
                        durable=False) as s:
        (link,) = [e for e in s.find(CustomEntry) if e.custom_type == "claude-code/subagent"]
        entries = list(s.entries())
        # The transcript is not copied in: the one root is the parent's first line.
        assert [e for e in entries if e.parent_id is None] == entries[:1]
        assert link.id in {e.id for e in s.branch()}
        linked_to = s.get_entry(link.parent_id or "")
        assert isinstance(linked_to, MessageEntry)
        assert linked_to.message.tool_call_id == link.data["tool_use_id"] == "toolu_fx_agent"
    agent_dest = tmp_path / "parent.agent-1.jsonl"
    assert link.data["session"] == str(agent_dest)
    with Session.open(agent_dest, readonly=True) as sub, \
            import_session("claude-code", agent_file, tmp_path / "alone.jsonl",
                           durable=False) as alone:
        assert sub.header.parent_session == str(dest)
        info = (sub.header.metadata or {})["imported_from"]["subagent"]
        assert info["session"] == str(agent_dest) and info["tool_use_id"] == "toolu_fx_agent"
        assert sub.build_context().messages == alone.build_context().messages
        assert len(sub.build_context().messages) >= 4


def test_claude_code_subagent_without_its_parent_still_imports(tmp_path: Path,
                                                               imported: Any) -> None:
    agent = tmp_path / "gone" / "subagents" / "agent-1.jsonl"
    agent.parent.mkdir(parents=True)
    (agent_file,) = claude_code.subagent_files(CC / "subagent" / "session-1.jsonl")
    shutil.copyfile(agent_file, agent)
    s = imported("claude-code", agent)
    link = (s.header.metadata or {})["imported_from"]["subagent"]
    assert link["resolved"] is False and "not there" in link["note"]
    assert link["parent_file"] == str(tmp_path / "gone.jsonl")
    assert s.header.parent_session == link["parent_session_id"]  # Claude Code's session id
    assert link["tool_use_id"] is None  # no meta.json, no parent to find it in
    assert [i for m in branch_messages(s) for i in message_items(m)] == cc_file_items(agent)


# A line nested past MAX_DEPTH but within the decoder's own recursion guard: the session
# file's first pass lets it by (it is refused when placed), a sub-agent's must not.
_DEEP_LINE = json.dumps({"type": "mode", "x": json.loads("[" * 300 + "]" * 300)})


@pytest.mark.parametrize(("line", "error"), [("not json", "not valid JSON"),
                                             (_DEEP_LINE, "levels deep")])
def test_claude_code_corrupt_subagent_file_is_reported_not_fatal(
        tmp_path: Path, imported: Any, line: str, error: str) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(CC_NEW / "subagent", copy)
    bad = copy / "session-1" / "subagents" / "agent-bad.jsonl"
    bad.write_text('{"type": "user", "uuid": "x", "message": {"content": "hi"}}\n'
                   f"{line}\n")
    parent = copy / "session-1.jsonl"
    s = imported("claude-code", parent)
    report = (s.header.metadata or {})["imported_from"]["report"]
    (err,) = report["subagent_errors"]
    assert err["file"] == str(bad) and error in err["error"]
    assert len(report["subagents"]) == 1  # the good one is still linked
    with import_session("claude-code", parent, tmp_path / "p.jsonl", with_subagents=True,
                        durable=False) as p:
        report = (p.header.metadata or {})["imported_from"]["report"]
        assert report["subagent_errors"][0]["file"] == str(bad)
    assert (tmp_path / "p.agent-1.jsonl").is_file()
    assert not (tmp_path / "p.agent-bad.jsonl").exists()


def test_with_subagents_is_refused_for_other_formats(tmp_path: Path) -> None:
    from contextree.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="only claude-code"):
        import_session("codex", CX / "simple" / "rollout-1.jsonl", tmp_path / "x.jsonl",
                       with_subagents=True)
    with pytest.raises(InvalidArgument, match="not a database URL"):
        import_session("claude-code", CC / "subagent" / "session-1.jsonl",
                       "postgresql://127.0.0.1:1/none#s", with_subagents=True)
    # Nothing is written over: a sub-agent's target already there stops the import first.
    (tmp_path / "p.agent-1.jsonl").write_text("mine\n")
    with pytest.raises(SessionExists):
        import_session("claude-code", CC / "subagent" / "session-1.jsonl",
                       tmp_path / "p.jsonl", with_subagents=True)
    assert not (tmp_path / "p.jsonl").exists()
    assert (tmp_path / "p.agent-1.jsonl").read_text() == "mine\n"


def test_claude_code_fork_and_resume(imported: Any) -> None:
    resumed = imported("claude-code", CC / "resume" / "session-1.jsonl")
    forked = imported("claude-code", CC / "resume" / "session-2.jsonl")
    prompts = [m.text for m in branch_messages(forked) if m.role == "user"]
    assert prompts == ["List the files in this directory.", "What does a.txt contain?",
                       "Answer again, differently.", "And now?"]
    assert [m.text for m in branch_messages(resumed) if m.role == "user"] == prompts[:2]
    assert forked.id != resumed.id


# -- Codex ----------------------------------------------------------------------------------

def cx_item(p: Json) -> list[Item]:
    kind = p.get("type")
    if kind == "message":
        role = {"developer": "system"}.get(p["role"], p["role"])
        return [(role, "".join(c.get("text", "") for c in p["content"]))]
    if kind == "reasoning":
        return [("reasoning", "\n\n".join(s["text"] for s in p.get("summary") or ()),
                 p.get("encrypted_content"))]
    if kind == "function_call":
        return [("call", p["call_id"], p["name"], json.loads(p["arguments"]))]
    if kind == "custom_tool_call":
        return [("call", p["call_id"], p["name"], {"input": p["input"]})]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [("output", p["call_id"], p["output"])]
    return [("item", kind)]


def cx_grouped(items: list[Item]) -> list[Item]:
    """Within a run of assistant items: reasoning and text first, then the calls."""
    out: list[Item] = []
    run: list[Item] = []
    for i in [*items, ("end",)]:
        if i[0] in ("reasoning", "assistant", "call"):
            run.append(i)
            continue
        out += [x for x in run if x[0] != "call"] + [x for x in run if x[0] == "call"]
        run = []
        if i[0] != "end":
            out.append(i)
    return out


def cx_message_items(m: Message) -> list[Item]:
    if m.role == "tool":
        return [("output", m.tool_call_id, m.text)]
    if m.role != "assistant":
        return [(m.role, m.text)]
    out: list[Item] = [("reasoning", p.thinking, p.signature) for p in m.thinking]
    if m.text:
        out.append(("assistant", m.text))
    out += [("call", c.id, c.name, c.arguments) for c in m.tool_calls or ()]
    return out


def cx_file_items(path: Path) -> list[Item]:
    """The response items of a rollout (the fork parent's part first), without the summary
    reply of a compaction, which the model is never sent."""
    head = lines_of(path)[0]["payload"]
    out: list[Item] = []
    base = head.get("history_base")
    if base:
        parent = next(p for p in path.parent.glob("rollout-*.jsonl")
                      if lines_of(p)[0]["payload"]["id"] == base["thread_id"])
        raw = parent.read_bytes()[:base["end_byte_offset"]].decode()
        out += cx_file_items_of([json.loads(x) for x in raw.splitlines() if x.strip()])
    return cx_grouped(out + cx_file_items_of(lines_of(path)))


def cx_file_items_of(lines: list[Json]) -> list[Item]:
    out: list[Item] = []
    for d in lines:
        if d["type"] == "response_item" and not (d.get("metadata") or {}).get(
                "compaction_output"):
            out += cx_item(d["payload"])
    return out


@pytest.mark.parametrize("rel", CX_FILES, ids=str)
def test_codex_branch_holds_every_message_in_order(rel: Path, imported: Any) -> None:
    path = CX / rel
    s = imported("codex", path)
    got = [i for m in branch_messages(s) if not m.kind
           and m.extra.get("codex_role") != "base_instructions" for i in cx_message_items(m)]
    assert got == cx_file_items(path)


@pytest.mark.parametrize("rel", CX_FILES, ids=str)
def test_codex_context_is_what_codex_sent(rel: Path, imported: Any) -> None:
    path = CX / rel
    s = imported("codex", path)
    tid = lines_of(path)[0]["payload"]["id"]
    body = requests(path.parent)[final_request(path.parent, tid, "thread_ids")]["body"]
    sent = cx_grouped([i for item in body["input"] for i in cx_item(item)])
    ctx = [i for m in s.build_context().messages for i in cx_message_items(m)]
    if ctx[0] != sent[0]:
        assert ctx[0][0] == sent[0][0] == "system"
        assert same_base_instructions(sent[0][1], ctx[0][1])
        ctx[0] = sent[0]
    assert ctx[:len(sent)] == sent
    reply = ctx[len(sent):]
    assert reply and all(i[0] in ASSISTANT_ITEMS for i in reply)


def same_base_instructions(sent: str, written: str) -> bool:
    """Codex 0.171.0 leaves a sentence of its default base instructions out of what it sends
    (a checklist rule, in exec mode): what it sends is the rollout's text minus that line."""
    if sent == written:
        return True
    sent_lines, written_lines = sent.splitlines(), written.splitlines()
    return set(sent_lines) <= set(written_lines) and len(written_lines) - len(sent_lines) <= 2


CX_STRIPPED = {"message": "content", "function_call": "arguments", "custom_tool_call": "input",
               "function_call_output": "output", "custom_tool_call_output": "output",
               "reasoning": "encrypted_content"}


def cx_strip(d: Json) -> Json:
    p = d["payload"]
    key = CX_STRIPPED.get(p.get("type")) if d["type"] == "response_item" else None
    if d["type"] == "session_meta" and isinstance(p.get("base_instructions"), dict):
        base = {k: v for k, v in p["base_instructions"].items() if k != "text"}
        return {**d, "payload": {**p, "base_instructions": base}}
    return {**d, "payload": {k: v for k, v in p.items() if k != key}} if key else d


@pytest.mark.parametrize("rel", CX_FILES, ids=str)
def test_codex_nothing_in_the_file_is_lost(rel: Path, imported: Any) -> None:
    path = CX / rel
    s = imported("codex", path)
    kept: Counter[str] = Counter()
    for e in s.entries():
        info = e.extra.get("codex", {})
        if info.get("thread_id"):
            continue  # from the fork's parent rollout
        if isinstance(e, CustomEntry):
            kept[json.dumps(e.data, sort_keys=True)] += 1
        for r in info.get("records", ()):
            kept[json.dumps(r, sort_keys=True)] += 1
    lines = lines_of(path)
    expected: Counter[str] = Counter()
    for d in lines:
        forms = {json.dumps(d, sort_keys=True), json.dumps(cx_strip(d), sort_keys=True)}
        match = next((f for f in forms if kept[f] > expected[f]), None)
        assert match is not None, f"line not kept: {json.dumps(d)[:200]}"
        expected[match] += 1
    assert sum(kept.values()) == len(lines) == sum(expected.values())
    report = (s.header.metadata or {})["imported_from"]["report"]
    assert sum(report["records"].values()) == len(lines)


def test_codex_tools_reasoning_custom_tool_and_failure(imported: Any) -> None:
    s = imported("codex", CX / "tools" / "rollout-1.jsonl")
    msgs = s.build_context().messages
    calls = [c for m in msgs for c in m.tool_calls or ()]
    patch = next(c for c in calls if c.name == "apply_patch")
    assert patch.arguments["input"].startswith("*** Begin Patch")
    assert patch.extra["codex_type"] == "custom_tool_call"
    thinking = [p for m in msgs for p in m.thinking]
    assert [p.signature for p in thinking] == ["ZW5jLWZpeHR1cmUtMQ==", "ZW5jLWZpeHR1cmUtMg==",
                                               "ZW5jLWZpeHR1cmUtMw=="]
    assert thinking[0].extra["id"] == "rs_fake001_0"
    failed = next(m for m in msgs if m.tool_call_id == "call_fx_fail")
    assert "Process exited with code 1" in failed.text


def test_codex_compaction_summary_comes_after_the_kept_prompts(imported: Any) -> None:
    s = imported("codex", CX / "compact" / "rollout-1.jsonl")
    (comp,) = s.find(CompactionEntry)
    tail = comp.retained_tail or []
    assert [m.role for m in tail] == ["system", "system", "user", "user", "user"]
    assert tail[3].text == "List the files, then show a.txt."
    assert tail[4].kind == "compaction_summary"
    # The summary reply is kept in the compaction entry, not glued to an assistant message.
    outputs = [r for r in comp.extra["codex"]["records"]
               if (r.get("metadata") or {}).get("compaction_output")]
    assert len(outputs) == 1
    assistants = [m.text for m in branch_messages(s) if m.role == "assistant"]
    assert not any("Summary:" in t for t in assistants)


def test_codex_fork_parent_is_found_by_thread_id(tmp_path: Path) -> None:
    src = CX / "resume"
    fork_meta = lines_of(src / "rollout-2.jsonl")[0]["payload"]
    parent_id = fork_meta["history_base"]["thread_id"]
    # Alone, the fork cannot be read: the error names the missing thread.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(src / "rollout-2.jsonl", alone / f"rollout-x-{parent_id}.jsonl")
    with pytest.raises(SessionNotFound, match=parent_id):
        codex.read(alone / f"rollout-x-{parent_id}.jsonl", home=tmp_path / "no-home")
    # Under CODEX_HOME/sessions, with a misleading name, it is found by its session_meta.
    home = tmp_path / "codex-home"
    day = home / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    shutil.copy(src / "rollout-1.jsonl", day / "rollout-parent.jsonl")
    later = {"timestamp": "2026-12-01T09:00:00.000Z", "ordinal": 34, "type": "response_item",
             "payload": {"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": "LATER, after the fork"}]}}
    with open(day / "rollout-parent.jsonl", "a") as f:  # the parent went on after the fork
        f.write(json.dumps(later) + "\n")
    (day / f"rollout-decoy-{parent_id}.jsonl").write_text(
        json.dumps({"type": "session_meta", "payload": {"id": "someone-else"}}) + "\n")
    imported = codex.read(alone / f"rollout-x-{parent_id}.jsonl", home=home)
    assert imported.report["fork_parents"][0]["path"] == str(day / "rollout-parent.jsonl")
    assert imported.header.parent_session == parent_id
    texts = [e.message.text for e in imported.entries if isinstance(e, MessageEntry)]
    assert "What does a.txt contain?" in texts and "LATER, after the fork" not in texts


# -- finding sessions -----------------------------------------------------------------------

def test_claude_code_sessions_are_listed_and_found_by_prefix(tmp_path: Path) -> None:
    project = tmp_path / ".claude" / "projects" / "-work-demo"
    project.mkdir(parents=True)
    for rel in ("simple/session-1.jsonl", "tools/session-1.jsonl"):
        sid = lines_of(CC / rel)[0]["sessionId"]
        shutil.copy(CC / rel, project / f"{sid}.jsonl")
    rows = claude_code.list_sessions(tmp_path / ".claude")
    assert {r.first_prompt for r in rows} == {
        "List the files in this directory.",
        "Read a.txt, cat missing.txt, then change hello to 'hello, world' and create b.txt."}
    row = next(r for r in rows if r.first_prompt and r.first_prompt.startswith("List"))
    assert claude_code.find_session(row.id[:8], tmp_path / ".claude") == row.path
    with pytest.raises(SessionNotFound):
        claude_code.find_session("ffffffff-none", tmp_path / ".claude")


def test_codex_threads_are_listed_and_found_by_prefix(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    for rel in ("simple/rollout-1.jsonl", "resume/rollout-1.jsonl", "resume/rollout-2.jsonl"):
        tid = lines_of(CX / rel)[0]["payload"]["id"]
        shutil.copy(CX / rel, day / f"rollout-2026-12-01T08-00-00-{tid}.jsonl")
    rows = codex.list_sessions(tmp_path)
    assert len(rows) == 3
    fork = next(r for r in rows if r.forked_from)
    assert fork.first_prompt == "Answer again, differently."
    assert codex.find_thread(fork.id, tmp_path).name.endswith(f"{fork.id}.jsonl")
    with pytest.raises(Exception, match="several"):
        codex.find_thread("01a230bc", tmp_path)


# -- export, then resume with the real CLI ---------------------------------------------------
#
# These run only with CLAUDE_BIN / CODEX_BIN set to the CLIs (the native binaries inside the
# npm packages @anthropic-ai/claude-code and @openai/codex; see scripts/fixtures). The CLI
# resumes the exported file against the fake server of scripts/fixtures, and the request it
# sends must carry the whole exported conversation, in order, then the new prompt.

CLAUDE_BIN = os.environ.get("CLAUDE_BIN")
CODEX_BIN = os.environ.get("CODEX_BIN")
FIXTURE_SCRIPTS = ROOT / "scripts" / "fixtures"
PI_SESSION = FORMATS_DATA / "pi_written_by_pi.jsonl"
NEXT = "Next step?"

needs_claude = pytest.mark.skipif(
    not CLAUDE_BIN, reason="set CLAUDE_BIN to the claude binary (npm install "
    "@anthropic-ai/claude-code: node_modules/@anthropic-ai/claude-code-linux-x64/claude) to "
    "resume exports with the real Claude Code")
needs_codex = pytest.mark.skipif(
    not CODEX_BIN, reason="set CODEX_BIN to the codex binary (npm install @openai/codex: "
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex) to "
    "resume exports with the real Codex")


def fake_servers() -> Any:
    """scripts/fixtures as a module (its fake servers and CLI settings)."""
    import sys

    if str(FIXTURE_SCRIPTS) not in sys.path:
        sys.path.insert(0, str(FIXTURE_SCRIPTS))
    import make_fixtures

    return make_fixtures


def native_session(path: Path) -> Session:
    """A session written with contextree itself: system prompt, signed thinking, parallel
    calls, an error result, an image."""
    from contextree import ToolCall

    s = Session.create(path, cwd="/work/project", durable=False)
    s.append_message(Message.system("You are a careful coding agent."))
    s.append_message(Message.user("Why does the parser test fail?"))
    s.append_message(Message.assistant(
        [ThinkingPart(thinking="Read the parser and run the test.", signature="c2lnLW5hdGl2ZQ=="),
         TextPart(text="Looking.")],
        tool_calls=[ToolCall(id="toolu_n1", name="read", arguments={"path": "parser.py"}),
                    ToolCall(id="toolu_n2", name="shell", arguments={"command": "pytest -q"})],
        model="claude-sonnet-4-5", provider="anthropic"))
    s.append_message(Message.tool("def parse(s):\n    return s[0]\n", tool_call_id="toolu_n1",
                                  name="read"))
    s.append_message(Message.tool("IndexError: string index out of range",
                                  tool_call_id="toolu_n2", name="shell", is_error=True))
    s.append_message(Message.assistant("`s[0]` fails on empty input.", provider="anthropic"))
    s.append_message(Message.user([TextPart(text="Here is the screenshot:"),
                                   ImagePart(data=TINY_PNG, mime_type="image/png")]))
    s.append_message(Message.assistant("Thanks, same error.", provider="anthropic"))
    return s


TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
            "RU5ErkJggg==")


def source_session(kind: str, src: Path | None, tmp_path: Path) -> Session:
    if kind == "native":
        return native_session(tmp_path / "native.jsonl")
    assert src is not None
    return import_session(kind, src, tmp_path / "imported.jsonl", durable=False)


EXPORT_SOURCES = [
    ("claude-code", CC / "tools" / "session-1.jsonl"),
    ("claude-code", CC / "compact_reactive" / "session-1.jsonl"),
    ("claude-code", CC / "subagent" / "session-1.jsonl"),
    ("codex", CX / "tools" / "rollout-1.jsonl"),
    ("codex", CX / "compact" / "rollout-1.jsonl"),
    ("codex", CX / "resume" / "rollout-2.jsonl"),
    ("pi", PI_SESSION),
    ("native", None),
]
EXPORT_IDS = [f"{k}-{p.parent.name if p and p.parent.name not in ('formats',) else k}"
              for k, p in EXPORT_SOURCES]


def claude_expected(s: Session, *, merged: bool = True) -> list[Item]:
    """What Claude Code should send for the exported context (claude_code_export's rules);
    ``merged``: as sent, consecutive user lines joined into one message."""
    ctx = s.build_context()
    per_message: list[list[Item]] = []
    for m, eid in zip(ctx.messages, ctx.entry_ids, strict=True):
        if m.kind == "compaction_summary":
            items: list[Item] = [("user", m.text)]
        elif m.role == "system":
            attachment = _imported_type(s, eid) == "attachment"
            items = [("system", m.text) if attachment else
                     ("user", f"<system-reminder>\n{m.text}\n</system-reminder>")]
        else:
            items = [x for x in message_items(m) if x != ("text", "")
                     and (x[0] != "thinking" or _anthropic_thinking(m, x))]
        per_message.append(items)
    out: list[Item] = []
    for i, items in enumerate(per_message):
        # Consecutive user lines go as one message, each but the last ending with a newline.
        nxt = per_message[i + 1] if i + 1 < len(per_message) else []
        if merged and any(x[0] == "user" for x in items) and any(x[0] == "user" for x in nxt):
            last = max(k for k, x in enumerate(items) if x[0] == "user")
            items[last] = ("user", items[last][1] + "\n")
        out += items
    return out


def _imported_type(s: Session, eid: str | None) -> str | None:
    entry = s.get_entry(eid) if eid else None
    records = entry.extra.get("claude_code", {}).get("records", ()) if entry is not None else ()
    return records[0].get("type") if records else None


def _anthropic_thinking(m: Message, item: Item) -> bool:
    part = next(p for p in m.thinking if p.thinking == item[1] and p.signature == item[2])
    return part.signature is not None and "id" not in part.extra


@pytest.mark.parametrize(("kind", "src"), EXPORT_SOURCES, ids=EXPORT_IDS)
def test_claude_code_export_reads_back(kind: str, src: Path | None, tmp_path: Path) -> None:
    """Without the CLI: the export, imported again, gives the same conversation, and its
    lines have Claude Code's shape (one line per block, results off their tool_use line)."""
    from contextree.formats import export_session

    s = source_session(kind, src, tmp_path)
    out = export_session("claude-code", s, tmp_path / "export.jsonl")
    back = import_session("claude-code", out, tmp_path / "back.jsonl", durable=False)
    got = [i for m in back.build_context().messages for i in message_items(m)]
    assert got == claude_expected(s, merged=False)
    lines = lines_of(out)
    uuids = {d["uuid"]: d for d in lines}
    for d in lines:
        assert d["sessionId"] == lines[0]["sessionId"]
        assert d["parentUuid"] is None or d["parentUuid"] in uuids
        if d["type"] == "assistant":
            assert len(d["message"]["content"]) == 1
        content = d.get("message", {}).get("content")
        if d["type"] == "user" and isinstance(content, list) and content[0].get(
                "type") == "tool_result":
            source = uuids[d["sourceToolAssistantUUID"]]
            assert source["message"]["content"][0]["id"] == content[0]["tool_use_id"]
            assert d["parentUuid"] == d["sourceToolAssistantUUID"]
    assert sum(d["parentUuid"] is None for d in lines) == 1
    back.close()
    s.close()


@pytest.mark.parametrize(("kind", "src"), EXPORT_SOURCES, ids=EXPORT_IDS)
def test_codex_export_reads_back(kind: str, src: Path | None, tmp_path: Path) -> None:
    """Without the CLI: the export, imported again, gives the same conversation."""
    from contextree.formats import export_session

    s = source_session(kind, src, tmp_path)
    out = export_session("codex", s, tmp_path / "export.jsonl")
    back = import_session("codex", out, tmp_path / "back.jsonl", durable=False)
    base, expected = codex_expected(s)
    got = cx_grouped([i for m in back.build_context().messages for i in cx_message_items(m)])
    if base is not None:
        assert got[0] == ("system", base)
        got = got[1:]
    assert got == expected
    assert [d["ordinal"] for d in lines_of(out)] == list(range(len(lines_of(out))))
    back.close()
    s.close()


@needs_claude
@pytest.mark.parametrize(("kind", "src"), EXPORT_SOURCES, ids=EXPORT_IDS)
def test_claude_code_resumes_the_export(kind: str, src: Path | None, tmp_path: Path) -> None:
    import subprocess

    from contextree.formats import export_to_claude_code_home

    mf = fake_servers()
    s = source_session(kind, src, tmp_path)
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    sid, path = export_to_claude_code_home(s, home=home / ".claude", cwd=str(cwd))
    assert path.parent.parent == home / ".claude" / "projects"
    agents = claude_code.subagent_files(path)  # beside it, as Claude Code lays them out
    assert len(agents) == (src is not None and src.parent.name == "subagent")
    assert all(d["sessionId"] == sid and d["isSidechain"] for a in agents for d in lines_of(a))
    server = mf.FakeAnthropic(mf.ClaudeScript(main=[{"content": [mf.a_text("Resumed.")]}]))
    server.start()
    try:
        cmd = [CLAUDE_BIN, *mf.claude_cmd(NEXT, "--resume", sid)[1:]]
        done = subprocess.run(cmd, cwd=cwd, env=mf.claude_env(home, server.url),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=180)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    main = [r for r in server.requests if r.get("reply_role") == "main"]
    assert main, f"Claude Code sent no request: {done.stdout[-1000:]}"
    sent = cc_request_items(main[-1]["body"])
    expected = claude_expected(s)
    assert sent[:len(expected)] == expected
    # Then the new prompt; after a conversation that ends with the user's turn, Claude Code
    # first puts in its own "No response requested." reply.
    rest = sent[len(expected):]
    if expected[-1][0] not in ASSISTANT_ITEMS:
        assert rest[:1] == [("text", "No response requested.")]
        rest = rest[1:]
    assert rest == [("user", NEXT)]
    s.close()


def codex_expected(s: Session) -> tuple[str | None, list[Item]]:
    """The base instructions and the items Codex should send (codex_export's rules)."""
    msgs = s.build_context().messages
    base = None
    if msgs and msgs[0].role == "system" and not msgs[0].kind:
        base, msgs = msgs[0].text, msgs[1:]
    out: list[Item] = []
    for m in msgs:
        items = cx_message_items(m)
        if m.role == "assistant":
            ok = {(p.thinking, p.signature) for p in m.thinking
                  if p.signature and isinstance(p.extra.get("id"), str)}
            items = [x for x in items if x[0] != "reasoning" or (x[1], x[2]) in ok]
        out += items
    return base, cx_grouped(out)


@needs_codex
@pytest.mark.parametrize(("kind", "src"), EXPORT_SOURCES, ids=EXPORT_IDS)
def test_codex_resumes_the_export(kind: str, src: Path | None, tmp_path: Path) -> None:
    import subprocess

    from contextree.formats import export_to_codex_home

    mf = fake_servers()
    s = source_session(kind, src, tmp_path)
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    (home / ".codex").mkdir(parents=True)
    server = mf.FakeResponses(mf.CodexScript(main=[{"output": [mf.r_msg("Resumed.")]}]))
    server.start()
    try:
        (home / ".codex" / "config.toml").write_text(mf.codex_config(server.url))
        tid, path = export_to_codex_home(s, home=home / ".codex")
        assert codex.thread_id_of(path) == tid
        cmd = [CODEX_BIN, *mf.codex_cmd("resume", tid, NEXT)[1:]]
        done = subprocess.run(cmd, cwd=cwd, env=mf.codex_env(home), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=180)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    main = [r for r in server.requests if r.get("reply_role") == "main"]
    assert main, f"Codex sent no request: {done.stdout[-1000:]}"
    sent = cx_grouped([i for item in main[-1]["body"]["input"] for i in cx_item(item)])
    base, expected = codex_expected(s)
    assert sent[0][0] == "system"
    if base is not None:
        assert same_base_instructions(sent[0][1], base)
    history = sent[1:1 + len(expected)]
    assert history == expected
    # Then what Codex adds on resuming in another place (its developer and environment
    # context), then the new prompt.
    rest = sent[1 + len(expected):]
    assert rest[-1] == ("user", NEXT)
    assert all(r[0] == "system" or r[1].startswith("<environment_context>") for r in rest[:-1])
    s.close()


def test_cli_lists_and_imports_by_id_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    from typer.testing import CliRunner

    from contextree.cli import app

    project = tmp_path / ".claude" / "projects" / "-work-demo"
    project.mkdir(parents=True)
    sid = lines_of(CC / "tools" / "session-1.jsonl")[0]["sessionId"]
    shutil.copy(CC / "tools" / "session-1.jsonl", project / f"{sid}.jsonl")
    day = tmp_path / "codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    tid = lines_of(CX / "simple" / "rollout-1.jsonl")[0]["payload"]["id"]
    shutil.copy(CX / "simple" / "rollout-1.jsonl", day / f"rollout-2026-12-01T08-00-00-{tid}.jsonl")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(app, ["import", "claude-code", "--list", "--home",
                                 str(tmp_path / ".claude"), "--json"])
    assert listed.exit_code == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["id"] == sid and row["first_prompt"].startswith("Read a.txt")
    text = runner.invoke(app, ["import", "codex", "--list", "--home", str(tmp_path / "codex")])
    assert text.exit_code == 0 and tid in text.stdout and "List the files" in text.stdout
    done = runner.invoke(app, ["import", "claude-code", sid[:8], "--home",
                               str(tmp_path / ".claude")])
    assert done.exit_code == 0, done.stderr
    with Session.open(tmp_path / f"{sid}.contextree.jsonl", readonly=True) as s:
        assert s.id == sid and len(s.build_context().messages) == 8
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    done = runner.invoke(app, ["import", "codex", tid[:13], "-o", str(tmp_path / "cx.jsonl")])
    assert done.exit_code == 0, done.stderr
    missing = runner.invoke(app, ["import", "codex", "ffff"])
    assert missing.exit_code == 1 and "no Codex thread 'ffff'" in missing.stderr


# -- records the fixtures do not have -------------------------------------------------------

def write_lines(path: Path, lines: list[Json]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def test_claude_code_unknown_records_are_kept_and_reported(tmp_path: Path,
                                                           imported: Any) -> None:
    lines = lines_of(CC / "simple" / "session-1.jsonl")
    prompt = next(d for d in lines if d["type"] == "user")
    first_reply = next(d for d in lines if d["type"] == "assistant")
    png = {"type": "base64", "media_type": "image/png", "data": TINY_PNG}
    prompt["message"]["content"] = [{"type": "text", "text": "What is in this picture?"},
                                    {"type": "image", "source": png}]
    future = {"type": "x-future", "uuid": "u-future", "parentUuid": prompt["uuid"],
              "payload": {"anything": 1}}
    skills = {"type": "attachment", "uuid": "u-skills", "parentUuid": "u-future",
              "attachment": {"type": "skill_listing", "content": "- pdf: read PDFs"}}
    first_reply["parentUuid"] = "u-skills"
    error = {"type": "assistant", "uuid": "u-error", "parentUuid": lines[-2]["uuid"],
             "isApiErrorMessage": True, "message": {
                 "id": "x", "role": "assistant", "model": "<synthetic>",
                 "content": [{"type": "text", "text": "API Error: overloaded"}]}}
    lines = [*lines[:3], future, skills, *lines[3:-1], error,
             {"type": "x-note", "note": "no uuid"}]
    s = imported("claude-code", write_lines(tmp_path / "s.jsonl", lines))
    msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    image = msgs[0].content[1]  # type: ignore[index]
    assert isinstance(image, ImagePart) and image.data == TINY_PNG
    customs = {e.custom_type for e in s.find(CustomEntry) if e.id in {x.id for x in s.branch()}}
    assert {"claude-code/x-future", "claude-code/attachment", "claude-code/api_error",
            "claude-code/x-note"} <= customs
    report = (s.header.metadata or {})["imported_from"]["report"]
    assert report["unknown_types"] == ["x-future", "x-note"]
    assert report["unrendered_attachments"] == {"skill_listing": 1}
    assert sum(e.parent_id is None for e in s.entries()) == 1


def test_claude_code_summary_after_an_attachment_is_joined(tmp_path: Path,
                                                           imported: Any) -> None:
    """Newer Claude Code versions may write an attachment between the boundary and the
    summary: the summary still goes into the compaction entry, the attachment after it."""
    lines = lines_of(CC / "compact_reactive" / "session-1.jsonl")
    boundary = next(d for d in lines if d.get("subtype") == "compact_boundary")
    summary = next(d for d in lines if d.get("isCompactSummary"))
    between = {"type": "attachment", "uuid": "u-between", "parentUuid": boundary["uuid"],
               "attachment": {"type": "agent_listing_delta", "addedLines": ["- a: b"],
                              "removedTypes": [], "isInitial": True}}
    summary["parentUuid"] = "u-between"
    at = lines.index(summary)
    lines = [*lines[:at], between, *lines[at:]]
    s = imported("claude-code", write_lines(tmp_path / "s.jsonl", lines))
    msgs = s.build_context().messages
    assert msgs[0].kind == "compaction_summary"
    assert next(m.text for m in msgs if m.role == "system").startswith("Available agent types")
    assert msgs[-1].text == "After compacting: a.txt is the only file."
    assert sum(e.parent_id is None for e in s.entries()) == 1


def test_sidechain_records_before_its_first_line_stay_with_it(tmp_path: Path,
                                                              imported: Any) -> None:
    src = CC / "subagent"
    shutil.copytree(src, tmp_path / "copy")
    agent = tmp_path / "copy" / "session-1" / "subagents" / "agent-1.jsonl"
    lines = lines_of(agent)
    write_lines(agent, [{"type": "queue-operation", "operation": "enqueue"}, *lines])
    s = imported("claude-code", tmp_path / "copy" / "session-1.jsonl")
    (link,) = [e for e in s.find(CustomEntry) if e.custom_type == "claude-code/subagent"]
    branch = s.branch(link.data["last_entry_id"])
    assert isinstance(branch[0], CustomEntry) and branch[0].custom_type == \
        "claude-code/queue-operation"
    assert [m.role for m in s.build_context(link.data["last_entry_id"]).messages] == [
        "user", "assistant", "tool", "assistant"]


def test_exports_keep_each_provider_to_its_own_parts(tmp_path: Path) -> None:
    """Thinking signed by one provider, and blocks or items only one API knows, are not
    written for the other; a data URL image becomes an Anthropic base64 image."""
    from contextree import UnknownPart
    from contextree.formats import _claude_code_export as claude_code_export
    from contextree.formats import _codex_export as codex_export

    s = Session.create(tmp_path / "s.jsonl", durable=False)
    s.append_message(Message.user([TextPart(text="look"),
                                   ImagePart(url=f"data:image/png;base64,{TINY_PNG}")]))
    s.append_message(Message.assistant([
        ThinkingPart(thinking="anthropic", signature="sig-a"),
        ThinkingPart(thinking="openai", signature="enc-o").set_extra({"id": "rs_1"}),
        UnknownPart({"type": "server_tool_use", "id": "srv_1", "name": "web_search",
                     "input": {}}),
        UnknownPart({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
        TextPart(text="done")]))
    cc = [d for d in claude_code_export.records(s) if d["type"] == "assistant"]
    blocks = [d["message"]["content"][0] for d in cc]
    assert [b["type"] for b in blocks] == ["thinking", "server_tool_use", "text"]
    assert blocks[0]["signature"] == "sig-a"
    user = next(d for d in claude_code_export.records(s) if d["type"] == "user")
    assert user["message"]["content"][1]["source"] == {
        "type": "base64", "media_type": "image/png", "data": TINY_PNG}
    items = [d["payload"] for d in codex_export.lines(s)[1:]]
    assert [i["type"] for i in items] == ["message", "reasoning", "web_search_call", "message"]
    assert items[1]["encrypted_content"] == "enc-o"
    s.close()
