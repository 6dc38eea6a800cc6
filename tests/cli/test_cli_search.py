"""``contextree search`` and ``contextree index`` as a user runs them: hits with their place,
bad queries as one-line errors, hostile text made harmless, and a directory of awkward
files (corrupt, locked by a writer, FIFOs, symbolic links) where every file is searched or
reported and nothing hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.cli import app
from contextree.tools import session_search_tool
from helpers import one_line_error, run, run_json, runner


def _project(root: Path) -> Path:
    with Session.create(root / "a.jsonl", cwd="/proj") as s:
        s.append_message(Message.user("it fails with ECONNREFUSED on test_parse_header"))
        s.append_message(Message.assistant("fixed in 3f9a2b1c4d"))
    return root


def test_search_prints_each_hit_with_its_place(tmp_path: Path) -> None:
    root = _project(tmp_path)
    out = run("search", "econnrefused", root).stdout.splitlines()
    assert len(out) == 2
    assert out[0].startswith("a.jsonl  ") and " user " in out[0] and "[on branch]" in out[0]
    assert out[1].strip() == "it fails with [[ECONNREFUSED]] on test_parse_header"
    rows = run_json("search", "3f9a2", root)
    assert [r["snippet"] for r in rows] == ["fixed in 3f9a2b1c4d"]
    assert rows[0]["path"] == str(root / "a.jsonl") and rows[0]["on_branch"] is True
    assert rows[0]["role"] == "assistant" and rows[0]["marks"] == [[9, 14]]
    assert "no entries match" in run("search", "nothing-here", root).stdout


def test_search_options(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert run_json("search", "fails", root, "--role", "assistant") == []
    assert len(run_json("search", "fails", root, "--role", "user", "--on-branch",
                        "--cwd", "/proj", "--since", "2000-01-01", "--limit", "1")) == 1
    assert run_json("search", "fails", root, "--until", "2000-01-01") == []
    assert run_json("search", "fails", root, "--model", "none") == []
    assert run_json("search", "fails", root, "--tool", "shell") == []
    assert len(run_json("search", "fails", root, "--no-refresh")) == 1
    assert len(run_json("search", "fails OR fixed", root, "--fts")) == 2


def test_bad_queries_are_one_line_errors(tmp_path: Path) -> None:
    root = _project(tmp_path)
    one_line_error(run("search", "a AND (", root, "--fts", code=2), "not a valid FTS5 query")
    one_line_error(run("search", "?!", root, code=2), "nothing to search for")
    one_line_error(run("search", "x", root / "a.jsonl", code=2), "session file")
    one_line_error(run("search", "x", root, "--limit", "0", code=2), "--limit")
    assert run_json("search", 'a AND ( "unbalanced', root) == []  # taken literally


def test_terminal_escapes_in_a_session_never_reach_the_terminal(tmp_path: Path) -> None:
    with Session.create(tmp_path / "evil.jsonl") as s:
        s.append_message(Message.user("before \x1b]0;owned\x07 \x1b[2J payload \x1b[31mred "
                                      "\r\x9b31m after"))
    out = run("search", "payload", tmp_path).stdout
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\x9b" not in out
    assert "[[payload]]" in out and "\\x1b" in out


@pytest.mark.timeout(120)
def test_a_directory_of_awkward_files_is_searched_and_reported(tmp_path: Path) -> None:
    for i in range(30):
        with Session.create(tmp_path / f"s{i:02}.jsonl") as s:
            s.append_message(Message.user(f"common word number {i}"))
    (tmp_path / "corrupt.jsonl").write_bytes(b"\x00\xffnot json at all\n")
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "s00.jsonl")
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "missing")
    nested = tmp_path / "deeper"
    nested.mkdir()
    with Session.create(nested / "n.jsonl") as s:
        s.append_message(Message.user("common word nested"))
    writer = Session.open(tmp_path / "s01.jsonl")  # locked by a writer that goes on
    writer.append_message(Message.user("common word while locked"))
    try:
        for args in (["search", "common", str(tmp_path), "--json", "--limit", "100"],
                     ["index", str(tmp_path)], ["ls", str(tmp_path), "--json"]):
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (args, result.stderr)
            for name in ("fifo.jsonl", "link.jsonl", "gone.jsonl"):
                assert f"not listed: {tmp_path / name}: " in result.stderr, (args, name)
            if args[0] == "search":
                hits = json.loads(result.stdout)
                assert len(hits) == 32 and "common word while locked" in {
                    h["snippet"] for h in hits}
            if args[0] == "ls":
                assert len(json.loads(result.stdout)) == 31  # corrupt.jsonl: counted apart
    finally:
        writer.close()


def test_index_builds_refreshes_and_rebuilds(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = run("index", root).stdout
    assert "indexed 1 changed session files" in first and "1 sessions" in first
    assert "indexed 0 changed" in run("index", root).stdout
    assert "indexed 1 changed" in run("index", root, "--rebuild").stdout
    assert (root / ".contextree" / "index.sqlite").is_file()
    assert run_json("ls", root)[0]["path"] == str(root / "a.jsonl")  # the index is no session


def test_the_session_search_tool(tmp_path: Path) -> None:
    root = _project(tmp_path)
    tool = session_search_tool(root)
    assert tool.name == "session_search" and tool.kind == "search"
    result = tool.run({"query": "ECONNREFUSED"})
    assert not result.is_error and "[on branch]" in result.content
    assert "test_parse_header" in result.content and result.meta == {"matches": 1}
    assert tool.run({"query": "nothing-like-it"}).content.startswith("No entries match")
    bad = tool.run({"query": "?!"})
    assert bad.is_error and "nothing to search for" in bad.content
    assert tool.run({"query": "x", "max_results": 500}).is_error
    with Session.open(root / "a.jsonl") as s:
        before = list(s.entries())
    tool.run({"query": "fixed", "role": "assistant"})
    with Session.open(root / "a.jsonl") as s:
        assert list(s.entries()) == before  # read-only
