"""Commands that write: ``--json`` on each, ``-o -``, ``--force`` and what it refuses, forks
that link back by absolute path, ``rm`` with the outputs a session spilled anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contextree import Message, OverflowStore, Session
from contextree.entries import LabelEntry, LeafEntry
from helpers import FORMATS_DATA as DATA
from helpers import one_line_error, run, run_json


def test_write_commands_report_json(sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, ids = sess
    fork = run_json("fork", path, "--at", "diagnosis", "-o", tmp_path / "f.jsonl")
    with Session.open(tmp_path / "f.jsonl", readonly=True) as f:
        assert (fork["session_id"], fork["entries"], fork["leaf_id"]) == (f.id, len(f),
                                                                          f.leaf_id)
    assert fork["forked_at"] == ids["found"] and fork["path"] == str(tmp_path / "f.jsonl")

    label = run_json("label", path, ids["task"], "the task")
    with Session.open(path, readonly=True) as s:
        entry = s.get_entry(label["label_entry_id"])
        assert isinstance(entry, LabelEntry) and entry.target_id == ids["task"]
    assert label["entry_id"] == ids["task"] and label["label"] == "the task"
    assert run_json("label", path, "the task", "--clear")["label"] is None

    name = run_json("name", path, "new name")
    assert name["name"] == "new name" and name["entry_id"]
    checkout = run_json("checkout", path, ids["task"])
    with Session.open(path, readonly=True) as s:
        moved = s.get_entry(checkout["entry_id"])
        assert isinstance(moved, LeafEntry) and s.leaf_id == ids["task"]
    assert checkout["previous_leaf_id"] == name["entry_id"]
    summary = run_json("checkout", path, ids["tip_a"], "--summary", "back")
    assert summary["summary_entry_id"] == summary["entry_id"] == summary["leaf_id"]

    exported = run_json("export", "openai-chat", path, "-o", tmp_path / "m.json")
    assert exported["path"] == str(tmp_path / "m.json") and exported["format"] == "openai-chat"
    imported = run_json("import", "openai-chat", tmp_path / "m.json", "-o", tmp_path / "i.jsonl")
    with Session.open(tmp_path / "i.jsonl", readonly=True) as i:
        assert (imported["session_id"], imported["entries"]) == (i.id, len(i))

    removed = run_json("rm", "--yes", tmp_path / "i.jsonl")
    assert removed["deleted"] and removed["session_id"] == imported["session_id"]
    assert not (tmp_path / "i.jsonl").exists()


def test_dash_o_writes_to_stdout(sess: tuple[Path, dict[str, str]], tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = sess
    monkeypatch.chdir(tmp_path)
    chat = run("export", "openai-chat", path, "-o", "-").stdout
    assert json.loads(chat)[-1]["content"] == "Approach B instead."
    copy = run("export", "contextree", path, "-o", "-").stdout
    assert copy.encode() == path.read_bytes()
    fork = run("fork", path, "--at", "diagnosis", "-o", "-").stdout
    assert json.loads(fork.splitlines()[0])["type"] == "session"
    (tmp_path / "m.json").write_text(chat)
    imported = run("import", "openai-chat", tmp_path / "m.json", "-o", "-").stdout
    assert json.loads(imported.splitlines()[0])["type"] == "session"
    assert not (tmp_path / "-").exists()
    one_line_error(run("export", "openai-chat", path, "-o", "-", "--json", code=2),
                   "--json and -o -")


def test_export_never_overwrites_its_own_input(sess: tuple[Path, dict[str, str]],
                                               tmp_path: Path) -> None:
    path, _ = sess
    before = path.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    hard = tmp_path / "hard.jsonl"
    os.link(path, hard)
    for target in (path, link, hard):
        for fmt in ("openai-chat", "pi", "contextree"):
            one_line_error(run("export", fmt, path, "-o", target, "--force", code=2),
                           "names the input")
    assert path.read_bytes() == before
    one_line_error(run("import", "contextree", path, "-o", hard, "--force", code=2),
                   "names the input")


def test_overwrite_refusals_name_force(sess: tuple[Path, dict[str, str]],
                                       tmp_path: Path) -> None:
    path, _ = sess
    taken = tmp_path / "taken.json"
    taken.write_text("x")
    for args in (["export", "openai-chat", path, "-o", taken],
                 ["import", "brute", DATA / "brute.jsonl", "-o", taken],
                 ["fork", path, "--at", "diagnosis", "-o", taken]):
        one_line_error(run(*args, code=1), "already there", "--force")
    assert taken.read_text() == "x"
    run("fork", path, "--at", "diagnosis", "-o", taken, "--force")
    with Session.open(taken, readonly=True) as f:
        assert f.leaf_id is not None
    run("import", "brute", DATA / "brute.jsonl", "-o", taken, "--force")
    with Session.open(taken, readonly=True) as f:
        assert len(f) > 0


def test_force_does_not_replace_a_session_open_for_writing(
        sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, _ = sess
    busy = tmp_path / "busy.jsonl"
    with Session.create(busy) as writer:
        writer.append_message(Message.user("still writing"))
        one_line_error(run("fork", path, "--at", "diagnosis", "-o", busy, "--force", code=1),
                       "open for writing")
        writer.append_message(Message.user("and again"))
    with Session.open(busy, readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["still writing", "and again"]


def test_fork_into_a_missing_directory_is_an_error(sess: tuple[Path, dict[str, str]],
                                                  tmp_path: Path) -> None:
    path, _ = sess
    target = tmp_path / "nope" / "dir" / "x.jsonl"
    one_line_error(run("fork", path, "--at", "diagnosis", "-o", target, code=1),
                   "does not exist", str(tmp_path / "nope" / "dir"))
    assert not (tmp_path / "nope").exists()
    one_line_error(run("export", "pi", path, "-o", target, code=1), "does not exist")
    assert not (tmp_path / "nope").exists()


def test_fork_links_back_by_absolute_path(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    with Session.create("chat.jsonl") as s:
        s.append_message(Message.user("hi"))
        s.fork("../elsewhere.jsonl").close()
    run("fork", "chat.jsonl", "--at", s.leaf_id or "", "-o", "cli-fork.jsonl")
    monkeypatch.chdir(tmp_path)  # the link resolves from anywhere
    for fork in (tmp_path / "elsewhere.jsonl", tmp_path / "work" / "cli-fork.jsonl"):
        with Session.open(fork, readonly=True) as f:
            parent = f.header.parent_session
        assert parent is not None and Path(parent).is_absolute()
        assert Path(parent) == tmp_path / "work" / "chat.jsonl"
        with Session.open(parent, readonly=True) as p:
            assert len(p) == 1


def test_rm_removes_the_spills_the_session_recorded(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    demo = tmp_path / "demo"
    out = subprocess.run([sys.executable, "-m", "contextree", "demo", "--dir", str(demo)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    spilled = [p for p in (demo / "overflow").rglob("*") if p.is_file()]
    assert len(spilled) == 1
    bystander = demo / "overflow" / "20200101T000000000-0123456789-other.txt"
    bystander.write_text("another session's output")
    result = run_json("rm", "--yes", demo / "session.jsonl")
    assert result["spills_removed"] == 1 and result["spill_paths"] == [str(spilled[0])]
    assert not spilled[0].exists() and bystander.exists()
    assert not (demo / "session.jsonl").exists()


def test_rm_dir_names_the_store(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store", gc_interval=None)
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
        saved = store.save("big output", session_id=s.id, label="shell")
    text = run("rm", "--yes", "--dir", tmp_path / "store", path).stdout
    assert "and 1 saved tool outputs" in text and not saved.exists()
    one_line_error(run("rm", "--yes", "--dir", tmp_path / "missing", path, code=1),
                   "no such directory")


def test_rm_never_deletes_a_recorded_path_that_is_not_a_spill(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.tool("cut", tool_call_id="c", name="shell",
                                      meta={"truncation": {"total_lines": 9, "total_bytes": 9,
                                                           "shown_lines": 1,
                                                           "saved_path": str(precious)}}))
    assert run_json("rm", "--yes", path)["spills_removed"] == 0
    assert precious.read_text() == "keep me"


def test_name_empty_clears_it(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    assert run("name", path, "").stdout.strip() == f"{path}: name cleared"
    with Session.open(path, readonly=True) as s:
        assert s.name is None
    assert run_json("name", path, "back")["name"] == "back"


def _spilling_session(path: Path, store: OverflowStore) -> Path:
    """A session whose one tool result was cut and spilled to ``store``."""
    with Session.create(path) as s:
        saved = store.save("the whole output\n" * 50, session_id=s.id, label="shell")
        s.append_message(Message.tool("cut", tool_call_id="c", name="shell", meta={
            "truncation": {"total_lines": 50, "total_bytes": 850, "shown_lines": 1,
                           "saved_path": str(saved)}}))
    return saved


def test_rm_of_a_fork_leaves_the_parents_spills(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store", gc_interval=None)
    saved = _spilling_session(tmp_path / "parent.jsonl", store)
    with Session.open(tmp_path / "parent.jsonl", readonly=True) as parent:
        tip = parent.leaf_id or ""
    run("fork", tmp_path / "parent.jsonl", "--at", tip, "-o", tmp_path / "fork.jsonl")
    result = run_json("rm", "--yes", "--dir", tmp_path / "store", tmp_path / "fork.jsonl")
    assert result["spills_removed"] == 0 and saved.exists()
    assert not (tmp_path / "fork.jsonl").exists()
    # The parent's own rm still takes them.
    assert run_json("rm", "--yes", "--dir", tmp_path / "store",
                    tmp_path / "parent.jsonl")["spills_removed"] == 1
    assert not saved.exists()


def test_rm_of_a_copy_leaves_the_originals_spills(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store", gc_interval=None)
    saved = _spilling_session(tmp_path / "a.jsonl", store)
    shutil.copy(tmp_path / "a.jsonl", tmp_path / "a-copy.jsonl")
    out = run("rm", "--yes", "--dir", tmp_path / "store", tmp_path / "a-copy.jsonl").stdout
    assert "kept" in out and "same id" in out
    assert saved.exists() and (tmp_path / "a.jsonl").exists()
    assert not (tmp_path / "a-copy.jsonl").exists()


def test_rm_of_a_crafted_session_deletes_no_other_sessions_spill(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store", gc_interval=None)
    victim = _spilling_session(tmp_path / "victim.jsonl", store)
    crafted = tmp_path / "sub" / "crafted.jsonl"
    with Session.create(crafted) as s:  # names the victim's spill as if it were its own
        s.append_message(Message.tool("cut", tool_call_id="c", name="shell", meta={
            "truncation": {"total_lines": 9, "total_bytes": 9, "shown_lines": 1,
                           "saved_path": str(victim)}}))
    assert run_json("rm", "--yes", "--dir", tmp_path / "store", crafted)["spills_removed"] == 0
    assert victim.exists()
