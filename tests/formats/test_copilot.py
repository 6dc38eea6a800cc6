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
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextree import Message, Session
from contextree.cli import app
from contextree.entries import CompactionEntry, CustomEntry, MessageEntry
from contextree.errors import SessionError
from contextree.formats import detect_format, import_session, list_tool_sessions
from contextree.markers import CompactionSummaryMarker
from helpers import FORMATS_DATA

CP = FORMATS_DATA / "real" / "copilot"
FILES = sorted(p.relative_to(CP) for p in CP.glob("*/session-*/events.jsonl"))
Json = dict[str, Any]
Item = tuple[Any, ...]


def events_of(path: Path) -> list[Json]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def scenario(rel: Path) -> Path:
    return CP / rel.parts[0]


def test_every_scenario_is_covered() -> None:
    assert {p.parts[0] for p in FILES} == {"simple", "tools", "resume", "compact"}


@pytest.fixture
def imported(tmp_path: Path) -> Any:
    opened: list[Session] = []

    def load(src: Path, fmt: str = "copilot") -> Session:
        s = import_session(fmt, src, tmp_path / f"{len(opened)}.jsonl", durable=False)
        opened.append(s)
        return s

    yield load
    for s in opened:
        s.close()


def request_items(body: Json) -> list[Item]:
    out: list[Item] = []
    for m in body["messages"]:
        if m["role"] == "tool":
            out.append(("tool", m["tool_call_id"], m["content"]))
            continue
        if m.get("reasoning_content"):
            out.append(("thinking", m["reasoning_content"]))
        if m.get("content"):
            out.append((m["role"], "text", m["content"]))
        for c in m.get("tool_calls") or ():
            out.append(("call", c["id"], c["function"]["name"],
                        json.loads(c["function"]["arguments"])))
    return out


def message_items(m: Message) -> list[Item]:
    if m.role == "tool":
        return [("tool", m.tool_call_id, m.text)]
    out: list[Item] = [("thinking", p.thinking) for p in m.thinking]
    if m.text:
        out.append((m.role, "text", m.text))
    out += [("call", c.id, c.name, c.arguments) for c in m.tool_calls or ()]
    return out


def file_items(path: Path) -> list[Item]:
    """The messages the events file records, in order (the system prompt, written after its
    turn's user message and sent first, before it; a prompt written again unchanged once)."""
    out: list[Item] = []
    prompts: list[str] = []
    for e in events_of(path):
        kind, data = e["type"], e.get("data") or {}
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
    manifest = json.loads((scenario(rel) / "manifest.json").read_text())
    requests = json.loads((scenario(rel) / "requests.json").read_text())
    sent = request_items(requests[int(manifest["final_main_request"])]["body"])
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
EXPORTED = ["tools", "compact"]
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
