"""OpenAIChat through the real ``openai`` SDK against a local fake Chat Completions server."""

from __future__ import annotations

import asyncio
import sys

import pytest

from contextree import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from contextree.errors import ModelError
from contextree.markers import Kind
from contextree.models import Model, OpenAIChat
from fakes import Reply
from fakes.openai_server import OpenAIServer, completion, error, tool_call

WEATHER = {
    "name": "weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture
def server(oa: OpenAIServer) -> OpenAIServer:
    """The fake Chat Completions server (conftest's ``oa``)."""
    return oa


@pytest.fixture
def model(server: OpenAIServer) -> OpenAIChat:
    return OpenAIChat("gpt-test", base_url=server.base_url, api_key="sk-test")


def test_is_a_model(model: OpenAIChat) -> None:
    assert isinstance(model, Model)
    assert (model.name, model.provider) == ("gpt-test", "openai")


def test_plain_reply_with_usage(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(completion("Hello!", prompt_tokens=30, cached_tokens=10, completion_tokens=4))
    msgs = [Message.system("Be brief."), Message.user("Hi")]
    reply = model.complete(msgs, temperature=0)

    assert reply == Message.assistant(
        "Hello!",
        usage=Usage(input=20, output=4, cache_read=10, total=34),
        model="gpt-test",
        provider="openai",
        stop_reason="stop",
    )
    (req,) = server.requests
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "temperature": 0,
    }


def test_default_options_and_overrides(server: OpenAIServer) -> None:
    m = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k", temperature=0.5, seed=1)
    server.reply(completion("a"), completion("b"))
    m.complete([Message.user("x")])
    m.complete([Message.user("x")], temperature=0.1, model="gpt-other")
    first, second = server.bodies
    assert (first["temperature"], first["seed"], first["model"]) == (0.5, 1, "gpt-test")
    assert (second["temperature"], second["seed"], second["model"]) == (0.1, 1, "gpt-other")


def test_meta_and_system_messages_in_place(server: OpenAIServer, model: OpenAIChat) -> None:
    summary = Message.system("Summary of earlier turns.").marked(Kind.COMPACTION_SUMMARY)
    msgs = [
        Message.system("You are helpful."),
        summary,
        Message(role="user", content="Go on", meta={"secret": 1}),
    ]
    server.reply(completion("ok"))
    model.complete(msgs)
    assert server.bodies[0]["messages"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": "Summary of earlier turns."},
        {"role": "user", "content": "Go on"},
    ]


def _tool_round(model: OpenAIChat, server: OpenAIServer, run: object) -> None:
    """Ask, get a tool call, send the result back, get the answer (``run`` calls the model)."""
    server.reply(
        completion(
            None,
            tool_calls=[tool_call("call_1", "weather", {"city": "Paris"})],
            prompt_tokens=40,
            completion_tokens=9,
        ),
        completion("It is sunny in Paris.", prompt_tokens=60, completion_tokens=8),
    )
    assert callable(run)
    history = [Message.user("Weather in Paris?")]
    first = run(history)
    assert first.tool_calls == [ToolCall(id="call_1", name="weather", arguments={"city": "Paris"})]
    assert first.stop_reason == "tool_calls"
    assert first.content is None
    history += [first, Message.tool("sunny, 24C", tool_call_id="call_1", name="weather")]
    second = run(history)
    assert second.text == "It is sunny in Paris."
    assert second.usage == Usage(input=60, output=8, total=68)

    ask, answer = server.bodies
    assert ask["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER["parameters"],
            },
        }
    ]
    assert answer["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
    ]


def test_tool_round(server: OpenAIServer, model: OpenAIChat) -> None:
    _tool_round(model, server, lambda h: model.complete(h, tools=[WEATHER]))


def test_tool_round_async(server: OpenAIServer, model: OpenAIChat) -> None:
    _tool_round(model, server, lambda h: asyncio.run(model.acomplete(h, tools=[WEATHER])))


def test_plain_reply_async(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(completion("async hi"))
    reply = asyncio.run(model.acomplete([Message.user("hi")]))
    assert reply.text == "async hi"
    assert reply.usage == Usage(input=12, output=5, total=17)


def test_unpaired_tool_result_is_rejected_by_server(
    server: OpenAIServer, model: OpenAIChat
) -> None:
    # The fake validates pairing like the real API: a stray tool result is a 400.
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x"), Message.tool("r", tool_call_id="nope")])
    assert info.value.status == 400 and not info.value.retryable
    assert "must be a response to a preceding message" in str(info.value)


def test_invalid_tool_arguments_kept_raw(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(
        completion(None, tool_calls=[tool_call("c1", "weather", '{"city": "Par')]),
        completion("done"),
    )
    first = model.complete([Message.user("x")], tools=[WEATHER])
    assert first.tool_calls == [
        ToolCall(id="c1", name="weather", arguments={"_raw": '{"city": "Par'})
    ]
    model.complete([Message.user("x"), first, Message.tool("err", tool_call_id="c1")])
    sent = server.bodies[1]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"city": "Par'


def test_reasoning_content_read_and_optionally_sent_back(server: OpenAIServer) -> None:
    plain = OpenAIChat("m", base_url=server.base_url, api_key="k")
    echoing = OpenAIChat(
        "m", base_url=server.base_url, api_key="k", reasoning_field="reasoning_content"
    )
    server.reply(
        completion("42", reasoning_content="Let me think."),
        completion("again", reasoning="OpenRouter style."),
        completion("x"),
        completion("y"),
    )
    first = plain.complete([Message.user("q")])
    assert first.content == [ThinkingPart(thinking="Let me think."), TextPart(text="42")]
    assert first.thinking == [ThinkingPart(thinking="Let me think.")]
    second = plain.complete([Message.user("q")])
    assert second.content == [ThinkingPart(thinking="OpenRouter style."), TextPart(text="again")]

    history = [Message.user("q"), first, Message.user("more")]
    plain.complete(history)
    echoing.complete(history)
    assert server.bodies[2]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "42"}],
    }
    assert server.bodies[3]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "42"}],
        "reasoning_content": "Let me think.",
    }


def test_image_parts_as_data_urls(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(completion("a cat"))
    parts = [TextPart(text="What is this?"), ImagePart(data="iVBORw0=", mime_type="image/png")]
    model.complete([Message.user(parts)])
    assert server.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0="}},
    ]


def test_rate_limit_is_retryable_with_retry_after(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(
        error(429, "Rate limit reached", kind="rate_limit_error", headers={"retry-after": "7"})
    )
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    err = info.value
    assert (err.status, err.retryable, err.retry_after) == (429, True, 7.0)
    assert "Rate limit reached" in str(err)
    assert len(server.requests) == 1  # the SDK did not retry on its own


def test_retry_after_ms(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(error(429, "slow down", headers={"retry-after-ms": "1500"}))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert info.value.retry_after == 1.5


def test_server_error_is_retryable(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(error(500, "boom", kind="server_error"))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (500, True, None)


def test_bad_request_is_not_retryable(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(error(400, "bad things"))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable) == (400, False)


def test_errors_async(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(error(429, "later", headers={"retry-after": "7"}))
    with pytest.raises(ModelError) as info:
        asyncio.run(model.acomplete([Message.user("x")]))
    assert (info.value.status, info.value.retryable, info.value.retry_after) == (429, True, 7.0)


def test_connection_error_is_retryable() -> None:
    with OpenAIServer() as s:
        url = s.base_url
    m = OpenAIChat("m", base_url=url, api_key="k")
    with pytest.raises(ModelError) as info:
        m.complete([Message.user("x")])
    assert info.value.retryable and info.value.status is None


def test_error_object_with_status_200(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(Reply(200, {"error": {"message": "upstream overloaded", "code": 502}}))
    with pytest.raises(ModelError) as info:
        model.complete([Message.user("x")])
    assert (info.value.status, info.value.retryable) == (502, True)


def test_local_server_needs_no_key(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.reply(completion("hi"))
    OpenAIChat("llama", base_url=server.base_url).complete([Message.user("x")])
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_key_from_environment(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.reply(completion("hi"))
    OpenAIChat("m", base_url=server.base_url).complete([Message.user("x")])
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


def test_remote_without_key_is_a_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt", base_url="https://api.example.com/v1")


def test_stream_option_rejected(model: OpenAIChat) -> None:
    with pytest.raises(ValueError, match="stream"):
        model.complete([Message.user("x")], stream=True)


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"contextree\[openai\]"):
        OpenAIChat("gpt-test", api_key="k")


def test_options_unknown_to_the_sdk_go_in_the_body(server: OpenAIServer, model: OpenAIChat) -> None:
    server.reply(completion("ok"))
    model.complete([Message.user("x")], top_k=40, extra_body={"min_p": 0.1}, temperature=0.2)
    body = server.bodies[0]
    assert (body["top_k"], body["min_p"], body["temperature"]) == (40, 0.1, 0.2)


def test_given_async_client_is_used_and_configures_sync(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    given = openai.AsyncOpenAI(api_key="sk-async", base_url=server.base_url, max_retries=0)
    m = OpenAIChat("m", async_client=given)
    server.reply(completion("a"), completion("b"))
    assert asyncio.run(m.acomplete([Message.user("x")])).text == "a"
    assert m.complete([Message.user("x")]).text == "b"
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer sk-async"] * 2
    assert repr(m) == f"OpenAIChat('m', base_url='{server.base_url}/')"
