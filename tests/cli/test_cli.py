"""The ``contextree`` command line: every command on generated sessions, ``--json`` output,
exit codes, and one-line errors without tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.cli import app
from contextree.entries import CompactionEntry
from helpers import FORMATS_DATA as DATA
from helpers import big_session, make_session, one_line_error, run, run_json, runner

# -- ls ------------------------------------------------------------------------------------

def test_ls_lists_sessions_newest_first(tmp_path: Path) -> None:
    make_session(tmp_path / "old.jsonl")
    time.sleep(0.01)
    make_session(tmp_path / "sub" / "new.jsonl", turns=40)
    (tmp_path / "notes.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    (tmp_path / "empty.jsonl").write_text("")

    listed = run_json("ls", tmp_path)
    assert [Path(s["path"]).name for s in listed] == ["new.jsonl", "old.jsonl"]
    new = listed[0]
    assert new["name"] == "calc fix"
    with Session.open(tmp_path / "sub" / "new.jsonl", readonly=True) as s:
        assert new["id"] == s.id and new["entries"] == len(s.storage)
        assert new["created"] == s.header.created_at
        assert new["last_activity"] == list(s.storage.entries())[-1].timestamp
    assert new["entries_exact"] and new["size"] == (tmp_path / "sub" / "new.jsonl").stat().st_size

    text = run("ls", tmp_path).stdout
    assert text.splitlines()[0].split() == ["path", "name", "id", "created", "last",
                                            "activity", "entries", "size"]
    assert "sub/new.jsonl" in text and "calc fix" in text
    assert "2 other .jsonl files are not contextree sessions" in text


def test_ls_counts_entries_of_files_it_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with Session.create(path, durable=False) as s, s.batch():
        for i in range(3000):
            s.append_message(Message.user(f"message number {i}"))
        s.set_name("early name")
        for i in range(3000):
            s.append_message(Message.assistant(f"reply number {i}"))
    [listed] = run_json("ls", tmp_path)
    assert listed["entries_exact"] and listed["entries"] == 6001  # small enough to count
    assert listed["name"] == "early name"  # found by searching back past the tail


def test_ls_reads_only_header_and_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path, durable=False) as s, s.batch():
        for i in range(4000):
            s.append_message(Message.user(f"message number {i}"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2000] = b"this line is not JSON and would stop any full parse\n"
    path.write_bytes(b"".join(lines))
    for i in range(300):
        make_session(tmp_path / "many" / f"{i}.jsonl", turns=1)
    started = time.perf_counter()
    listed = run_json("ls", tmp_path)
    assert time.perf_counter() - started < 20
    assert len(listed) == 301 and str(path) in {s["path"] for s in listed}


def test_ls_of_a_missing_directory(tmp_path: Path) -> None:
    one_line_error(run("ls", tmp_path / "nope", code=1), "no such directory")


# -- tree ----------------------------------------------------------------------------------

def test_tree_shows_branches_labels_compaction_and_leaf(sess: tuple[Path, dict[str, str]]
                                                        ) -> None:
    path, ids = sess
    text = run("tree", path).stdout
    assert "[diagnosis]" in text
    assert "compaction: 900 -> 300 tokens" in text
    # The summary names the tip it left and the entry it went back to.
    assert (f"branch summary (left {ids['tip_a']}, back at {ids['found']}): "
            "Approach A was abandoned.") in text
    assert "└─ " in text and "(branch: " in text
    leaf_lines = [line for line in text.splitlines() if "<- leaf" in line]
    assert len(leaf_lines) == 1 and "name = 'calc fix'" in leaf_lines[0]
    assert leaf_lines[0].startswith("* ")
    approach_a = next(line for line in text.splitlines() if "approach A" in line)
    assert approach_a.startswith("  ")  # not on the current branch


def test_tree_collapses_long_runs_unless_all(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    make_session(path, turns=100)
    text = run("tree", path).stdout
    assert "… 19" in text and "entries …" in text  # 200 turns entries, minus the ends
    assert len(text.splitlines()) < 40
    full = run("tree", path, "--all").stdout
    assert "entries …" not in full and len(full.splitlines()) > 200


def test_tree_json_has_every_entry(sess: tuple[Path, dict[str, str]]) -> None:
    path, ids = sess
    data = run_json("tree", path)
    with Session.open(path, readonly=True) as s:
        visible = [e for e in s.storage.entries() if e.type != "leaf"]
        assert data["leaf_id"] == s.leaf_id
    assert {e["id"] for e in data["entries"]} == {e.id for e in visible}
    found = next(e for e in data["entries"] if e["id"] == ids["found"])
    assert found["label"] == "diagnosis" and found["on_branch"]
    assert len(found["children"]) == 2
    assert data["name"] == "calc fix"


@pytest.mark.slow
def test_tree_handles_100k_entries(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    with Session.create(path, durable=False) as s, s.batch():
        for i in range(50_000):
            s.append_message(Message.user(f"q{i}"))
            s.append_message(Message.assistant(f"a{i}"))
    started = time.perf_counter()
    text = run("tree", path).stdout
    assert "… 99996 entries …" in text
    assert time.perf_counter() - started < 30


# -- show ----------------------------------------------------------------------------------

def test_show_path_and_at(sess: tuple[Path, dict[str, str]]) -> None:
    path, ids = sess
    text = run("show", path).stdout
    assert "Approach B instead." in text and "Approach A was abandoned." in text
    assert "Now try approach A." not in text
    at_label = run("show", path, "--at", "diagnosis").stdout
    assert at_label.rstrip().endswith("add() subtracts; fixing it.")
    assert "-> call read {\"path\":\"calc.py\"}  [id c1]" in at_label
    assert run("show", path, "--at", ids["found"][:5]).stdout == at_label
    entries = run_json("show", path, "--at", ids["found"])
    assert entries[-1]["id"] == ids["found"] and entries[-1]["label"] == "diagnosis"


def test_show_context_is_what_the_model_sees(sess: tuple[Path, dict[str, str]]) -> None:
    path, ids = sess
    data = run_json("show", path, "--context", "--at", ids["tip_a"])
    with Session.open(path, readonly=True) as s:
        expected = s.build_context(ids["tip_a"])
    assert [m["message"] for m in data["messages"]] == [m.to_dict() for m in expected.messages]
    assert [m["entry_id"] for m in data["messages"]] == expected.entry_ids
    assert data["compaction_id"] == ids["compaction"]
    assert all(m["tokens"] > 0 for m in data["messages"])
    assert data["total_tokens"] > 0 and data["model"] == "openai/m1"

    text = run("show", path, "--context", "--at", ids["tip_a"]).stdout
    assert "<compaction summary>" in text and "Fixed add() in calc.py." in text
    assert "~" in text and "tokens" in text
    assert "compaction: " in text and "messages:" in text


def test_show_unknown_entry_is_one_line(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    one_line_error(run("show", path, "--at", "zzzz", code=1), "no entry 'zzzz'")


# -- stats ---------------------------------------------------------------------------------

def test_stats(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    data = run_json("stats", path)
    assert data["name"] == "calc fix" and data["branch_count"] == 2
    assert data["file"]["usage"]["input"] == 500 and data["file"]["compactions"] == 1
    text = run("stats", path).stdout
    assert "calc fix" in text and "current branch" in text and "openai/m1" in text


def test_stats_names_each_branch_by_the_label_at_its_tip(tmp_path: Path) -> None:
    """``label`` and ``name`` append their entries on the current branch, so one of them
    is its tip: the branch shows the label of the message under them."""
    path = tmp_path / "s.jsonl"
    with Session.create(path, durable=False) as s:
        question = s.append_message(Message.user("q"))
        first = s.append_message(Message.assistant("answer one"))
        s.move_to(question)
        second = s.append_message(Message.assistant("answer two"))
    run("label", path, first, "first")
    run("label", path, second, "second")
    run("name", path, "two answers")
    branches = run_json("stats", path)["branches"]
    assert [(b["label"], b["current"]) for b in branches] == [("first", False),
                                                              ("second", True)]
    *_, side, current = run("stats", path).stdout.splitlines()  # the table of branch tips
    assert side.split()[1] == "first"
    assert current.split()[0] == "*" and current.split()[2] == "second"


# -- fork, label, name, checkout -----------------------------------------------------------

def test_fork(sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, ids = sess
    new = tmp_path / "fork.jsonl"
    out = run("fork", path, "--at", "diagnosis", "-o", new).stdout
    assert str(new) in out
    with Session.open(new, readonly=True) as f:
        assert f.leaf_id is not None
        assert [e.id for e in f.branch()][-1] != ids["compaction"]
        assert f.storage.labels() == {ids["found"]: "diagnosis"}
    default = run("fork", path, "--at", ids["task"]).stdout
    assert f"s-fork-{ids['task'][:8]}.jsonl" in default


def test_label_name_and_checkout(sess: tuple[Path, dict[str, str]]) -> None:
    path, ids = sess
    run("label", path, ids["task"], "the task")
    run("label", path, "diagnosis", "--clear")
    run("name", path, "renamed")
    run("checkout", path, "the task")
    with Session.open(path, readonly=True) as s:
        assert s.storage.labels() == {ids["task"]: "the task"}
        assert s.name == "renamed"
        assert s.leaf_id == ids["task"]
    out = run("checkout", path, ids["tip_a"], "--summary", "Left the task.").stdout
    assert "branch summary" in out
    with Session.open(path, readonly=True) as s:
        leaf = s.get_entry(s.leaf_id or "")
        assert leaf is not None and leaf.type == "branch_summary"
    result = run("label", path, ids["task"], code=2)
    assert "give the label TEXT to set, or --clear" in result.stderr
    result = run("label", path, ids["task"], "x", "--clear", code=2)
    assert "not both" in result.stderr


# -- verify and repair ---------------------------------------------------------------------

def test_verify_ok(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    assert run("verify", path).stdout.startswith("OK ")
    assert run_json("verify", path)["ok"] is True


def test_verify_names_the_corrupt_line_then_repair_fixes_it(
        sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    lines = path.read_text().splitlines()
    lines[4] = lines[4][:30]  # line 5 cut in the middle
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()

    result = run("verify", path, code=1)
    assert f"{path}:5:" in result.stdout and "corrupt_line" in result.stdout
    data = json.loads(run("verify", path, "--json", code=1).stdout)
    assert (data["ok"], data["line"], data["code"]) == (False, 5, "corrupt_line")

    dry = run("repair", path, "--dry-run").stdout
    assert "would quarantine" in dry and "line 5:" in dry
    assert path.read_bytes() == before

    report = json.loads(run("repair", path, "--json").stdout)
    assert report["changed"] and report["quarantined"][0]["line"] == 5
    assert Path(report["backup"]).read_bytes() == before
    assert run("verify", path).stdout.startswith("OK ")
    assert "nothing to repair" in run("repair", path).stdout


def test_verify_reports_a_torn_last_line(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"tor')
    n = len(path.read_bytes().splitlines())
    data = json.loads(run("verify", path, "--json", code=1).stdout)
    assert (data["code"], data["line"]) == ("torn_line", n)


# -- gc ------------------------------------------------------------------------------------

def test_gc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    store = tmp_path / "home" / "tool-output"
    store.mkdir(parents=True)
    old, new = store / "20200101T000000000-aa-old.txt", store / "20990101T000000000-bb-new.txt"
    old.write_text("x" * 100)
    new.write_text("y" * 100)
    os.utime(old, (time.time() - 30 * 86400,) * 2)

    dry = run_json("gc", "--dry-run")
    assert dry["removed"] == 1 and dry["paths"] == [str(old)] and old.exists()
    assert "would remove 1 files" in run("gc", "--dry-run").stdout
    done = run_json("gc")
    assert done["removed"] == 1 and not old.exists() and new.exists()


# -- compact -------------------------------------------------------------------------------

def test_compact_dry_run_then_for_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    monkeypatch.delenv("CONTEXTREE_MODEL", raising=False)
    path = tmp_path / "c.jsonl"
    big_session(path)
    before = path.read_bytes()
    dry = run("compact", path, "--window", "8000", "--dry-run").stdout
    assert "tool_results" in dry and "dry run: nothing was written" in dry
    assert path.read_bytes() == before

    data = run_json("compact", path, "--window", "8000")
    assert data["entry_id"] and data["tokens_after"] < data["tokens_before"]
    assert data["stages"][0]["name"] == "tool_results"
    with Session.open(path, readonly=True) as s:
        leaf = s.get_entry(s.leaf_id or "")
        assert isinstance(leaf, CompactionEntry) and leaf.cleared
    assert "under the trigger of 5600 tokens" in run("compact", path, "--window", "8000").stdout


def test_compact_at_decides_when_and_force_says_what_it_aims_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--compact-at is the trigger (the one count against it); --force compacts below it
    toward --compact-to, and says so when the context is already under that target."""
    monkeypatch.delenv("CONTEXTREE_MODEL", raising=False)
    path = tmp_path / "c.jsonl"
    big_session(path)
    tokens = run_json("compact", path, "--window", "8000", "--dry-run", "--force")[
        "tokens_before"]
    window = int(tokens / 0.8)  # the context fills 80% of it
    late = run_json("compact", path, "--window", str(window), "--compact-at", "0.9",
                    "--dry-run")
    assert late["entry_id"] is None and "under the trigger" in late["reason"]
    early = run_json("compact", path, "--window", str(window), "--compact-at", "0.75",
                     "--dry-run")
    assert early["tokens_after"] < early["tokens_before"] == tokens
    assert early["target"] == int(window * 0.4) and not early["note"]
    forced = run_json("compact", path, "--window", str(window), "--compact-at", "0.9",
                      "--dry-run", "--force")
    assert forced["target"] == int(window * 0.4) and not forced["note"]
    under = run("compact", path, "--window", str(tokens * 4), "--dry-run", "--force").stdout
    assert "forced: the context" in under and "already under the target" in under


def test_compact_rejects_an_unknown_model_provider(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    big_session(path)
    result = run("compact", path, "--model", "acme:big", code=2)
    one_line_error(result, "unknown provider 'acme'")


# -- import and export ---------------------------------------------------------------------

def test_import_and_export(tmp_path: Path) -> None:
    src = tmp_path / "pi.jsonl"
    src.write_bytes((DATA / "pi_v3.jsonl").read_bytes())
    out = run("import", "pi", src).stdout
    target = tmp_path / "pi.contextree.jsonl"
    assert f"-> {target}: 20 entries, leaf b0c1d2e3" in out
    assert run("verify", target).stdout.startswith("OK ")
    assert "(pi)" in run("import", "auto", src, "-o", tmp_path / "auto.jsonl").stdout

    run("export", "pi", target, "-o", tmp_path / "again.jsonl")
    assert [json.loads(x) for x in (tmp_path / "again.jsonl").read_text().splitlines()] == \
        [json.loads(x) for x in src.read_text().splitlines()]
    run("export", "openai-chat", target)
    chat = json.loads((tmp_path / "pi.contextree.openai-chat.json").read_text())
    assert chat[-1] == {"role": "user", "content": "Update the changelog."}
    one_line_error(run("export", "openai-chat", target, code=1), "already there")
    run("export", "openai-chat", target, "--force", "--at", "fix-found")
    chat = json.loads((tmp_path / "pi.contextree.openai-chat.json").read_text())
    assert chat[-2]["tool_calls"][0]["function"]["name"] == "edit"
    assert chat[-1]["role"] == "tool"  # the result came later: "interrupted" stands in


def test_import_claude_code_with_subagents(tmp_path: Path) -> None:
    src = tmp_path / "cc"
    shutil.copytree(DATA / "real" / "claude_code_2.1.332" / "subagent", src)
    bad = src / "session-1" / "subagents" / "agent-bad.jsonl"
    bad.write_text("not json\n")
    out = run("import", "claude-code", src / "session-1.jsonl", "-o", tmp_path / "p.jsonl",
              "--with-subagents").stdout
    agent = tmp_path / "p.agent-1.jsonl"
    assert f"sub-agent -> {agent}" in out
    assert f"WARNING: sub-agent transcript {bad} not imported" in out
    assert run("verify", agent).stdout.startswith("OK ")
    # The tree shows the link under the Agent call's result; the sub-agent names its parent.
    tree = run("tree", tmp_path / "p.jsonl").stdout  # (lines are cut to the width)
    (line,) = [x for x in tree.splitlines() if "sub-agent -> " in x]
    assert f"sub-agent -> {agent}, for call toolu_fx_agent"[:30] in line
    with Session.open(agent, readonly=True) as sub:
        assert sub.header.parent_session == str(tmp_path / "p.jsonl")
    # Imported on its own, a sidechain file is a session too (not 0 messages).
    alone = tmp_path / "alone.jsonl"
    run("import", "auto", src / "session-1" / "subagents" / "agent-1.jsonl", "-o", alone)
    assert "FIXTURE-SUBAGENT-TASK" in run("show", alone).stdout
    one_line_error(run("import", "codex", DATA / "real" / "codex" / "simple" / "rollout-1.jsonl",
                       "-o", tmp_path / "x.jsonl", "--with-subagents", code=2),
                   "only claude-code")
    one_line_error(run("import", "claude-code", src / "session-1.jsonl", "-o", "-",
                       "--with-subagents", code=2), "give -o a file path")


def test_import_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": \n')
    one_line_error(run("import", "brute", bad, code=1), f"{bad}:2:", "not valid JSON")
    assert not (tmp_path / "bad.contextree.jsonl").exists()
    one_line_error(run("import", "nope", bad, code=2), "unknown format 'nope'")
    one_line_error(run("import", "brute", tmp_path / "missing.jsonl", code=1), "no such file")
    dest = tmp_path / "taken.jsonl"
    dest.write_text("x")
    one_line_error(run("import", "brute", DATA / "brute.jsonl", "-o", dest, code=1),
                   "already there")
    from contextree.formats import Format, register_format, unregister_format
    from contextree.formats import _brute as brute

    register_format(Format("import-only", "x", brute.read))
    try:
        one_line_error(run("export", "import-only", dest, code=2), "imported, not exported")
    finally:
        unregister_format("import-only")


# -- conventions ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["tree"], ["show", "x", "--bogus"], ["nope"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_missing_or_invalid_files_are_one_line_errors(tmp_path: Path) -> None:
    one_line_error(run("tree", tmp_path / "missing.jsonl", code=1), "no such session file")
    one_line_error(run("tree", tmp_path, code=2), "is a directory")
    not_session = tmp_path / "n.jsonl"
    not_session.write_text('{"role": "user"}\n')
    one_line_error(run("stats", not_session, code=1), f"{not_session}:1:",
                   "not a session header")
    one_line_error(run("show", "postgresql://host/db", code=2), "add #SESSION_ID")


def test_plain_output_when_piped_is_stable(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    first = run("tree", path).stdout
    assert first == run("tree", path).stdout
    assert "\x1b[" not in first  # no colour codes when not on a terminal


def test_console_script_subprocess(sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, _ = sess
    cmd = [sys.executable, "-c", "from contextree.cli import main; main()"]
    ok = subprocess.run([*cmd, "stats", str(path), "--json"], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["name"] == "calc fix"
    bad = subprocess.run([*cmd, "verify", str(tmp_path / "missing.jsonl")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and bad.stderr.startswith("error: ")
    usage = subprocess.run([*cmd, "fork", str(path)], capture_output=True, text=True,
                           timeout=120)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
