"""Import and export of other agents' formats (``contextree.formats``).

Round trips: contextree -> pi -> contextree keeps every entry (tree shape, labels, compaction
fields, branch summaries, model and thinking changes) and the leaf; pi -> contextree -> pi
gives back the same lines; Brute and the provider message lists go both ways. Imports of the
hand-checked samples in ``tests/data/formats`` are checked fact by fact, and malformed input
names the file and line.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from contextree import (
    ImagePart,
    Message,
    Session,
    SessionError,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
)
from contextree.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    to_dict,
)
from contextree.errors import InvalidArgument, SessionExists, UnknownFormat
from contextree.formats import (
    detect_format,
    export_session,
    get_format,
    import_session,
    list_formats,
    register_format,
    unregister_format,
)
from helpers import FORMATS_DATA as DATA

# -- a session that uses every feature ------------------------------------------------------

def build_session(path: Path) -> Session:
    """Branches, labels, a compaction with every field, a branch summary, model, thinking and
    tool changes, custom entries, images, signed thinking, and the leaf moved off the tip."""
    s = Session.create(path, cwd="/work/project", durable=False)
    s.append_message(Message.system("You are a careful coding agent."))
    task = s.append_message(Message.user("Fix the failing parser test."))
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_thinking_level_change("high")
    s.append_active_tools_change(["read", "edit", "shell"])
    s.append_message(Message.assistant(
        [ThinkingPart(thinking="Read the parser.", signature="sig-1"),
         TextPart(text="Reading the parser.")],
        tool_calls=[ToolCall(id="call_1", name="read", arguments={"path": "parser.py"})],
        usage=Usage(input=900, output=40, cache_read=100, total=1040, cost=0.0123),
        model="claude-sonnet-4-5", provider="anthropic", stop_reason="tool_use"))
    result = s.append_message(Message.tool("def parse(s):\n    return s[0]\n",
                                           tool_call_id="call_1", name="read"))
    found = s.append_message(Message.assistant("`s[0]` fails on empty input."))
    s.set_label(found, "diagnosis")
    s.append_message(Message.user([TextPart(text="Screenshot of the failure:"),
                                   ImagePart(data="aGVsbG8=", mime_type="image/png")]))
    kept = s.append_message(Message.assistant("I'll return None for empty input."))
    s.append_compaction(summary="Parser fails on empty input; reading parser.py.", first_kept_entry_id=kept, tokens_before=5000,
                        details={"stages": ["digest"]}, usage=Usage(input=10, output=5),
                        tokens_after=800, cleared={result: "[tool result cleared]"},
                        pinned=[task])
    s.append_custom("editor-state", {"open": ["parser.py"]})
    s.append_custom_message("reminder", "Run the tests before finishing.", details={"n": 1})
    s.append_message(Message.user("Approach A: raise ValueError instead."))
    s.move_to(found, {"summary": "Tried raising ValueError; too strict.",
                      "details": {"files": ["parser.py"]}})
    s.append_message(Message.user("Approach B: return an empty list."))
    tip = s.append_message(Message.assistant("Returning []. Tests pass."))
    s.set_name("parser fix")
    s.move_to(tip)  # a leaf move: the leaf is no longer the last entry
    s.move_to(found)
    return s


def entry_dicts(session: Session) -> dict[str, dict[str, Any]]:
    return {e.id: to_dict(e) for e in session.storage.entries() if not isinstance(e, LeafEntry)}


def context_dicts(session: Session) -> list[dict[str, Any]]:
    return [m.to_dict() for m in session.build_context().messages]


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return build_session(tmp_path / "original.jsonl")


# -- pi ------------------------------------------------------------------------------------

def test_contextree_to_pi_to_contextree_keeps_every_entry(session: Session,
                                                          tmp_path: Path) -> None:
    out = export_session("pi", session, tmp_path / "pi.jsonl")
    back = import_session("pi", out, tmp_path / "back.jsonl")

    assert entry_dicts(back) == entry_dicts(session)
    assert back.leaf_id == session.leaf_id
    assert back.storage.labels() == session.storage.labels() == {session.leaf_id: "diagnosis"}
    assert back.name == "parser fix"
    assert back.header.id == session.header.id
    assert back.header.cwd == "/work/project"
    assert context_dicts(back) == context_dicts(session)
    comp = next(e for e in back.storage.entries() if isinstance(e, CompactionEntry))
    assert comp.cleared and comp.pinned and comp.tokens_after == 800
    assert comp.usage == Usage(input=10, output=5)
    summary = next(e for e in back.storage.entries() if isinstance(e, BranchSummaryEntry))
    assert summary.details == {"files": ["parser.py"]}


def test_pi_export_is_a_file_pi_can_open(session: Session, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in export_session("pi", session, tmp_path / "p.jsonl")
             .read_text().splitlines()]
    head, entries = lines[0], lines[1:]
    assert head["type"] == "session" and head["version"] == 3
    assert {"id", "timestamp", "cwd"} <= set(head)
    ids = {e["id"] for e in entries}
    for e in entries:
        assert {"type", "id", "parentId", "timestamp"} <= set(e)
        assert e["parentId"] is None or e["parentId"] in ids
        assert not any(k in e for k in ("parent_id", "first_kept_entry_id", "target_id"))
        if e["type"] == "message":
            _check_pi_message(e["message"])
    # pi resumes at the last entry of the file: that must be contextree's leaf.
    assert entries[-1]["id"] == session.leaf_id
    # pi builds the same conversation from the file as contextree does from the session.
    assert pi_context_shape(entries) == contextree_context_shape(session)


def _check_pi_message(m: dict[str, Any]) -> None:
    role = m["role"]
    assert isinstance(m["timestamp"], int)
    if role == "assistant":
        assert isinstance(m["content"], list)
        assert {"api", "provider", "model", "usage", "stopReason"} <= set(m)
        assert m["stopReason"] in {"stop", "length", "toolUse", "error", "aborted"}
        assert {"input", "output", "cacheRead", "cacheWrite", "totalTokens"} <= set(m["usage"])
        assert "total" in m["usage"]["cost"]
        for block in m["content"]:
            assert block["type"] in {"text", "thinking", "toolCall"}
    elif role == "toolResult":
        assert {"toolCallId", "toolName", "content", "isError"} <= set(m)
        assert isinstance(m["content"], list)
    else:
        assert role in {"user", "custom"}


def pi_context_shape(entries: list[dict[str, Any]]) -> list[str]:
    """pi's buildSessionContext (leaf = last entry), reduced to the kinds of messages."""
    by_id = {e["id"]: e for e in entries}
    path: list[dict[str, Any]] = []
    current: dict[str, Any] | None = entries[-1]
    while current is not None:
        path.insert(0, current)
        current = by_id.get(current["parentId"]) if current["parentId"] else None
    comps = [i for i, e in enumerate(path) if e["type"] == "compaction"]

    def kinds(e: dict[str, Any]) -> list[str]:
        if e["type"] == "message":
            role = e["message"]["role"]
            if role == "custom":
                return ["system" if e["message"]["customType"] == "contextree.system"
                        else "user"]
            return ["tool" if role == "toolResult" else role]
        if e["type"] == "custom_message":
            return ["user"]
        if e["type"] == "branch_summary":
            return ["branch_summary"]
        return []

    if not comps:
        return [k for e in path for k in kinds(e)]
    ci = comps[-1]
    first = path[ci]["firstKeptEntryId"]
    start = next((i for i in range(ci) if path[i]["id"] == first), ci)
    return ["compaction_summary", *(k for e in path[start:ci] for k in kinds(e)),
            *(k for e in path[ci + 1:] for k in kinds(e))]


def contextree_context_shape(session: Session) -> list[str]:
    out = []
    for m in session.build_context().messages:
        kind = (m.meta or {}).get("kind")
        out.append(kind if kind in ("compaction_summary", "branch_summary") else m.role)
    return out


def test_pi_sample_imports_every_kind_of_entry(tmp_path: Path) -> None:
    s = import_session("pi", DATA / "pi_v3.jsonl", tmp_path / "s.jsonl")
    assert s.header.id == "5f0c7a9e-2b41-4c3e-9d1a-8e6f4b2c1d00"
    assert s.header.cwd == "/home/dev/parser"
    assert (s.header.metadata or {})["imported_from"]["format"] == "pi"
    assert len(s.storage) == 20
    assert s.leaf_id == "b0c1d2e3"
    assert s.name == "tokenizer empty input"
    assert s.storage.labels() == {"f6a7b8c9": "fix-found"}
    tree = {e.id: e for e in s.storage.entries()}
    # A branch: d0e1f2a3 (the TypeError idea) and the branch summary both follow a7b8c9d0.
    assert {c for c, e in tree.items() if e.parent_id == "a7b8c9d0"} == {"b8c9d0e1",
                                                                         "f2a3b4c5"}
    branch = tree["f2a3b4c5"]
    assert isinstance(branch, BranchSummaryEntry) and branch.from_id == "a7b8c9d0"
    assert branch.details == {"readFiles": ["src/tokenizer.py"], "modifiedFiles": []}
    comp = tree["d6e7f8a9"]
    assert isinstance(comp, CompactionEntry)
    assert (comp.first_kept_entry_id, comp.tokens_before) == ("a3b4c5d6", 10410)
    models = [e for e in tree.values() if isinstance(e, ModelChangeEntry)]
    assert [(m.provider, m.model_id) for m in models] == [("anthropic", "claude-sonnet-4-5"),
                                                          ("openai", "gpt-5")]
    thinking = tree["b2c3d4e5"]
    assert isinstance(thinking, ThinkingLevelChangeEntry) and thinking.thinking_level == "medium"
    assert isinstance(tree["f8a9b0c1"], CustomEntry)

    first = _message(tree["d4e5f6a7"])
    assert first.thinking[0].signature == "EqQBCkgIBxABGAIiQK1"
    assert first.tool_calls == [ToolCall(id="toolu_01AbC", name="read",
                                         arguments={"path": "src/tokenizer.py"})]
    assert first.usage is not None and first.usage.cache_write == 2290
    assert first.usage.cost == pytest.approx(0.0168405)
    result = _message(tree["e5f6a7b8"])
    assert (result.role, result.name, result.tool_call_id) == ("tool", "read", "toolu_01AbC")
    bash = _message(tree["b8c9d0e1"])
    assert bash.role == "user" and bash.text.startswith("Ran `pytest -q tests/test_tokenizer.py`")
    image = _message(tree["a3b4c5d6"])
    assert isinstance(image.content, list) and isinstance(image.content[1], ImagePart)
    assert image.content[1].mime_type == "image/png"

    ctx = s.build_context()
    assert ctx.model == ("openai", "gpt-5") and ctx.thinking_level == "medium"
    kinds = [(m.meta or {}).get("kind", m.role) for m in ctx.messages]
    assert kinds == ["compaction_summary", "user", "assistant", "custom_message", "user"]


def _message(entry: Any) -> Message:
    assert isinstance(entry, MessageEntry)
    return entry.message


def test_pi_to_contextree_to_pi_gives_back_the_same_lines(tmp_path: Path) -> None:
    s = import_session("pi", DATA / "pi_v3.jsonl", tmp_path / "s.jsonl")
    out = export_session("pi", s, tmp_path / "again.jsonl")
    original = [json.loads(x) for x in (DATA / "pi_v3.jsonl").read_text().splitlines()]
    assert [json.loads(x) for x in out.read_text().splitlines()] == original


def test_a_file_written_by_pi_round_trips_exactly(tmp_path: Path) -> None:
    """``pi_written_by_pi.jsonl`` was written by pi's own SessionManager (pi-coding-agent
    0.73.1, ``pi_node/make_pi_session.mjs``)."""
    src = DATA / "pi_written_by_pi.jsonl"
    s = import_session("pi", src, tmp_path / "s.jsonl")
    assert s.name == "calc sign bug" and len(s.storage.labels()) == 1
    assert any(isinstance(e, BranchSummaryEntry) for e in s.storage.entries())
    out = export_session("pi", s, tmp_path / "again.jsonl")
    assert [json.loads(x) for x in out.read_text().splitlines()] == \
        [json.loads(x) for x in src.read_text().splitlines()]


PI_PACKAGE = os.environ.get("PI_CODING_AGENT")  # node_modules/@mariozechner/pi-coding-agent


PI1_PACKAGE = os.environ.get("PI1_CODING_AGENT")  # node_modules/@earendil-works/pi-coding-agent
PI1_NODE = os.environ.get("PI1_NODE")  # a Node >= 22.19, which pi 1.x needs


def pi_reads(path: Path, *, pi1: bool = False) -> dict[str, Any]:
    """What pi's own SessionManager makes of a session file (needs node and pi installed):
    pi 0.73 (``PI_CODING_AGENT``), or with ``pi1`` pi 1.x (``PI1_CODING_AGENT``, ``PI1_NODE``)."""
    script = DATA / "pi_node" / "read_pi_session.mjs"
    node, package = (PI1_NODE or "node", PI1_PACKAGE) if pi1 else ("node", PI_PACKAGE)
    done = subprocess.run([node, str(script), str(path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PI_CODING_AGENT": package or ""},
                          check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


needs_pi = pytest.mark.skipif(
    not PI_PACKAGE or shutil.which("node") is None,
    reason="set PI_CODING_AGENT to an installed @mariozechner/pi-coding-agent (npm install) "
           "to check exports against pi itself")


needs_pi1 = pytest.mark.skipif(
    not PI1_PACKAGE or not PI1_NODE,
    reason="set PI1_CODING_AGENT to an installed @earendil-works/pi-coding-agent and PI1_NODE "
           "to a Node >= 22.19 (npm install node@22) to check exports against pi 1.x itself")


@needs_pi1
def test_pi1_itself_opens_the_export(session: Session, tmp_path: Path) -> None:
    """pi 1.x reads the (default) pi 1.x export: every entry, plus a context_edit line for
    each tool result the compaction cleared, just below it; the same context."""
    seen = pi_reads(export_session("pi", session, tmp_path / "p.jsonl"), pi1=True)
    comp = next(e for e in session.storage.entries() if isinstance(e, CompactionEntry))
    edits = [f"{comp.id}.cleared.{i}" for i in range(len(comp.cleared or {}))]
    assert edits
    below = {comp.id: edits[-1]}
    want = {(e.id, below.get(e.parent_id or "", e.parent_id), e.type)
            for e in session.storage.entries() if not isinstance(e, LeafEntry)}
    want |= {(eid, parent, "context_edit") for eid, parent in zip(edits, [comp.id, *edits][:-1], strict=True)}
    assert {tuple(e) for e in seen["entries"]} == want
    assert seen["leafId"] == session.leaf_id
    roles = {"custom": "system", "toolResult": "tool"}
    assert [roles.get(r, r) for r in seen["context"]] == \
        [m.role for m in session.build_context().messages]


@needs_pi
def test_pi_itself_opens_the_export(session: Session, tmp_path: Path) -> None:
    seen = pi_reads(export_session("pi", session, tmp_path / "p.jsonl", version="0.73"))
    assert {tuple(e) for e in seen["entries"]} == {
        (e.id, e.parent_id, e.type) for e in session.storage.entries()
        if not isinstance(e, LeafEntry)}
    assert seen["leafId"] == session.leaf_id
    assert seen["labels"] == session.storage.labels()
    assert seen["name"] == "parser fix"
    assert seen["thinkingLevel"] == "high"
    assert seen["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    roles = {"custom": "system", "toolResult": "tool"}
    assert [roles.get(r, r) for r in seen["context"]] == \
        [m.role for m in session.build_context().messages]


@needs_pi
def test_pi_sees_the_same_session_after_a_round_trip(tmp_path: Path) -> None:
    src = DATA / "pi_written_by_pi.jsonl"
    s = import_session("pi", src, tmp_path / "s.jsonl")
    assert pi_reads(export_session("pi", s, tmp_path / "p.jsonl", version="0.73")) \
        == pi_reads(src)


def test_pi_version_1_is_migrated_like_pi_does(tmp_path: Path) -> None:
    s = import_session("pi", DATA / "pi_v1.jsonl", tmp_path / "s.jsonl")
    entries = list(s.storage.entries())
    assert len(entries) == 7
    for parent, child in itertools.pairwise(entries):  # one linear chain
        assert child.parent_id == parent.id
    comp = entries[4]
    assert isinstance(comp, CompactionEntry)
    # firstKeptEntryIndex 4 counts the header as 0: the fourth entry, "Two files...".
    assert comp.first_kept_entry_id == entries[3].id
    hook = _message(entries[5])
    assert hook.role == "user" and hook.text == "Tests must pass before commit."
    assert hook.extra["piMessage"]["role"] == "custom"  # v2 -> v3 rename
    out = export_session("pi", s, tmp_path / "v3.jsonl")
    head = json.loads(out.read_text().splitlines()[0])
    assert head["version"] == 3


# -- Claude Code and Codex -----------------------------------------------------------------

def test_claude_code_sample(tmp_path: Path) -> None:
    s = import_session("claude-code", DATA / "claude_code.jsonl", tmp_path / "s.jsonl")
    tree = {e.id: e for e in s.storage.entries()}
    assert s.header.id == "7c1e9f40-3a2b-4d5c-8e6f-0a1b2c3d4e5f"
    assert s.header.cwd == "/home/dev/webapp"
    assert s.name == "Login redirect loop"
    # Four assistant lines of one response (msg_01Xa) are one message.
    first = _message(tree["a-0001"])
    assert [type(p).__name__ for p in first.content or []] == ["ThinkingPart", "TextPart"]
    assert [c.name for c in first.tool_calls or []] == ["Read", "Grep"]
    assert first.usage is not None and first.usage.output == 152
    assert first.model == "claude-sonnet-4-5-20250929"
    assert not any(k in tree for k in ("a-0002", "a-0003", "a-0004"))
    # Parallel tool results are chained, not siblings; the local_command line is kept as a
    # custom entry in the chain.
    assert tree["u-0002"].parent_id == "a-0001"
    assert tree["u-0003"].parent_id == "u-0002"
    assert _message(tree["u-0003"]).name == "Grep"
    local = tree["s-0001"]
    assert isinstance(local, CustomEntry) and local.custom_type == "claude-code/system"
    assert local.parent_id == "u-0003" and tree["a-0005"].parent_id == "s-0001"
    # The rewind made two branches from a-0005.
    assert {c for c, e in tree.items() if e.parent_id == "a-0005"} == {"u-0004", "u-0005"}
    # The sidechain is its own root.
    assert tree["sc-0001"].parent_id is None
    # The compact boundary hangs under its logical parent and holds the summary message.
    comp = tree["b-0001"]
    assert isinstance(comp, CompactionEntry) and comp.parent_id == "a-0007"
    assert comp.tokens_before == 48210 and comp.retained_tail is not None
    assert "PUBLIC_PATHS" in comp.retained_tail[0].text
    assert "u-0006" not in tree and tree["u-0007"].parent_id == "b-0001"
    assert isinstance(tree[s.leaf_id or ""], SessionInfoEntry)
    texts = [m.text for m in s.build_context().messages]
    assert texts[1:] == ["Add a test for it.",
                         "Added tests/test_auth.py::test_login_not_redirected."]
    summary = s.build_context().messages[0]
    assert summary.role == "user" and summary.kind == "compaction_summary"
    # Records without a uuid are custom entries too; nothing is left out.
    report = (s.header.metadata or {})["imported_from"]["report"]
    assert report["records"]["summary"] == 1
    assert report["custom_entries"]["claude-code/file-history-snapshot"] == 1


def test_codex_sample(tmp_path: Path) -> None:
    s = import_session("codex", DATA / "codex_rollout.jsonl", tmp_path / "s.jsonl")
    entries = list(s.storage.entries())
    assert s.header.id == "0199a2d7-41c4-78b1-b7cc-a45d62a89cd5"
    assert (s.header.metadata or {})["imported_from"]["cli_version"] == "0.50.0"
    assert s.name == "cli --version flag"
    messages = [e.message for e in entries if isinstance(e, MessageEntry)]
    assert messages[0].text.startswith("<environment_context>")
    call = messages[2]
    assert call.role == "assistant" and call.model == "gpt-5-codex"
    assert call.thinking[0].thinking == "**Inspecting CLI entry point**"
    assert call.thinking[0].signature == "gAAAAABpAWb7xQ0example"
    assert call.tool_calls is not None and call.tool_calls[0].name == "shell"
    assert call.usage == Usage(input=1048, output=129, cache_read=4992, total=6169)
    assert messages[3].role == "tool" and messages[3].name == "shell"
    patch = messages[4].tool_calls or []
    assert patch[0].name == "apply_patch" and patch[0].arguments["input"].startswith("*** Begin")
    levels = [e.thinking_level for e in entries if isinstance(e, ThinkingLevelChangeEntry)]
    assert levels == ["medium", "high"]
    assert [e.model_id for e in entries if isinstance(e, ModelChangeEntry)] == ["gpt-5-codex"]
    # The rolled-back turn stays in the tree, on a branch of its own.
    undone = next(e for e in entries if isinstance(e, MessageEntry)
                  and "from the package" in e.message.text)
    redo = next(e for e in entries if isinstance(e, MessageEntry)
                and "VERSION file instead" in e.message.text)
    branch = {e.id for e in s.branch()}
    assert undone.parent_id in branch and redo.id in branch and undone.id not in branch
    comp = next(e for e in entries if isinstance(e, CompactionEntry))
    assert comp.retained_tail is not None
    # What Codex sends after it: the kept prompt, then the summary (as a user message).
    summary = "Added a --version flag to src/cli.py that reads the VERSION file."
    assert [m.text for m in comp.retained_tail] == ["Add a --version flag to the CLI.", summary]
    assert comp.retained_tail[1].kind == "compaction_summary"
    ctx = [m.text for m in s.build_context().messages]
    assert ctx == ["Add a --version flag to the CLI.", summary, "Now add a test."]


# -- Brute and the provider lists ----------------------------------------------------------

def test_brute_sample_round_trips_exactly(tmp_path: Path) -> None:
    s = import_session("brute", DATA / "brute.jsonl", tmp_path / "s.jsonl")
    assert [m.role for m in s.build_context().messages] == ["user", "assistant", "tool",
                                                             "assistant", "user", "assistant"]
    out = export_session("brute", s, tmp_path / "log.jsonl")
    assert out.read_text().splitlines() == [
        json.dumps(json.loads(x), separators=(",", ":"))
        for x in (DATA / "brute.jsonl").read_text().splitlines()]


def test_brute_export_drops_the_system_prompt_but_keeps_summaries(session: Session,
                                                                  tmp_path: Path) -> None:
    tip = next(e.id for e in session.storage.entries() if isinstance(e, MessageEntry)
               and e.message.text.startswith("Returning []"))
    session.move_to(tip)  # the branch with a branch summary in its context
    lines = [json.loads(x) for x in export_session("brute", session, tmp_path / "b.jsonl")
             .read_text().splitlines()]
    assert all(set(line) <= {"role", "content", "tool_calls", "tool_call_id"}
               for line in lines)
    assert "You are a careful coding agent." not in {line["content"] for line in lines}
    assert any("Tried raising ValueError" in (line["content"] or "") for line in lines)
    back = import_session("brute", tmp_path / "b.jsonl", tmp_path / "back.jsonl")
    assert [m.text for m in back.build_context().messages] == [
        m.text for m in session.build_context().messages if m.role != "system"
        or (m.meta or {}).get("kind") == "branch_summary"]


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_provider_lists_both_ways(fmt: str, tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s.jsonl", durable=False)
    s.append_message(Message.system("Be brief."))
    s.append_message(Message.user("What's in config.json?"))
    s.append_message(Message.assistant(
        [ThinkingPart(thinking="Read it.", signature="sig")],
        tool_calls=[ToolCall(id="call_1", name="read", arguments={"path": "config.json"})]))
    s.append_message(Message.tool('{"debug": true}', tool_call_id="call_1", name="read"))
    s.append_message(Message.assistant("Debug is on."))
    out = export_session(fmt, s, tmp_path / f"out{get_format(fmt).suffix}")
    back = import_session(fmt, out, tmp_path / "back.jsonl")
    before, after = s.build_context().messages, back.build_context().messages
    assert [(m.role, m.text, m.tool_call_id) for m in after] == \
        [(m.role, m.text, m.tool_call_id) for m in before]
    assert after[2].tool_calls == before[2].tool_calls
    assert after[2].thinking[0].thinking == "Read it."
    assert after[3].name == "read"


@pytest.mark.parametrize("name,fmt", [("openai_chat.json", "openai-chat"),
                                      ("openai_responses.json", "openai-responses"),
                                      ("anthropic.json", "anthropic")])
def test_provider_list_samples(name: str, fmt: str, tmp_path: Path) -> None:
    s = import_session(fmt, DATA / name, tmp_path / "s.jsonl")
    msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[0].text == "You are a coding assistant."
    assert msgs[2].tool_calls is not None and msgs[2].tool_calls[0].arguments == {
        "path": "config.json"}
    assert msgs[2].thinking and msgs[3].name == "read"
    assert msgs[4].text == "It sets debug to true."


def test_provider_lists_read_json_lines_too(tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    s = import_session("openai-chat", src, tmp_path / "s.jsonl")
    assert [m.text for m in s.build_context().messages] == ["hi", "yo"]


# -- detection, registry, errors -----------------------------------------------------------

@pytest.mark.parametrize("name,fmt", [
    ("pi_v3.jsonl", "pi"), ("pi_v1.jsonl", "pi"), ("claude_code.jsonl", "claude-code"),
    ("codex_rollout.jsonl", "codex"), ("brute.jsonl", "brute"),
    ("openai_chat.json", "openai-chat"), ("openai_responses.json", "openai-responses"),
    ("anthropic.json", "anthropic"),
])
def test_detect_format(name: str, fmt: str, tmp_path: Path) -> None:
    assert detect_format(DATA / name) == fmt
    assert len(import_session("auto", DATA / name, tmp_path / "s.jsonl").storage) > 0


def test_detect_refuses_contextree_files_and_unknown_ones(session: Session,
                                                          tmp_path: Path) -> None:
    with pytest.raises(UnknownFormat, match="already a contextree session"):
        detect_format(Path(session.location))
    other = tmp_path / "x.txt"
    other.write_text("hello\n")
    with pytest.raises(UnknownFormat, match="cannot tell"):
        detect_format(other)


NEW_FORMATS = {"atif", "gemini-cli", "opencode", "copilot"}  # issue 25


def test_registry() -> None:
    assert {f.name for f in list_formats()} == {"brute", "pi", "openai-chat", "openai-responses", "anthropic",
                            "claude-code", "codex", "contextree", "markdown", "html"} | NEW_FORMATS
    assert not get_format("md").can_import and get_format("md").name == "markdown"
    assert get_format("OpenAI_Chat").name == "openai-chat"
    assert get_format("claude").name == "claude-code"
    with pytest.raises(UnknownFormat, match="unknown format 'nope'"):
        get_format("nope")


def test_import_only_formats_cannot_be_exported(session: Session, tmp_path: Path) -> None:
    from contextree.formats import Format
    from contextree.formats import _brute as brute

    register_format(Format("import-only", "x", brute.read))
    try:
        with pytest.raises(InvalidArgument, match="imported, not exported"):
            export_session("import-only", session, tmp_path / "x.jsonl")
    finally:
        unregister_format("import-only")


def test_import_never_replaces_a_file(tmp_path: Path) -> None:
    dest = tmp_path / "taken.jsonl"
    dest.write_text("precious\n")
    with pytest.raises(SessionError) as err:
        import_session("brute", DATA / "brute.jsonl", dest)
    assert err.value.code == "exists"
    assert dest.read_text() == "precious\n"


def test_export_refuses_to_overwrite_unless_asked(session: Session, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    out.write_text("old")
    with pytest.raises(SessionError, match="already there"):
        export_session("openai-chat", session, out)
    export_session("openai-chat", session, out, overwrite=True)
    assert json.loads(out.read_text())[0]["role"] == "system"


def test_export_at_an_entry(session: Session, tmp_path: Path) -> None:
    at = session.branch()[1].id  # the first user message
    out = export_session("openai-chat", session, tmp_path / "x.json", at=at)
    assert [m["role"] for m in json.loads(out.read_text())] == ["system", "user"]
    with pytest.raises(SessionError, match="no entry"):
        export_session("openai-chat", session, tmp_path / "y.json", at="nope")


BAD_INPUTS = [
    ("pi", "p.jsonl",
     '{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n'
     '{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user",'
     '"content":"hi"}}\n{"type":"message", oops\n', 3, "not valid JSON"),
    ("pi", "p.jsonl", '{"type":"message","id":"a"}\n', 1, "not a pi session header"),
    ("pi", "p.jsonl",
     '{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n'
     '{"type":"model_change","id":"a","parentId":null,"timestamp":"t"}\n', 2,
     "invalid pi 'model_change' entry"),
    ("brute", "b.jsonl", '{"role":"user","content":"hi"}\n[1, 2]\n', 2,
     "expected a message object"),
    ("brute", "b.jsonl", '{"role":"user","content":"hi"}\n\n{"content":"no role"}\n', 3,
     "no string `role`"),
    ("claude-code", "c.jsonl", '{"type":"user","message":{"role":"user","content":"x"}}\n', 1,
     "no string `uuid`"),
    ("codex", "r.jsonl", '{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}\n'
     '{"timestamp":"t","type":"response_item"}\n', 2, "no `payload` object"),
    ("openai-chat", "o.json", '[\n  {"role": "user", "content": "hi"},\n  {"role": }\n]\n', 3,
     "not valid JSON"),
]


@pytest.mark.parametrize("fmt,name,text,line,message", BAD_INPUTS)
def test_malformed_input_names_file_and_line(fmt: str, name: str, text: str, line: int,
                                             message: str, tmp_path: Path) -> None:
    src = tmp_path / name
    src.write_text(text)
    with pytest.raises(SessionError) as err:
        import_session(fmt, src, tmp_path / "out.jsonl")
    assert err.value.line == line
    assert str(err.value).startswith(f"{src}:{line}: ")
    assert message in str(err.value)
    assert not (tmp_path / "out.jsonl").exists()


def test_malformed_list_items_are_named(tmp_path: Path) -> None:
    src = tmp_path / "a.json"
    src.write_text('{"messages": [{"role": "user", "content": "hi"}, "oops"]}')
    with pytest.raises(SessionError, match=r"item 1: expected an object"):
        import_session("anthropic", src, tmp_path / "out.jsonl")


def test_progress_is_reported_for_imports(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    with open(src, "w") as f:
        for i in range(30_000):
            f.write(json.dumps({"role": "user", "content": f"message {i} " + "x" * 40}) + "\n")
    seen: list[tuple[int, int]] = []
    s = import_session("brute", src, tmp_path / "s.jsonl",
                       progress=lambda done, total: seen.append((done, total)))
    assert len(s.storage) == 30_000
    assert seen and seen[-1][0] == seen[-1][1] == src.stat().st_size


# -- unknown fields and refused overwrites -------------------------------------------------

def test_unknown_fields_survive_a_pi_round_trip(tmp_path: Path) -> None:
    """Fields contextree does not know, on a message, a content part and a tool call, are
    written into the pi file and read back unchanged."""
    s = Session.create(tmp_path / "s.jsonl", durable=False)
    s.append_message(Message.user("hi").set_extra({"x_vendor": {"trace": "t-1"}}))
    call = ToolCall(id="c1", name="read", arguments={"path": "a"}).set_extra({"x_call": 1})
    s.append_message(Message.assistant(
        [TextPart(text="reading").set_extra({"x_part": [1, 2]})], tool_calls=[call],
        model="m", provider="p", stop_reason="tool_use").set_extra({"x_vendor": "v"}))
    s.append_message(Message.tool("body", tool_call_id="c1", name="read")
                     .set_extra({"x_result": True}))
    back = import_session("pi", export_session("pi", s, tmp_path / "p.jsonl"),
                          tmp_path / "back.jsonl")
    assert entry_dicts(back) == entry_dicts(s)
    user, assistant, tool = (e.message for e in back.entries() if isinstance(e, MessageEntry))
    assert user.extra == {"x_vendor": {"trace": "t-1"}}
    assert assistant.extra["x_vendor"] == "v"
    assert isinstance(assistant.content, list) and assistant.content[0].extra == {"x_part": [1, 2]}
    assert assistant.tool_calls is not None and assistant.tool_calls[0].extra == {"x_call": 1}
    assert tool.extra["x_result"] is True


@pytest.mark.parametrize("fmt", [f.name for f in list_formats() if f.writer is not None])
def test_an_export_onto_an_existing_file_is_refused_and_leaves_it_alone(
        fmt: str, session: Session, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "taken.out"
    out.write_bytes(b"precious\n")
    os.chmod(out, 0o644)
    before = out.stat()
    with pytest.raises(SessionExists) as err:
        export_session(fmt, session, out)
    assert "overwrite=True" in str(err.value) and "--force" in str(err.value)  # how to allow it
    assert out.read_bytes() == b"precious\n"
    after = out.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_mode) == \
        (before.st_ino, before.st_mtime_ns, before.st_mode)
    assert [p.name for p in out.parent.iterdir()] == ["taken.out"]  # no temp file left


def test_pi_custom_message_images_reach_the_context_and_survive_a_reopen(tmp_path: Path) -> None:
    """pi's convertToLlm sends a custom_message's image blocks; the import keeps them."""
    image = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
    lines = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": "/w"},
        {"type": "custom_message", "id": "c1", "parentId": None,
         "timestamp": "2026-01-01T00:00:01.000Z", "customType": "screenshot",
         "content": [{"type": "text", "text": "the page:"}, image], "display": True},
    ]
    src = tmp_path / "pi.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "ct.jsonl"
    import_session("pi", src, out).close()
    for session in (Session.open(out, readonly=True),):
        with session:
            (message,) = session.build_context().messages
            assert message.role == "user" and message.text == "the page:"
            assert [type(p).__name__ for p in message.content or []] == ["TextPart", "ImagePart"]
            assert message.content[1].data == "aGVsbG8="  # type: ignore[index,union-attr]
            back = tmp_path / "back.jsonl"
            export_session("pi", session, back)
    again = [json.loads(x) for x in back.read_text().splitlines()]
    assert again[1]["content"] == lines[1]["content"]
