"""ScriptedModel: replays replies, records calls, estimates usage, fails clearly when done."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from contextree import Message, ToolCall, Usage
from contextree.errors import ModelError, ModelRateLimited
from contextree.models import Model, ScriptedModel


def test_is_a_model() -> None:
    m = ScriptedModel([], name="fake")
    assert isinstance(m, Model)
    assert (m.name, m.provider) == ("fake", "scripted")


def test_replays_in_order_and_records_calls() -> None:
    call = ToolCall(id="c1", name="ls", arguments={"path": "."})
    m = ScriptedModel(["first", Message.assistant("", tool_calls=[call])])
    tools = [{"name": "ls", "parameters": {"type": "object"}}]
    a = m.complete([Message.user("hi")], tools=tools, temperature=0)
    b = m.complete([Message.user("hi"), a, Message.user("again")])

    assert a.role == "assistant" and a.content == "first"
    assert (a.model, a.provider, a.stop_reason) == ("scripted", "scripted", "end_turn")
    assert b.tool_calls == [call] and b.stop_reason == "tool_use"
    assert m.calls == [[Message.user("hi")], [Message.user("hi"), a, Message.user("again")]]
    assert m.tools == [tools, []]
    assert m.options == [{"temperature": 0}, {}]


def test_usage_is_estimated_from_the_input() -> None:
    m = ScriptedModel(["ok", "ok"])
    short = m.complete([Message.user("hi")])
    long = m.complete([Message.user("hi " * 1000)])
    assert short.usage is not None and long.usage is not None
    assert 0 < short.usage.input < long.usage.input
    assert long.usage.input >= 750  # ~ 3000 characters / 4
    assert long.usage.total == long.usage.input + long.usage.output
    assert long.usage.output >= 1


def test_given_usage_and_fields_are_kept() -> None:
    usage = Usage(input=1000, output=5, total=1005)
    reply = Message.assistant("x", usage=usage, model="big", stop_reason="length")
    out = ScriptedModel([reply]).complete([Message.user("q")])
    assert (out.usage, out.model, out.stop_reason, out.provider) == (
        usage,
        "big",
        "length",
        "scripted",
    )


def test_callable_replies_see_the_input() -> None:
    def echo(messages: Sequence[Message]) -> str:
        return f"you said {messages[-1].text}"

    m = ScriptedModel([echo, lambda msgs: Message.assistant(str(len(msgs)))])
    assert m.complete([Message.user("ping")]).text == "you said ping"
    assert m.complete([Message.user("a"), Message.user("b")]).text == "2"


def test_exceptions_are_raised() -> None:
    m = ScriptedModel([ModelRateLimited("busy", status=429, retry_after=1.0), "ok"])
    with pytest.raises(ModelError) as info:
        m.complete([Message.user("x")])
    assert info.value.retryable
    assert m.complete([Message.user("x")]).text == "ok"
    assert len(m.calls) == 2


def test_runs_out_with_a_clear_error() -> None:
    m = ScriptedModel(["one", "two"])
    m.complete([Message.user("x")])
    m.complete([Message.user("x")])
    with pytest.raises(ModelError, match=r"ran out of replies after 2 calls; give it more replies"):
        m.complete([Message.user("x")])
    m.add("three")
    assert m.complete([Message.user("x")]).text == "three"


def test_async() -> None:
    m = ScriptedModel(["a", "b"])

    async def run() -> list[str]:
        return [(await m.acomplete([Message.user("x")])).text for _ in range(2)]

    assert asyncio.run(run()) == ["a", "b"]
    with pytest.raises(ModelError, match="ran out"):
        asyncio.run(m.acomplete([]))


def test_replies_from_a_generator() -> None:
    m = ScriptedModel(f"reply {i}" for i in range(100))
    assert [m.complete([]).text for _ in range(3)] == ["reply 0", "reply 1", "reply 2"]
