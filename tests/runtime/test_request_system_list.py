"""Several leading system messages are recorded as they were sent: a list in the request
entry, each one its own system message in ``show --context`` and in the ``--wire`` body
(checked byte for byte against what a fake provider server received). An entry written
before lists were recorded (the texts joined by a blank line) still reads, and system
messages the branch holds itself (an imported Codex session's instructions) are sent once."""

from __future__ import annotations

import json
from pathlib import Path

import contextree as ct
from contextree import Message, Session
from contextree.entries import RequestEntry
from contextree.formats import import_session
from contextree.models import AnthropicMessages, OpenAIChat, ScriptedModel
from contextree.runtime import Env, SessionTree, SystemPrompt
from fakes.anthropic_server import AnthropicServer, message, text
from fakes.openai_server import OpenAIServer, completion
from helpers import FORMATS_DATA, run

RULES = "Rules: answer in one line."
ROLE = "You are terse."


class Preamble:
    """A middleware that puts one more system message in front of the conversation."""

    def __init__(self, app: ct.runtime.App, /, text: str) -> None:
        self.app, self.text = app, text

    def __call__(self, env: Env) -> Env:
        env.put_first(Message.system(self.text))
        return self.app(env)


def _agent(path: Path, model: ct.Model) -> ct.Agent:
    # SystemPrompt puts ROLE first, then Preamble puts RULES before it: two system messages.
    return (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=ROLE)
            .use(Preamble, text=RULES).run(model))


def _request(path: Path) -> RequestEntry:
    with Session.open(path, readonly=True) as s:
        (request,) = s.find(RequestEntry)
    return request


def test_two_system_messages_are_recorded_as_a_list_and_sent_as_two(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with OpenAIServer() as server:
        server.reply(completion("One line."))
        _agent(path, OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")).start("Hi?")
    assert _request(path).system == [RULES, ROLE]
    with Session.open(path, readonly=True) as s:
        ctx = s.build_context()
    assert ctx.system_texts() == [RULES, ROLE]
    assert [(m.role, m.text) for m in ctx.request_messages()[:3]] == [
        ("system", RULES), ("system", ROLE), ("user", "Hi?")]
    # --wire prints what the adapter sent: two system messages, not one joined text.
    (sent,) = server.requests
    at = _before_reply(path)
    printed = run("show", path, "--at", at, "--context", "--wire", "openai", "--raw")
    assert printed.stdout_bytes == sent.raw + b"\n"
    assert [m["content"] for m in json.loads(sent.raw)["messages"][:2]] == [RULES, ROLE]
    # --context shows each in order, --json keeps the list, show and tree say how many.
    shown = run("show", path, "--context").stdout
    assert "(1 of 2)" in shown and "(2 of 2)" in shown
    assert shown.index(RULES) < shown.index(ROLE) < shown.index("Hi?")
    assert json.loads(run("show", path, "--context", "--json").stdout)["system"] == [RULES, ROLE]
    listed = run("show", path).stdout
    assert "system message 1 of 2:" in listed and "system message 2 of 2:" in listed
    assert "system prompt of 2 messages" in run("tree", path).stdout


def test_two_system_messages_on_anthropic_are_the_system_blocks_sent(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with AnthropicServer() as server:
        server.reply(message(text("One line.")))
        _agent(path, AnthropicMessages("claude-test", base_url=server.url, api_key="k",
                                       max_tokens=100)).start("Hi?")
    assert _request(path).system == [RULES, ROLE]
    (sent,) = server.requests
    printed = run("show", path, "--at", _before_reply(path), "--context", "--wire",
                  "anthropic", "--raw")
    assert printed.stdout_bytes == sent.raw + b"\n"
    system = json.loads(sent.raw)["system"]
    assert RULES in system[0]["text"] and ROLE in system[0]["text"]


def test_the_same_two_prompts_next_turn_record_nothing_new(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel(["one", "two"])
    _agent(path, model).start("first")
    _agent(path, model).start("second")
    with Session.open(path, readonly=True) as s:
        assert len(s.find(RequestEntry)) == 1


def test_an_entry_with_the_texts_joined_still_reads(tmp_path: Path) -> None:
    # What sessions written before lists were recorded hold: one text for both.
    path = tmp_path / "s.jsonl"
    joined = f"{RULES}\n\n{ROLE}"
    with Session.create(path) as s:
        s.append_request(joined)
        s.append_message(Message.user("Hi?"))
        s.append_message(Message.assistant("One line.", model="gpt-test", provider="openai"))
    assert _request(path).system == joined
    body = json.loads(run("show", path, "--context", "--wire", "openai").stdout)
    assert body["messages"][0] == {"role": "system", "content": joined}
    shown = run("show", path, "--context").stdout
    assert "[system] recorded in entry" in shown and "(1 of" not in shown and RULES in shown
    assert "system prompt:" in run("show", path).stdout


def test_system_messages_the_branch_holds_are_sent_once(tmp_path: Path) -> None:
    # An imported Codex session holds its instructions as system messages: a turn sends
    # them (and records them), and --wire sends them once, as the adapter did.
    path = tmp_path / "s.jsonl"
    import_session("codex", FORMATS_DATA / "real" / "codex" / "tools" / "rollout-1.jsonl",
                   path).close()
    with Session.open(path, readonly=True) as s:
        stored = [m.text for m in s.build_context().messages if m.role == "system"]
    assert len(stored) == 2
    with OpenAIServer() as server:
        server.reply(completion("Done."))
        (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=ROLE)
         .run(OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")).start("More?"))
    assert _request(path).system == stored  # what was sent before the other messages
    (sent,) = server.requests
    printed = run("show", path, "--at", _before_reply(path), "--context", "--wire", "openai",
                  "--raw")
    assert printed.stdout_bytes == sent.raw + b"\n"
    roles = [m["role"] for m in json.loads(sent.raw)["messages"]]
    assert roles.count("system") == 2
    # An entry written before lists, with the branch's texts joined, reads the same way.
    with Session.open(path) as s:
        s.append_request("\n\n".join(stored))
        ctx = s.build_context()
    assert ctx.system_texts() == []
    assert [m.role for m in ctx.request_messages()].count("system") == 2


def _before_reply(path: Path) -> str:
    """The id of the entry just before the last assistant reply on the branch."""
    with Session.open(path, readonly=True) as s:
        branch = s.branch()
    last = max(i for i, e in enumerate(branch) if isinstance(e, ct.entries.MessageEntry)
               and e.message.role == "assistant")
    return branch[last - 1].id


def test_a_secret_in_a_recorded_system_message_is_printed_only_with_raw(tmp_path: Path) -> None:
    key = "AKIA" + "Z" * 16
    path = tmp_path / "s.jsonl"
    agent = (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=f"Deploy with {key}.")
             .use(Preamble, text=RULES).run(ScriptedModel(["ok"])))
    agent.start("Go.")
    assert _request(path).system == [RULES, f"Deploy with {key}."]
    for args in (("show",), ("show", "--json"), ("show", "--context"),
                 ("show", "--context", "--json"), ("show", "--context", "--wire", "openai"),
                 ("show", "--context", "--wire", "anthropic"), ("tree",)):
        shown = run(args[0], path, *args[1:]).stdout
        assert key not in shown, args
    assert "[REDACTED:" in run("show", path, "--context").stdout
    raw = run("show", path, "--context", "--wire", "openai", "--raw").stdout
    assert key in raw
