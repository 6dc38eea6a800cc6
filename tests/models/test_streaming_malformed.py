"""Malformed replies from real SDKs over loopback: a ``data:`` line cut off after good chunks,
data that is not JSON, events of the wrong shape or missing fields. Each is a
``ModelReplyMalformed`` that quotes what was sent, from the adapters and through
``agent.stream()`` / ``start()``, and the session is left valid for the next turn."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall
from contextree._limits import ARGUMENTS_DEPTH
from contextree.errors import ModelError, ModelReplyMalformed
from contextree.markers import Kind
from contextree.models import (
    AnthropicMessages,
    OpenAIChat,
    OpenAIResponses,
    TextDelta,
    ToolCallReady,
)
from contextree.models._wire_common import RAW_ARGUMENTS_KEY
from contextree.runtime import DefaultToolPipeline, Event, Retry, SessionTree, ToolResultLoop
from fakes import SSE, Recorded, Reply
from fakes.anthropic_server import AnthropicServer, message, text, tool_use
from fakes.native_compaction import ResponsesServer
from fakes.openai_server import OpenAIServer, completion, tool_call

ASK = [Message.user("Weather in Paris?")]
CUT = '{"id": "chatcmpl-fake", "object": "chat.completion.ch'  # a data: line cut off


def openai_model(server: OpenAIServer) -> OpenAIChat:
    return OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="sk-test")


def anthropic_model(server: AnthropicServer) -> AnthropicMessages:
    return AnthropicMessages("claude-test", base_url=server.url, api_key="sk-test")


def openai_events(server: OpenAIServer, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return server.to_stream(body, Recorded("POST", "", {}, {})).events


def anthropic_events(server: AnthropicServer,
                     body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return server.to_stream(body, Recorded("POST", "", {}, {})).events


def good_then(server: OpenAIServer, bad: Any, *, good: int = 3) -> SSE:
    """The first ``good`` chunks of "The weather in Paris is sunny.", then ``bad``."""
    events = openai_events(server, completion("The weather in Paris is sunny."))
    return SSE([*events[:good], (None, bad)])


def chunk(delta: Any = None, **fields: Any) -> dict[str, Any]:
    """A chat.completion.chunk with one choice holding ``delta`` (fields override)."""
    out: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                           "created": 0, "model": "gpt-test",
                           "choices": [{"index": 0, "delta": delta or {},
                                        "finish_reason": None}]}
    out.update(fields)
    return out


# -- the OpenAI-compatible adapter ---------------------------------------------------------

OPENAI_MALFORMED: dict[str, tuple[Any, str]] = {
    "a data: line cut off": (CUT, "not JSON"),
    "data that is not JSON": ("upstream timed out", "not JSON"),
    "an array, not an event": ([1, 2], "the event is an array, not an object"),
    "choices not a list": (chunk(choices="none"), "`choices` is a string, not an array"),
    "a choice that is a string": (chunk(choices=["hi"]), "a choice is a string"),
    "delta a string": (chunk(choices=[{"index": 0, "delta": "more"}]),
                       "`delta` is a string, not an object"),
    "content a number": (chunk({"content": 42}), "`delta.content` is a number"),
    "tool call index a string": (
        chunk({"tool_calls": [{"index": "first", "id": "c", "function": {"name": "w"}}]}),
        "`tool_calls[].index` is a string"),
    "arguments an object": (
        chunk({"tool_calls": [{"index": 0, "id": "c",
                               "function": {"name": "w", "arguments": {"city": "x"}}}]}),
        "`tool_calls[].function.arguments` is an object"),
    "usage a list": (chunk(usage=[3, 4]), "`usage` is an array, not an object"),
}


@pytest.mark.parametrize("case", sorted(OPENAI_MALFORMED))
def test_openai_malformed_stream_is_a_typed_error_quoting_what_was_sent(
        oa: OpenAIServer, case: str) -> None:
    bad, reason = OPENAI_MALFORMED[case]
    oa.reply(good_then(oa, bad))
    stream = openai_model(oa).stream(ASK)
    got: list[Any] = []
    with pytest.raises(ModelReplyMalformed) as info:
        for delta in stream:
            got.append(delta)
    error = info.value
    assert error.retryable and error.code == "malformed_reply"
    assert isinstance(error, ModelError)
    said = str(error)
    assert said.startswith(f"openai: the reply stream from {oa.base_url}")
    assert reason in said
    sent = bad if isinstance(bad, str) else str(bad[0] if isinstance(bad, list) else "")
    assert sent[:20] in said  # what the provider sent is quoted
    assert "Retrying may help" in said and "OpenAI Chat Completions API" in said
    # What came before the bad event is intact.
    assert "".join(d.text for d in got) == "The weather in Paris is sunny."[:8]
    partial = stream.partial()
    assert partial is not None and partial.text == "The weather in Paris is sunny."[:8]
    with pytest.raises(ModelError, match="not complete"):
        _ = stream.message


def test_openai_async_stream_maps_a_cut_off_data_line(oa: OpenAIServer) -> None:
    oa.reply(good_then(oa, CUT))

    async def run() -> list[Any]:
        got: list[Any] = []
        stream = await openai_model(oa).astream(ASK)
        async with stream:
            async for delta in stream:
                got.append(delta)
        return got

    with pytest.raises(ModelReplyMalformed, match="not JSON"):
        asyncio.run(run())


def test_a_tool_call_cut_off_by_a_bad_event_is_left_out_of_the_partial_reply(
        oa: OpenAIServer) -> None:
    body = completion("Let me look.", tool_calls=[tool_call("c1", "weather", {"city": "Oslo"}),
                                                  tool_call("c2", "weather", {"city": "Rome"})])
    events = openai_events(oa, body)
    second = next(i for i, (_, c) in enumerate(events)
                  if c["choices"] and (c["choices"][0]["delta"].get("tool_calls") or [{}])[0]
                  .get("id") == "c2")
    oa.reply(SSE([*events[:second + 1], (None, CUT)]))
    stream = openai_model(oa).stream(ASK)
    with pytest.raises(ModelReplyMalformed):
        list(stream)
    partial = stream.partial()
    assert partial is not None and partial.text == "Let me look."
    assert partial.tool_calls == [ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})]


def test_tool_calls_without_an_index_are_read_one_after_another(oa: OpenAIServer) -> None:
    """Some compatible servers leave ``index`` out and send each call whole: not malformed."""
    events = [(None, chunk({"role": "assistant", "content": None})),
              (None, chunk({"tool_calls": [{"id": "a", "type": "function", "function": {
                  "name": "weather", "arguments": '{"city": "Oslo"}'}}]})),
              (None, chunk({"tool_calls": [{"id": "b", "type": "function", "function": {
                  "name": "weather", "arguments": '{"city": '}}]})),
              (None, chunk({"tool_calls": [{"function": {"arguments": '"Rome"}'}}]})),
              (None, chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
              (None, "[DONE]")]
    oa.reply(SSE(events))
    with openai_model(oa).stream(ASK) as stream:
        deltas = list(stream)
    calls = [ToolCall(id="a", name="weather", arguments={"city": "Oslo"}),
             ToolCall(id="b", name="weather", arguments={"city": "Rome"})]
    assert deltas == [ToolCallReady(c) for c in calls]
    assert stream.message.tool_calls == calls


@pytest.mark.parametrize("body", [[1, 2], "just text", {"choices": "none"},
                                  {"choices": [{"message": "hi"}]}])
def test_openai_complete_with_a_malformed_body_is_a_typed_error(oa: OpenAIServer,
                                                                body: Any) -> None:
    oa.reply(Reply(200, body))
    with pytest.raises(ModelReplyMalformed, match="is a body contextree cannot read") as info:
        openai_model(oa).complete(ASK)
    assert oa.base_url in str(info.value)


# -- the Anthropic adapter -----------------------------------------------------------------

ANTHROPIC_MALFORMED: dict[str, tuple[Any, str]] = {
    "a data: line cut off": ('{"type": "content_block_delta", "index": 0, "del', "not JSON"),
    "data that is not JSON": ("<html>502 Bad Gateway</html>", "not JSON"),
    "an array, not an event": ([1], "the event is an array, not an object"),
    "no type": ({"index": 0, "delta": {"type": "text_delta", "text": "x"}},
                "the event has no `type`"),
    "a delta without its index": ({"type": "content_block_delta",
                                   "delta": {"type": "text_delta", "text": "x"}},
                                  "without an `index`"),
    "a delta for a block that never started": (
        {"type": "content_block_delta", "index": 7,
         "delta": {"type": "text_delta", "text": "x"}}, "block 7, which never started"),
    "a delta without a delta": ({"type": "content_block_delta", "index": 0},
                                "without a `delta`"),
    "text a number": ({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": 5}},
                      "`delta.text` is a number"),
    "a block starting without its block": ({"type": "content_block_start", "index": 1},
                                           "a block starts without"),
}


@pytest.mark.parametrize("case", sorted(ANTHROPIC_MALFORMED))
def test_anthropic_malformed_stream_is_a_typed_error_quoting_what_was_sent(
        an: AnthropicServer, case: str) -> None:
    bad, reason = ANTHROPIC_MALFORMED[case]
    events = anthropic_events(an, message(text("The weather in Paris is sunny.")))
    name = bad.get("type") if isinstance(bad, dict) else "content_block_delta"
    an.reply(SSE([*events[:3], (name or "content_block_delta", bad)]))
    stream = anthropic_model(an).stream(ASK)
    got: list[Any] = []
    with pytest.raises(ModelReplyMalformed) as info:
        for delta in stream:
            got.append(delta)
    said = str(info.value)
    assert info.value.retryable
    assert said.startswith(f"anthropic: the reply stream from {an.url}")
    assert reason in said and "Anthropic Messages API" in said
    assert got == [TextDelta("The ")]
    partial = stream.partial()
    assert partial is not None and partial.text == "The "


def test_an_unknown_event_type_is_not_malformed(an: AnthropicServer) -> None:
    """New event types are skipped, as the API asks clients to do."""
    events = anthropic_events(an, message(text("Sunny.")))
    an.reply(SSE([events[0], ("novelty", {"type": "novelty", "x": 1}), *events[1:]]))
    with anthropic_model(an).stream(ASK) as stream:
        list(stream)
    assert stream.message.text == "Sunny."


def test_anthropic_complete_with_a_malformed_body_is_a_typed_error(
        an: AnthropicServer) -> None:
    an.reply(Reply(200, {"content": "not blocks"}))
    with pytest.raises(ModelReplyMalformed, match="is a body contextree cannot read"):
        anthropic_model(an).complete(ASK)


# -- a 200 "application/json" body that is not JSON: cut off, empty, not UTF-8 ---------------

CUT_BODY = b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": ['
UNDECODABLE = {"cut off": (CUT_BODY, "not JSON: Expecting value"), "empty": (b"", "(empty)"),
               "not UTF-8": (b'{"id": "\xff\xfe"}', "not JSON: 'utf-8' codec")}
ADAPTERS = {
    "chat": (OpenAIServer, lambda s: OpenAIChat("gpt-test", base_url=s.base_url,
                                                api_key="sk-test"), "Chat Completions"),
    "responses": (ResponsesServer, lambda s: OpenAIResponses("gpt-test", base_url=s.base_url,
                                                             api_key="sk-test"), "Responses"),
    "anthropic": (AnthropicServer, anthropic_model, "Anthropic Messages"),
}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("case", sorted(UNDECODABLE))
def test_complete_with_a_json_body_that_does_not_decode_is_a_typed_error(
        adapter: str, case: str) -> None:
    """The SDK's own JSON error never escapes: it is the same retryable error, naming the
    server and quoting the body, as a body of the wrong shape."""
    server_class, make, api = ADAPTERS[adapter]
    raw, reason = UNDECODABLE[case]
    with server_class() as server:
        server.reply(Reply(200, raw=raw), Reply(200, raw=raw))
        model = make(server)
        with pytest.raises(ModelReplyMalformed, match="is a body contextree cannot read") as info:
            model.complete(ASK)
        with pytest.raises(ModelReplyMalformed) as async_info:
            asyncio.run(model.acomplete(ASK))
    for said in (str(info.value), str(async_info.value)):
        assert reason in said and api in said and server.url in said
        assert raw[:20].decode("utf-8", "replace").replace('"', '\\"') in said
    assert info.value.retryable


def test_retry_asks_again_after_a_json_body_cut_off(oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(Reply(200, raw=CUT_BODY), completion("Sunny in Paris."))
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(Retry, attempts=3, sleep=lambda s: None).run(openai_model(oa), stream=False))
    turn = agent.start("Weather?")
    assert turn.text == "Sunny in Paris."
    assert len(oa.bodies) == 2


# -- through the agent, on a JSONL session ---------------------------------------------------


@ct.tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"{city}: sunny"


def agent_on(path: Path, model: Any, *middleware: Any) -> ct.Agent:
    agent = ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
    for layer in middleware:
        agent = agent.use(layer, sleep=lambda s: None)
    return agent.use(DefaultToolPipeline, tools=[weather]).run(model)


def verify(path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "contextree", "verify", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_agent_stream_with_a_cut_off_data_line_raises_typed_and_keeps_the_session_valid(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = completion("Let me look.", tool_calls=[tool_call("c1", "weather", {"city": "Oslo"}),
                                                  tool_call("c2", "weather", {"city": "Rome"})])
    events = openai_events(oa, body)
    second = next(i for i, (_, c) in enumerate(events)
                  if c["choices"] and (c["choices"][0]["delta"].get("tool_calls") or [{}])[0]
                  .get("id") == "c2")
    oa.reply(SSE([*events[:second + 1], (None, CUT)]))
    model = openai_model(oa)
    seen: list[Any] = []
    with pytest.raises(ModelReplyMalformed, match="not JSON"), \
            agent_on(path, model).stream("Weather in Oslo and Rome?") as stream:
        for event in stream:
            seen.append(event)
    assert seen[-1]["event"] == Event.TURN_END and seen[-1]["stopped"] == "error"
    assert "ModelReplyMalformed" in seen[-1]["error"]
    assert not [e for e in seen if e["event"] == Event.TOOL_START]  # nothing ran

    verify(path)
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY and msgs[1].text == "Let me look."
    assert [c.id for c in msgs[1].tool_calls or ()] == ["c1"]  # c2 never arrived whole
    assert msgs[2].kind is Kind.INTERRUPTED and msgs[2].tool_call_id == "c1"

    # The fake server checks every tool call has its result: the next turn goes through.
    oa.reply(completion("Oslo and Rome: both sunny."))
    turn = agent_on(path, model).start("Try again.")
    assert turn.text == "Oslo and Rome: both sunny." and turn.stopped is None
    assert [m["role"] for m in oa.bodies[-1]["messages"]] == ["user", "assistant", "tool",
                                                              "user"]
    verify(path)


def test_agent_start_with_a_wrong_shaped_anthropic_event_keeps_the_partial_reply(
        an: AnthropicServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = message(text("Checking Oslo."), tool_use("toolu_1", "weather", {"city": "Oslo"}))
    events = anthropic_events(an, body)
    stop = next(i for i, (_, e) in enumerate(events) if e["type"] == "content_block_stop"
                and e["index"] == 1)
    an.reply(SSE([*events[:stop + 1],
                  ("message_delta", {"type": "message_delta", "delta": "tool_use"})]))
    model = anthropic_model(an)
    with pytest.raises(ModelReplyMalformed, match="`delta` is a string"):
        agent_on(path, model).start("Oslo?")
    verify(path)
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY and msgs[1].text == "Checking Oslo."
    assert msgs[2].tool_call_id == "toolu_1"
    an.reply(message(text("Sunny in Oslo.")))  # the server rejects an unanswered tool_use
    assert agent_on(path, model).start("And now?").text == "Sunny in Oslo."


def test_agent_astream_with_data_that_is_not_json(oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    oa.reply(good_then(oa, "oops"))

    async def run() -> None:
        async with agent_on(path, openai_model(oa)).astream("Weather?") as stream:
            async for _ in stream:
                pass

    with pytest.raises(ModelReplyMalformed, match="'oops'"):
        asyncio.run(run())
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [(m.role, m.kind) for m in msgs] == [("user", None),
                                                ("assistant", Kind.INTERRUPTED_REPLY)]
    assert msgs[1].text == "The weather in Paris is sunny."[:8]


def test_retry_replaces_a_malformed_reply_with_the_next_one(oa: OpenAIServer,
                                                            tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    oa.reply(good_then(oa, CUT), completion("Sunny in Paris."))
    retries: list[Any] = []
    agent = agent_on(path, openai_model(oa), Retry).on(Event.RETRY,
                                                       lambda env, p: retries.append(p))
    turn = agent.start("Weather?")
    assert turn.text == "Sunny in Paris."
    assert len(retries) == 1 and "not JSON" in retries[0]["error"]
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [(m.role, m.text, m.kind) for m in msgs] == [("user", "Weather?", None),
                                                        ("assistant", "Sunny in Paris.", None)]


# -- hostile nesting: 100,000 levels, as a hostile or broken server would send them -----------

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_stream_event_nested_100k_deep_is_malformed_not_a_recursion_error(
        oa: OpenAIServer, an: AnthropicServer) -> None:
    events = openai_events(oa, completion("The weather in Paris is sunny."))
    oa.reply(SSE([*events[:3], (None, '{"id": "c", "choices": ' + DEEP + "}")]))
    with pytest.raises(ModelReplyMalformed, match="nested too deeply"):
        list(openai_model(oa).stream(ASK))
    events = anthropic_events(an, message(text("The weather in Paris is sunny.")))
    an.reply(SSE([*events[:3], ("content_block_delta", '{"type": "content_block_delta", '
                                                        '"index": 0, "delta": ' + DEEP + "}")]))
    with pytest.raises(ModelReplyMalformed, match="nested too deeply"):
        list(anthropic_model(an).stream(ASK))


def test_a_complete_body_nested_100k_deep_is_malformed(oa: OpenAIServer,
                                                       an: AnthropicServer) -> None:
    oa.reply(Reply(200, raw=('{"id": "x", "choices": ' + DEEP + "}").encode()))
    with pytest.raises(ModelReplyMalformed, match="nested too deeply") as info:
        openai_model(oa).complete(ASK)
    assert oa.base_url in str(info.value)
    an.reply(Reply(200, raw=('{"type": "message", "content": ' + DEEP + "}").encode()))
    with pytest.raises(ModelReplyMalformed, match="nested too deeply"):
        anthropic_model(an).complete(ASK)


def _deep_tool_input(server: AnthropicServer) -> SSE:
    """A weather call whose streamed input is nested 100,000 levels deep."""
    events = anthropic_events(server, message(tool_use("toolu_1", "weather", {"city": "x"})))
    out: list[tuple[str | None, Any]] = []
    for name, event in events:
        if event.get("delta", {}).get("type") == "input_json_delta":
            if any(e.get("delta", {}).get("type") == "input_json_delta" for _, e in out):
                continue
            event = {**event, "delta": {"type": "input_json_delta",
                                        "partial_json": '{"city": ' + DEEP + "}"}}
        out.append((name, event))
    return SSE(out)


def test_tool_arguments_nested_100k_deep_are_fed_back_and_the_session_stays_valid(
        oa: OpenAIServer, an: AnthropicServer, tmp_path: Path) -> None:
    """Both adapters keep such arguments as the text they are; the tool is not run, the model
    is told they must be a JSON object, and the next turn goes through."""
    path = tmp_path / "s.jsonl"
    oa.reply(completion(tool_calls=[tool_call("c1", "weather", '{"city": ' + DEEP + "}")]),
             completion("Sorry."))
    turn = agent_on(path, openai_model(oa)).start("Weather?")
    assert turn.text == "Sorry."
    told = [m for m in oa.bodies[1]["messages"] if m["role"] == "tool"]
    assert "must be a JSON object" in told[0]["content"]

    an.reply(_deep_tool_input(an), message(text("Sorry again.")))
    assert agent_on(path, anthropic_model(an)).start("And now?").text == "Sorry again."
    results = [b for m in an.bodies[1]["messages"] for b in m["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert "must be a JSON object" in str(results[-1]["content"])
    verify(path)
    with Session.open(path, readonly=True) as s:
        assert s.build_context().messages[-1].text == "Sorry again."


def test_agent_stream_with_an_event_nested_100k_deep_keeps_the_session_valid(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    events = openai_events(oa, completion("The weather in Paris is sunny."))
    oa.reply(SSE([*events[:3], (None, '{"id": "c", "choices": ' + DEEP + "}")]))
    with pytest.raises(ModelReplyMalformed, match="nested too deeply"):
        agent_on(path, openai_model(oa)).start("Weather?")
    verify(path)
    oa.reply(completion("Sunny."))
    assert agent_on(path, openai_model(oa)).start("Again?").text == "Sunny."
    verify(path)


def _nested(levels: int) -> str:
    """Arguments that nest ``levels`` deep, the arguments object counted."""
    return '{"city": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


@pytest.mark.parametrize("levels", [ARGUMENTS_DEPTH, ARGUMENTS_DEPTH + 1, 250])
def test_arguments_near_the_depth_limit_are_stored_either_way(
        oa: OpenAIServer, an: AnthropicServer, tmp_path: Path, levels: int) -> None:
    """At the limit the arguments are kept as sent; one level past it they are kept as
    text; either way the reply fits in a session line, so the turn ends and the session
    holds it (streamed from OpenAI, and whole from Anthropic, parsed by its SDK)."""
    path = tmp_path / "s.jsonl"
    oa.reply(completion(tool_calls=[tool_call("c1", "weather", _nested(levels))]),
             completion("Done."))
    assert agent_on(path, openai_model(oa)).start("Weather?").text == "Done."
    body = message(tool_use("toolu_1", "weather", {"city": "x"}))
    body["content"][0]["input"] = json.loads(_nested(levels))
    an.reply(Reply(200, raw=json.dumps(body).encode()))
    call = anthropic_model(an).complete(ASK).tool_calls[0]
    with Session.open(path) as s:
        s.append_message(Message.user("Again?"))
        s.append_message(Message.assistant("", tool_calls=[call]))  # fits in a line
    kept_as_text = levels > ARGUMENTS_DEPTH
    assert (RAW_ARGUMENTS_KEY in call.arguments) is kept_as_text
    verify(path)
