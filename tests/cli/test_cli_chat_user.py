"""``contextree chat`` as a new user tried it (issue 18): the resume hint after ``/fork``,
a failed start that creates nothing, Ctrl-C at an approval prompt, the recorded tool set,
and ``CONTEXTREE_HOME``. Run under a pseudo-terminal against the fake OpenAI server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from contextree import Message, Session
from contextree.entries import ActiveToolsChangeEntry
from contextree.tools import make_tools
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import SRC, Term, chat_env, open_chat

TOOLS = [t.name for t in make_tools(workspace=Path.cwd(), cwd=Path.cwd())]


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextree", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def sent(server: OpenAIServer) -> list[tuple[str, str]]:
    """The roles and texts of the last request, without the system prompt."""
    return [(m["role"], str(m.get("content"))) for m in server.bodies[-1]["messages"]
            if m["role"] != "system"]


def test_after_fork_the_exit_hint_names_the_fork_and_resuming_it_keeps_every_turn(
        oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion("First answer."), completion("Second answer."),
             completion("Third answer."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("First question", r"First answer\.")
    term.ask("/fork forked.jsonl", r"the chat goes on there")
    term.say("Second question", r"Second answer\.")
    term.expect(r"> ")
    term.line("/exit")
    hint = term.expect(r"resume: contextree chat \S+\)")
    assert term.close() == 0
    assert hint == "resume: contextree chat forked.jsonl)"

    # Following the hint (from the same directory) resumes with both turns.
    work = tmp_path / "work"
    again = Term(["chat", "forked.jsonl"], work, chat_env(oa.base_url, tmp_path))
    again.expect(r"\(4 messages\)")
    again.say("Third question", r"Third answer\.")
    assert again.exit() == 0
    assert sent(oa) == [("user", "First question"), ("assistant", "First answer."),
                        ("user", "Second question"), ("assistant", "Second answer."),
                        ("user", "Third question")]
    with Session.open(tmp_path / "chat.jsonl", readonly=True) as original:
        assert len(original.build_context().messages) == 2  # the fork took the later turns


def no_model_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC),
            "HOME": str(tmp_path / "home"), "CONTEXTREE_HOME": str(tmp_path / "ct-home")}


def test_a_chat_that_cannot_start_creates_nothing(tmp_path: Path) -> None:
    env = no_model_env(tmp_path)
    for args in (["chat", str(tmp_path / "c.jsonl")], ["chat"]):
        out = subprocess.run([sys.executable, "-m", "contextree", *args], capture_output=True,
                             text=True, env=env, timeout=60, cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert "no model to chat with" in out.stderr and "--model" in out.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == [], args  # no file, no home


def test_a_chat_in_a_directory_that_does_not_exist_is_refused(oa: OpenAIServer,
                                                               tmp_path: Path) -> None:
    env = chat_env(oa.base_url, tmp_path)
    out = subprocess.run([sys.executable, "-m", "contextree", "chat", "a/b/c.jsonl"],
                         capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 1
    assert out.stderr.startswith("error: a/b/c.jsonl: the directory a/b does not exist")
    assert not (tmp_path / "a").exists()


def test_ctrl_c_at_an_approval_prompt_keeps_the_next_line_typed(oa: OpenAIServer,
                                                                tmp_path: Path) -> None:
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", {"command": "rm -rf build"})]),
             completion("Here is the next answer."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Clean up", r"allow shell: rm -rf build\? \[y/N\] ")
    term.send("\x03")  # Ctrl-C at the prompt
    term.expect(r"\[interrupted")
    term.expect(r"> ")
    term.line("Something else")  # goes to the chat, not to the abandoned prompt
    term.expect(r"Here is the next answer\.")
    assert term.exit() == 0
    assert len(oa.bodies) == 2
    assert sent(oa)[-1] == ("user", "Something else")


def test_the_chat_records_its_tool_set(oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    with Session.create(path) as s:  # a session from elsewhere, with another tool set
        s.append_active_tools_change(["search_web"])
        s.append_message(Message.user("Earlier question"))
        s.append_message(Message.assistant("Earlier answer."))
    oa.reply(completion("Now with the built-in tools."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Go on", r"Now with the built-in tools\.")
    assert term.exit() == 0
    shown = cli("show", path, "--context")
    assert re.search(rf"tools: +{', '.join(TOOLS)}\n", shown.stdout), shown.stdout
    context = json.loads(cli("show", path, "--context", "--json").stdout)
    assert context["active_tools"] == TOOLS
    with Session.open(path, readonly=True) as s:
        changes = [e for e in s.entries() if isinstance(e, ActiveToolsChangeEntry)]
    assert [e.active_tool_names for e in changes] == [["search_web"], TOOLS]

    # Resuming with the same tools records nothing more.
    oa.reply(completion("Same tools."))
    again = open_chat(tmp_path, oa.base_url)
    again.ask("Again", r"Same tools\.")
    assert again.exit() == 0
    with Session.open(path, readonly=True) as s:
        assert sum(isinstance(e, ActiveToolsChangeEntry) for e in s.entries()) == 2


def test_a_chat_without_a_file_is_kept_in_contextree_home(oa: OpenAIServer,
                                                          tmp_path: Path) -> None:
    home = tmp_path / "ct-home"
    oa.reply(completion("Kept at home."))
    work = tmp_path / "work"
    work.mkdir()
    term = Term(["chat"], work, chat_env(oa.base_url, tmp_path, CONTEXTREE_HOME=str(home)))
    term.ask("Hello", r"Kept at home\.")
    term.line("/exit")
    hint = term.expect(r"resume: contextree chat \S+\)")
    assert term.close() == 0
    saved = Path(re.sub(r"^resume: contextree chat |\)$", "", hint))
    assert saved.parent == home / "chats" and saved.is_file()
    assert not (tmp_path / "home" / ".local").exists()  # not the platform directory
