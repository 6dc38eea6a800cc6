"""``Budget``: a turn stops before the model call that would take it past its limit, says so,
and leaves nothing half-done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree.errors import InvalidArgument
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import (
    Budget,
    DefaultToolPipeline,
    Event,
    SessionTree,
    ToolResultLoop,
)
from fakes.openai_server import OpenAIServer, completion, tool_call


@ct.tool
def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text


def calling(i: int, usage: Usage) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=f"c{i}", name="echo",
                                                      arguments={"text": f"step {i}"})],
                             usage=usage)


def agent_with(model: Any, path: Path, **budget: Any) -> ct.Agent:
    return (ct.agent().use(SessionTree, path=path).use(ToolResultLoop).use(Budget, **budget)
            .use(DefaultToolPipeline, tools=[echo]).run(model))


def test_max_tokens_stops_the_turn_before_the_call_that_would_pass_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([calling(i, Usage(input=400, output=100, total=500, cost=0.01))
                           for i in range(10)])
    events: list[Any] = []
    agent = agent_with(model, path, max_tokens=1400).on(Event.BUDGET,
                                                        lambda e, p: events.append(p))
    turn = agent.start("Go step by step.")

    assert turn.stopped == "budget"
    assert any("max_tokens=1,400" in n for n in turn.notices)
    # 2 x 500 spent; the third call would send the 500 reported plus the new tool result
    assert len(model.calls) == 2
    assert turn.usage.input + turn.usage.output <= 1400
    (event,) = events
    assert (event["limit"], event["per"], event["maximum"]) == ("tokens", "turn", 1400.0)
    assert event["spent"] == 1000 and 500 < event["next_call"] < 600
    with Session.open(path, readonly=True) as s:
        msgs = s.build_context().messages
    # Nothing half-done: the last call's tool result is saved, no call is left open.
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "tool"]


def test_max_cost_uses_the_price_table_before_the_call(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.reply(*[completion(tool_calls=[tool_call(f"c{i}", "echo", {"text": "x"})],
                                  prompt_tokens=100_000, completion_tokens=1000,
                                  model="gpt-4o-mini") for i in range(5)])
        model = OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="k")
        # Each call: 100k input at $0.15/M + 1k output at $0.60/M = $0.0156.
        turn = agent_with(model, tmp_path / "s.jsonl", max_cost=0.04).start("Go.")
        assert turn.stopped == "budget" and len(server.requests) == 2
    assert turn.cost == pytest.approx(2 * 0.0156)
    assert any("max_cost=$0.04" in n for n in turn.notices)


def test_per_session_counts_what_earlier_turns_spent(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([Message.assistant("one", usage=Usage(input=50, output=10,
                                                                  cost=0.6)),
                           Message.assistant("two", usage=Usage(input=50, output=10,
                                                                  cost=0.6))])
    assert agent_with(model, path, max_cost=1.5, per="session").start("a").stopped is None
    # $0.60 spent; the next call (about 65 tokens at the $0.01/token seen) fits in $1.50
    second = agent_with(model, path, max_cost=1.5, per="session").start("b")
    assert second.stopped is None
    third = agent_with(model, path, max_cost=1.5, per="session").start("c")
    assert third.stopped == "budget" and len(model.calls) == 2
    # The refused message was taken back; a per-turn budget of the same size answers it.
    model.add(Message.assistant("three", usage=Usage(input=50, output=10, cost=0.6)))
    assert agent_with(model, path, max_cost=1.5).start("c").text == "three"


def test_a_cost_budget_on_an_unpriced_model_stops_and_says_why(tmp_path: Path) -> None:
    model = ScriptedModel([calling(i, Usage(input=10, output=10)) for i in range(5)])
    turn = agent_with(model, tmp_path / "s.jsonl", max_cost=5.0).start("go")
    assert turn.stopped == "budget" and len(model.calls) == 1
    assert any("unknown" in n and "scripted/scripted" in n for n in turn.notices)


def test_budget_options_are_checked() -> None:
    model = ScriptedModel([])
    with pytest.raises(InvalidArgument, match="max_cost"):
        ct.agent().use(Budget).run(model).start("x")  # neither limit
    with pytest.raises(InvalidArgument, match="per"):
        ct.agent().use(Budget, max_tokens=10, per="day").run(  # type: ignore[arg-type]
            model).start("x")
    with pytest.raises(InvalidArgument, match="0 or more"):
        ct.agent().use(Budget, max_cost=-1).run(model).start("x")
