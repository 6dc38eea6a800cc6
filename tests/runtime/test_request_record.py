"""The session records what was sent: the system prompt, the tool schemas and the request
parameters, once per change, and ``show --context --wire`` prints the very bytes a call
sent (checked against what a fake provider server received)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, Session
from contextree.entries import RequestEntry
from contextree.models import AnthropicMessages, OpenAIChat, ScriptedModel
from contextree.runtime import DefaultToolPipeline, SessionTree, SystemPrompt, ToolResultLoop
from fakes.anthropic_server import AnthropicServer, message, text, tool_use
from fakes.openai_server import OpenAIServer, completion, tool_call
from fakes.tools import lookup
from helpers import run

PROMPT = "You are terse. Answer in one line."



def _agent(path: Path, model: ct.Model, prompt: str = PROMPT) -> ct.Agent:
    return (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=prompt)
            .use(ToolResultLoop).use(DefaultToolPipeline, tools=[lookup]).run(model))


def _requests(path: Path) -> list[RequestEntry]:
    with Session.open(path, readonly=True) as s:
        return s.find(RequestEntry)


def test_an_unchanged_request_is_recorded_once_and_a_change_appends_one(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([Message.assistant(f"answer {i}") for i in range(4)])
    _agent(path, model).start("one")
    _agent(path, model).start("two")
    assert len(_requests(path)) == 1  # the same prompt, tools and parameters: nothing new
    _agent(path, model, prompt="You are verbose.").start("three")
    _agent(path, model).start("four")  # back to the first prompt: a reference to it
    first, second, third = _requests(path)
    assert second.system == "You are verbose."
    assert third.same_as == first.id and third.system is None and third.sha256 == first.sha256
    with Session.open(path, readonly=True) as s:
        ctx = s.build_context()
        assert ctx.system == PROMPT and ctx.request_id == third.id
        assert ctx.tools is not None and [t["name"] for t in ctx.tools] == ["lookup"]
        assert ctx.tools[0]["parameters"]["properties"]["city"]["type"] == "string"
        types = [e.type for e in s.branch()]
    assert types.count("request") == 3
    # It is in the tree and in show.
    assert "request: system prompt of" in run("tree", path).stdout
    shown = run("show", path).stdout
    assert PROMPT in shown and "tool lookup" in shown and "[schema elided" in shown


def _before_replies(path: Path) -> list[str]:
    """The ids of the entries just before each assistant reply on the branch."""
    with Session.open(path, readonly=True) as s:
        branch = s.branch()
    return [branch[i - 1].id for i, e in enumerate(branch)
            if e.type == "message" and e.message.role == "assistant"]  # type: ignore[union-attr]


def _openai_turn(tmp_path: Path, server: OpenAIServer) -> Path:
    path = tmp_path / "s.jsonl"
    server.reply(completion(tool_calls=[tool_call("call_1", "lookup", {"city": "Oslo"})]),
                 completion("Sunny."))
    model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k", temperature=0.25,
                       max_completion_tokens=300)
    _agent(path, model).start("Weather in Oslo?")
    return path


def test_show_wire_openai_prints_the_bytes_the_adapter_sent(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_turn(tmp_path, server)
    (request,) = _requests(path)
    assert request.params == {"temperature": 0.25, "max_completion_tokens": 300}
    assert request.stream
    before = _before_replies(path)
    # Each call, byte for byte: the context just before the reply it produced.
    assert len(before) == len(server.requests) == 2
    for at, sent in zip(before, server.requests, strict=True):
        printed = run("show", path, "--at", at, "--context", "--wire", "openai",
                      "--raw").stdout_bytes
        assert printed == sent.raw + b"\n"
    body = json.loads(printed)
    assert body["messages"][0] == {"role": "system", "content": PROMPT}
    assert body["tools"][0]["function"]["name"] == "lookup"
    # --context shows the system prompt and the tools, and --json carries them.
    shown = run("show", path, "--context").stdout
    assert PROMPT in shown and "[tools] 1 recorded" in shown
    assert "no system prompt is stored" not in shown
    data = json.loads(run("show", path, "--context", "--json").stdout)
    assert data["system"] == PROMPT and data["tools"][0]["name"] == "lookup"
    assert data["params"] == {"temperature": 0.25, "max_completion_tokens": 300}


def test_show_wire_anthropic_prints_the_bytes_the_adapter_sent(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with AnthropicServer() as server:
        server.reply(message(tool_use("tu_1", "lookup", {"city": "Oslo"})),
                     message(text("Sunny.")))
        model = AnthropicMessages("claude-test", base_url=server.url, api_key="k",
                                  max_tokens=500, temperature=0.5)
        _agent(path, model).start("Weather in Oslo?")
    (request,) = _requests(path)
    assert request.params == {"max_tokens": 500, "temperature": 0.5}
    for at, sent in zip(_before_replies(path), server.requests, strict=True):
        printed = run("show", path, "--at", at, "--context", "--wire", "anthropic",
                      "--raw").stdout_bytes
        assert printed == sent.raw + b"\n"
    assert json.loads(printed)["system"][0]["text"] == PROMPT  # a block, with its cache breakpoint
    # Anthropic's order: the tools come before the system prompt in --context.
    shown = run("show", path, "--context").stdout
    assert shown.index("[tools]") < shown.index("[system]") < shown.index("Weather in Oslo?")


def test_show_wire_responses_builds_the_responses_body(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_turn(tmp_path, server)
    body = json.loads(run("show", path, "--context", "--wire", "responses").stdout)
    assert body["input"][0] == {"type": "message", "role": "system", "content": PROMPT}
    assert body["tools"][0] == {"type": "function", "name": "lookup",
                                "description": "The weather in a city.",
                                "parameters": body["tools"][0]["parameters"]}
    assert any(item.get("type") == "function_call_output" for item in body["input"])


@pytest.mark.parametrize("args, needle", [
    (("--wire", "openai"), "add --context"),
    (("--context", "--wire", "gemini"), "openai, anthropic, responses"),
])
def test_show_wire_bad_input_says_what_to_do(tmp_path: Path, args: tuple[str, ...],
                                             needle: str) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
    result = run("show", path, *args, code=2)
    assert needle in result.stderr


def test_a_session_without_a_recorded_request_still_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
    assert "no system prompt is stored" in run("show", path, "--context").stdout
