"""``agent.stream()`` / ``astream()`` with the real SDKs over loopback: every event, in order,
the same for ``on()`` handlers and ``start()``; interruption that leaves a valid session."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session
from contextree.markers import Kind
from contextree.models import AnthropicMessages, OpenAIChat
from contextree.runtime import (
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    Event,
    SessionTree,
    ToolResultLoop,
)
from fakes import SSE, Recorded
from fakes.anthropic_server import AnthropicServer, message, text, tool_use
from fakes.models import HeldModel
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import ctrl_c_on_first_delta


@ct.tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"{city}: sunny, 21 C. " + "Details follow. " * 40


def openai_agent(server: OpenAIServer, path: Path, **compaction: Any) -> ct.Agent:
    model = OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="sk-test")
    agent = ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
    if compaction:
        agent = agent.use(DefaultCompactionPipeline, **compaction)
    return agent.use(DefaultToolPipeline, tools=[weather]).run(model)


def names(events: list[Any]) -> list[str]:
    return [str(e["event"]) for e in events]


# -- every event, in order -------------------------------------------------------------------


def test_stream_gives_every_event_of_a_tool_round_with_compaction(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:  # earlier turns, for the compaction to fold
        for i in range(4):
            s.append_message(Message.user(f"Earlier question {i}: " + "words " * 60))
            s.append_message(Message.assistant(f"Earlier answer {i}: " + "words " * 60))
    oa.reply(completion("Let me check.", tool_calls=[tool_call("c1", "weather",
                                                               {"city": "Paris"})],
                        prompt_tokens=1200, completion_tokens=20, model="gpt-4o-mini"),
             completion("Paris is sunny and warm today.", prompt_tokens=1400,
                        completion_tokens=12, cached_tokens=256, model="gpt-4o-mini"))
    agent = openai_agent(oa, path, window=2500, compact_at=0.5, compact_to=0.3)
    stored_at_commit: list[bool] = []
    events: list[Any] = []
    with agent.stream("Weather in Paris?") as stream:
        for event in stream:
            events.append(event)
            if event["event"] == Event.COMMITTED and event["entry_id"] is not None:
                stored_at_commit.append(event["entry_id"].encode() in path.read_bytes())
    result = stream.result

    seq = names(events)
    assert seq[0] == "turn_start" and seq[-1] == "turn_end"
    assert events[0]["input"] == Message.user("Weather in Paris?")
    # The user message is committed first, then the first call streams.
    assert seq[1:3] == ["committed", "model_start"]
    first = seq.index("model_start")
    assert events[first]["tokens"] > 0 and events[first]["model"] == "gpt-4o-mini"
    call_at = seq.index("tool_call")
    assert seq.index("text_delta") < call_at < seq.index("model_reply") < seq.index("tool_start")
    assert events[call_at]["call"].arguments == {"city": "Paris"}
    assert seq.index("tool_start") < seq.index("tool_end")
    assert seq.index("tool_end") < seq.index("compaction_start") < seq.index("compacted")
    assert seq.index("compacted") < len(seq) - 1 - seq[::-1].index("model_start")
    text = "".join(e["text"] for e in events if e["event"] == Event.TEXT_DELTA)
    assert text == "Let me check.Paris is sunny and warm today."
    assert stored_at_commit and all(stored_at_commit)  # written before it was announced
    with Session.open(path, readonly=True) as s:
        ids = {e.id for e in s.entries()}
    committed = [e["entry_id"] for e in events if e["event"] == Event.COMMITTED]
    assert set(committed) <= ids and len(committed) == 4  # user, reply, tool, reply
    compacted = events[seq.index("compacted")]
    assert compacted["entry_id"] in ids and compacted["tokens_after"] < compacted["tokens_before"]
    end = events[-1]
    replies = [e["message"] for e in events if e["event"] == Event.MODEL_REPLY]
    assert end["usage"].input == sum(m.usage.input for m in replies)
    assert end["usage"].output == sum(m.usage.output for m in replies)
    assert end["cost"] == pytest.approx(sum(m.usage.cost for m in replies)) and end["cost"] > 0
    assert (end["stopped"], end["error"]) == (None, None)
    assert result.text == "Paris is sunny and warm today."
    assert result.cost == end["cost"] and result.usage == end["usage"]


def test_on_handlers_and_start_see_the_same_events_as_the_stream(
        oa: OpenAIServer, tmp_path: Path) -> None:
    script = [completion(tool_calls=[tool_call("c1", "weather", {"city": "Rome"})]),
              completion("Rome is sunny.")]
    oa.reply(*script)
    watched = openai_agent(oa, tmp_path / "a.jsonl")
    handled: list[Any] = []
    watched.on("*", lambda env, p: handled.append(p))
    with watched.stream("Rome?") as stream:
        streamed = list(stream)
    assert names(handled) == names(streamed)
    assert handled == streamed

    oa.reply(*script)
    plain = openai_agent(oa, tmp_path / "b.jsonl")
    started: list[Any] = []
    plain.on("*", lambda env, p: started.append(p))
    plain.start("Rome?")
    assert names(started) == names(streamed)


def test_astream_gives_the_same_events(oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion("Hello there, async."), completion("Hello there, async."))
    agent = openai_agent(oa, tmp_path / "a.jsonl")
    sync = names(list(agent.stream("hi")))

    async def run() -> list[Any]:
        async with openai_agent(oa, tmp_path / "b.jsonl").astream("hi") as events:
            return [e async for e in events]

    assert names(asyncio.run(run())) == sync


def test_stream_false_completes_the_reply_and_gives_the_same_events(
        oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion("One piece."))
    model = OpenAIChat("gpt-test", base_url=oa.base_url, api_key="k")
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(model, stream=False)
    events = list(agent.stream("hi"))
    assert "stream" not in oa.bodies[0]
    assert [e["text"] for e in events if e["event"] == Event.TEXT_DELTA] == ["One piece."]


def test_a_failing_turn_ends_with_turn_end_then_raises(oa: OpenAIServer, tmp_path: Path) -> None:
    from fakes.openai_server import error

    oa.reply(error(400, "bad request"))
    events: list[Any] = []
    with pytest.raises(ct.errors.ModelRequestRejected), openai_agent(oa, tmp_path / "s.jsonl").stream(
            "hi") as stream:
        for event in stream:
            events.append(event)
    assert events[-1]["event"] == Event.TURN_END and events[-1]["stopped"] == "error"
    assert "bad request" in events[-1]["error"]


# -- interruption ----------------------------------------------------------------------------


def held_stream(server: OpenAIServer | AnthropicServer, body: dict[str, Any],
                after: int) -> SSE:
    sse = server.to_stream(body, Recorded("POST", "", {}, {"stream_options":
                                                          {"include_usage": True}}))
    sse.hold_after = after
    server.reply(sse)
    return sse


def test_close_mid_reply_saves_the_partial_reply_and_the_next_start_continues(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_stream(oa, completion("The weather in Paris is sunny."), after=4)
    agent = openai_agent(oa, path)
    got = ""
    with agent.stream("Weather?") as stream:
        for event in stream:
            if event["event"] == Event.TEXT_DELTA:
                got += event["text"]
                if len(got) >= 8:
                    break  # leaving the block interrupts the turn
    sse.release.set()
    assert stream.result.stopped == "interrupted"
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
        assert s.health().quarantined_lines == 0
    assert [m.role for m in msgs] == ["user", "assistant"]
    verify = subprocess.run([sys.executable, "-m", "contextree", "verify", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    saved = msgs[1].text  # what had arrived: at least what was read, never more than sent
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY
    assert saved.startswith(got) and "The weather in Paris is sunny.".startswith(saved)
    assert saved != "The weather in Paris is sunny."

    oa.reply(completion("As I was saying: sunny."))
    turn = openai_agent(oa, path).start("Go on.")
    assert turn.text == "As I was saying: sunny." and turn.stopped is None
    sent = oa.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == saved


def test_interruption_gives_open_tool_calls_an_interrupted_result(
        an: AnthropicServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = message(tool_use("toolu_1", "weather", {"city": "Oslo"}),
                   text("While that runs, some words about Oslo."))
    events = an.events(body)
    stop_of_call = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    sse = held_stream(an, body, after=stop_of_call + 3)
    model = AnthropicMessages("claude-test", base_url=an.url, api_key="k")
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[weather]).run(model))
    with agent.stream("Oslo?") as stream:
        for event in stream:
            if event["event"] == Event.TOOL_CALL:
                break
    sse.release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY
    assert msgs[1].tool_calls is not None and msgs[1].tool_calls[0].id == "toolu_1"
    assert msgs[2].kind is Kind.INTERRUPTED and msgs[2].tool_call_id == "toolu_1"
    # The fake server checks that every tool_use is answered: the session continues.
    an.reply(message(text("Let me try again later.")))
    agent2 = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
              .use(DefaultToolPipeline, tools=[weather]).run(model))
    assert agent2.start("Never mind.").text == "Let me try again later."


def test_ctrl_c_in_start_saves_the_partial_reply_then_raises(oa: OpenAIServer,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_stream(oa, completion("A slow answer, word by word."), after=4)
    agent = openai_agent(oa, path)
    ctrl_c_on_first_delta(agent)
    with pytest.raises(KeyboardInterrupt):
        agent.start("Answer slowly.")
    sse.release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].kind is Kind.INTERRUPTED_REPLY and msgs[1].text


def test_cancelling_the_task_of_astart_saves_the_partial_reply(oa: OpenAIServer,
                                                                tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sse = held_stream(oa, completion("An answer that never ends."), after=3)

    async def run() -> None:
        task = asyncio.create_task(openai_agent(oa, path).astart("Talk."))
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


def test_interrupting_a_running_tool_does_not_wait_for_it(tmp_path: Path) -> None:
    release = threading.Event()
    started = threading.Event()

    @ct.tool
    def slow() -> str:
        """Takes long."""
        started.set()
        release.wait(30)
        return "finally"

    call = ct.ToolCall(id="c1", name="slow", arguments={})
    model = ct.models.ScriptedModel([Message.assistant("", tool_calls=[call])])
    path = tmp_path / "s.jsonl"
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[slow]).run(model))
    events: list[Any] = []
    with agent.stream("go") as stream:
        for event in stream:
            events.append(event)
            if event["event"] == Event.TOOL_START:
                assert started.wait(10)
                break
    assert not release.is_set()  # the tool still runs; the turn did not wait
    release.set()
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    assert msgs[-1].kind is Kind.INTERRUPTED and msgs[-1].tool_call_id == "c1"
    assert stream.result.stopped == "interrupted"


def test_iterating_after_an_interruption_gives_the_turns_last_events(tmp_path: Path) -> None:
    model = HeldModel(["Some words that arrive slowly."], chunk=3, hold_after=2)
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(model)
    stream = agent.stream("hi")
    for event in stream:
        if event["event"] == Event.TEXT_DELTA:
            break
    threading.Timer(0.2, model.release.set).start()
    stream.close()
    assert stream.result.stopped == "interrupted"
    assert list(stream) == []  # close() drops the rest
