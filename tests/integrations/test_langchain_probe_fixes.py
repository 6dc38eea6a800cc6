"""``ContextreeMiddleware`` fixes found by a probe, each through the real ``create_agent`` loop
(the scripted chat model of ``test_langchain.py``): ``directory=`` is always a folder of
sessions, tool results are cut to the truncation limits as the runtime's own are, and a lone
surrogate anywhere in a message never stops the run or the session file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from test_langchain import ScriptedChat, answer, assert_paired, mirrored

from contextree import OverflowStore, Session
from contextree._truncation import is_truncated
from contextree.entries import MessageEntry
from contextree.errors import InvalidArgument
from contextree.integrations.langchain import ContextreeMiddleware
from contextree.storage import key_to_session_id

BIG = "".join(f"line {i}: " + "x" * 300 + "\n" for i in range(1000))  # 310 KB, 1000 lines
LISTING = "report.txt\nna\udcefme.txt"  # a name os.listdir could not decode


@tool
def dump_log(path: str) -> str:
    """Return a whole log."""
    return BIG


@tool
def dump_blocks(path: str) -> list[dict[str, Any]]:
    """Return a whole log as content blocks."""
    return [{"type": "text", "text": BIG}, {"type": "text", "text": "the end"}]


@tool
def dump_command(path: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Return a whole log in a Command."""
    return Command(update={"messages": [ToolMessage(BIG, tool_call_id=tool_call_id)]})


@tool
def list_dir(path: str) -> str:
    """List a directory."""
    return LISTING


def calling(name: str, call_id: str = "c1", **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": call_id, "name": name, "args": args or {"path": "x"}}])


def stored(session: Session) -> list[Any]:
    """The contextree messages of the session's branch."""
    return [e.message for e in session.branch() if isinstance(e, MessageEntry)]


# -- 1. directory= is a folder of sessions, never one file ---------------------------------

def test_a_missing_directory_is_made_a_folder_with_a_session_per_thread(tmp_path: Path) -> None:
    where = tmp_path / "threads"
    model = ScriptedChat(script=[answer(0), answer(1)])
    mw = ContextreeMiddleware(directory=where)
    agent = create_agent(model, tools=[dump_log], middleware=[mw], checkpointer=InMemorySaver())
    for thread in ("a", "b"):
        agent.invoke({"messages": [{"role": "user", "content": f"hi {thread}"}]},
                     {"configurable": {"thread_id": thread}})
    mw.close()
    assert where.is_dir()
    assert sorted(p.name for p in where.iterdir()) == ["a.jsonl", "b.jsonl"]
    for n, thread in enumerate(("a", "b")):
        with Session.open(where / f"{thread}.jsonl", readonly=True) as session:
            assert session.id == key_to_session_id(thread)
            assert [m.text for m in stored(session)] == [f"hi {thread}", f"Step {n} is done."]


def test_a_file_given_as_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "threads"
    path.write_text("notes\n")
    with pytest.raises(InvalidArgument, match="session="):
        ContextreeMiddleware(directory=path)
    assert path.read_text() == "notes\n"  # untouched
    # the one-file form still takes a file
    model = ScriptedChat(script=[answer(0)])
    mw = ContextreeMiddleware(tmp_path / "one.jsonl")
    agent = create_agent(model, tools=[dump_log], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]},
                 {"configurable": {"thread_id": "a"}})
    mw.close()
    assert (tmp_path / "one.jsonl").is_file()


# -- 2. tool results are cut to the limits ---------------------------------------------------

@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_huge_tool_result_is_cut_with_the_whole_saved(tmp_path: Path, run: str) -> None:
    model = ScriptedChat(script=[calling("dump_log"), answer(0)])
    mw = ContextreeMiddleware(directory=tmp_path / "threads",
                              store=OverflowStore(tmp_path / "overflow"))
    agent = create_agent(model, tools=[dump_log], middleware=[mw], checkpointer=InMemorySaver())
    args = ({"messages": [{"role": "user", "content": "read the log"}]},
            {"configurable": {"thread_id": "t"}})
    out = agent.invoke(*args) if run == "invoke" else asyncio.run(agent.ainvoke(*args))
    state: list[BaseMessage] = out["messages"]
    result = state[2]
    assert isinstance(result, ToolMessage) and isinstance(result.content, str)
    assert len(result.content.encode()) <= 51 * 1024 < len(BIG)
    assert result.content.startswith("line 0: ")
    # the model got the cut result, the state holds it, and the whole is in the store
    sent = model.inputs[-1][2]
    assert isinstance(sent, ToolMessage) and sent.content == result.content
    record = result.response_metadata["contextree"]["truncated"]
    saved = Path(record["saved_path"])
    assert saved.read_text() == BIG
    assert saved.is_relative_to(tmp_path / "overflow")
    assert record["saved_path"] in result.content            # the hint tells where
    # the session keeps the cut result with its truncation record
    message = stored(mw.session_for("t"))[2]
    assert message.text == result.content and is_truncated(message.meta)
    mw.close()


def test_a_huge_result_in_text_blocks_is_cut(tmp_path: Path) -> None:
    model = ScriptedChat(script=[calling("dump_blocks"), answer(0)])
    mw = ContextreeMiddleware(store=OverflowStore(tmp_path / "overflow"))
    agent = create_agent(model, tools=[dump_blocks], middleware=[mw])
    state = agent.invoke({"messages": [{"role": "user", "content": "read"}]})["messages"]
    sent = model.inputs[-1][2]
    assert isinstance(sent, ToolMessage) and isinstance(sent.content, list)
    text = "".join(b["text"] for b in sent.content if isinstance(b, dict))
    assert text.startswith("line 0: ") and len(text.encode()) <= 51 * 1024
    assert sent.content == state[2].content
    assert Path(sent.response_metadata["contextree"]["truncated"]["saved_path"]).read_text() \
        == BIG + "\nthe end"


def test_a_huge_result_in_a_command_is_cut(tmp_path: Path) -> None:
    model = ScriptedChat(script=[calling("dump_command"), answer(0)])
    mw = ContextreeMiddleware(store=OverflowStore(tmp_path / "overflow"))
    agent = create_agent(model, tools=[dump_command], middleware=[mw])
    state = agent.invoke({"messages": [{"role": "user", "content": "read"}]})["messages"]
    result = state[2]
    assert isinstance(result, ToolMessage) and isinstance(result.content, str)
    assert len(result.content.encode()) <= 51 * 1024
    assert model.inputs[-1][2].content == result.content
    assert is_truncated(stored(mw.session_for())[2].meta)


def test_a_huge_result_in_the_given_history_is_cut_in_the_view(tmp_path: Path) -> None:
    """A result that never went through a tool call (the caller sends the history): the
    state keeps it whole, the session and the model get it cut, the same cut on every call
    and after a restart, and nothing is mirrored twice."""
    where, store = tmp_path / "threads", OverflowStore(tmp_path / "overflow")
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        calling("dump_log").model_copy(update={"id": "a1"}),
        ToolMessage(BIG, tool_call_id="c1", name="dump_log", id="t1"),
        HumanMessage("summarize it", id="h2"),
    ]
    model = ScriptedChat(script=[answer(0), answer(1)])
    mw = ContextreeMiddleware(directory=where, store=store)
    agent = create_agent(model, tools=[dump_log], middleware=[mw])
    state = agent.invoke({"messages": history})["messages"]
    assert state[2].content == BIG                          # the state is never changed
    cut = model.inputs[-1][2]
    assert isinstance(cut, ToolMessage) and isinstance(cut.content, str)
    assert cut.tool_call_id == "c1" and len(cut.content.encode()) <= 51 * 1024
    assert_paired(model.inputs[-1])
    assert is_truncated(stored(mw.session_for())[2].meta)
    again = agent.invoke({"messages": [*state, HumanMessage("more", id="h3")]})["messages"]
    assert model.inputs[-1][2].content == cut.content       # a stable prefix
    assert mirrored(mw) == [m.id for m in again]
    mw.close()
    # a restart: a new middleware finds the cut result as the state's message
    model.script = [answer(2)]
    reopened = ContextreeMiddleware(directory=where, store=store)
    agent = create_agent(model, tools=[dump_log], middleware=[reopened])
    last = agent.invoke({"messages": [*again, HumanMessage("last", id="h4")]})["messages"]
    assert model.inputs[-1][2].content == cut.content
    assert mirrored(reopened) == [m.id for m in last]
    assert len(reopened.session_for().tree()) == 1          # no branch, no copies
    reopened.close()


# -- 3. a lone surrogate in any message ------------------------------------------------------

def test_lone_surrogates_in_every_role_are_stored_and_read_back(tmp_path: Path) -> None:
    where = tmp_path / "threads"
    model = ScriptedChat(script=[
        AIMessage("Looking \udcff", tool_calls=[{"id": "c1", "name": "list_dir",
                                                 "args": {"path": "d\udcfe"}}]),
        answer(0), answer(1)])
    mw = ContextreeMiddleware(directory=where)
    agent = create_agent(model, tools=[list_dir], middleware=[mw])
    state = agent.invoke({"messages": [HumanMessage("list \udcfd", id="h1")]})["messages"]
    assert state[-1].content == "Step 0 is done."          # the run went on
    assert state[2].content == "report.txt\nna\ufffdme.txt"  # the model got valid text
    mw.close()
    path = where / f"{key_to_session_id(chr(0) + 'no thread id')}.jsonl"
    with Session.open(path, readonly=True) as session:
        messages = stored(session)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[0].text == "list \ufffd"
    assert messages[1].text == "Looking \ufffd"
    assert messages[1].tool_calls[0].arguments == {"path": "d\ufffd"}
    assert messages[2].text == "report.txt\nna\ufffdme.txt"
    # a new middleware on the same folder knows every message again (nothing twice)
    reopened = ContextreeMiddleware(directory=where)
    agent = create_agent(model, tools=[list_dir], middleware=[reopened])
    last = agent.invoke({"messages": [*state, HumanMessage("again", id="h2")]})["messages"]
    assert mirrored(reopened) == [m.id for m in last]
    assert len(reopened.session_for().tree()) == 1
    reopened.close()
