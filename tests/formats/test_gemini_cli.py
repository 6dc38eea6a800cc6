"""Gemini CLI chat files, written by the real Gemini CLI (tests/data/formats/real/gemini_cli,
made by scripts/fixtures/make_fixtures_new.py against a fake Gemini API on 127.0.0.1).

For every fixture: the branch holds every message of the file in the order the CLI replays
them; ``build_context()`` equals the ``contents`` of the last request the CLI sent, followed by
the reply; every record of the file is imported or kept. Then: ``import --list`` finds the
chats under a HOME the test sets, ``import auto`` detects the format, and a wrong explicit
format is refused, naming this one.
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
    importer,
    json_lines,
    manifest,
    request_body,
    requests,
    subagent_links,
    subtree_leaf,
)
from contextree import Message, Session
from contextree._context import INTERRUPTED
from contextree.cli import app
from contextree.entries import CustomEntry, MessageEntry
from contextree.errors import SessionError
from contextree.formats import detect_format, import_session, list_tool_sessions
from contextree.markers import CompactionSummaryMarker
from helpers import FORMATS_DATA

GM = FORMATS_DATA / "real" / "gemini_cli"
FILES = sorted(p.relative_to(GM) for p in GM.glob("*/session-*.jsonl"))


lines_of = json_lines


def test_every_scenario_is_covered() -> None:
    assert {p.parent.name for p in FILES} == {"simple", "tools", "resume", "compress",
                                              "subagent", "rewind"}


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[Importer]:
    yield from importer(tmp_path, "gemini-cli")


# -- normalized items -----------------------------------------------------------------------

def part_items(role: str, part: Json) -> list[Item]:
    if part.get("thought"):  # the CLI does not send thoughts back
        return []
    if isinstance(part.get("text"), str):
        return [(role, "text", part["text"])] if part["text"] else []
    if isinstance(part.get("functionCall"), dict):
        call = part["functionCall"]
        return [("assistant", "call", call["name"], call.get("args") or {})]
    if isinstance(part.get("functionResponse"), dict):
        r = part["functionResponse"]
        return [("tool", r["name"], r["response"])]
    return [(role, "part", sorted(part))]


def request_items(body: Json) -> list[Item]:
    """The ``contents`` of a request; a tool result sent twice in one content (Gemini CLI 0.61
    does so for the calls of a resumed session: once from the call's record, once from the
    user record that answered it) counts once."""
    out: list[Item] = []
    for content in body["contents"]:
        role = "assistant" if content["role"] == "model" else "user"
        seen: set[str] = set()
        for part in content["parts"]:
            r = part.get("functionResponse")
            if isinstance(r, dict):
                if r.get("id") in seen:
                    continue
                seen.add(r.get("id"))
            out.extend(part_items(role, part))
    return out


def message_items(m: Message) -> list[Item]:
    if m.role == "tool":
        response = m.extra.get("gemini_cli_response")
        if response is None:
            response = {"error": m.text} if m.is_error else {"output": m.text}
        return [("tool", m.name, response)]
    role = "assistant" if m.role == "assistant" else "user"
    items: list[Item] = [(role, "text", m.text)] if m.text else []
    items += [("assistant", "call", c.name, c.arguments) for c in m.tool_calls or ()]
    return items


def file_items(path: Path) -> list[Item]:
    """The messages of the file as Gemini CLI replays it on resume (records kept by id in
    order of first appearance, ``$set.messages`` replacing them all, ``$rewindTo`` cutting)."""
    records: dict[str, Json] = {}
    for line in lines_of(path):
        if "$rewindTo" in line:
            ids = list(records)
            cut = ids.index(line["$rewindTo"]) if line["$rewindTo"] in ids else 0
            records = {k: records[k] for k in ids[:cut]}
        elif "id" in line:
            records[line["id"]] = line
        elif "messages" in line.get("$set", {}):
            records = {m["id"]: m for m in line["$set"]["messages"]}
    answered = {p["functionResponse"]["id"] for r in records.values() if r["type"] == "user"
                for p in r["content"] if "functionResponse" in p}
    out: list[Item] = []
    for r in records.values():
        if r["type"] == "user":
            for p in r["content"]:
                out.extend(part_items("user", p))
        elif r["type"] == "gemini":
            parts = r["content"] if isinstance(r["content"], list) else [{"text": r["content"]}]
            out.extend(i for p in parts for i in part_items("assistant", p))
            listed = {p["functionCall"]["id"] for p in parts if "functionCall" in p}
            for call in r.get("toolCalls") or ():
                if call["id"] not in listed:
                    out.append(("assistant", "call", call["name"], call["args"]))
            for call in r.get("toolCalls") or ():
                if call["id"] not in answered:
                    out.extend(part_items("user", p) for p in call.get("result") or ())
    return out


def branch_messages(s: Session) -> list[Message]:
    return [e.message for e in s.branch() if isinstance(e, MessageEntry)]


# -- every fixture --------------------------------------------------------------------------

@pytest.mark.parametrize("rel", FILES, ids=str)
def test_branch_holds_every_message_in_order(rel: Path, imported: Any) -> None:
    s = imported(GM / rel)
    got = [i for m in branch_messages(s) for i in message_items(m)]
    assert got == file_items(GM / rel)  # a tool result written twice is there twice


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_context_is_what_gemini_cli_sent(rel: Path, imported: Any) -> None:
    path = GM / rel
    s = imported(path)
    m = manifest(path.parent)
    body = requests(path.parent)[int(m["final_main_request"])]["body"]
    sent = request_items(body)
    # a call the rewind left without its result gets contextree's placeholder result (the
    # pairing every provider asks for); the CLI sends the call alone
    ctx = [i for msg in s.build_context().messages if msg.text != INTERRUPTED
           for i in message_items(msg)]
    assert ctx[:len(sent)] == sent
    reply = ctx[len(sent):]
    assert reply and all(i[0] == "assistant" for i in reply)


@pytest.mark.parametrize("rel", FILES, ids=str)
def test_every_record_is_kept(rel: Path, imported: Any) -> None:
    path = GM / rel
    s = imported(path)
    entries = list(s.entries())
    ids = {e.message.extra.get("gemini_cli_id") for e in entries if isinstance(e, MessageEntry)}
    ids |= {e.data.get("id") for e in entries if isinstance(e, CustomEntry)
            and isinstance(e.data, dict)}
    meta = s.header.metadata["gemini_cli"]
    for line in lines_of(path):
        if "id" in line:
            assert line["id"] in ids
        elif "$set" in line:
            for key, value in line["$set"].items():
                if key == "messages":
                    assert {m["id"] for m in value} <= ids
                else:
                    assert key in meta
        elif "$rewindTo" in line:  # what it took out stays, off the branch
            on_branch = {e.id for e in s.branch()}
            assert any(isinstance(e, MessageEntry) and e.id not in on_branch for e in entries)
        else:
            assert line["sessionId"] == meta["sessionId"] == s.header.id


def test_tools_thoughts_usage_and_a_failed_call(imported: Any) -> None:
    s = imported(GM / "tools" / "session-1.jsonl")
    msgs = s.build_context().messages
    first = next(m for m in msgs if m.tool_calls)
    assert first.thinking[0].thinking == "**Reading both** Look at both files at once."
    assert [c.arguments for c in first.tool_calls or ()] == [{"file_path": "a.txt"},
                                                             {"file_path": "missing.txt"}]
    assert first.model == "gemini-2.5-flash" and first.usage is not None
    tokens = lines_of(GM / "tools" / "session-1.jsonl")[4]["tokens"]
    assert first.usage.input == tokens["input"] and first.usage.total == tokens["total"]
    results = [m for m in msgs if m.role == "tool"]
    assert [r.is_error for r in results] == [False, True, False]
    assert results[1].text.startswith("File not found")
    assert msgs[0].extra["gemini_cli_role"] == "session_context"


def test_compression_summary_is_marked_and_the_old_history_kept(imported: Any) -> None:
    s = imported(GM / "compress" / "session-1.jsonl")
    msgs = s.build_context().messages
    summary = msgs[1]
    assert summary.role == "user" and summary.text.startswith("<state_snapshot>")
    mark = summary.marker
    assert isinstance(mark, CompactionSummaryMarker) and mark.source == "gemini-cli"
    assert mark.summary == summary.text
    assert msgs[2].text == "Got it. Thanks for the additional context!"
    # the history before the compression is still in the session, on its own branch
    texts = {e.message.text for e in s.entries() if isinstance(e, MessageEntry)}
    assert "There is one file here: a.txt." in texts
    assert "There is one file here: a.txt." not in [m.text for m in msgs]


def test_resume_continues_the_same_file(imported: Any) -> None:
    s = imported(GM / "resume" / "session-1.jsonl")
    texts = [m.text for m in s.build_context().messages if m.role == "user"]
    assert texts[1:] == ["List the files in this directory.", "What does a.txt contain?"]


def test_subagent_chat_is_a_root_of_its_own_linked_after_its_call(imported: Any) -> None:
    path = GM / "subagent" / "session-1.jsonl"
    s = imported(path)
    (link,) = subagent_links(s, "gemini-cli")
    call = next(c for line in lines_of(path) for c in line.get("toolCalls") or ()
                if c["name"] == "invoke_agent")
    assert link.data["agent_id"] == call["agentId"] and link.data["tool_use_id"] == call["id"]
    assert link.data["meta"]["agent_name"] == "generalist"
    agent_file = path.parent / s.header.id / f"{call['agentId']}.jsonl"
    assert link.data["file"] == str(agent_file)
    result = s.get_entry(link.parent_id)
    assert isinstance(result, MessageEntry) and result.message.tool_call_id == call["id"]
    # the sub-agent's context is what the CLI sent in its last sub-agent request, + reply
    sent = request_items(request_body(GM / "subagent", "final_subagent_request"))
    root = link.data["first_entry_id"]
    ctx = [i for m in s.build_context(subtree_leaf(s, root)).messages
           for i in message_items(m)]
    assert ctx[:len(sent)] == sent
    # the reply: the complete_task call, and the result the CLI recorded for it
    assert ctx[len(sent):] == [
        ("assistant", "call", "complete_task",
         {"result": {"response": "The directory contains a.txt."}}),
        ("tool", "complete_task", {"output": "Output submitted and task completed."})]
    # its chat imported alone is the same, linked to the parent's session id
    alone = imported(agent_file)
    assert [i for m in alone.build_context().messages for i in message_items(m)] == ctx
    assert alone.header.parent_session == s.header.id
    assert alone.header.cwd == lines_of(agent_file)[0]["directories"][0]


def test_rewind_leaves_what_it_took_out_on_a_branch(imported: Any) -> None:
    """``/rewind`` (typed in the interactive CLI) then a new prompt: the messages it took out
    are a branch of their own, whose context is what the first run sent; the leaf is the
    answer to the new prompt."""
    s = imported(GM / "rewind" / "session-1.jsonl")
    texts = [m.text for m in s.build_context().messages]
    assert texts[-2:] == ["Answer differently.", "Rewound: a different answer."]
    old = next(e for e in s.entries() if isinstance(e, MessageEntry)
               and e.message.text == "There is one file here: a.txt.")
    assert old.id not in {e.id for e in s.branch()}
    first = request_items(requests(GM / "rewind")[manifest(GM / "rewind")[
        "last_request_of_run"]["prompt"]]["body"])
    ctx = [i for m in s.build_context(old.id).messages for i in message_items(m)]
    assert ctx[:len(first)] == first and ctx[len(first):] == [
        ("assistant", "text", "There is one file here: a.txt.")]


# -- where Gemini CLI keeps them; detection; wrong formats ---------------------------------

def gemini_home(tmp_path: Path) -> Path:
    """A HOME holding the fixtures where Gemini CLI keeps chats."""
    home = tmp_path / "home"
    for n, rel in enumerate(FILES):
        project = home / ".gemini" / "tmp" / f"project-{n}"
        (project / "chats").mkdir(parents=True)
        (project / ".project_root").write_text(f"/work/project-{n}")
        shutil.copyfile(GM / rel, project / "chats" / f"session-2026-12-02T03-4{n}-x{n}.jsonl")
    return home


def test_list_finds_the_chats_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = gemini_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    found = list_tool_sessions("gemini-cli")
    assert len(found) == len(FILES)
    ids = {lines_of(GM / rel)[0]["sessionId"] for rel in FILES}
    assert {f.id for f in found} == ids
    assert all(f.cwd and f.cwd.startswith("/work/project-") for f in found)
    assert {f.first_prompt for f in found} >= {"List the files in this directory."}
    result = CliRunner().invoke(app, ["import", "gemini-cli", "--list", "--json"])
    assert result.exit_code == 0, result.stderr
    assert {row["id"] for row in json.loads(result.stdout)} == ids
    sid = sorted(ids)[0]
    out = tmp_path / "by-id.jsonl"
    result = CliRunner().invoke(app, ["import", "gemini-cli", sid[:8], "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    with Session.open(out, readonly=True) as s:
        assert s.header.id == sid


def test_auto_detects_it_and_wrong_formats_are_refused(tmp_path: Path) -> None:
    src = GM / "simple" / "session-1.jsonl"
    assert detect_format(src) == "gemini-cli"
    runner = CliRunner()
    for wrong in ("claude-code", "codex", "brute", "pi"):
        out = tmp_path / f"{wrong}.jsonl"
        result = runner.invoke(app, ["import", wrong, str(src), "-o", str(out)])
        assert result.exit_code == 1, (wrong, result.stdout)
        assert "looks like gemini-cli" in result.stderr and "import it as gemini-cli" in \
            result.stderr, (wrong, result.stderr)
        assert not out.exists()
    codex = FORMATS_DATA / "real" / "codex" / "simple" / "rollout-1.jsonl"
    result = runner.invoke(app, ["import", "gemini-cli", str(codex), "-o",
                                 str(tmp_path / "x.jsonl")])
    assert result.exit_code == 1 and "looks like codex" in result.stderr, result.stderr


# -- export: read back, and resumed by the real Gemini CLI ---------------------------------

GEMINI_CLI_BIN = os.environ.get("GEMINI_CLI_BIN", "")
needs_gemini = pytest.mark.skipif(
    not (GEMINI_CLI_BIN and Path(GEMINI_CLI_BIN).exists() and shutil.which("node")),
    reason="set GEMINI_CLI_BIN to node_modules/.bin/gemini of @google/gemini-cli@0.61.0 (npm "
           "install) to resume exports with the real Gemini CLI")
NEXT = "Go on."


EXPORTED = ["tools", "compress"]  # thoughts, parallel calls, a failed one; a compression


def exported_source(tmp_path: Path, name: str) -> Session:
    """A fixture imported, to export again."""
    return import_session("gemini-cli", GM / name / "session-1.jsonl", tmp_path / "src.jsonl",
                          durable=False)


def context_items(s: Session) -> list[Item]:
    return [i for m in s.build_context().messages if m.role != "system"
            for i in message_items(m)]


@pytest.mark.parametrize("name", EXPORTED)
def test_export_reads_back_as_the_same_context(name: str, tmp_path: Path) -> None:
    s = exported_source(tmp_path, name)
    out = tmp_path / "chat.jsonl"
    from contextree.formats import export_session

    export_session("gemini-cli", s, out)
    assert detect_format(out) == "gemini-cli"
    back = import_session("auto", out, tmp_path / "back.jsonl", durable=False)
    assert context_items(back) == context_items(s)
    got, want = back.build_context().messages, s.build_context().messages
    assert [m.usage for m in got if m.role == "assistant"] == \
        [m.usage for m in want if m.role == "assistant"]
    assert [[p.thinking for p in m.thinking] for m in got] == \
        [[p.thinking for p in m.thinking] for m in want]
    back.close()
    s.close()


def test_export_to_home_is_listed_where_the_cli_looks(tmp_path: Path) -> None:
    from contextree.formats import export_to_gemini_cli_home

    s = exported_source(tmp_path, "tools")
    home = tmp_path / "home" / ".gemini"
    sid, path = export_to_gemini_cli_home(s, home=home, cwd="/work/project")
    assert path.parent.name == "chats" and path.parent.parent.parent == home / "tmp"
    projects = json.loads((home / "projects.json").read_text())["projects"]
    assert projects["/work/project"] == path.parent.parent.name
    assert [f.id for f in list_tool_sessions("gemini-cli", home)] == [sid]
    with pytest.raises(SessionError, match="already there"):
        export_to_gemini_cli_home(s, home=home, cwd="/work/project")
    s.close()


@needs_gemini
@pytest.mark.parametrize("name", EXPORTED)
def test_gemini_cli_resumes_the_export(name: str, tmp_path: Path) -> None:
    import subprocess

    from contextree.formats import export_to_gemini_cli_home
    from fakes.gemini_api import FakeGemini

    s = exported_source(tmp_path, name)
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    sid, _ = export_to_gemini_cli_home(s, home=home / ".gemini", cwd=str(cwd))
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))

    def reply(body: dict[str, Any], path: str) -> dict[str, Any]:
        main = path.endswith(":streamGenerateContent")
        return {"parts": [{"text": "Resumed." if main else '{"next_speaker": "user"}'}],
                "role": "main" if main else "side"}

    with FakeGemini(reply) as server:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "TERM": "dumb", "GEMINI_API_KEY": "sk-test", "GOOGLE_GEMINI_BASE_URL": server.url,
               "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "1"}
        done = subprocess.run([GEMINI_CLI_BIN, "--output-format", "stream-json", "--yolo",
                               "-m", "gemini-2.5-flash", "--resume", sid, "-p", NEXT],
                              cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    main = [r for r in server.log if r.get("reply_role") == "main"]
    assert main, f"Gemini CLI sent no request: {done.stdout[-1000:]}"
    sent = request_items(main[-1]["body"])
    # the CLI puts a fresh <session_context> first, in place of the exported one
    expected = [i for i in context_items(s) if not str(i[-1]).startswith("<session_context>")]
    assert sent[0][2].startswith("<session_context>")
    assert sent[1:] == [*expected, ("user", "text", NEXT)]
    s.close()
