"""What a person reads: ``tree`` at a fixed column within the width, ``show --context`` exact,
compaction reports that agree with the next measurement, the demo's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.cli.output import PLAIN_WIDTH
from contextree.cli.render import MAX_LEVEL
from contextree.cli.terminal import width_of
from helpers import SGR, big_session, cli, run, run_json, run_on_terminal

ID = re.compile(r"[0-9a-f]{8}")


def branchy_session(path: Path, *, backs: int = 300) -> None:
    """A long session that goes back a few entries and branches again, ``backs`` times; the
    abandoned tips stay behind as side branches (the pattern of a 200 MB agent session)."""
    with Session.create(path, durable=False) as s, s.batch():
        s.append_message(Message.user("start " + "x" * 200))
        for i in range(backs):
            a = s.append_message(Message.user(f"try {i} " + "long text " * 20))
            s.append_message(Message.assistant(f"attempt {i} " + "more words " * 20))
            s.append_message(Message.user(f"no, step {i} was wrong"))
            s.move_to(a, summary=f"attempt {i} went nowhere")


def nested_session(path: Path, depth: int) -> str:
    """A side branch that branches again inside itself, ``depth`` levels deep."""
    with Session.create(path, durable=False) as s:
        root = s.append_message(Message.user("root"))
        s.append_message(Message.assistant("current branch"))
        s.move_to(root)
        parent = root
        for level in range(depth):
            s.move_to(parent)
            kid = s.append_message(Message.user(f"side level {level + 1}"))
            s.append_message(Message.assistant(f"tip at level {level + 1}"))
            parent = kid
        s.move_to(root)
        return s.append_message(Message.user("current again"))


def test_tree_keeps_the_current_branch_at_one_column_within_the_width(tmp_path: Path) -> None:
    path = tmp_path / "branchy.jsonl"
    branchy_session(path)
    lines = run("tree", path).stdout.splitlines()
    assert all(width_of(line) <= PLAIN_WIDTH for line in lines), max(lines, key=width_of)
    current = [line for line in lines if line.startswith("* ")]
    assert len(current) > 300  # every branch point of the current branch is shown
    assert all(ID.fullmatch(line[2:10]) for line in current)  # the id always at column 2
    # Branch summaries name both ends: the tip that was left and the entry returned to.
    summary = next(line for line in current if "branch summary" in line)
    found = re.search(r"branch summary \(left ([0-9a-f]{8}), back at ([0-9a-f]{8})\)", summary)
    assert found and found.group(1) != found.group(2)
    assert not any(line.rstrip().endswith("  …") for line in current)  # text is not squeezed


def test_tree_caps_the_indentation_and_says_how_deep(tmp_path: Path) -> None:
    path = tmp_path / "nested.jsonl"
    nested_session(path, depth=MAX_LEVEL + 4)
    lines = run("tree", path).stdout.splitlines()
    indents = [len(line) - len(line.lstrip(" *│├└─")) for line in lines]
    assert max(indents) <= 2 + 3 * MAX_LEVEL
    assert any(f"level {MAX_LEVEL + 4}" in line for line in lines)
    assert any("(branch: 2 entries, level" in line for line in lines)  # the deepest one
    assert any("(branch: " in line and "entries" in line for line in lines)


@pytest.mark.parametrize("columns", [60, 120])
def test_tree_fits_the_terminal(tmp_path: Path, columns: int) -> None:
    path = tmp_path / "branchy.jsonl"
    branchy_session(path, backs=30)
    out, code = run_on_terminal(["tree", str(path)], columns=columns)
    assert code == 0
    lines = SGR.sub(b"", out).decode().splitlines()
    assert len(lines) > 30
    assert all(width_of(line) <= columns for line in lines), max(lines, key=width_of)


def test_tree_json_names_the_left_tip(sess: tuple[Path, dict[str, str]]) -> None:
    path, ids = sess
    data = run_json("tree", path)
    summary = next(e for e in data["entries"] if e["type"] == "branch_summary")
    assert summary["left_from"] == ids["tip_a"] and summary["parent_id"] == ids["found"]


def test_show_context_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "ws.jsonl"
    text = "  indented\n\n\ttabbed  \n\n\nthree blank lines above\r\nwindows line"
    with Session.create(path) as s:
        s.append_message(Message.system("Be brief."))
        s.append_message(Message.user(text))
    out = run("show", path, "--context").stdout
    assert "    Be brief." in out  # the stored system prompt, shown first
    assert "    " + "  indented\n    \n    \ttabbed  \n    \n    \n    three blank" in out
    assert "three blank lines above\\r" in out  # a carriage return is shown, not obeyed
    assert "(no system prompt" not in out
    data = run_json("show", path, "--context")
    assert data["messages"][1]["message"]["content"] == text and data["system_prompt_stored"]


def test_show_context_says_when_no_system_prompt_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
    out = run("show", path, "--context").stdout
    assert out.startswith("(no system prompt is stored in this session")
    assert run_json("show", path, "--context")["system_prompt_stored"] is False


def context_tokens(path: Path) -> int:
    return int(run_json("show", path, "--context")["total_tokens"])


@pytest.mark.parametrize("window", ["8000", "3000", "300"])
def test_compaction_figures_agree_with_the_next_show_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: str) -> None:
    monkeypatch.delenv("CONTEXTREE_MODEL", raising=False)
    path = tmp_path / "c.jsonl"
    big_session(path)
    before = context_tokens(path)
    dry = run_json("compact", path, "--window", window, "--dry-run")
    assert dry["tokens_before"] == before
    text = run("compact", path, "--window", window).stdout
    after = context_tokens(path)
    assert f"context: {before} tokens" in text
    assert f"{before} -> {after} tokens" in text  # the figure the next measurement gives
    stages = [line.split() for line in text.splitlines() if line.split()[:1] in
              (["tool_results"], ["sliding_window"], ["digest"])]
    applied = [s for s in stages if s[3] == "yes"]
    assert int(applied[-1][2]) == after  # the stage table ends where the summary line does
    if window == "300":
        assert "missed the target of 120 tokens" in text
    else:
        assert "missed the target" not in text
    if len(applied) > 1:  # cleared by the first stage, then dropped: said, not "0 cleared"
        assert "are counted as dropped" in text
    shown = run("show", path, "--context").stdout
    assert f"context size: {after} tokens" in shown


def test_compact_json_after_writing_matches_show_context(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    big_session(path)
    data = run_json("compact", path, "--window", "3000")
    assert data["tokens_after"] == context_tokens(path)
    assert data["reached_target"] is True


def test_stats_and_show_context_name_their_tokens_differently(
        sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    stats = run("stats", path).stdout
    assert "billed tokens" in stats and "context size" not in stats
    assert "context size:" in run("show", path, "--context").stdout


def test_demo_output(tmp_path: Path) -> None:
    before = set(Path("/tmp").glob("contextree-demo-*"))
    out = cli("demo")
    assert out.returncode == 0, out.stderr
    assert set(Path("/tmp").glob("contextree-demo-*")) == before  # nothing left behind
    assert "now removed" in out.stdout and "--dir" in out.stdout
    assert "\x1b" not in out.stdout
    # The model's view: the system prompt first, whitespace kept, a marker where it is cut.
    view = out.stdout.split("What the model would see next", 1)[1]
    assert view.index("You are a careful coding agent") < view.index("The tests in this")
    assert "not shown here]" in view
    assert "    return a + b" in view  # the edit's indentation survives


def test_demo_compacted_is_not_in_the_error_colour(tmp_path: Path) -> None:
    screen, code = run_on_terminal(["demo", "--dir", str(tmp_path / "d")])
    assert code == 0
    line = next(x for x in screen.split(b"\n") if b"compacted" in x)
    assert b"\x1b[31m" not in line and b"\x1b[1;31m" not in line  # red is for errors


def test_demo_on_an_ascii_terminal(tmp_path: Path) -> None:
    out = cli("demo", "--dir", str(tmp_path / "d"), PYTHONIOENCODING="ascii")
    assert out.returncode == 0, out.stderr
    assert "Session file:" in out.stdout  # it ran to the end
    assert "UnicodeEncodeError" not in out.stderr


def test_demo_json_and_a_second_run_in_the_same_dir(tmp_path: Path) -> None:
    where = tmp_path / "d"
    out = cli("demo", "--dir", str(where), "--json")
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["kept"] is True and facts["session_path"] == str(where / "session.jsonl")
    assert facts["compactions"] == 1 and facts["tests_pass"]
    again = cli("demo", "--dir", str(where))
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith("error: ") and "already holds a demo run" in again.stderr
    assert "File exists" not in again.stderr
