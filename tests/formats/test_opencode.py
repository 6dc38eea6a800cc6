"""opencode sessions, read from databases written by the real opencode
(tests/data/formats/real/opencode, made by scripts/fixtures/make_fixtures_new.py against the
Chat Completions fake of tests/fakes on 127.0.0.1).

For every fixture: the branch holds every message of the session in order; ``build_context()``
equals the messages of the last request opencode sent (less its system prompt, which opencode
does not store), followed by the reply; every message and part row is imported or kept. Then:
``import --list`` finds the sessions under an XDG_DATA_HOME the test sets, ``import auto``
detects the database, and a wrong explicit format is refused, naming this one.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
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
    manifest,
    request_body,
    requests,
    subagent_links,
    subtree_leaf,
)
from contextree import Message, Session
from contextree.cli import app
from contextree.entries import CompactionEntry, CustomEntry, MessageEntry
from contextree.formats import detect_format, list_tool_sessions
from contextree.markers import CompactionSummaryMarker
from helpers import FORMATS_DATA

OC = FORMATS_DATA / "real" / "opencode"
DBS = sorted(p.relative_to(OC) for p in OC.glob("*/opencode.db"))
message_items = chat_message_items


def request_items(body: Json) -> list[Item]:
    return chat_request_items(body, system=False)  # opencode does not store its prompt


def test_every_scenario_is_covered() -> None:
    assert {p.parent.name for p in DBS} == {"simple", "tools", "resume", "compact",
                                            "subagent", "fork"}


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[Importer]:
    yield from importer(tmp_path, "opencode")


def db_items(db: Path, session: str | None = None) -> list[Item]:
    """The session's messages read straight from the tables, in order (``session``: those
    of that one; else the database holds one)."""
    con = sqlite3.connect(db)
    if session is None:
        (session,) = [r[0] for r in con.execute("select id from session")]
    out: list[Item] = []
    for mid, data in con.execute("select id, data from message where session_id = ? order "
                                 "by time_created, id", (session,)):
        role = json.loads(data)["role"]
        parts = [json.loads(p) for (p,) in con.execute(
            "select data from part where message_id = ? order by id", (mid,))]
        if role == "user":
            text = "".join(p["text"] if p["type"] == "text" else "What did we do so far?"
                           for p in parts if p["type"] in ("text", "compaction"))
            out.append(("user", "text", text))
            continue
        results: list[Item] = []
        for p in parts:
            if p["type"] == "reasoning":
                out.append(("thinking", p["text"]))
            elif p["type"] == "text" and p["text"]:
                out.append(("assistant", "text", p["text"]))
            elif p["type"] == "tool":
                out.append(("call", p["callID"], p["tool"], p["state"]["input"]))
                results.append(("tool", p["callID"], p["state"].get("output")
                                if p["state"]["status"] == "completed" else p["state"]["error"]))
        out += results
    con.close()
    return out


def branch_messages(s: Session) -> list[Message]:
    return [e.message for e in s.branch() if isinstance(e, MessageEntry)]


@pytest.mark.parametrize("rel", DBS, ids=str)
def test_branch_holds_every_message_in_order(rel: Path, imported: Any) -> None:
    s = imported(OC / rel)
    assert [i for m in branch_messages(s) for i in message_items(m)] == db_items(OC / rel,
                                                                                s.header.id)


@pytest.mark.parametrize("rel", DBS, ids=str)
def test_context_is_what_opencode_sent(rel: Path, imported: Any) -> None:
    path = OC / rel
    s = imported(path)
    body = requests(path.parent)[int(manifest(path.parent)["final_main_request"])]["body"]
    sent = request_items(body)
    ctx = [i for m in s.build_context().messages for i in message_items(m)]
    assert ctx[:len(sent)] == sent
    reply = ctx[len(sent):]
    assert reply and all(i[0] in ("assistant", "thinking", "call") for i in reply)


@pytest.mark.parametrize("rel", DBS, ids=str)
def test_every_row_is_kept(rel: Path, imported: Any) -> None:
    db = OC / rel
    s = imported(db)
    seen: set[str] = set()
    for e in s.entries():
        seen.add(e.id)
        if not isinstance(e, MessageEntry):
            continue
        extra = e.message.extra
        seen |= {p["id"] for p in extra.get("opencode_parts", ())}
        seen |= {p["id"] for p in extra.get("opencode_text_parts", ())}
        seen |= {c.extra["opencode_part"]["id"] for c in e.message.tool_calls or ()}
        seen |= {extra["opencode_message_id"]} if "opencode_message_id" in extra else set()
    for e in s.entries():  # a fork's copies of the session's messages
        if isinstance(e, CustomEntry) and e.custom_type == "opencode/fork":
            seen |= {*e.data["copied_messages"], *e.data["copied_parts"]}
    con = sqlite3.connect(db)
    messages = {r[0] for r in con.execute("select id from message")}
    parts = {r[0] for r in con.execute("select id from part")}
    session = con.execute("select id, title, directory from session where id = ?",
                          (s.header.id,)).fetchone()
    con.close()
    assert messages <= seen and parts <= seen
    assert s.header.id == session[0] and s.header.cwd == session[2]
    assert s.header.metadata["opencode"]["title"] == session[1]


def test_tools_reasoning_usage_and_a_failed_command(imported: Any) -> None:
    s = imported(OC / "tools" / "opencode.db")
    msgs = s.build_context().messages
    first = msgs[1]
    assert first.thinking[0].thinking == "Look at both files at once."
    assert [c.name for c in first.tool_calls or ()] == ["read", "bash"]
    assert msgs[3].text.startswith("cat: missing.txt") and not msgs[3].is_error
    assert msgs[3].extra["opencode_state"]["metadata"]["exit"] == 1
    last = msgs[-1]
    assert last.usage is not None
    assert (last.usage.input, last.usage.cache_read, last.usage.output) == (600, 300, 20)
    assert last.model == "fake-model" and last.provider == "fake"


def test_compaction_starts_the_context_and_keeps_the_history(imported: Any) -> None:
    s = imported(OC / "compact" / "opencode.db")
    comp = [e for e in s.branch() if isinstance(e, CompactionEntry)]
    assert len(comp) == 1 and comp[0].details["source"] == "opencode"
    assert comp[0].tokens_before == 9500
    msgs = s.build_context().messages
    assert msgs[0].text == "What did we do so far?"
    assert isinstance(msgs[1].marker, CompactionSummaryMarker)
    assert msgs[1].marker.summary == msgs[1].text and msgs[1].marker.source == "opencode"
    assert comp[0].summary == msgs[1].text.strip() and comp[0].summary.startswith("## Goal")
    assert sum(comp[0].summary in m.text for m in msgs) == 1


def test_a_compaction_exports_in_opencode_shape_its_summary_once(tmp_path: Path,
                                                                 imported: Any) -> None:
    from contextree.formats import export_session

    s = imported(OC / "compact" / "opencode.db")
    (comp,) = s.find(CompactionEntry)
    doc = json.loads(export_session("opencode", s, tmp_path / "e.json").read_text())
    texts = [p.get("text", "") for m in doc["messages"] for p in m["parts"]]
    assert sum(comp.summary in t for t in texts) == 1
    ask, answer = doc["messages"][:2]
    assert [p["type"] for p in ask["parts"]] == ["compaction"]
    assert ask["parts"][0]["auto"] is True  # as opencode wrote it
    assert answer["info"]["summary"] is True and answer["info"]["agent"] == "compaction"
    before = [m.text for m in branch_messages(s)]
    assert before[0] == '"List the files, then show a.txt."'  # still on the branch


def test_subagent_is_a_root_of_its_own_linked_after_its_call(imported: Any) -> None:
    db = OC / "subagent" / "opencode.db"
    s = imported(db)
    (link,) = subagent_links(s, "opencode")
    con = sqlite3.connect(db)
    (child,) = [r[0] for r in con.execute("select id from session where parent_id = ?",
                                          (s.header.id,))]
    con.close()
    assert link.data["agent_id"] == child and link.data["tool_use_id"] == "call_fx_task"
    assert link.data["meta"]["subagent_type"] == "general"
    result = s.get_entry(link.parent_id)
    assert isinstance(result, MessageEntry) and result.message.tool_call_id == "call_fx_task"
    root = link.data["first_entry_id"]
    sent = request_items(request_body(OC / "subagent", "final_subagent_request"))
    got = chat_context_items(s, subtree_leaf(s, root))
    assert got[:len(sent)] == sent and got[len(sent):][0][0] == "assistant"
    # the child session named on its own imports the same, linked to its parent
    alone = imported(f"{db}#{child}")
    assert chat_context_items(alone) == got and alone.header.parent_session == s.header.id


def test_fork_is_a_branch_from_the_last_message_it_copied(imported: Any) -> None:
    db = OC / "fork" / "opencode.db"
    s = imported(db)
    m = manifest(OC / "fork")
    bodies = [r["body"] for r in requests(OC / "fork")]
    runs = m["last_request_of_run"]
    # the session's own branch is what its last run sent; the fork's, what the fork run sent
    main = chat_context_items(s, system=False)
    sent = request_items(bodies[runs["session"]])
    assert main[:len(sent)] == sent
    leaf = fork_leaf(s)
    fork = chat_context_items(s, leaf, system=False)
    sent = request_items(bodies[runs["fork"]])
    assert fork[:len(sent)] == sent and fork[len(sent):] == [
        ("assistant", "text", "Forked: this session answers differently.")]
    # they share the copied messages: the branch starts after the first run's answer
    (mark,) = [e for e in s.entries() if isinstance(e, CustomEntry)
               and e.custom_type == "opencode/fork"]
    shared = s.get_entry(mark.parent_id)
    assert isinstance(shared, MessageEntry)
    assert shared.message.text == "There is one file here: a.txt."
    assert s.leaf_id != leaf and s.leaf_id in [e.id for e in s.branch()]
    # the fork named on its own is a session of its own, with its copies of the history
    alone = imported(f"{db}#{mark.data['session']}")
    assert chat_context_items(alone, system=False) == fork
    assert "fork #1" in alone.header.metadata["opencode"]["title"]


def data_home(tmp_path: Path) -> tuple[Path, Path]:
    """An XDG_DATA_HOME whose opencode database holds the sessions of two fixtures."""
    data = tmp_path / "data"
    db = data / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(OC / "resume" / "opencode.db", db)
    con = sqlite3.connect(db)
    con.execute("attach ? as other", (str(OC / "tools" / "opencode.db"),))
    for table in ("session", "message", "part"):
        con.execute(f"insert into {table} select * from other.{table}")
    con.commit()
    con.close()
    return data, db


def test_list_finds_the_sessions_and_imports_one_by_id(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    data, db = data_home(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    found = list_tool_sessions("opencode")
    assert len(found) == 2
    assert {f.first_prompt for f in found} == {'"List the files in this directory."',
                                               '"Show a.txt and missing.txt, then add b.txt."'}
    runner = CliRunner()
    result = runner.invoke(app, ["import", "opencode", "--list", "--json"])
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["id"] for r in rows} == {f.id for f in found}
    target = next(f for f in found if "Show" in (f.first_prompt or ""))
    out = tmp_path / "one.jsonl"
    result = runner.invoke(app, ["import", "opencode", target.id[:12], "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    with Session.open(out, readonly=True) as s:
        assert s.header.id == target.id
        assert [m.role for m in s.build_context().messages][:2] == ["user", "assistant"]
    # the whole database, which holds two sessions, is refused saying how to pick one
    result = runner.invoke(app, ["import", "opencode", str(db), "-o", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 1 and "holds 2 sessions" in result.stderr
    assert f"{db}#SESSION_ID" in result.stderr
    result = runner.invoke(app, ["import", "auto", f"{db}#{target.id}", "-o",
                                 str(tmp_path / "y.jsonl")])
    assert result.exit_code == 0, result.stderr


def test_auto_detects_it_and_wrong_formats_are_refused(tmp_path: Path) -> None:
    src = OC / "simple" / "opencode.db"
    assert detect_format(src) == "opencode"
    runner = CliRunner()
    for wrong in ("claude-code", "codex", "gemini-cli", "atif", "openai-chat"):
        out = tmp_path / f"{wrong}.jsonl"
        result = runner.invoke(app, ["import", wrong, str(src), "-o", str(out)])
        assert result.exit_code == 1, (wrong, result.stdout)
        assert "looks like opencode" in result.stderr, (wrong, result.stderr)
        assert not out.exists()
    gemini = FORMATS_DATA / "real" / "gemini_cli" / "simple" / "session-1.jsonl"
    result = runner.invoke(app, ["import", "opencode", str(gemini), "-o",
                                 str(tmp_path / "x.jsonl")])
    assert result.exit_code == 1 and "looks like gemini-cli" in result.stderr, result.stderr


# -- export: the shape of `opencode export`, and resumed by the real opencode --------------

OPENCODE_BIN = os.environ.get("OPENCODE_BIN", "")
needs_opencode = pytest.mark.skipif(
    not (OPENCODE_BIN and Path(OPENCODE_BIN).exists()),
    reason="set OPENCODE_BIN to node_modules/opencode-linux-x64/bin/opencode of "
           "opencode-ai@1.18.33 (npm install) to resume exports with the real opencode")
EXPORTED = ["tools", "compact"]


def test_export_has_the_shape_opencode_export_writes(tmp_path: Path, imported: Any) -> None:
    from contextree.formats import export_session

    real = json.loads((OC / "simple" / "opencode-export.json").read_text())  # by opencode
    s = imported(OC / "tools" / "opencode.db")
    ours = json.loads(export_session("opencode", s, tmp_path / "e.json").read_text())
    assert set(ours) == set(real) and {"id", "directory", "title"} <= set(ours["info"])
    for kind in ("user", "assistant"):
        want = next(m for m in real["messages"] if m["info"]["role"] == kind)
        got = next(m for m in ours["messages"] if m["info"]["role"] == kind)
        assert set(got["info"]) <= set(want["info"]) | {"model"}
        assert {"id", "sessionID", "messageID", "type"} <= set(got["parts"][0])
    ids = [m["info"]["id"] for m in ours["messages"]]
    assert ids == sorted(ids) and all(i.startswith("msg_") for i in ids)
    tool = next(p for m in ours["messages"] for p in m["parts"] if p["type"] == "tool")
    assert tool["state"]["status"] == "completed" and tool["state"]["output"]


def fork_leaf(s: Session) -> str:
    """The last entry of the branch an opencode fork became."""
    (mark,) = [e for e in s.entries() if isinstance(e, CustomEntry)
               and e.custom_type == "opencode/fork"]
    return subtree_leaf(s, mark.id)


@needs_opencode
@pytest.mark.parametrize("name", [*EXPORTED, "fork"])
def test_opencode_resumes_the_export(name: str, tmp_path: Path, imported: Any) -> None:
    """An export resumed by the real opencode (``fork``: the branch a fork became, exported
    at its leaf) sends the exported context, then the new prompt."""
    import subprocess

    from contextree.formats import export_session
    from fakes.openai_server import OpenAIServer, completion

    s = imported(OC / name / "opencode.db")
    at = fork_leaf(s) if name == "fork" else None
    out = export_session("opencode", s, tmp_path / "export.json", at=at)
    sid = json.loads(out.read_text())["info"]["id"]
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    home.mkdir()
    with OpenAIServer() as server:
        server.reply(*[completion("Resumed.") for _ in range(5)])
        (cwd / "opencode.json").write_text(json.dumps({
            "autoupdate": False, "share": "disabled", "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": server.base_url, "apiKey": "sk-test"},
                                  "models": {"fake-model": {"name": "Fake", "tool_call": True}}}}}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "TERM": "dumb", "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_AUTOUPDATE": "1",
               **{f"XDG_{k}_HOME": str(home / k.lower()) for k in ("DATA", "CONFIG", "CACHE",
                                                                    "STATE")}}
        for cmd in ([OPENCODE_BIN, "import", str(out)],
                    [OPENCODE_BIN, "run", "--format", "json", "--session", sid, "Go on."]):
            done = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr[-2000:]
        main = [b for b in server.bodies if "title generator" not in json.dumps(b["messages"][0])]
    assert main, "opencode sent no request"
    sent = request_items(main[-1])
    want = chat_context_items(s, at, system=False)
    assert sent == [*want, ("user", "text", '"Go on."')]
    # and the database opencode wrote imports back to the same context
    back = imported(f"{home / 'data' / 'opencode' / 'opencode.db'}#{sid}")
    got = [i for m in back.build_context().messages for i in message_items(m)]
    assert got[:len(want)] == want
    # a compaction comes back as opencode's: the same summary, sent once
    assert [c.summary for c in back.find(CompactionEntry)] == [
        c.summary for c in s.find(CompactionEntry)]
