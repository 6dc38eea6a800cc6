"""What a turn reports and leaves behind: its usage is its own calls' usage, a failed turn can
be retried without repeating its input, and ``start(None)`` with nothing to answer says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree.errors import ModelUnavailable
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import (
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    Event,
    SessionLog,
    SessionTree,
    ToolResultLoop,
)
from fakes.openai_server import OpenAIServer, completion


@ct.tool
def dump(n: int) -> str:
    """Print ``n`` lines.

    Args:
        n: How many.
    """
    return "\n".join(f"line {i} of a long output" for i in range(n))


def call(i: int) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=f"c{i}", name="dump",
                                                      arguments={"n": 400})],
                             usage=Usage(input=1000 + 900 * i, output=30,
                                         total=1030 + 900 * i, cost=0.001 * (i + 1)))


def test_turn_usage_is_the_sum_of_its_calls_even_when_compaction_rewrites(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    summary = Message.assistant("Summary: lines were dumped.",
                                usage=Usage(input=3000, output=40, total=3040, cost=0.05))
    model = ScriptedModel([*(call(i) for i in range(6)),
                           Message.assistant("done", usage=Usage(input=2000, output=5,
                                                                 total=2005, cost=0.002))])
    summarizer = ScriptedModel([summary] * 5)
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultCompactionPipeline, window=8000, summarizer=summarizer)
             .use(DefaultToolPipeline, tools=[dump]).run(model))
    replies: list[Message] = []
    agent.on(Event.MODEL_REPLY, lambda env, p: replies.append(p["message"]))
    compactions: list[Any] = []
    agent.on(Event.COMPACTED, lambda env, p: compactions.append(p))
    turn = agent.start("Dump lines, many times.")

    assert compactions, "the turn must have compacted"
    with Session.open(path, readonly=True) as s:
        stats = s.stats()
    calls = sum((m.usage for m in replies if m.usage), Usage())
    assert turn.usage.input == stats.file.usage.input  # the calls and the summaries
    assert turn.usage.output == stats.file.usage.output
    assert turn.usage.input > calls.input  # summaries are calls of the turn too
    assert turn.cost == pytest.approx(stats.file.usage.cost)
    # A second turn counts only its own call.
    model.add(Message.assistant("again", usage=Usage(input=7, output=3, total=10, cost=0.5)))
    again = agent.start("Once more?")
    assert (again.usage.input, again.usage.output, again.cost) == (7, 3, 0.5)


def test_turn_cost_is_unknown_when_a_call_has_no_price() -> None:
    turn = ct.agent().run(ScriptedModel(["hello"])).start("hi")
    assert turn.usage.input > 0 and turn.cost is None


@pytest.mark.parametrize("log", [SessionTree, SessionLog])
def test_a_failed_turn_retried_with_the_same_input_does_not_repeat_it(
        oa: OpenAIServer, tmp_path: Path, log: Any) -> None:
    path = tmp_path / "s.jsonl"
    down = OpenAIChat("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="k")
    for _ in range(2):
        with pytest.raises(ModelUnavailable):
            ct.agent().use(log, path=path).run(down).start("What is 2+2?")
    oa.reply(completion("4"))
    up = OpenAIChat("gpt-test", base_url=oa.base_url, api_key="k")
    turn = ct.agent().use(log, path=path).run(up).start("What is 2+2?")
    assert turn.text == "4"
    assert oa.bodies[0]["messages"] == [{"role": "user", "content": "What is 2+2?"}]
    oa.reply(completion("6"))
    ct.agent().use(log, path=path).run(up).start("And 3+3?")
    assert [m["role"] for m in oa.bodies[1]["messages"]] == ["user", "assistant", "user"]


def test_start_none_after_a_failed_turn_answers_the_waiting_message(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    down = OpenAIChat("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(ModelUnavailable):
        ct.agent().use(SessionTree, path=path).run(down).start("Hello?")
    oa.reply(completion("Hi!"))
    up = OpenAIChat("gpt-test", base_url=oa.base_url, api_key="k")
    assert ct.agent().use(SessionTree, path=path).run(up).start().text == "Hi!"
    assert oa.bodies[0]["messages"] == [{"role": "user", "content": "Hello?"}]


def test_start_none_with_nothing_to_answer_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel(["The answer.", "A second answer in a row."])
    ct.agent().use(SessionTree, path=path).run(model).start("Question?")
    events: list[Any] = []
    agent = ct.agent().use(SessionTree, path=path).run(model).on("*",
                                                                 lambda e, p: events.append(p))
    turn = agent.start()
    assert turn.stopped == "nothing_to_answer"
    assert any("Nothing to answer" in n for n in turn.notices)
    assert len(model.calls) == 1  # no second call
    assert turn.usage == Usage(cost=0.0) and turn.cost == 0.0  # no call: nothing spent
    with Session.open(path, readonly=True) as s:
        roles = [m.role for m in s.build_context().messages]
    assert roles == ["user", "assistant"]
    assert [e["event"] for e in events] == ["turn_start", "turn_end"]
    assert events[-1]["stopped"] == "nothing_to_answer"


def test_start_none_on_an_empty_session_has_nothing_to_answer(tmp_path: Path) -> None:
    turn = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(
        ScriptedModel([])).start()
    assert turn.stopped == "nothing_to_answer" and turn.reply is None
