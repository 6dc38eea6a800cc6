"""GitHub Copilot CLI sessions, written by the real Copilot CLI
(tests/data/formats/real/copilot, made by scripts/fixtures/make_fixtures_new.py: Copilot's
offline mode with its own provider pointed at the Chat Completions fake of tests/fakes).

For every fixture: the branch holds every message of the events file in order;
``build_context()`` equals the messages of the last request Copilot sent, followed by the reply;
every event is imported or kept. Then: ``import --list`` finds the sessions under a HOME the test
sets, ``import auto`` detects the format, and a wrong explicit format is refused, naming this one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_fixtures import (
    Importer,
    Item,
    Json,
    chat_context_items,
    chat_message_items,
    chat_request_items,
    importer,
    json_lines,
    request_body,
    subagent_links,
    subtree_leaf,
)
from contextree import Session
from contextree.cli import app
from contextree.entries import CompactionEntry, CustomEntry, MessageEntry
from contextree.errors import SessionError
from contextree.formats import detect_format, import_session, list_tool_sessions
from contextree.markers import CompactionSummaryMarker
from helpers import FORMATS_DATA

CP = FORMATS_DATA / "real" / "copilot"
FILES = sorted(p.relative_to(CP) for p in CP.glob("*/session-*/events.jsonl"))
events_of = json_lines
request_items = chat_request_items
message_items = chat_message_items


def scenario(rel: Path) -> Path:
    return CP / rel.parts[0]


def test_every_scenario_is_covered() -> None:
    assert {p.parts[0] for p in FILES} == {"simple", "tools", "resume", "compact",
                                           "compact_long", "compact_twice", "subagent",
                                           "subagents", "fork"}


# The run whose last request a file's context is compared with, where it is not the last
# request of the scenario: the fork (session-2) was resumed before the session it forked.
FINAL_RUN = {Path("fork/session-2/events.jsonl"): "resume-fork"}


def final_request(rel: Path) -> Json:
    m = json.loads((scenario(rel) / "manifest.json").read_text())
    reqs = json.loads((scenario(rel) / "requests.json").read_text())
    run = FINAL_RUN.get(rel)
    index = m["last_request_of_run"][run] if run else m["final_main_request"]
    return reqs[int(index)]["body"]  # type: ignore[no-any-return]


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[Importer]:
    yield from importer(tmp_path, "copilot")


def sub_agent_events(path: Path) -> set[str]:
    """The ids of the events of the file's sub-agents: those naming a running sub-agent's
    call as ``parentToolCallId``, those of an interaction such an event is in, and, while
    one runs, the ones of no interaction the session's own events have."""
    events = events_of(path)
    calls = {e["data"]["toolCallId"] for e in events if e["type"] == "subagent.started"}
    theirs = {e["data"]["interactionId"] for e in events
              if e.get("data", {}).get("parentToolCallId") in calls
              and "interactionId" in e["data"]}
    out: set[str] = set()
    running = 0
    for e in events:
        data = e.get("data") or {}
        if e["type"] == "subagent.started":
            running += 1
        elif e["type"] in ("subagent.completed", "subagent.failed"):
            running -= 1
        elif data.get("parentToolCallId") in calls or data.get("interactionId") in theirs \
                or (running and "interactionId" not in data):
            out.add(e["id"])
    return out


def file_items(path: Path) -> list[Item]:
    """The messages the events file records, in order (the system prompt, written after its
    turn's user message and sent first, before it; a prompt written again unchanged once; a
    reply's tool results, written as they finished, in the order of its calls, as sent)."""
    out: list[Item] = []
    prompts: list[str] = []
    theirs = sub_agent_events(path)
    for e in events_of(path):
        kind, data = e["type"], e.get("data") or {}
        if e["id"] in theirs:
            continue
        if kind == "system.message":
            if prompts and prompts[-1] == data["content"]:
                continue
            prompts.append(data["content"])
            item = ("system", "text", data["content"])
            if out and out[-1][0] == "user":
                out.insert(len(out) - 1, item)
            else:
                out.append(item)
        elif kind == "user.message":
            out.append(("user", "text", data["transformedContent"]))
        elif kind == "assistant.message":
            if data.get("reasoningText"):
                out.append(("thinking", data["reasoningText"]))
            if data.get("content"):
                out.append(("assistant", "text", data["content"]))
            out += [("call", r["toolCallId"], r["name"], r["arguments"])
                    for r in data.get("toolRequests") or ()]
        elif kind == "tool.execution_complete":
            out.append(("tool", data["toolCallId"], data["result"]["content"]))
    return in_call_order(out)


def in_call_order(items: list[Item]) -> list[Item]:
    """Each run of tool results sorted by where their calls are."""
    where = {i[1]: n for n, i in enumerate(items) if i[0] == "call"}
    out: list[Item] = []
    for item in items:
        run = len(out)
        while run and out[run - 1][0] == "tool":
            run -= 1
        if item[0] != "tool" or run == len(out):
            out.append(item)
            continue
        out[run:] = sorted([*out[run:], item], key=lambda i: where.get(i[1], len(items)))
    return out


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_branch_holds_every_message_in_order(rel: Path, imported: Any) -> None:
    s = imported(CP / rel)
    got = [i for e in s.branch() if isinstance(e, MessageEntry)
           and not isinstance(e.message.marker, CompactionSummaryMarker)
           for i in message_items(e.message)]
    assert got == file_items(CP / rel)


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_context_is_what_copilot_sent(rel: Path, imported: Any) -> None:
    s = imported(CP / rel)
    sent = request_items(final_request(rel))
    ctx = [i for m in s.build_context().messages for i in message_items(m)]
    # a system prompt that changed on resume is in the context where it changed; the CLI
    # sends only the newest one, first
    sent_system = [i for i in sent if i[0] == "system"]
    assert sent_system == [i for i in ctx if i[0] == "system"][-1:]
    sent_rest = [i for i in sent if i[0] != "system"]
    ctx_rest = [i for i in ctx if i[0] != "system"]
    assert ctx_rest[:len(sent_rest)] == sent_rest
    reply = ctx_rest[len(sent_rest):]
    assert reply and all(i[0] in ("assistant", "thinking", "call") for i in reply)


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_every_event_is_kept(rel: Path, imported: Any) -> None:
    s = imported(CP / rel)
    kept: set[str] = set()
    for e in s.entries():
        kept.add(e.id)
        if isinstance(e, CustomEntry) and isinstance(e.data, dict):
            kept.add(e.data.get("id"))
    for event in events_of(CP / rel):
        assert event["id"] in kept, event["type"]
    start = events_of(CP / rel)[0]["data"]
    assert s.header.id == start["sessionId"] and s.header.cwd == start["context"]["cwd"]
    assert s.header.metadata["copilot_workspace"]["id"] == start["sessionId"]


def test_tools_reasoning_usage(imported: Any) -> None:
    s = imported(CP / "tools" / "session-1" / "events.jsonl")
    msgs = [m for m in s.build_context().messages if m.role != "system"]
    first = msgs[1]
    assert first.thinking[0].thinking == "Look at both files at once."
    assert [c.name for c in first.tool_calls or ()] == ["view", "bash"]
    last = msgs[-1]
    assert last.usage is not None
    assert (last.usage.input, last.usage.cache_read, last.usage.output) == (600, 300, 20)


def test_compaction_summary_and_kept_messages(imported: Any) -> None:
    s = imported(CP / "compact" / "session-1" / "events.jsonl")
    comp = [e for e in s.branch() if isinstance(e, CompactionEntry)]
    assert len(comp) == 1 and comp[0].details["source"] == "copilot"
    msgs = s.build_context().messages
    assert msgs[0].role == "system"
    mark = msgs[1].marker
    assert isinstance(mark, CompactionSummaryMarker) and mark.source == "copilot"
    assert mark.summary == comp[0].details["summary"] and mark.summary in msgs[1].text
    # the history before the compaction is still on the branch
    texts = [m.text for e in s.branch() if isinstance(e, MessageEntry) for m in [e.message]]
    assert any("List the files, then show a.txt." in t for t in texts)


@pytest.mark.parametrize("name", ["compact", "compact_long", "compact_twice"])
def test_each_compaction_holds_the_summary_the_cli_sent(name: str, imported: Any) -> None:
    """Every applied compaction (a short and a 3 KB summary, two user messages before one,
    a second on top of the first) is a compaction entry followed by the user message the CLI
    sent in place of the history, byte for byte as in its next request."""
    path = CP / name / "session-1" / "events.jsonl"
    s = imported(path)
    done = [e["data"] for e in events_of(path) if e["type"] == "session.compaction_complete"]
    comps = [e for e in s.branch() if isinstance(e, CompactionEntry)]
    assert [c.details["summary"] for c in comps] == [d["summaryContent"] for d in done]
    assert [c.tokens_before for c in comps] == [d["preCompactionTokens"] for d in done]
    marks = [m for e in s.branch() if isinstance(e, MessageEntry)
             for m in [e.message] if isinstance(m.marker, CompactionSummaryMarker)]
    assert [m.marker.summary for m in marks] == [d["summaryContent"] for d in done]
    # each summary message is what the CLI sent first after the system prompt, in the
    # first main request after that compaction
    reqs = json.loads((CP / name / "requests.json").read_text())
    compact_at = [r["index"] for r in reqs if r["reply_role"] == "compact"]
    sent = []
    for k, end in zip(compact_at, [*compact_at[1:], len(reqs)], strict=True):
        after = [r for r in reqs if k < r["index"] < end and r["reply_role"] == "main"
                 and "Here is a summary of the prior context" in json.dumps(r["body"])]
        sent.append(next(m["content"] for m in after[-1]["body"]["messages"]
                         if m["role"] == "user"))
    assert sent == [m.text for m in marks]  # each compaction's own summary message
    users = [e["data"]["content"] for e in events_of(path) if e["type"] == "user.message"]
    for m, d in zip(marks, done, strict=True):
        before = [u for u in users if f"<user_message>\n{u}\n</user_message>" in m.text]
        assert m.text.endswith(f"<summary>\n{d['summaryContent']}\n</summary>\n")
        assert before, "the user's messages are quoted before the summary"
    if name == "compact_twice":  # the second replaces the first: only it is in the context
        ctx = [m.text for m in s.build_context().messages]
        assert marks[1].text in ctx and marks[0].text not in ctx
        assert "List the files, then show a.txt." in marks[1].text
        assert "Count the lines of a.txt." in marks[1].text


def test_subagent_is_a_root_of_its_own_linked_after_its_call(imported: Any) -> None:
    path = CP / "subagent" / "session-1" / "events.jsonl"
    s = imported(path)
    (link,) = subagent_links(s, "copilot")
    started = next(e["data"] for e in events_of(path) if e["type"] == "subagent.started")
    assert link.data["tool_use_id"] == link.data["agent_id"] == started["toolCallId"]
    assert link.data["meta"]["agentType"] == started["agentType"]
    result = s.get_entry(link.parent_id)
    assert isinstance(result, MessageEntry) and result.message.tool_call_id == started[
        "toolCallId"]
    assert link.id in [e.id for e in s.branch()]  # on the parent's branch, after the result
    root = s.get_entry(link.data["first_entry_id"])
    assert root is not None and root.parent_id is None
    # the sub-agent's context is what the CLI sent in its last sub-agent request, + reply
    body = request_body(CP / "subagent", "final_subagent_request")
    sent = chat_request_items(body)
    got = chat_context_items(s, subtree_leaf(s, root.id))
    assert got[:len(sent)] == sent and got[len(sent):][0][0] == "assistant"
    # and the sub-agent named on its own imports the same, linked to its parent
    alone = imported(f"{path}#{started['toolCallId']}")
    assert chat_context_items(alone) == got
    assert alone.header.parent_session == s.header.id != alone.header.id


def test_two_parallel_subagents_are_each_linked_after_their_own_call(imported: Any) -> None:
    """Two task calls in one reply: the CLI runs both sub-agents at once, their events
    interleaved in one file. Each is a root of its own, linked after its own call's result,
    and its context is what the CLI last sent for it."""
    path = CP / "subagents" / "session-1" / "events.jsonl"
    s = imported(path)
    links = subagent_links(s, "copilot")
    assert sorted(x.data["tool_use_id"] for x in links) == ["call_fx_task1", "call_fx_task2"]
    m = json.loads((CP / "subagents" / "manifest.json").read_text())
    reqs = json.loads((CP / "subagents" / "requests.json").read_text())
    branch = [e.id for e in s.branch()]
    for link in links:
        n = link.data["tool_use_id"][-1]
        result = s.get_entry(link.parent_id)
        assert isinstance(result, MessageEntry)
        assert result.message.tool_call_id == link.data["tool_use_id"] and link.id in branch
        root = s.get_entry(link.data["first_entry_id"])
        assert root is not None and root.parent_id is None
        got = chat_context_items(s, subtree_leaf(s, root.id))
        sent = chat_request_items(reqs[m["final_subagent_requests"][f"subagent-{n}"]]["body"])
        assert got[:len(sent)] == sent
        assert got[len(sent):] == [("assistant", "text", {"1": "a.txt has 1 line.",
                                                          "2": "a.txt says hello."}[n])]
        assert f"FIXTURE-SUBAGENT-TASK-{n}:" in json.dumps(got[:3])  # its own task only
        alone = imported(f"{path}#{link.data['tool_use_id']}")
        assert chat_context_items(alone) == got


def test_fork_is_a_branch_from_the_last_event_it_copied(imported: Any) -> None:
    """``/fork`` (typed in the interactive CLI) wrote a new session whose events begin with
    copies of the first's, ids and all; imported with the first, its own events are a branch
    from the last event it copied, and the leaf stays the first's."""
    first, second = CP / "fork" / "session-1" / "events.jsonl", \
        CP / "fork" / "session-2" / "events.jsonl"
    s = imported(first)
    copied = {e["id"] for e in events_of(second)} & {e["id"] for e in events_of(first)}
    own = [e for e in events_of(second) if e["id"] not in copied]
    assert own[0]["type"] == "session.info" and own[0]["data"]["infoType"] == "fork"
    branch_start = s.get_entry(own[0]["id"])
    assert branch_start is not None and branch_start.parent_id in copied
    assert s.get_entry(branch_start.parent_id) is not None
    fork_leaf = subtree_leaf(s, branch_start.id)
    assert s.leaf_id != fork_leaf and branch_start.id not in [e.id for e in s.branch()]
    # the branch's context is what the CLI sent when the fork was resumed, + its reply
    sent = [i for i in request_items(final_request(Path("fork/session-2/events.jsonl")))
            if i[0] != "system"]
    got = [i for i in chat_context_items(s, fork_leaf) if i[0] != "system"]
    assert got[:len(sent)] == sent
    assert got[len(sent):] == [("assistant", "text", "Forked: this session answers differently.")]
    # and the fork imported alone has the same context
    alone = imported(second)
    assert [i for i in chat_context_items(alone) if i[0] != "system"] == got
    (fork,) = s.header.metadata["imported_from"]["report"]["forks"]
    assert fork["session"] == alone.header.id and fork["file"] == str(second)


def copilot_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for rel in FILES:
        sid = events_of(CP / rel)[0]["data"]["sessionId"]
        dest = home / ".copilot" / "session-state" / sid
        dest.mkdir(parents=True)
        shutil.copyfile(CP / rel, dest / "events.jsonl")
        shutil.copyfile((CP / rel).parent / "workspace.yaml", dest / "workspace.yaml")
    return home


def test_list_finds_the_sessions_under_home(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    home = copilot_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    found = list_tool_sessions("copilot")
    ids = {events_of(CP / rel)[0]["data"]["sessionId"] for rel in FILES}
    assert {f.id for f in found} == ids
    assert "List the files in this directory." in {f.first_prompt for f in found}
    runner = CliRunner()
    result = runner.invoke(app, ["import", "copilot", "--list", "--json"])
    assert result.exit_code == 0, result.stderr
    assert {r["id"] for r in json.loads(result.stdout)} == ids
    sid = sorted(ids)[0]
    out = tmp_path / "one.jsonl"
    result = runner.invoke(app, ["import", "copilot", sid[:8], "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    with Session.open(out, readonly=True) as s:
        assert s.header.id == sid


def test_auto_detects_it_and_wrong_formats_are_refused(tmp_path: Path) -> None:
    src = CP / "simple" / "session-1" / "events.jsonl"
    assert detect_format(src) == "copilot"
    runner = CliRunner()
    for wrong in ("claude-code", "codex", "gemini-cli", "brute", "pi"):
        out = tmp_path / f"{wrong}.jsonl"
        result = runner.invoke(app, ["import", wrong, str(src), "-o", str(out)])
        assert result.exit_code == 1, (wrong, result.stdout)
        assert "looks like copilot" in result.stderr, (wrong, result.stderr)
        assert not out.exists()
    claude = FORMATS_DATA / "real" / "claude_code" / "simple" / "session-1.jsonl"
    result = runner.invoke(app, ["import", "copilot", str(claude), "-o",
                                 str(tmp_path / "x.jsonl")])
    assert result.exit_code == 1 and "looks like claude-code" in result.stderr, result.stderr


# -- export: read back, and resumed by the real Copilot CLI --------------------------------

COPILOT_BIN = os.environ.get("COPILOT_BIN", "")
needs_copilot = pytest.mark.skipif(
    not (COPILOT_BIN and Path(COPILOT_BIN).exists()),
    reason="set COPILOT_BIN to node_modules/@github/copilot-linux-x64/copilot of "
           "@github/copilot@1.0.102 (npm install) to resume exports with the real Copilot CLI")
EXPORTED = ["tools", "compact", "subagents"]
NEXT = "Go on."


def exported_source(tmp_path: Path, name: str) -> Session:
    return import_session("copilot", CP / name / "session-1" / "events.jsonl",
                          tmp_path / "src.jsonl", durable=False)


def without_system(s: Session) -> list[Item]:
    return [i for m in s.build_context().messages if m.role != "system"
            for i in message_items(m)]


@pytest.mark.parametrize("name", EXPORTED)
def test_export_reads_back_as_the_same_context(name: str, tmp_path: Path) -> None:
    from contextree.formats import export_to_copilot_home

    s = exported_source(tmp_path, name)
    sid, path = export_to_copilot_home(s, home=tmp_path / "home", cwd="/work/project")
    assert detect_format(path) == "copilot"
    back = import_session("auto", path, tmp_path / "back.jsonl", durable=False)
    assert without_system(back) == without_system(s)
    assert [f.id for f in list_tool_sessions("copilot", tmp_path / "home")] == [sid]
    with pytest.raises(SessionError, match="already there"):
        export_to_copilot_home(s, home=tmp_path / "home", cwd="/work/project")
    back.close()
    s.close()


@needs_copilot
@pytest.mark.parametrize("name", EXPORTED)
def test_copilot_resumes_the_export(name: str, tmp_path: Path) -> None:
    import subprocess

    from contextree.formats import export_to_copilot_home
    from fakes.openai_server import OpenAIServer, completion

    class Lenient(OpenAIServer):  # Copilot adds a field of its own to resumed messages
        def validate(self, body: Any) -> str | None:
            return None

    s = exported_source(tmp_path, name)
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    sid, _ = export_to_copilot_home(s, home=home / ".copilot", cwd=str(cwd))
    with Lenient() as server:
        server.reply(*[completion("Resumed.") for _ in range(5)])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "TERM": "dumb", "COPILOT_OFFLINE": "true",
               "COPILOT_PROVIDER_BASE_URL": server.base_url,
               "COPILOT_PROVIDER_API_KEY": "sk-test", "COPILOT_MODEL": "gpt-4.1",
               "COPILOT_AUTO_UPDATE": "false", "COPILOT_ALLOW_ALL": "true"}
        done = subprocess.run([COPILOT_BIN, "--allow-all-tools", "--output-format", "json",
                               "--disable-client-telemetry", "--resume", sid, "-p", NEXT],
                              cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=180)
        bodies = server.bodies
    assert done.returncode == 0, done.stderr[-2000:]
    assert bodies, f"Copilot CLI sent no request: {done.stdout[-1000:]}"
    sent = [i for i in request_items(bodies[-1]) if i[0] != "system"]
    # the reasoning is in the export (reasoningText), but the resumed CLI does not send it
    assert sent[:-1] == [i for i in without_system(s) if i[0] != "thinking"]
    assert sent[-1][0] == "user" and sent[-1][2].endswith(NEXT)
    s.close()
