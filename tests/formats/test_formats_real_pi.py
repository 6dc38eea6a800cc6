"""Imports and exports of sessions written by the real pi 1.6 CLI.

The fixtures (``tests/data/formats/real/pi``, made by ``scripts/fixtures/make_pi_fixtures.py``)
hold each session file pi wrote and every request pi sent to the fake Anthropic server. For
every file:

* the imported active branch holds every message of pi's own active path, in order;
* ``build_context()`` equals what pi sent in its last request for that file, followed by the
  reply to it (the context edits pi wrote are honoured: the overflow file's failed attempt is
  not in the context);
* every line is accounted for: each entry line is one entry, of the matching type.

How the request is compared with the context: both are reduced to flat items (text, thinking
with signature, tool call, tool result with its error flag), so merging consecutive user
messages into one API message does not matter. pi sends the compaction summary as a user
message wrapped in its own prefix; contextree renders the same summary with its own: both
sides give ``("summary", text)``. pi's system prompt is kept in the session (``system``
messages) and sent as ``system``: it is compared separately (the text of the file's sections).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from contextree import Message, Session
from contextree.entries import (
    CALLS_TYPE,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    MessageEntry,
    UnknownEntry,
)
from contextree.formats import export_session, import_session, list_tool_sessions
from contextree.formats._detect import detect_format
from contextree.formats._pi.reader import (
    BRANCH_PREFIX,
    BRANCH_SUFFIX,
    COMPACTION_PREFIX,
    COMPACTION_SUFFIX,
)
from contextree.markers import BranchSummaryMarker, CompactionSummaryMarker
from helpers import FORMATS_DATA, ROOT, one_line_error, run

PI = FORMATS_DATA / "real" / "pi"
PI_FILES = sorted(p.relative_to(PI) for p in PI.glob("*/session-*.jsonl"))
Json = dict[str, Any]
Item = tuple[Any, ...]
# The last request pi sent for a file (requests.json index), where it is not the manifest's
# final_main_request: the fork's first file was resumed last, its second forked before that.
FINAL_REQUEST = {Path("fork/session-1.jsonl"): 3, Path("fork/session-2.jsonl"): 2}


def lines_of(path: Path) -> list[Json]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def requests(scenario: Path) -> list[Json]:
    return json.loads((scenario / "requests.json").read_text())  # type: ignore[no-any-return]


def final_request(rel: Path) -> Json:
    scenario = PI / rel.parent
    index = FINAL_REQUEST.get(rel)
    if index is None:
        index = json.loads((scenario / "manifest.json").read_text())["final_main_request"]
    return requests(scenario)[index]["body"]  # type: ignore[no-any-return]


def pi_path(lines: list[Json]) -> list[Json]:
    """pi's active path: from the last entry back to the root (pi's leaf is the last line)."""
    by_id = {e["id"]: e for e in lines[1:]}
    out, cur = [], lines[-1]
    while cur is not None:
        out.append(cur)
        cur = by_id.get(cur.get("parentId"))
    return out[::-1]


@pytest.fixture(scope="module", params=PI_FILES, ids=[str(p) for p in PI_FILES])
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    rel: Path = request.param
    s = import_session("pi", PI / rel, tmp_path_factory.mktemp("pi") / "s.jsonl", durable=False)
    yield rel, s
    s.close()


def test_every_scenario_is_there() -> None:
    assert {p.parent.name for p in PI_FILES} == {
        "simple", "tools", "compaction", "retain_none", "usage", "branch", "fork", "overflow"}


def test_pi_branch_holds_every_message_in_order(imported: Any) -> None:
    rel, s = imported
    wanted = [e["id"] for e in pi_path(lines_of(PI / rel)) if e["type"] == "message"]
    got = [e.id for e in s.branch() if isinstance(e, MessageEntry)
           or (isinstance(e, CustomEntry) and e.custom_type != CALLS_TYPE)]
    assert got == wanted
    for e in s.branch():
        if isinstance(e, MessageEntry):
            raw = next(x for x in lines_of(PI / rel) if x.get("id") == e.id)["message"]
            assert e.message.role == {"toolResult": "tool"}.get(raw["role"], raw["role"])


def request_items(body: Json) -> list[Item]:
    out: list[Item] = []
    for m in body["messages"]:
        content = m["content"]
        for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kind = b["type"]
            if kind == "text" and m["role"] == "user" and b["text"].startswith(COMPACTION_PREFIX):
                out.append(("summary", b["text"][len(COMPACTION_PREFIX):-len(COMPACTION_SUFFIX)]))
            elif kind == "text" and m["role"] == "user" and b["text"].startswith(BRANCH_PREFIX):
                out.append(("branch", b["text"][len(BRANCH_PREFIX):-len(BRANCH_SUFFIX)]))
            elif kind == "text" and b["text"]:
                out.append((m["role"], b["text"]))
            elif kind == "thinking":
                out.append(("thinking", b["thinking"], b.get("signature")))
            elif kind == "tool_use":
                out.append(("call", b["id"], b["name"], b["input"]))
            elif kind == "tool_result":
                text = b["content"] if isinstance(b["content"], str) else "".join(
                    x.get("text", "") for x in b["content"])
                out.append(("result", b["tool_use_id"], text, b.get("is_error", False)))
    return out


def context_items(messages: list[Message]) -> list[Item]:
    out: list[Item] = []
    for m in messages:
        mark = m.marker
        if isinstance(mark, CompactionSummaryMarker):
            out.append(("summary", mark.summary))
        elif isinstance(mark, BranchSummaryMarker):
            out.append(("branch", m.text.split("\n\n", 1)[1]))
        elif m.role == "tool":
            out.append(("result", m.tool_call_id, m.text, m.is_error))
        else:
            for p in m.thinking:
                out.append(("thinking", p.thinking, p.signature))
            if m.text:
                out.append((m.role, m.text))
            for c in m.tool_calls or ():
                out.append(("call", c.id, c.name, c.arguments))
    return out


def test_pi_context_is_what_pi_sent(imported: Any) -> None:
    rel, s = imported
    ctx = s.build_context()
    sent = request_items(final_request(rel))
    # the context is the request, then pi's reply to it (the file's last message)
    assert context_items(ctx.messages[:-1]) == sent
    last = lines_of(PI / rel)[-1]
    assert ctx.entry_ids[-1] == last["id"]


def test_pi_system_prompt_is_kept_as_pi_wrote_it(imported: Any) -> None:
    rel, s = imported
    body = final_request(rel)
    sent = "".join(b["text"] for b in body["system"])
    systems = [e for e in s.branch() if isinstance(e, CustomEntry)
               and (e.data or {}).get("message", {}).get("role") == "system"]
    assert systems, "pi 1.x keeps its system prompt in the session"
    sections = systems[0].data["message"]["sections"]
    assert all(text in sent for text in sections.values() if text)


def test_pi_every_line_is_accounted_for(imported: Any) -> None:
    rel, s = imported
    lines = lines_of(PI / rel)
    entries = {e.id: e for e in s.entries()}
    assert len(entries) == len(lines) - 1
    for line in lines[1:]:
        e = entries[line["id"]]
        as_custom = (line["type"] == "message" or line["type"] == "usage") and \
            isinstance(e, CustomEntry)
        assert e.type == ("custom" if as_custom else line["type"])
        assert not isinstance(e, UnknownEntry)
    assert s.leaf_id == lines[-1]["id"]
    meta = s.header.metadata["imported_from"]  # type: ignore[index]
    assert meta["pi"] == "1.x"
    assert detect_format(PI / rel) == "pi"


def test_pi_overflow_attempt_is_left_out_by_its_context_edit(tmp_path: Path) -> None:
    src = PI / "overflow" / "session-1.jsonl"
    with import_session("pi", src, tmp_path / "s.jsonl") as s:
        edits = [e for e in s.entries() if isinstance(e, ContextEditEntry)]
        assert len(edits) == 1 and edits[0].content is None
        failed = s.get_entry(edits[0].target_id)
        assert isinstance(failed, MessageEntry) and failed.message.stop_reason == "error"
        assert failed.id not in s.build_context().entry_ids
        # the history keeps it; before the edit the context still shows it
        assert failed.id in [e.id for e in s.branch()]
        assert failed.id in s.build_context(failed.id).entry_ids


def test_pi_retain_none_compaction_keeps_nothing_before_it(tmp_path: Path) -> None:
    src = PI / "retain_none" / "session-1.jsonl"
    with import_session("pi", src, tmp_path / "s.jsonl") as s:
        comp = next(e for e in s.entries() if isinstance(e, CompactionEntry))
        assert comp.first_kept_entry_id is None
        ids = s.build_context().entry_ids
        assert ids[0] == comp.id and all(i not in ids for i in
                                         [e.id for e in s.branch()][:s.branch().index(comp)])


def test_pi_cache_warming_usage_is_kept_outside_the_context(tmp_path: Path) -> None:
    src = PI / "usage" / "session-1.jsonl"
    with import_session("pi", src, tmp_path / "s.jsonl") as s:
        usage = [e for e in s.branch() if isinstance(e, CustomEntry)
                 and e.custom_type == CALLS_TYPE]
        assert len(usage) >= 1 and all(e.data["calls"][0]["outcome"] == "cache_warm"
                                       for e in usage)
        assert not {e.id for e in usage} & set(s.build_context().entry_ids)
        # they sit between the tool call and its result: the pair still holds
        roles = [m.role for m in s.build_context().messages]
        assert roles == ["user", "assistant", "tool", "assistant"]


def test_pi_usage_entries_are_counted_by_stats(tmp_path: Path) -> None:
    """pi 1.x's ``usage`` lines (the cache warm-up calls) are model calls: ``stats`` counts
    them, by model, at the cost pi recorded, beside the calls the messages record."""
    src = PI / "usage" / "session-1.jsonl"
    lines = lines_of(src)
    warm = [x for x in lines if x["type"] == "usage"]
    replies = [x["message"] for x in lines if x["type"] == "message"
               and x["message"]["role"] == "assistant"]
    out = tmp_path / "s.jsonl"
    run("import", "pi", str(src), "-o", str(out))
    stats = json.loads(run("stats", str(out), "--json", "--by-model").stdout)
    want_calls = len(warm) + len(replies)
    cost = sum(x["usage"]["cost"]["total"] for x in warm + replies)
    cache_read = sum(x["usage"]["cacheRead"] for x in warm + replies)
    total = stats["total"]
    assert total["calls"] == want_calls and total["cache_read"] == cache_read
    assert total["cost"] == pytest.approx(cost) and total["unpriced_calls"] == 0
    assert list(stats["by_model"]) == ["fake/claude-fake"]
    assert stats["by_model"]["fake/claude-fake"]["calls"] == want_calls


def test_pi_branch_summary_and_an_edit_on_one_branch(tmp_path: Path) -> None:
    """pi's in-file branch: the branch left is summarized; an edit made on it (by contextree)
    does not reach the branch pi went on with, before or after an export for pi 1.x."""
    src = PI / "branch" / "session-1.jsonl"
    with import_session("pi", src, tmp_path / "s.jsonl") as s:
        main_leaf = s.leaf_id
        left = next(e for e in s.entries() if isinstance(e, MessageEntry)
                    and e.message.text == "a.txt says hello.")
        before = context_items(s.build_context().messages)
        s.move_to(left.id)
        s.append_context_edit(left.id)
        assert ("assistant", "a.txt says hello.") not in context_items(
            s.build_context().messages)
        assert context_items(s.build_context(main_leaf).messages) == before
        s.move_to(main_leaf)
        out = export_session("pi", s, tmp_path / "p.jsonl")
        with import_session("pi", out, tmp_path / "back.jsonl") as back:
            assert context_items(back.build_context().messages) == before
            assert back.leaf_id == main_leaf


def test_pi_0_73_files_are_told_apart(tmp_path: Path) -> None:
    with import_session("auto", FORMATS_DATA / "pi_written_by_pi.jsonl", tmp_path / "a.jsonl") as s:
        assert s.header.metadata["imported_from"]["pi"] == "0.73"  # type: ignore[index]


@pytest.mark.parametrize("rel", PI_FILES, ids=[str(p) for p in PI_FILES])
@pytest.mark.parametrize("pi", ["1", "0.73"])
def test_pi_export_gives_back_the_same_lines(rel: Path, pi: str, tmp_path: Path) -> None:
    """pi 1.6's own files round-trip exactly through contextree, for either export."""
    src = PI / rel
    with import_session("pi", src, tmp_path / "s.jsonl") as s:
        out = export_session("pi", s, tmp_path / "p.jsonl", version=pi)
    want = lines_of(src)
    if pi == "0.73":  # pi 0.73 has no retain-none: a compaction keeping nothing names none
        for line in want:
            if line["type"] == "compaction" and line["firstKeptEntryId"] == line["id"]:
                line["firstKeptEntryId"] = None
    assert lines_of(out) == want


def test_pi_sessions_are_listed_where_pi_keeps_them(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = tmp_path / "agent" / "sessions"
    for rel in PI_FILES:
        folder = sessions / f"--work-{rel.parent.name}--"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PI / rel, folder / f"2026-12-02T00-00-00-000Z_{rel.stem}.jsonl")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    found = list_tool_sessions("pi")
    assert len(found) == len(PI_FILES)
    assert {f.first_prompt for f in found} >= {"List the files."}
    one = found[0]
    from contextree.formats import find_tool_session

    assert find_tool_session("pi", one.id[:13]) == one.path


def test_cli_exports_for_pi_1_or_0_73(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``export pi`` writes for pi 1.x unless told ``--format-version 0.73``: a compaction's
    cleared tool results become context_edit lines for pi 1.x only; import folds them back."""
    session = _native(tmp_path / "n.jsonl")
    session.close()
    new = tmp_path / "new.jsonl"
    old = tmp_path / "old.jsonl"
    run("export", "pi", tmp_path / "n.jsonl", "-o", new)
    run("export", "pi", tmp_path / "n.jsonl", "-o", old, "--format-version", "0.73")
    kinds_new = [x["type"] for x in lines_of(new)]
    kinds_old = [x["type"] for x in lines_of(old)]
    assert kinds_new.count("context_edit") == 2  # the cleared result and the session's own
    assert kinds_old.count("context_edit") == 1  # only the session's own
    for path in (new, old):
        with import_session("pi", path, tmp_path / f"{path.stem}.back.jsonl") as back, \
                Session.open(tmp_path / "n.jsonl", readonly=True) as orig:
            assert list(back.entries()) == list(orig.entries())
            assert back.leaf_id == orig.leaf_id
    one_line_error(run("export", "pi", tmp_path / "n.jsonl", "-o", tmp_path / "x.jsonl",
                       "--format-version", "2", code=2), "1, 0.73")
    one_line_error(run("export", "anthropic", tmp_path / "n.jsonl", "-o", tmp_path / "x.json",
                       "--format-version", "2", code=2), "leave the version out")


def test_pi_sessions_are_listed_by_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "agent" / "sessions" / "--work--"
    folder.mkdir(parents=True)
    shutil.copyfile(PI / "tools" / "session-1.jsonl", folder / "2026-12-02_x.jsonl")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    rows = json.loads(run("import", "pi", "--list", "--json").stdout)
    assert [r["first_prompt"] for r in rows] == ["Read a.txt, run exit 3, then write b.txt."]
    out = tmp_path / "imported.jsonl"
    run("import", "pi", rows[0]["id"][:12], "-o", out)
    with Session.open(out, readonly=True) as s:
        assert s.header.id == rows[0]["id"]


# -- resumed by the real pi 1.6 --------------------------------------------------------------
#
# With PI1_NODE (a Node >= 22.19) and PI1_CODING_AGENT (the installed
# @earendil-works/pi-coding-agent 1.6.0), pi resumes an export against the fake Anthropic server
# of scripts/fixtures; the request it sends must carry the exported context, then the new prompt.

PI1_NODE = os.environ.get("PI1_NODE")
PI1_CODING_AGENT = os.environ.get("PI1_CODING_AGENT")
needs_pi1 = pytest.mark.skipif(
    not (PI1_NODE and PI1_CODING_AGENT),
    reason="set PI1_NODE to a Node >= 22.19 (npm install node@22) and PI1_CODING_AGENT to an "
           "installed @earendil-works/pi-coding-agent@1.6.0 to resume exports with the real pi 1.6")


def _native(path: Path) -> Session:
    """A contextree session with what only pi 1.x can show: a compaction that cleared a tool
    result (exported as a context_edit) and a context edit of its own."""
    from contextree import ToolCall

    s = Session.create(path, cwd="/work/project", durable=False)
    s.append_message(Message.user("Why does the test fail?"))
    s.append_message(Message.assistant("Running it.", tool_calls=[
        ToolCall(id="toolu_x1", name="bash", arguments={"command": "pytest -q"})],
        provider="fake", model="claude-fake"))
    out = s.append_message(Message.tool("E" * 500, tool_call_id="toolu_x1", name="bash"))
    first = s.append_message(Message.assistant("IndexError in parse().", provider="fake",
                                               model="claude-fake"))
    s.append_message(Message.user("Fix it."))
    wrong = s.append_message(Message.assistant("A wrong first try.", provider="fake",
                                               model="claude-fake"))
    s.append_context_edit(wrong)
    s.append_compaction(summary="The test fails with IndexError in parse().",
                        first_kept_entry_id=s.branch()[0].id, tokens_before=900,
                        cleared={out: "[pytest output cleared]"})
    assert first
    return s


@needs_pi1
@pytest.mark.parametrize("src", [*PI_FILES, None], ids=[*map(str, PI_FILES), "native"])
def test_pi1_resumes_the_export(src: Path | None, tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
    import make_fixtures
    import make_pi_fixtures as mp

    s = (_native(tmp_path / "n.jsonl") if src is None
         else import_session("pi", PI / src, tmp_path / "s.jsonl", durable=False))
    expected = context_items(s.build_context().messages)
    if src is None:  # the cleared result and the edit are what pi must show too
        assert ("result", "toolu_x1", "[pytest output cleared]", False) in expected
        assert ("assistant", "A wrong first try.") not in expected
    run = make_fixtures.Run("pi", "resume-test")
    srv = mp.FakeAnthropic(mp.PiScript(main=[{"content": [mp.a_text("Resumed.")]}])).start()
    try:
        env = mp.pi_setup(run, srv.url)
        exported = export_session("pi", s, tmp_path / "resume.jsonl")
        # pi resumes only where the session was started: here, in the run's working directory
        lines = exported.read_bytes().splitlines(keepends=True)
        head = json.loads(lines[0])
        head["cwd"] = str(run.cwd)
        exported.write_bytes(json.dumps(head).encode() + b"\n" + b"".join(lines[1:]))
        cmd = [PI1_NODE, str(Path(PI1_CODING_AGENT or "") / "dist" / "cli.js"),
               *mp.pi_cmd("Next step?", "--session", str(exported))[2:]]
        done = subprocess.run(cmd, cwd=run.cwd, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=180)
    finally:
        srv.stop()
        shutil.rmtree(run.root, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    main = [r for r in srv.requests if r.get("reply_role") == "main"]
    assert main, f"pi sent no request: {done.stdout[-1000:]}"
    sent = request_items(main[-1]["body"])
    assert sent[-1] == ("user", "Next step?")
    assert sent[:-1] == [x for x in expected if x[0] != "system"]
    s.close()


def test_tree_shows_what_a_context_edit_does(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    run("import", "pi", PI / "overflow" / "session-1.jsonl", "-o", out)
    with Session.open(out, readonly=True) as s:
        edit = next(e for e in s.entries() if isinstance(e, ContextEditEntry))
    shown = run("tree", out).stdout
    assert f"context edit: {edit.target_id[:8]} left out from here on" in shown
