"""``ContextreeMiddleware`` keeps its mirror and its view as it goes: a turn writes only its
new messages and never rebuilds the context, and the view it hands the model is the one a
fresh build from the session gives, through tool rounds, dangling calls, removed and edited
messages, another writer and compaction. Real ``create_agent`` graphs, as in
``test_langchain.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import contextree as ct
from contextree import Session
from contextree.entries import CompactionEntry, MessageEntry
from contextree.integrations import langchain as lc
from contextree.integrations.langchain import ContextreeMiddleware
from contextree.models import ScriptedModel


class Scripted(BaseChatModel):
    """Calls ``read_file`` once, then answers, for every user message; records its inputs."""

    inputs: list[list[BaseMessage]] = []
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        self.calls += 1
        n = self.calls
        usage = {"input_tokens": 100 * len(messages), "output_tokens": 10,
                 "total_tokens": 100 * len(messages) + 10}
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"Answer {n}.", usage_metadata=usage)  # type: ignore[arg-type]
        else:
            reply = AIMessage(f"Looking {n}.", usage_metadata=usage,  # type: ignore[arg-type]
                              tool_calls=[{"id": f"call{n}", "name": "read_file",
                                           "args": {"path": f"f{n}.py"}}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}\n" + "a line of text\n" * 30


def wire(messages: list[BaseMessage]) -> list[str]:
    return [json.dumps(message_to_dict(m), sort_keys=True, default=str) for m in messages]


def fresh_view(path: Path, state: list[BaseMessage], **options: Any) -> list[str]:
    """The view built from scratch from the session file, by a middleware that never saw it."""
    with Session.open(path, readonly=True) as session:
        return wire(ContextreeMiddleware(session, **options).prepare(state))


CFG = {"configurable": {"thread_id": "t"}}


def agent_with(mw: ContextreeMiddleware, model: Scripted) -> Any:
    return create_agent(model, tools=[read_file], system_prompt="Be brief.", middleware=[mw],
                        checkpointer=InMemorySaver())


def test_steady_turns_append_only_what_is_new_and_never_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mw = ContextreeMiddleware(directory=tmp_path, window=1_000_000)
    agent = agent_with(mw, Scripted())
    for n in range(3):
        agent.invoke({"messages": [{"role": "user", "content": f"step {n}"}]}, CFG)
    builds: list[str] = []
    converted: list[BaseMessage] = []
    real_convert = lc.from_langchain
    monkeypatch.setattr(Session, "build_context",
                        lambda self, *a, **k: builds.append("build_context"))
    monkeypatch.setattr(Session, "branch", lambda self, *a, **k: builds.append("branch"))
    monkeypatch.setattr(lc, "from_langchain",
                        lambda m: converted.append(m) or real_convert(m))
    before = len(agent.get_state(CFG).values["messages"])
    for n in range(3, 6):
        agent.invoke({"messages": [{"role": "user", "content": f"step {n}"}]}, CFG)
    state = agent.get_state(CFG).values["messages"]
    assert builds == []                       # no walk of the branch, no context rebuilt
    assert [m.id for m in converted] == [m.id for m in state[before:]]  # each new one, once
    monkeypatch.undo()
    assert fresh_view(tmp_path / "t.jsonl", state, window=1_000_000) == wire(
        mw.prepare(state, "t"))
    mw.close()


def test_the_view_kept_is_the_view_built_through_every_kind_of_change(tmp_path: Path) -> None:
    model = Scripted()
    mw = ContextreeMiddleware(directory=tmp_path)
    agent = agent_with(mw, model)
    path = tmp_path / "t.jsonl"

    def check() -> list[BaseMessage]:
        state = list(agent.get_state(CFG).values["messages"])
        view = wire(mw.prepare(state, "t"))
        assert view == fresh_view(path, state)
        sent = wire(model.inputs[-1][1:])  # the last call got the same, before its answer
        assert sent == view[:len(sent)] and len(view) == len(sent) + 1
        return state

    agent.invoke({"messages": [{"role": "user", "content": "one"}]}, CFG)
    state = check()
    # A call left without its result, then a new question (the state says so itself).
    dangling = AIMessage("", id="lost", tool_calls=[{"id": "gone", "name": "read_file",
                                                     "args": {"path": "x"}}])
    agent.update_state(CFG, {"messages": [dangling]})
    agent.invoke({"messages": [HumanMessage("never mind", id="nm")]}, CFG)
    state = check()
    sent = model.inputs[-2]
    closer = next(m for m in sent if isinstance(m, ToolMessage) and m.tool_call_id == "gone")
    assert closer.status == "error" and "interrupted" in str(closer.content)
    # A tool result removed from the middle: its call is answered "interrupted" instead.
    first_result = next(m for m in state if isinstance(m, ToolMessage))
    agent.update_state(CFG, {"messages": [RemoveMessage(id=first_result.id or "")]})
    agent.invoke({"messages": [HumanMessage("again", id="again")]}, CFG)
    state = check()
    assert first_result.id not in {m.id for m in model.inputs[-1]}
    # An edited message (same id, other content).
    edited = state[0].model_copy(update={"content": "one, edited"})
    agent.update_state(CFG, {"messages": [edited]})
    agent.invoke({"messages": [HumanMessage("and?", id="and")]}, CFG)
    state = check()
    assert model.inputs[-1][1].content == "one, edited"
    with Session.open(path, readonly=True) as s:
        assert [e.message.extra["langchain_id"] for e in s.branch()
                if isinstance(e, MessageEntry)] == [m.id for m in state]
    mw.close()


def test_another_writer_is_seen_at_the_next_call(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s.jsonl")
    model = Scripted()
    mw = ContextreeMiddleware(session)
    agent = agent_with(mw, model)
    agent.invoke({"messages": [{"role": "user", "content": "one"}]}, CFG)
    session.append_custom_message("note", "The user switched to the staging database.")
    agent.invoke({"messages": [{"role": "user", "content": "two"}]}, CFG)
    texts = [m.content for m in model.inputs[-2]]
    assert "The user switched to the staging database." in texts
    state = list(agent.get_state(CFG).values["messages"])
    assert wire(mw.prepare(state)) == fresh_view(tmp_path / "s.jsonl", state)
    session.close()


def test_after_a_compaction_the_view_goes_on_from_it(tmp_path: Path) -> None:
    model = Scripted()
    summarizer = ScriptedModel(["Summary: files were read."] * 20)
    mw = ContextreeMiddleware(directory=tmp_path, window=2_500, model=summarizer)
    agent = agent_with(mw, model)
    for n in range(8):
        agent.invoke({"messages": [{"role": "user", "content": f"step {n}"}]}, CFG)
    state = list(agent.get_state(CFG).values["messages"])
    with Session.open(tmp_path / "t.jsonl", readonly=True) as s:
        assert s.find(CompactionEntry)
    assert wire(mw.prepare(state, "t")) == fresh_view(tmp_path / "t.jsonl", state,
                                                      window=2_500, model=summarizer)
    assert any((m.id or "").startswith("contextree-compaction_summary")
               for m in model.inputs[-1])
    mw.close()


def test_model_takes_a_contextree_model_as_summarizer() -> None:
    summarizer: ct.models.Model = ScriptedModel(["a summary"])
    mw = ContextreeMiddleware(window=10_000, model=summarizer)
    assert mw.summarizer is summarizer
