"""``contextree import FMT SRC --with-subagents`` for the sessions of Gemini CLI, opencode and
Copilot CLI whose sub-agents the real CLIs wrote (the ``subagent`` fixtures): the parent and
each sub-agent become sessions of their own, linked both ways, and nothing is written when one
of the targets is already there. (Claude Code's: tests/formats/test_formats_real.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fixtures import subagent_links
from contextree import Session
from contextree.entries import MessageEntry
from helpers import FORMATS_DATA, run

REAL = FORMATS_DATA / "real"
SOURCES = {
    "gemini-cli": REAL / "gemini_cli" / "subagent" / "session-1.jsonl",
    "opencode": REAL / "opencode" / "subagent" / "opencode.db",
    "copilot": REAL / "copilot" / "subagent" / "session-1" / "events.jsonl",
}
PROMPT = "FIXTURE-SUBAGENT-TASK: list the files in the current directory and report."


@pytest.mark.parametrize("fmt", SOURCES)
def test_with_subagents_writes_linked_sessions(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "parent.jsonl"
    info = json.loads(run("import", fmt, str(SOURCES[fmt]), "-o", str(out),
                          "--with-subagents", "--json").stdout)
    assert info["subagent_errors"] == []
    (agent_path,) = info["subagent_sessions"]
    assert Path(agent_path).parent == tmp_path and ".agent-" in Path(agent_path).name
    with Session.open(out, readonly=True) as parent, \
            Session.open(agent_path, readonly=True) as agent:
        (link,) = subagent_links(parent, fmt)
        assert link.data["session"] == agent_path and "first_entry_id" not in link.data
        assert link.id in [e.id for e in parent.branch()]
        # the parent holds none of the sub-agent's messages: they are in its own session
        texts = [e.message.text for e in parent.entries() if isinstance(e, MessageEntry)]
        assert not any(t.endswith(PROMPT) for t in texts)
        assert agent.header.parent_session == str(out)
        assert agent.header.metadata["imported_from"]["subagent"]["session"] == agent_path
        first_user = next(m for m in agent.build_context().messages if m.role == "user")
        assert first_user.text.endswith(PROMPT)
        assert agent.build_context().messages[-1].text == "The directory contains a.txt." \
            or fmt == "gemini-cli"  # Gemini's sub-agent ends with its complete_task call
    tree = run("tree", str(out)).stdout
    assert f"sub-agent -> {tmp_path}" in tree  # the line goes on to the session's file


@pytest.mark.parametrize("fmt", SOURCES)
def test_without_it_the_subagent_is_a_root_in_the_one_session(fmt: str,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "one.jsonl"
    run("import", fmt, str(SOURCES[fmt]), "-o", str(out))
    assert not list(tmp_path.glob("*.agent-*"))
    with Session.open(out, readonly=True) as s:
        (link,) = subagent_links(s, fmt)
        root = s.get_entry(link.data["first_entry_id"])
        assert root is not None and root.parent_id is None
        # the leaf is still the parent's last message, not the sub-agent's
        last = s.build_context().messages[-1]
        assert last.role == "assistant" and last.text == "The sub-agent found a.txt."
    assert "sub-agent -> " in run("tree", str(out)).stdout


@pytest.mark.parametrize("fmt", SOURCES)
def test_nothing_is_written_when_a_target_is_there(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "parent.jsonl"
    run("import", fmt, str(SOURCES[fmt]), "-o", str(out), "--with-subagents")
    before = sorted(p.name for p in tmp_path.iterdir())
    out.unlink()
    result = run("import", fmt, str(SOURCES[fmt]), "-o", str(out), "--with-subagents", code=1)
    assert "already there" in result.stderr
    assert not out.exists()  # the parent was not written either
    assert sorted(p.name for p in tmp_path.iterdir()) == [n for n in before
                                                          if n != "parent.jsonl"]


def test_a_format_without_subagents_is_refused(tmp_path: Path) -> None:
    src = FORMATS_DATA / "real" / "codex" / "simple" / "rollout-1.jsonl"
    result = run("import", "codex", str(src), "-o", str(tmp_path / "x.jsonl"),
                 "--with-subagents", code=2)
    assert "claude-code, gemini-cli, opencode, copilot" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()
