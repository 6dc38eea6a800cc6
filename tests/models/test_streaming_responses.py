"""``OpenAIResponses`` streams for real: the Responses API's server-sent events through the
real ``openai`` SDK, from a local server (``fakes.native_compaction.ResponsesServer``).

Deltas arrive while the server still holds the rest of the reply back; the reply read to its
end is the message ``complete()`` returns; an error event, a failed response, a cut or a
garbled event are typed errors that keep what came before; interrupting the agent mid-reply
stores what the other adapters store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall
from contextree.errors import ModelError, ModelRateLimited, ModelReplyMalformed, ModelUnavailable
from contextree.markers import Kind
from contextree.models import (
    OpenAIResponses,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    to_openai_responses,
)
from contextree.runtime import DefaultToolPipeline, Event, SessionTree, ToolResultLoop
from fakes import SSE, Recorded
from fakes.native_compaction import ResponsesServer, function_call, reasoning, response
from helpers import ctrl_c_on_first_delta

WEATHER = {"name": "weather", "description": "Weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
ASK = [Message.system("Be brief."), Message.user("Weather in Paris and Rome?")]
NO_REQUEST = Recorded("POST", "", {}, {})


@ct.tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"{city}: sunny."


@pytest.fixture
def rs() -> Iterator[ResponsesServer]:
    with ResponsesServer() as server:
        yield server


def model_of(server: ResponsesServer) -> OpenAIResponses:
    return OpenAIResponses("gpt-5.5", base_url=server.base_url, api_key="sk-test")


def events_of(server: ResponsesServer, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return server.to_stream(body, NO_REQUEST).events


def held_at(server: ResponsesServer, body: dict[str, Any], kind: str, nth: int) -> SSE:
    """``body`` streamed, held after the ``nth`` event of type ``kind``."""
    events = events_of(server, body)
    sse = SSE(events, hold_after=index_of(events, kind, nth) + 1)
    server.reply(sse)
    return sse


def index_of(events: list[tuple[str | None, Any]], kind: str, nth: int = 0) -> int:
    """Where the ``nth`` event of type ``kind`` is."""
    return [i for i, (name, _) in enumerate(events) if name == kind][nth]


REPLIES = {
    "text": response("Sunny in Paris, and a long sentence to split.", input_tokens=40,
                     cached_tokens=16, output_tokens=11),
    "tool round": response(None, function_call("call_1", "weather", {"city": "Paris"}),
                           function_call("call_2", "weather", {"city": "Rome"})),
    "reasoning": response("Rome.", reasoning("Paris is rainy.", "Rome is not.",
                                             encrypted="enc-1")),
    "reasoning, text and a call": response("Let me look.", reasoning("Check Nice."),
                                           function_call("c", "weather", {"city": "Nice"})),
    "malformed arguments": response(None, function_call("c", "weather", '{"city": ')),
}


@pytest.mark.parametrize("shape", sorted(REPLIES))
def test_the_stream_assembles_the_message_complete_returns(rs: ResponsesServer,
                                                           shape: str) -> None:
    model = model_of(rs)
    rs.reply(REPLIES[shape], REPLIES[shape])
    completed = model.complete(ASK, tools=[WEATHER])
    assert "stream" not in rs.bodies[-1]
    with model.stream(ASK, tools=[WEATHER]) as stream:
        deltas = list(stream)
    assert rs.bodies[-1]["stream"] is True
    assert stream.message == completed
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == completed.text
    thought = "".join(d.text for d in deltas if isinstance(d, ThinkingDelta))
    assert thought == "".join(p.thinking for p in completed.thinking)
    assert [d.call for d in deltas if isinstance(d, ToolCallReady)] == (completed.tool_calls
                                                                        or [])


def test_usage_and_status_come_from_the_completed_event(rs: ResponsesServer) -> None:
    rs.reply(REPLIES["text"])
    with model_of(rs).stream(ASK) as stream:
        list(stream)
    usage = stream.message.usage
    assert usage is not None
    assert (usage.input, usage.cache_read, usage.output) == (24, 16, 11)
    assert stream.message.stop_reason == "completed" and stream.message.model == "gpt-test"


def test_deltas_arrive_before_the_server_has_finished(rs: ResponsesServer) -> None:
    body = response("The weather in Paris is sunny today, and Rome is warm.")
    events = events_of(rs, body)
    held = SSE(events, hold_after=index_of(events, "response.output_text.delta", 2))
    rs.reply(held)
    with model_of(rs).stream(ASK) as stream:
        first = next(iter(stream))  # arrives while the server holds the rest back
        assert first == TextDelta("The ")
        assert not held.release.is_set() and len(held.written) < len(events)
        partial = stream.partial()
        assert partial is not None and partial.text and partial.stop_reason is None
        held.release.set()
        rest = list(stream)
    assert "".join(d.text for d in [first, *rest]) == body["output"][0]["content"][0]["text"]


def test_a_tool_call_is_announced_when_its_item_is_done(rs: ResponsesServer) -> None:
    body = response(None, function_call("call_1", "weather", {"city": "Paris"}),
                    function_call("call_2", "weather", {"city": "Rome"}))
    events = events_of(rs, body)
    held = SSE(events, hold_after=index_of(events, "response.output_item.done") + 1)
    rs.reply(held)
    with model_of(rs).stream(ASK, tools=[WEATHER]) as stream:
        first = next(iter(stream))
        assert first == ToolCallReady(ToolCall(id="call_1", name="weather",
                                               arguments={"city": "Paris"}))
        assert not held.release.is_set()
        held.release.set()
        assert list(stream) == [ToolCallReady(ToolCall(id="call_2", name="weather",
                                                       arguments={"city": "Rome"}))]


def test_a_reasoning_item_cut_short_keeps_its_id_for_the_next_request(
        rs: ResponsesServer) -> None:
    """The Responses API needs a reasoning item's id when it is sent back: a partial reply
    keeps the id the item was announced with."""
    body = response("Rome.", reasoning("Paris is rainy today.", encrypted="enc-1"))
    held = held_at(rs, body, "response.reasoning_summary_text.delta", 1)
    with model_of(rs).stream(ASK) as stream:
        assert [next(iter(stream)), next(iter(stream))] == [ThinkingDelta("Pari"),
                                                            ThinkingDelta("s is")]
        partial = stream.partial()
        held.release.set()
    assert partial is not None and partial.text == "" and partial.stop_reason is None
    (thought,) = partial.thinking
    assert thought.thinking == "Paris is" and thought.extra["id"] == "rs_1"
    (item,) = to_openai_responses([partial])
    assert item == {"type": "reasoning", "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Paris is"}]}


def test_astream_gives_the_same_message(rs: ResponsesServer) -> None:
    body = REPLIES["reasoning, text and a call"]
    rs.reply(body, body)
    model = model_of(rs)
    completed = model.complete(ASK, tools=[WEATHER])

    async def run() -> tuple[list[Any], Message]:
        stream = await model.astream(ASK, tools=[WEATHER])
        async with stream:
            deltas = [d async for d in stream]
        return deltas, stream.message

    deltas, message = asyncio.run(run())
    assert message == completed
    assert rs.bodies[-1]["stream"] is True
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == completed.text


def test_a_server_that_leaves_the_completed_output_empty_gets_the_items_it_streamed(
        rs: ResponsesServer) -> None:
    body = REPLIES["reasoning, text and a call"]
    events = events_of(rs, body)
    last = events[-1][1]
    events[-1] = (events[-1][0], {**last, "response": {**last["response"], "output": []}})
    rs.reply(body, SSE(events))
    model = model_of(rs)
    completed = model.complete(ASK, tools=[WEATHER])
    with model.stream(ASK, tools=[WEATHER]) as stream:
        list(stream)
    assert stream.message == completed


# -- failures ------------------------------------------------------------------------------


def test_an_error_event_is_mapped_by_its_code_and_keeps_the_partial_reply(
        rs: ResponsesServer) -> None:
    events = events_of(rs, response("The weather in Paris is sunny."))
    cut = index_of(events, "response.output_text.delta", 2)
    rs.reply(SSE([*events[:cut], ("error", {"type": "error", "code": "rate_limit_exceeded",
                                            "message": "Slow down", "param": None,
                                            "sequence_number": cut})]))
    stream = model_of(rs).stream(ASK)
    got: list[Any] = []
    with pytest.raises(ModelRateLimited, match="Slow down") as info:
        for delta in stream:
            got.append(delta)
    assert info.value.status == 429 and info.value.retryable
    partial = stream.partial()
    assert partial is not None and partial.text == "".join(d.text for d in got) == "The weat"


def test_a_failed_response_is_a_model_error(rs: ResponsesServer) -> None:
    events = events_of(rs, response("Half"))
    failed = {"type": "response.failed", "sequence_number": 9, "response": {
        **events[0][1]["response"], "status": "failed",
        "error": {"code": "server_error", "message": "The model crashed"}}}
    rs.reply(SSE([*events[:3], ("response.failed", failed)]))
    with pytest.raises(ModelUnavailable, match="The model crashed") as info:
        list(model_of(rs).stream(ASK))
    assert info.value.status == 500 and info.value.retryable


def test_a_stream_cut_off_midway_is_retryable_with_the_partial_reply(
        rs: ResponsesServer) -> None:
    sse = SSE(events_of(rs, response("The weather in Paris is sunny today.")))
    sse.cut_after = index_of(sse.events, "response.output_text.delta", 3)
    rs.reply(sse)
    stream = model_of(rs).stream(ASK)
    with pytest.raises(ModelUnavailable, match="cut off") as info:
        list(stream)
    assert info.value.retryable
    partial = stream.partial()
    assert partial is not None and partial.text == "The weather "
    with pytest.raises(ModelError, match="not complete"):
        _ = stream.message


def test_a_stream_that_ends_without_completing_is_cut_off(rs: ResponsesServer) -> None:
    events = events_of(rs, response("Half"))
    rs.reply(SSE(events[:-1]))  # no response.completed: not the whole reply
    with pytest.raises(ModelUnavailable, match="before the reply was complete"):
        list(model_of(rs).stream(ASK))


@pytest.mark.parametrize(("bad", "reason"), [
    ('{"type": "response.output_text.del', "not JSON"),
    ({"type": "response.output_text.delta", "output_index": "first", "delta": "x"},
     "`output_index` is a string"),
    ({"type": "response.output_text.delta", "output_index": 0, "delta": 42},
     "`delta` is a number"),
    ({"type": "response.completed", "response": "done"}, "`response` is a string"),
])
def test_a_garbled_event_is_malformed_and_quoted(rs: ResponsesServer, bad: Any,
                                                 reason: str) -> None:
    events = events_of(rs, response("The weather in Paris is sunny."))
    good = index_of(events, "response.output_text.delta", 1)
    rs.reply(SSE([*events[:good], ("response.output_text.delta", bad)]))
    stream = model_of(rs).stream(ASK)
    with pytest.raises(ModelReplyMalformed) as info:
        list(stream)
    said = str(info.value)
    assert said.startswith(f"openai: the reply stream from {rs.base_url}") and reason in said
    partial = stream.partial()
    assert partial is not None and partial.text == "The "


# -- interruption in the agent runtime -------------------------------------------------------


def agent_of(rs: ResponsesServer, path: Path) -> ct.Agent:
    return (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
            .use(DefaultToolPipeline, tools=[weather]).run(model_of(rs)))


def test_leaving_the_stream_mid_reply_stores_the_partial_reply_and_the_next_turn_goes_on(
        rs: ResponsesServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_at(rs, response("The weather in Paris is sunny."),
                     "response.output_text.delta", 2)
    got = ""
    with agent_of(rs, path).stream("Weather?") as stream:
        for event in stream:
            if event["event"] == Event.TEXT_DELTA:
                got += event["text"]
                if len(got) >= 8:
                    break  # leaving the block interrupts the turn
    sse.release.set()
    assert stream.result.stopped == "interrupted"
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant"]
    saved = msgs[1].text
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY
    assert saved.startswith(got) and saved != "The weather in Paris is sunny."

    rs.reply(response("As I was saying: sunny."))
    assert agent_of(rs, path).start("Go on.").text == "As I was saying: sunny."
    sent = rs.bodies[-1]["input"]
    assert [(i["type"], i.get("role")) for i in sent] == [
        ("message", "user"), ("message", "assistant"), ("message", "user")]
    assert saved in str(sent[1]["content"])


def test_an_interrupted_turn_gives_its_finished_tool_call_an_interrupted_result(
        rs: ResponsesServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = response("While that runs, some words about Oslo.",
                    function_call("call_1", "weather", {"city": "Oslo"}))
    sse = held_at(rs, body, "response.output_text.delta", 1)
    with agent_of(rs, path).stream("Oslo?") as stream:
        for event in stream:
            if event["event"] == Event.TOOL_CALL:
                break
    sse.release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY
    assert msgs[1].tool_calls == [ToolCall(id="call_1", name="weather",
                                           arguments={"city": "Oslo"})]
    assert msgs[2].kind is Kind.INTERRUPTED and msgs[2].tool_call_id == "call_1"
    rs.reply(response("Let me try again later."))
    assert agent_of(rs, path).start("Never mind.").text == "Let me try again later."
    sent = rs.bodies[-1]["input"]
    outputs = [i for i in sent if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_1"]


def test_ctrl_c_in_start_stores_the_partial_reply_then_raises(rs: ResponsesServer,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_at(rs, response("A slow answer, word by word."),
                     "response.output_text.delta", 1)
    agent = agent_of(rs, path)
    ctrl_c_on_first_delta(agent)
    with pytest.raises(KeyboardInterrupt):
        agent.start("Answer slowly.")
    sse.release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY and msgs[1].text


def test_cancelling_astart_stores_the_partial_reply(rs: ResponsesServer,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_at(rs, response("An answer that never ends."),
                     "response.output_text.delta", 1)

    async def run() -> None:
        task = asyncio.create_task(agent_of(rs, path).astart("Talk."))
        while not sse.sent.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    sse.release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert msgs[-1].kind is Kind.INTERRUPTED_REPLY and msgs[-1].text
