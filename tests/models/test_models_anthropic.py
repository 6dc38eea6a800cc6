"""AnthropicMessages through the real ``anthropic`` SDK against a local fake Messages server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import pytest

from contextree import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from contextree.errors import ModelError
from contextree.markers import Kind
from contextree.models import AnthropicMessages, Model
from fakes.anthropic_server import (
    AnthropicServer,
    error,
    message,
    redacted_thinking,
    text,
    thinking,
    tool_use,
)

WEATHER = {
    "name": "weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SIGNATURE = "EqQBCkYIBxgCKkC+/sig==\nopaque"


def _key(headers: dict[str, str]) -> str | None:
    """The API key a request carried (SDK versions differ: ``x-api-key`` or a bearer token)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ") or None


@pytest.fixture
def server(an: AnthropicServer) -> AnthropicServer:
    """The fake Messages server (conftest's ``an``)."""
    return an


@pytest.fixture
def model(server: AnthropicServer) -> AnthropicMessages:
    # the wire shapes without cache breakpoints (test_cache_breakpoints has those)
    return AnthropicMessages("claude-test", base_url=server.url, api_key="sk-ant-test",
                             prompt_cache=False)


def test_is_a_model(model: AnthropicMessages) -> None:
    assert isinstance(model, Model)
    assert (model.name, model.provider) == ("claude-test", "anthropic")


def test_plain_reply_with_usage(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(
        message(text("Hello!"), input_tokens=20, output_tokens=7, cache_read=100, cache_write=5)
    )
    reply = model.complete([Message.user("Hi")], temperature=0)
    assert reply == Message.assistant(
        "Hello!",
        usage=Usage(input=20, output=7, cache_read=100, cache_write=5, total=132),
        model="claude-test",
        provider="anthropic",
        stop_reason="end_turn",
    )
    (req,) = server.requests
    assert _key(req.headers) == "sk-ant-test"
    assert req.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0,
    }


def test_plain_reply_async(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(message(text("async hi")), message(text("again")))
    assert asyncio.run(model.acomplete([Message.user("hi")])).text == "async hi"
    assert asyncio.run(model.acomplete([Message.user("hi")])).text == "again"  # a new loop


def test_system_messages_concatenated_in_order(
    server: AnthropicServer, model: AnthropicMessages
) -> None:
    summary = Message.system("Earlier: the user asked about Paris.").marked(Kind.COMPACTION_SUMMARY)
    msgs = [
        Message.system("You are helpful."),
        Message.user("Hi"),
        Message.assistant("Hello"),
        summary,
        Message(role="user", content="Continue", meta={"not": "sent"}),
    ]
    server.reply(message(text("ok")))
    model.complete(msgs, max_tokens=100)
    body = server.bodies[0]
    assert body["system"] == "You are helpful.\n\nEarlier: the user asked about Paris."
    assert body["max_tokens"] == 100
    assert body["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Continue"},
    ]


def test_system_option_goes_first(server: AnthropicServer) -> None:
    m = AnthropicMessages("c", base_url=server.url, api_key="k", system="Base rules.",
                          prompt_cache=False)
    server.reply(message(text("ok")))
    m.complete([Message.system("Session notes."), Message.user("x")])
    assert server.bodies[0]["system"] == "Base rules.\n\nSession notes."


def _tool_round(server: AnthropicServer, run: Callable[[list[Message]], Message]) -> None:
    """Two parallel tool calls; both results must come back in ONE user message."""
    server.reply(
        message(
            text("Checking both."),
            tool_use("toolu_1", "weather", {"city": "Paris"}),
            tool_use("toolu_2", "weather", {"city": "Oslo"}),
        ),
        message(text("Paris is sunny; Oslo failed.")),
    )
    history = [Message.user("Weather in Paris and Oslo?")]
    first = run(history)
    assert first.content == "Checking both."
    assert first.tool_calls == [
        ToolCall(id="toolu_1", name="weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_2", name="weather", arguments={"city": "Oslo"}),
    ]
    assert first.stop_reason == "tool_use"
    history += [
        first,
        Message.tool("sunny", tool_call_id="toolu_1", name="weather"),
        Message.tool("city not found", tool_call_id="toolu_2", name="weather", is_error=True),
    ]
    assert run(history).text == "Paris is sunny; Oslo failed."

    ask, answer = server.bodies
    assert ask["tools"] == [
        {
            "name": "weather",
            "input_schema": WEATHER["parameters"],
            "description": "Current weather for a city.",
        }
    ]
    assert answer["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "city not found",
                    "is_error": True,
                },
            ],
        },
    ]


def test_tool_round(server: AnthropicServer, model: AnthropicMessages) -> None:
    _tool_round(server, lambda h: model.complete(h, tools=[WEATHER]))


def test_tool_round_async(server: AnthropicServer, model: AnthropicMessages) -> None:
    _tool_round(server, lambda h: asyncio.run(model.acomplete(h, tools=[WEATHER])))


def test_thinking_signature_sent_back_verbatim(
    server: AnthropicServer, model: AnthropicMessages
) -> None:
    server.reply(
        message(
            thinking("The user wants weather; call the tool.", SIGNATURE),
            redacted_thinking("ENCRYPTED=="),
            tool_use("toolu_9", "weather", {"city": "Rome"}),
        ),
        message(thinking("Got it.", "sig2"), text("Rome: warm.")),
    )
    thinking_opt = {"type": "enabled", "budget_tokens": 2048}
    history = [Message.user("Rome?")]
    first = model.complete(history, tools=[WEATHER], thinking=thinking_opt)
    assert first.content == [
        ThinkingPart(thinking="The user wants weather; call the tool.", signature=SIGNATURE),
        ThinkingPart(thinking="", signature="ENCRYPTED==", redacted=True),
    ]
    history += [first, Message.tool("warm", tool_call_id="toolu_9")]
    second = model.complete(history, tools=[WEATHER], thinking=thinking_opt)
    assert second.content == [
        ThinkingPart(thinking="Got it.", signature="sig2"),
        TextPart(text="Rome: warm."),
    ]
    assert second.text == "Rome: warm."

    body = server.bodies[1]
    assert body["thinking"] == thinking_opt
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants weather; call the tool.",
                "signature": SIGNATURE,
            },
            {"type": "redacted_thinking", "data": "ENCRYPTED=="},
            {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Rome"}},
        ],
    }


def test_unsigned_thinking_is_not_sent(server: AnthropicServer, model: AnthropicMessages) -> None:
    # e.g. reasoning produced by an OpenAI-compatible model earlier in the session
    other = Message.assistant([ThinkingPart(thinking="hmm"), TextPart(text="Answer.")])
    server.reply(message(text("ok")))
    model.complete([Message.user("q"), other, Message.user("next")])
    assert server.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Answer."}],
    }


def test_images_as_base64_blocks(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(message(text("a cat")))
    parts = [TextPart(text="What?"), ImagePart(data="iVBORw0=", mime_type="image/png")]
    model.complete([Message.user(parts)])
    assert server.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What?"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="},
        },
    ]


def test_rate_limit_is_retryable_with_retry_after(
    server: AnthropicServer, model: AnthropicMessages
) -> None:
    server.reply(
        error(
            429,
            "Number of requests exceeded",
            kind="rate_limit_error",
            headers={"retry-after": "7"},
        )
    )
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    err = info.value
    assert (err.status, err.retryable, err.retry_after) == (429, True, 7.0)
    assert "Number of requests exceeded" in str(err)
    assert len(server.requests) == 1


def test_overloaded_is_retryable(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(error(529, "Overloaded", kind="overloaded_error"))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable) == (529, True)


def test_server_error_is_retryable(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(error(500, "Internal server error", kind="api_error"))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable) == (500, True)


def test_bad_request_is_not_retryable(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(error(400, "messages: roles must alternate"))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable) == (400, False)
    assert "roles must alternate" in str(info.value)


def test_errors_async(server: AnthropicServer, model: AnthropicMessages) -> None:
    server.reply(error(429, "later", headers={"retry-after": "7"}))
    with pytest.raises(ModelError) as info:
        asyncio.run(model.acomplete([Message.user("x")]))
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (429, True, 7.0)


def test_missing_tool_result_rejected_by_server(
    server: AnthropicServer, model: AnthropicMessages
) -> None:
    calls = [ToolCall(id="t1", name="weather", arguments={})]
    msgs = [Message.user("x"), Message.assistant("", tool_calls=calls), Message.user("y")]
    with pytest.raises(ModelError) as info:
        model.complete(msgs)
    assert info.value.status == 400
    assert "without `tool_result`" in str(info.value)


def test_connection_error_is_retryable() -> None:
    with AnthropicServer() as s:
        url = s.url
    m = AnthropicMessages("c", base_url=url, api_key="k")
    with pytest.raises(ModelError) as info:
        m.complete([Message.user("x")])
    assert info.value.retryable and info.value.status is None


def test_local_server_needs_no_key(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    server.reply(message(text("hi")))
    AnthropicMessages("c", base_url=server.url).complete([Message.user("x")])
    assert _key(server.requests[0].headers) == "not-needed"


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"contextree\[anthropic\]"):
        AnthropicMessages("claude", api_key="k")


def test_options_unknown_to_the_sdk_go_in_the_body(
    server: AnthropicServer, model: AnthropicMessages
) -> None:
    server.reply(message(text("ok")))
    model.complete([Message.user("x")], brand_new_param={"a": 1}, top_k=5)
    body = server.bodies[0]
    assert (body["brand_new_param"], body["top_k"]) == ({"a": 1}, 5)


def test_given_client_is_used(server: AnthropicServer) -> None:
    import anthropic

    given = anthropic.Anthropic(api_key="sk-given", base_url=server.url, max_retries=0)
    m = AnthropicMessages("c", client=given)
    server.reply(message(text("a")), message(text("b")))
    assert m.complete([Message.user("x")]).text == "a"
    assert asyncio.run(m.acomplete([Message.user("x")])).text == "b"  # async made alike
    assert [_key(r.headers) for r in server.requests] == ["sk-given"] * 2
