"""Streamed replies through the real ``openai`` and ``anthropic`` SDKs, against local SSE
servers: deltas as they arrive, then exactly the message ``complete()`` returns."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from contextree import Message, TextPart, ThinkingPart, ToolCall
from contextree.errors import ModelError, ModelRateLimited, ModelUnavailable
from contextree.models import (
    AnthropicMessages,
    OpenAIChat,
    ReplyStream,
    ScriptedModel,
    StreamingModel,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    stream_reply,
)
from fakes import SSE, Recorded
from fakes.anthropic_server import (
    AnthropicServer,
    message,
    redacted_thinking,
    text,
    thinking,
    tool_use,
)
from fakes.anthropic_server import error as anthropic_error
from fakes.openai_server import OpenAIServer, completion, tool_call
from fakes.openai_server import error as openai_error

WEATHER = {"name": "weather", "description": "Weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
ASK = [Message.system("Be brief."), Message.user("Weather in Paris and Rome?")]


def openai_model(server: OpenAIServer, name: str = "gpt-test") -> OpenAIChat:
    return OpenAIChat(name, base_url=server.base_url, api_key="sk-test")


def anthropic_model(server: AnthropicServer, name: str = "claude-test") -> AnthropicMessages:
    return AnthropicMessages(name, base_url=server.url, api_key="sk-test")


def streamed(stream: ReplyStream) -> tuple[list[Any], Message]:
    with stream:
        deltas = list(stream)
    return deltas, stream.message


# -- the same message as complete() --------------------------------------------------------


OPENAI_REPLIES = {
    "text": completion("Sunny in Paris, and a long sentence to split.", prompt_tokens=40,
                       cached_tokens=16, completion_tokens=11),
    "tool round": completion(tool_calls=[tool_call("call_1", "weather", {"city": "Paris"}),
                                         tool_call("call_2", "weather", {"city": "Rome"})]),
    "thinking": completion("Rome.", reasoning_content="Paris is rainy; Rome is not."),
    "text and a call": completion("Let me look.",
                                  tool_calls=[tool_call("c", "weather", {"city": "Nice"})]),
    "malformed arguments": completion(tool_calls=[tool_call("c", "weather", '{"city": ')]),
}


def check_stream_matches(stream: Any, completed: Message) -> None:
    """``stream`` read to its end gives ``completed``, and its deltas add up to it: the text,
    the thinking, the tool calls."""
    deltas, message = streamed(stream)
    assert message == completed
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == completed.text
    thought = "".join(d.text for d in deltas if isinstance(d, ThinkingDelta))
    assert thought == "".join(p.thinking for p in completed.thinking)
    assert [d.call for d in deltas if isinstance(d, ToolCallReady)] == (completed.tool_calls
                                                                        or [])


@pytest.mark.parametrize("shape", sorted(OPENAI_REPLIES))
def test_openai_stream_assembles_the_message_complete_returns(oa: OpenAIServer,
                                                              shape: str) -> None:
    model = openai_model(oa)
    oa.reply(OPENAI_REPLIES[shape], OPENAI_REPLIES[shape])
    completed = model.complete(ASK, tools=[WEATHER])
    check_stream_matches(model.stream(ASK, tools=[WEATHER]), completed)
    body = oa.bodies[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


ANTHROPIC_REPLIES = {
    "text": message(text("Sunny in Paris, and a long sentence to split."), cache_read=30,
                    cache_write=12),
    "tool round": message(tool_use("toolu_1", "weather", {"city": "Paris"}),
                          tool_use("toolu_2", "weather", {"city": "Rome"})),
    "thinking": message(thinking("Paris is rainy; Rome is not.", "sig-abc=="),
                        redacted_thinking("opaque=="), text("Rome.")),
    "thinking and a call": message(thinking("Check Nice.", "sig-n"), text("Looking."),
                                   tool_use("toolu_3", "weather", {"city": "Nice"})),
}


@pytest.mark.parametrize("shape", sorted(ANTHROPIC_REPLIES))
def test_anthropic_stream_assembles_the_message_complete_returns(an: AnthropicServer,
                                                                 shape: str) -> None:
    model = anthropic_model(an)
    an.reply(ANTHROPIC_REPLIES[shape], ANTHROPIC_REPLIES[shape])
    completed = model.complete(ASK, tools=[WEATHER])
    check_stream_matches(model.stream(ASK, tools=[WEATHER]), completed)
    assert an.bodies[-1]["stream"] is True


def test_anthropic_thinking_signatures_and_cache_usage_survive_the_stream(
        an: AnthropicServer) -> None:
    model = anthropic_model(an)
    an.reply(message(thinking("Hmm.", "sig-1"), redacted_thinking("data=="), text("Yes."),
                     input_tokens=50, output_tokens=9, cache_read=400, cache_write=100))
    _, reply = streamed(model.stream([Message.user("q")]))
    assert reply.content == [ThinkingPart(thinking="Hmm.", signature="sig-1"),
                             ThinkingPart(thinking="", signature="data==", redacted=True),
                             TextPart(text="Yes.")]
    assert reply.usage is not None
    assert (reply.usage.input, reply.usage.output, reply.usage.cache_read,
            reply.usage.cache_write) == (50, 9, 400, 100)
    assert reply.stop_reason == "end_turn"
    # The signed thinking goes back verbatim on the next call.
    an.reply(message(text("ok")))
    model.complete([Message.user("q"), reply, Message.user("and?")])
    sent = an.bodies[-1]["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"}
    assert sent[1] == {"type": "redacted_thinking", "data": "data=="}


def test_a_tool_call_is_announced_as_soon_as_its_arguments_are_complete(
        oa: OpenAIServer) -> None:
    body = completion(tool_calls=[tool_call("call_1", "weather", {"city": "Paris"}),
                                  tool_call("call_2", "weather", {"city": "Rome"})])
    events = oa.to_stream(body, Recorded("POST", "", {}, {"stream_options": {}})).events
    second = next(i for i, (_, c) in enumerate(events)
                  if c["choices"] and (c["choices"][0]["delta"].get("tool_calls") or [{}])[0]
                  .get("id") == "call_2")
    held = SSE(events, hold_after=second + 1)
    oa.reply(held)
    model = openai_model(oa)
    with model.stream(ASK, tools=[WEATHER]) as stream:
        first = next(iter(stream))  # arrives while the server holds the rest back
        assert first == ToolCallReady(ToolCall(id="call_1", name="weather",
                                               arguments={"city": "Paris"}))
        assert not held.release.is_set()
        held.release.set()
        rest = list(stream)
    assert rest == [ToolCallReady(ToolCall(id="call_2", name="weather",
                                           arguments={"city": "Rome"}))]


# -- failures ------------------------------------------------------------------------------


def test_openai_stream_cut_off_midway_is_a_retryable_error_with_the_partial_reply(
        oa: OpenAIServer) -> None:
    body = completion("The weather in Paris is sunny today.")
    sse = oa.to_stream(body, Recorded("POST", "", {}, {"stream_options": {"include_usage": 1}}))
    sse.cut_after = 4
    oa.reply(sse)
    model = openai_model(oa)
    stream = model.stream(ASK)
    got: list[Any] = []
    with pytest.raises(ModelUnavailable, match="cut off") as info:
        for delta in stream:
            got.append(delta)
    assert info.value.retryable
    assert "".join(d.text for d in got) == "The weather "[:len("".join(d.text for d in got))]
    partial = stream.partial()
    assert partial is not None and partial.text == "".join(d.text for d in got)
    assert partial.stop_reason is None
    with pytest.raises(ModelError, match="not complete"):
        _ = stream.message


def test_anthropic_stream_cut_off_midway_is_a_retryable_error(an: AnthropicServer) -> None:
    sse = an.to_stream(message(text("A long answer that will not arrive whole.")),
                       Recorded("POST", "", {}, {}))
    sse.cut_after = 5
    an.reply(sse)
    with pytest.raises(ModelUnavailable, match="cut off"):
        list(anthropic_model(an).stream(ASK))


def test_a_stream_that_ends_without_finishing_is_cut_off(oa: OpenAIServer) -> None:
    events = oa.to_stream(completion("Half"), Recorded("POST", "", {}, {})).events
    oa.reply(SSE([*events[:2], (None, "[DONE]")]))  # no finish_reason: not the whole reply
    with pytest.raises(ModelUnavailable, match="before the reply was complete"):
        list(openai_model(oa).stream(ASK))


def test_openai_429_before_the_first_byte_is_rate_limited(oa: OpenAIServer) -> None:
    oa.reply(openai_error(429, "Rate limit reached", kind="rate_limit_error",
                          headers={"retry-after": "7"}))
    with pytest.raises(ModelRateLimited) as info:
        openai_model(oa).stream(ASK)
    assert info.value.retry_after == 7.0 and info.value.status == 429


def test_anthropic_429_before_the_first_byte_is_rate_limited(an: AnthropicServer) -> None:
    an.reply(anthropic_error(429, "Number of requests exceeded", kind="rate_limit_error",
                             headers={"retry-after": "3"}))
    with pytest.raises(ModelRateLimited) as info:
        anthropic_model(an).stream(ASK)
    assert info.value.retry_after == 3.0


def test_anthropic_error_event_in_the_stream_is_mapped_by_its_type(an: AnthropicServer) -> None:
    start = an.events(message(text("x")))[0]
    an.reply(SSE([("message_start", start),
                  ("error", {"type": "error", "error": {"type": "overloaded_error",
                                                        "message": "Overloaded"}})]))
    with pytest.raises(ModelUnavailable, match="Overloaded") as info:
        list(anthropic_model(an).stream(ASK))
    assert info.value.retryable and info.value.status == 529


def test_complete_refuses_the_stream_option_and_names_stream(oa: OpenAIServer) -> None:
    with pytest.raises(ValueError, match=r"model\.stream"):
        openai_model(oa).complete(ASK, stream=True)


# -- async, fallbacks ------------------------------------------------------------------------


def test_astream_gives_the_same_message(oa: OpenAIServer, an: AnthropicServer) -> None:
    body = OPENAI_REPLIES["text and a call"]
    oa.reply(body, body)
    abody = ANTHROPIC_REPLIES["thinking and a call"]
    an.reply(abody, abody)

    async def run(model: OpenAIChat | AnthropicMessages) -> tuple[list[Any], Message]:
        stream = await model.astream(ASK, tools=[WEATHER])
        async with stream:
            deltas = [d async for d in stream]
        return deltas, stream.message

    for model in (openai_model(oa), anthropic_model(an)):
        completed = model.complete(ASK, tools=[WEATHER])
        deltas, message_ = asyncio.run(run(model))
        assert message_ == completed
        assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == completed.text


def test_a_model_without_stream_is_completed_and_replayed_as_deltas() -> None:
    class Plain:
        name, provider = "plain", "test"

        def complete(self, messages: Any, *, tools: Any = (), **options: Any) -> Message:
            return Message.assistant([ThinkingPart(thinking="t")],
                                     tool_calls=[ToolCall(id="1", name="f")])

        async def acomplete(self, messages: Any, **kw: Any) -> Message:
            return self.complete(messages)

    plain = Plain()
    assert not isinstance(plain, StreamingModel)
    deltas, reply = streamed(stream_reply(plain, ASK))  # type: ignore[arg-type]
    assert deltas == [ThinkingDelta("t"), ToolCallReady(ToolCall(id="1", name="f"))]
    assert reply == plain.complete(ASK)


def test_scripted_model_streams_in_chunks() -> None:
    model = ScriptedModel(["abcdefgh"], chunk=3)
    assert isinstance(model, StreamingModel)
    deltas, reply = streamed(model.stream(ASK))
    assert deltas == [TextDelta("abc"), TextDelta("def"), TextDelta("gh")]
    assert reply.text == "abcdefgh" and reply.usage is not None


def test_a_stream_read_to_its_end_is_freed_without_the_garbage_collector() -> None:
    # An ended stream (or one that failed) holds its connection: no reference cycle may
    # keep it alive until the collector runs.
    import gc
    import weakref

    from contextree.models._stream import DeltaAssembler, message_of_body

    def failing() -> Iterator[Any]:
        yield TextDelta("a")
        raise ValueError("garbled")

    def read(chunks: Iterator[Any]) -> weakref.ref[ReplyStream]:
        stream = ReplyStream(chunks, DeltaAssembler(Message.assistant("a")), message_of_body,
                             errors=lambda e, started: None, provider="p")
        try:
            list(stream)
        except ModelError:
            pass
        return weakref.ref(stream)

    gc.disable()
    try:
        assert read(iter([TextDelta("a")]))() is None
        assert read(failing())() is None
    finally:
        gc.enable()
