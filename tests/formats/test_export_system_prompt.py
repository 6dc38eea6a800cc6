"""The provider-list exports carry the system prompt the runtime recorded (the request entry
on the branch): an ``openai-chat`` or ``anthropic`` export of a session written by an agent,
sent through the provider's SDK to a fake server, gives the model that system prompt, and
imported again it is the session's first message. Secrets in it are redacted like the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, Session
from contextree.entries import RequestEntry
from contextree.models import AnthropicMessages, OpenAIChat
from contextree.runtime import DefaultToolPipeline, SessionTree, SystemPrompt, ToolResultLoop
from fakes.anthropic_server import AnthropicServer, message, text, tool_use
from fakes.openai_server import OpenAIServer, completion, tool_call
from fakes.tools import lookup
from helpers import run

PROMPT = "You are terse. Answer in one line."


def _agent(path: Path, model: ct.Model, prompt: str = PROMPT) -> ct.Agent:
    return (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=prompt)
            .use(ToolResultLoop).use(DefaultToolPipeline, tools=[lookup]).run(model))


def _openai_session(tmp_path: Path, prompt: str = PROMPT) -> Path:
    path = tmp_path / "s.jsonl"
    with OpenAIServer() as server:
        server.reply(completion(tool_calls=[tool_call("call_1", "lookup", {"city": "Oslo"})]),
                     completion("Sunny."))
        _agent(path, OpenAIChat("gpt-test", base_url=server.base_url, api_key="k"),
               prompt).start("Weather in Oslo?")
    with Session.open(path, readonly=True) as s:
        assert s.find(RequestEntry)  # the prompt is in the request entry, not a message
        assert all(m.role != "system" for m in s.build_context().messages)
    return path


def test_an_openai_chat_export_gives_the_model_the_recorded_prompt(tmp_path: Path) -> None:
    path = _openai_session(tmp_path)
    out = tmp_path / "chat.json"
    run("export", "openai-chat", path, "-o", out)
    exported = json.loads(out.read_text())
    assert exported[0] == {"role": "system", "content": PROMPT}
    assert [m["role"] for m in exported].count("system") == 1
    # Fed back to a provider: the request it receives starts with the system prompt.
    openai = pytest.importorskip("openai")
    with OpenAIServer() as server:
        server.reply(completion("Still sunny."))
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        answer = client.chat.completions.create(model="gpt-test", messages=exported)
        (received,) = server.requests
    assert answer.choices[0].message.content == "Still sunny."
    assert received.body["messages"][0] == {"role": "system", "content": PROMPT}
    assert received.body["messages"][1:] == exported[1:]
    # Imported again: the system prompt is the first message.
    run("import", "openai-chat", out, "-o", tmp_path / "back.jsonl")
    with Session.open(tmp_path / "back.jsonl", readonly=True) as back:
        first, *rest = back.build_context().messages
    assert (first.role, first.text) == ("system", PROMPT)
    assert [m.role for m in rest] == ["user", "assistant", "tool", "assistant"]


def test_an_anthropic_export_puts_the_recorded_prompt_in_system(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with AnthropicServer() as server:
        server.reply(message(tool_use("tu_1", "lookup", {"city": "Oslo"})),
                     message(text("Sunny.")))
        _agent(path, AnthropicMessages("claude-test", base_url=server.url, api_key="k",
                                       max_tokens=200)).start("Weather in Oslo?")
    out = tmp_path / "body.json"
    run("export", "anthropic", path, "-o", out)
    body = json.loads(out.read_text())
    assert body["system"] == PROMPT
    anthropic = pytest.importorskip("anthropic")
    with AnthropicServer() as server:
        server.reply(message(text("Still sunny.")))
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        answer = client.messages.create(model="claude-test", max_tokens=100, **body)
        (received,) = server.requests
    assert answer.content[0].text == "Still sunny."  # type: ignore[union-attr]
    assert received.body["system"] == PROMPT and received.body["messages"] == body["messages"]
    run("import", "anthropic", out, "-o", tmp_path / "back.jsonl")
    with Session.open(tmp_path / "back.jsonl", readonly=True) as back:
        first = back.build_context().messages[0]
    assert (first.role, first.text) == ("system", PROMPT)


def test_a_responses_export_starts_with_the_recorded_prompt(tmp_path: Path) -> None:
    path = _openai_session(tmp_path)
    out = tmp_path / "input.json"
    run("export", "openai-responses", path, "-o", out)
    items = json.loads(out.read_text())
    assert items[0]["role"] == "system" and items[0]["content"] == PROMPT
    run("import", "openai-responses", out, "-o", tmp_path / "back.jsonl")
    with Session.open(tmp_path / "back.jsonl", readonly=True) as back:
        first = back.build_context().messages[0]
    assert (first.role, first.text) == ("system", PROMPT)


def test_a_secret_in_the_recorded_prompt_is_redacted_in_the_export(tmp_path: Path) -> None:
    key = "AKIA" + "Q" * 16
    path = _openai_session(tmp_path, prompt=f"Deploy with {key}.")
    out = tmp_path / "chat.json"
    run("export", "openai-chat", path, "-o", out)
    first = json.loads(out.read_text())[0]
    assert first["role"] == "system" and key not in first["content"]
    assert "[REDACTED:" in first["content"]
    run("export", "openai-chat", path, "-o", out, "--force", "--no-redact")
    assert json.loads(out.read_text())[0]["content"] == f"Deploy with {key}."


def test_a_session_without_a_recorded_request_exports_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
        s.append_message(Message.assistant("hello"))
    out = tmp_path / "chat.json"
    run("export", "openai-chat", path, "-o", out)
    assert json.loads(out.read_text()) == [{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": "hello"}]
