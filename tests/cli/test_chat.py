"""``contextree chat`` under a pseudo-terminal, against the fake servers: a streamed answer,
a tool call approved and one denied, Ctrl-C mid-stream then resume, /checkout and continue."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextree import Session
from contextree.entries import RequestEntry
from contextree.markers import Kind
from fakes import Recorded
from fakes.anthropic_server import AnthropicServer, message, text
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import SRC, Term, chat_env, open_chat, run


def held(server: OpenAIServer, body: dict[str, Any], after: int) -> Any:
    sse = server.to_stream(body, Recorded("POST", "", {}, {"stream_options":
                                                          {"include_usage": True}}))
    sse.hold_after = after
    server.reply(sse)
    return sse


def test_a_streamed_answer_shows_before_the_reply_is_complete(oa: OpenAIServer,
                                                              tmp_path: Path) -> None:
    sse = held(oa, completion("Hello from the fake model, streamed in pieces."), after=4)
    term = open_chat(tmp_path, oa.base_url)
    term.expect(r"/help for commands")
    term.ask("Say hello")
    term.expect(r"Hello from")  # on the screen while the server still holds the rest back
    assert not sse.release.is_set()
    sse.release.set()
    term.expect(r"streamed in pieces\.")
    term.expect(r"tokens, cost unknown\]")
    term.line("/exit")
    term.expect(r"session saved")
    assert term.close() == 0
    assert oa.bodies[0]["stream"] is True


def test_the_chat_records_the_request_it_sent(oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion("Hi."))
    term = open_chat(tmp_path, oa.base_url)
    term.say("Say hi", r"Hi\.")
    assert term.exit() == 0
    path = tmp_path / "chat.jsonl"
    with Session.open(path, readonly=True) as s:
        (request,) = s.find(RequestEntry)
        branch = s.branch()
    sent = oa.bodies[0]
    assert sent["messages"][0] == {"role": "system", "content": request.system}
    assert [t["function"]["name"] for t in sent["tools"]] == [
        t["name"] for t in request.tools or ()]
    before_reply = branch[-2].id
    wire = run("show", path, "--at", before_reply, "--context", "--wire", "openai", "--raw")
    assert wire.stdout_bytes == oa.requests[0].raw + b"\n"


def test_a_tool_call_approved_and_one_denied(oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", {"command": "echo ran-it"})]),
             completion("The command printed ran-it."),
             completion(tool_calls=[tool_call("c2", "write", {"path": "notes.txt",
                                                              "content": "secret"})]),
             completion("I did not write the file."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Run echo", r"allow shell: echo ran-it\? \[y/N\] ")
    term.say("y", r"<- ran-it", r"The command printed ran-it\.")
    term.ask("Write notes", r"allow write to notes\.txt \(1 line, 6 characters, shown in "
             r"full\):", r"1 \| secret", r"allow this write\? \[y/N\] ")
    term.say("n",
             r"<- error: tool call 'write' was denied: the user said no",
             r"I did not write the file\.")
    assert term.exit() == 0
    assert not (tmp_path / "work" / "notes.txt").exists()
    ran = [m for m in oa.bodies[1]["messages"] if m["role"] == "tool"]
    assert "ran-it" in ran[0]["content"]
    denied = [m for m in oa.bodies[3]["messages"] if m["role"] == "tool"]
    assert "denied" in denied[-1]["content"]


def test_parallel_calls_are_asked_about_one_at_a_time(oa: OpenAIServer,
                                                       tmp_path: Path) -> None:
    """A reply with three shell calls: each question comes after the answer to the one
    before, in call order, so a "y" typed for the first never approves another."""
    oa.reply(completion(tool_calls=[
        tool_call(f"c{i}", "shell", {"command": f"touch made{i}"}) for i in range(3)]),
        completion("Only the first."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Make files", r"allow shell: touch made0\? \[y/N\] ")
    term.say("y", r"allow shell: touch made1\? \[y/N\] ")
    term.say("n", r"allow shell: touch made2\? \[y/N\] ")
    term.say("n", r"Only the first\.")
    assert term.exit() == 0
    assert sorted(p.name for p in (tmp_path / "work").glob("made*")) == ["made0"]


@pytest.mark.slow
def test_ctrl_c_mid_stream_keeps_the_partial_reply_and_the_chat_resumes(
        oa: OpenAIServer, tmp_path: Path) -> None:
    sse = held(oa, completion("A long story that goes on and on and on."), after=5)
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Tell a story", r"A long")
    term.send("\x03")  # Ctrl-C, through the terminal
    term.expect(r"\[interrupted: the partial reply is saved\]")
    term.expect(r"\[[1-9][\d,]* tokens, cost unknown\]")  # billed: estimated, never $0
    term.expect(r"> ")
    sse.release.set()
    assert term.exit() == 0
    with Session.open(tmp_path / "chat.jsonl", readonly=True) as s:
        msgs = s.build_context().messages
    assert msgs[-1].kind is Kind.INTERRUPTED_REPLY and msgs[-1].text.startswith("A long")
    partial = msgs[-1].text

    oa.reply(completion("Where was I? The end."))
    again = open_chat(tmp_path, oa.base_url)
    again.expect(r"\(2 messages\)")
    again.say("Go on", r"Where was I\? The end\.")
    assert again.exit() == 0
    sent = [(m["role"], m["content"]) for m in oa.bodies[-1]["messages"]
            if m["role"] != "system"]
    assert sent == [("user", "Tell a story"), ("assistant", partial), ("user", "Go on")]


@pytest.mark.slow
def test_checkout_an_earlier_entry_and_continue_from_there(oa: OpenAIServer,
                                                          tmp_path: Path) -> None:
    oa.reply(completion("First answer."), completion("Second answer."),
             completion("A different second answer."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("First question", r"First answer\.")
    term.ask("/label first", r"labelled \w+ 'first'")
    term.say("Second question", r"Second answer\.")
    term.ask("/checkout first", r"now at \w+: assistant: First answer\.")
    term.say("Another second question", r"A different second answer\.")
    term.ask("/tree", r"\[first\]", r"<- leaf")
    term.say("/stats", r"branches 2")
    assert term.exit() == 0
    sent = [m["content"] for m in oa.bodies[-1]["messages"] if m["role"] != "system"]
    assert sent == ["First question", "First answer.", "Another second question"]


@pytest.mark.slow
def test_the_chat_resumes_on_the_files_recorded_model(tmp_path: Path) -> None:
    with AnthropicServer() as an:
        an.reply(message(text("Claude here.")), message(text("Still Claude.")))
        env = {"ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "k",
               "CONTEXTREE_MODEL": "claude-test"}
        first = open_chat(tmp_path, "", **env)
        first.expect(r"anthropic/claude-test")
        first.say("Hi", r"Claude here\.")
        assert first.exit() == 0
        # No model in the environment now: the file says which one it was.
        work = tmp_path / "work"
        base = chat_env("", tmp_path)
        for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CONTEXTREE_MODEL"):
            base.pop(key)
        base.update({"ANTHROPIC_BASE_URL": an.url, "ANTHROPIC_API_KEY": "k"})
        second = Term(["chat", str(tmp_path / "chat.jsonl")], work, base)
        second.expect(r"anthropic/claude-test")
        second.say("Again", r"Still Claude\.")
        assert second.exit() == 0


def test_without_a_model_the_chat_says_what_to_set(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC),
           "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "contextree", "chat", str(tmp_path / "c.jsonl")],
                         capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "OPENAI_BASE_URL" in out.stderr and "CONTEXTREE_MODEL" in out.stderr
    assert "Traceback" not in out.stderr


HIDDEN = "touch PWNED #\x1b[2K\x1b[Gallow shell: ls -la"


def test_the_approval_prompt_shows_the_exact_command_escapes_visible(
        oa: OpenAIServer, tmp_path: Path) -> None:
    """A command that redraws the prompt to look harmless, one that hides a second line, and
    model text that writes the clipboard (OSC 52): the person sees every byte as text."""
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", {"command": HIDDEN})]),
             completion("Said no.\x1b]52;c;cm0gLXJmIH4=\x07 done"),
             completion(tool_calls=[tool_call("c2", "shell",
                                              {"command": "ls\u2028\nrm -rf important\x0b"})]),
             completion("Said no again."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Look around",
             re.escape("allow shell: touch PWNED #\\x1b[2K\\x1b[Gallow shell: ls -la? [y/N] "))
    term.say("n", re.escape("Said no.\\x1b]52;c;cm0gLXJmIH4=\\x07 done"))
    term.ask("Again",
             r"allow shell \(2 lines, .* shown in full\):",
             re.escape("1 | ls\\u2028"),
             re.escape("2 | rm -rf important\\x0b"),
             re.escape("allow this shell? [y/N] "))
    term.say("n", r"Said no again\.")
    assert term.exit() == 0
    assert not (tmp_path / "work" / "PWNED").exists()
    assert b"\x1b]52" not in term.raw and b"\x1b[2K" not in term.raw
    assert b"\x0b" not in term.raw and "\u2028".encode() not in term.raw


def test_tool_arguments_nested_100k_deep_are_an_argument_error_the_chat_survives(
        oa: OpenAIServer, tmp_path: Path) -> None:
    """A hostile model sends arguments nested 100,000 levels deep: the tool is not run (and
    nobody is asked to approve a call that cannot run), the model is told its arguments
    were not usable, and the session stays valid."""
    deep = '{"command": ' + "[" * 100_000 + "]" * 100_000 + "}"
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", deep)]),
             completion("Sorry, bad arguments."))
    term = open_chat(tmp_path, oa.base_url)
    term.expect(r"> ")
    term.line("Do it")
    term.expect(r"Sorry, bad arguments\.", timeout=60)  # nothing could run: nobody is asked
    term.expect(r"> ")
    term.line("/exit")
    assert term.close() == 0
    assert "allow" not in term.seen
    assert "RecursionError" not in term.seen and "Traceback" not in term.seen
    told = [m for m in oa.bodies[1]["messages"] if m["role"] == "tool"]
    assert len(told) == 1 and "must be a JSON object" in told[0]["content"], told[0]["content"][:300]
    with Session.open(tmp_path / "chat.jsonl", readonly=True) as s:
        assert [m.role for m in s.build_context().messages][-3:] == ["assistant", "tool",
                                                                     "assistant"]


EVIL_NAME = "notes\x1b]0;pwned\x07\x9b2J.txt"
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"


def test_nothing_a_model_or_a_file_sends_acts_on_the_terminal(oa: OpenAIServer,
                                                              tmp_path: Path) -> None:
    """A hostile file (its name and its first line), a model's streamed text and a tool
    call's path, then /tree, /context and /label echo them: the screen shows every escape
    as text, and no title, clipboard or clear-screen sequence reaches the terminal."""
    work = tmp_path / "work"
    work.mkdir()
    (work / EVIL_NAME).write_text(f"# README {OSC52}\x1b[2J\nsecond line\n")
    oa.reply(completion(f"Reading it.{OSC52}",
                        tool_calls=[tool_call("c1", "read", {"path": EVIL_NAME})]),
             completion("It says hi.\x1b[2J\x1b]0;title\x07 done"))
    term = open_chat(tmp_path, oa.base_url)
    term.expect(r"> ")
    term.line("Read the notes")
    term.expect(r"done")
    term.expect(r"> ")
    for command in ("/tree", "/context", "/label \x1b]0;x\x07here", "/stats"):
        term.line(command)
        term.expect(r"> ")
    term.line("/exit")
    assert term.close() == 0
    for raw in (b"\x1b]", b"\x1b[2J", b"\x9b", "\x9b".encode(), b"\x07"):
        assert raw not in term.raw, (raw, term.raw[-2000:])
    assert re.search(re.escape("notes\\x1b]0;pwned\\x07\\x9b2J.txt"), term.seen)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in term.seen


def test_chat_on_a_database_url_starts_resumes_and_keeps_the_session_there(
        oa: OpenAIServer, tmp_path: Path) -> None:
    from conformance import fresh_schema_url
    from contextree.storage import open_catalog
    from contextree.storage.postgres import create_schema
    from helpers import as_url, require_postgres

    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        create_schema(conninfo)
        url = as_url(conninfo)
        oa.reply(completion("First answer."), completion("Second answer."))
        term = Term(["chat", url], tmp_path, chat_env(oa.base_url, tmp_path))
        term.ask("hello", r"First answer\.")
        term.line("/exit")
        saved = term.expect(r"resume: contextree chat (\S+)\)")
        assert term.close() == 0
        resume = re.search(r"resume: contextree chat (\S+)\)", saved).group(1)  # type: ignore[union-attr]
        assert resume.startswith("postgresql://") and "#" in resume
        assert not list(tmp_path.glob("postgres*"))  # no directory named after the URL
        (info,) = open_catalog(url).list().sessions
        assert resume.endswith("#" + info.id)
        again = Term(["chat", url + "#" + info.id], tmp_path, chat_env(oa.base_url, tmp_path))
        again.ask("more", r"Second answer\.")
        assert again.exit() == 0
        with Session.open(url + "#" + info.id) as s:
            said = [m.text for m in s.build_context().messages]
        assert said == ["hello", "First answer.", "more", "Second answer."]
    finally:
        drop()


def test_chat_in_a_directory_starts_a_new_session_there(oa: OpenAIServer,
                                                        tmp_path: Path) -> None:
    oa.reply(completion("Hi there."))
    place = tmp_path / "sessions"
    place.mkdir()
    term = Term(["chat", str(place)], tmp_path, chat_env(oa.base_url, tmp_path))
    term.ask("hello", r"Hi there\.")
    assert term.exit() == 0
    (made,) = place.glob("*.jsonl")
    with Session.open(made) as s:
        assert made.name == f"{s.id}.jsonl"
        assert [m.text for m in s.build_context().messages] == ["hello", "Hi there."]
