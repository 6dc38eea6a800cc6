"""``ContextreeMiddleware`` fixes found by a probe, each through the real ``create_agent`` loop
(the scripted chat model of ``test_langchain.py``): ``directory=`` is always a folder of
sessions, tool results are cut to the truncation limits as the runtime's own are, and a lone
surrogate anywhere in a message never stops the run or the session file; and with
``directory=`` the sessions open at once are bounded (``max_open``), never one in use, and a
thread's session is let go at the end of each run, so another process can serve it."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from test_langchain import ScriptedChat, answer, assert_paired, mirrored, read_file, wire

from contextree import OverflowStore, Session
from contextree._truncation import is_truncated
from contextree.entries import MessageEntry
from contextree.errors import InvalidArgument, SessionLocked
from contextree.integrations import langchain as lc
from contextree.integrations.langchain import ContextreeMiddleware
from contextree.storage import key_to_session_id
from helpers import ROOT, SRC

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


# -- 4. open sessions are bounded; a thread's session is let go between runs ------------------

def open_in(where: Path) -> list[str]:
    """The files under ``where`` this process has open (read from /proc/self/fd)."""
    gc.collect()
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(where)):
            out.append(target)
    return out


class Tooling(BaseChatModel):
    """Calls ``read_file`` once a user turn, then answers (ids unique across threads and
    processes); ``pause`` seconds in each call, so that concurrent turns overlap."""

    pause: float = 0.0
    inputs: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "tooling"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Tooling:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        self.inputs.append(list(messages))
        n = f"{os.getpid()}-{next(_COUNT)}"
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"read {len(messages)}", id=f"answer-{n}")
        else:
            reply = AIMessage("", id=f"call-{n}", tool_calls=[
                {"id": f"c-{n}", "name": "read_file", "args": {"path": "x.py"}}])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        time.sleep(self.pause)
        return self._reply(messages)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.pause)
        return self._reply(messages)


_COUNT = itertools.count()


def check_thread(mw: ContextreeMiddleware, thread: str, state: list[BaseMessage]) -> None:
    """The thread's session holds its state once, on one branch, and gives it as the view."""
    assert mirrored(mw, thread) == [m.id for m in state]     # each message once
    assert len(mw.session_for(thread).tree()) == 1            # no branch
    assert wire(mw.prepare(state, thread)) == wire(state)


@pytest.mark.parametrize("hold_for", [0, None, 1.0])
def test_many_threads_beyond_max_open_keep_open_files_bounded(tmp_path: Path,
                                                              hold_for: float | None) -> None:
    """A long-lived middleware serving more threads than ``max_open``, each coming back:
    the files open stay bounded (none between runs by default), and each thread's history
    is right when it comes back (read again from its session: nothing twice, no branch).
    ``hold_for=0``: none open between runs; ``None``: kept open, at most ``max_open``."""
    where = tmp_path / "threads"
    baseline = len(os.listdir("/proc/self/fd"))
    model = Tooling()
    mw = ContextreeMiddleware(directory=where, max_open=4, hold_for=hold_for, durable=False)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    threads = [f"user-{i}" for i in range(12)]
    states: dict[str, list[BaseMessage]] = {}
    most = 0
    for turn in range(3):
        for thread in threads:
            out = agent.invoke({"messages": [HumanMessage(f"turn {turn} of {thread}")]},
                               {"configurable": {"thread_id": thread}})
            states[thread] = out["messages"]
            # the model saw the thread's whole state, its own and nothing else
            assert wire(model.inputs[-1]) == wire(states[thread][:-1])
            held = open_in(where)
            most = max(most, len(held))
            if hold_for == 0:
                assert held == []                       # let go at the end of each run
            assert len(os.listdir("/proc/self/fd")) <= baseline + 3 * 4
    assert 0 < most <= 3 * 4 if hold_for != 0 else most == 0  # a session, index, lock
    assert len(mw._threads) <= 4
    for thread in threads:
        assert len(states[thread]) == 3 * 4
        check_thread(mw, thread, states[thread])
    mw.close()
    assert open_in(where) == []


def wait_closed(where: Path, seconds: float = 10.0) -> float:
    """How long until this process has no file under ``where`` open."""
    start = time.monotonic()
    while open_in(where) and time.monotonic() - start < seconds:
        time.sleep(0.05)
    assert open_in(where) == []
    return time.monotonic() - start


def test_a_session_is_let_go_hold_for_seconds_after_a_run(tmp_path: Path) -> None:
    mw = ContextreeMiddleware(directory=tmp_path, hold_for=0.5)
    agent = create_agent(Tooling(), tools=[read_file], middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    for turn in range(3):  # a turn soon after the last one finds it open still
        state = agent.invoke({"messages": [HumanMessage(f"turn {turn}")]}, cfg)["messages"]
        assert open_in(tmp_path)
    assert 0.2 < wait_closed(tmp_path) < 5
    state = agent.invoke({"messages": [HumanMessage("later")]}, cfg)["messages"]
    check_thread(mw, "t", state)
    mw.close()
    assert open_in(tmp_path) == []


def test_a_run_that_fails_lets_its_session_go(tmp_path: Path) -> None:
    model = ScriptedChat(script=[RuntimeError("the provider is down"), answer(0)])
    mw = ContextreeMiddleware(directory=tmp_path, hold_for=0)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError, match="down"):
        agent.invoke({"messages": [HumanMessage("hi", id="h1")]}, cfg)
    assert open_in(tmp_path) == []
    state = agent.invoke({"messages": [HumanMessage("again", id="h2")]}, cfg)["messages"]
    assert [m.id for m in state[:2]] == ["h1", "h2"]
    assert open_in(tmp_path) == []
    # with a hold_for, a failed run's session is let go too, that much later
    model.script = [RuntimeError("down again")]
    held = ContextreeMiddleware(directory=tmp_path, hold_for=0.3)
    agent = create_agent(model, tools=[read_file], middleware=[held],
                         checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="again"):
        agent.invoke({"messages": [HumanMessage("hi", id="h1")]}, cfg)
    wait_closed(tmp_path)
    check_thread(mw, "t", state)
    mw.close()


SECOND_WORKER = """
import json, sys
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, message_to_dict, messages_from_dict
from langgraph.checkpoint.memory import InMemorySaver
from test_langchain import read_file
from test_langchain_probe_fixes import Tooling
from contextree.integrations.langchain import ContextreeMiddleware

where, history = sys.argv[1], messages_from_dict(json.loads(sys.stdin.read()))
mw = ContextreeMiddleware(directory=where)
agent = create_agent(Tooling(), tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
cfg = {"configurable": {"thread_id": "user-1"}}
agent.update_state(cfg, {"messages": history})  # the checkpoint the workers share
state = agent.invoke({"messages": [HumanMessage("from the second worker")]}, cfg)["messages"]
print(json.dumps([message_to_dict(m) for m in state]))
"""


def second_worker(where: Path, history: list[BaseMessage], home: Path) -> list[BaseMessage]:
    """A turn of ``user-1`` in another process (its own middleware on ``where``)."""
    here = Path(__file__).resolve().parent
    env = {"PYTHONPATH": os.pathsep.join(map(str, (SRC, ROOT / "tests", here))),
           "HOME": str(home), "CONTEXTREE_HOME": str(home / "ct"), "PATH": os.environ["PATH"]}
    out = subprocess.run([sys.executable, "-c", SECOND_WORKER, str(where)], env=env,
                         input=json.dumps([message_to_dict(m) for m in history]),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return messages_from_dict(json.loads(out.stdout.splitlines()[-1]))


def test_another_process_serves_a_thread_this_one_served(tmp_path: Path) -> None:
    """Two workers of a server, each with its middleware on one folder, take turns on a
    thread: the idle one lets its session go (``hold_for`` after its run; the other waits
    for it), and each sees what the other wrote (nothing twice)."""
    where = tmp_path / "threads"
    mw = ContextreeMiddleware(directory=where)
    agent = create_agent(Tooling(), tools=[read_file], middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "user-1"}}
    first = agent.invoke({"messages": [HumanMessage("from the first worker")]},
                         cfg)["messages"]
    second = second_worker(where, first, tmp_path / "home")   # the first one is idle
    assert [m.id for m in second[:len(first)]] == [m.id for m in first]
    assert len(second) == 2 * len(first)
    # back to the first worker (the shared checkpoint has the second one's turn)
    agent.update_state(cfg, {"messages": second[len(first):]})
    third = agent.invoke({"messages": [HumanMessage("first again")]}, cfg)["messages"]
    assert [m.id for m in third[:len(second)]] == [m.id for m in second]
    check_thread(mw, "user-1", third)
    mw.close()


HOLDER = """
import sys
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from test_langchain import read_file
from test_langchain_probe_fixes import Tooling
from contextree.integrations.langchain import ContextreeMiddleware

mw = ContextreeMiddleware(directory=sys.argv[1], hold_for=None)
agent = create_agent(Tooling(), tools=[read_file], middleware=[mw])
agent.invoke({"messages": [HumanMessage("hi", id="h1")]}, {"configurable": {"thread_id": "user-1"}})
print("served", flush=True)
sys.stdin.readline()
mw.close()
print("closed", flush=True)
"""


def test_a_thread_open_in_another_process_is_waited_for_then_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hold_for=None`` holds a thread's session between turns: another process waits for
    it up to ``LOCK_WAIT`` seconds, then gets ``SessionLocked``; once it is let go the wait
    ends."""
    where, home = tmp_path / "threads", tmp_path / "home"
    here = Path(__file__).resolve().parent
    env = {"PYTHONPATH": os.pathsep.join(map(str, (SRC, ROOT / "tests", here))),
           "HOME": str(home), "CONTEXTREE_HOME": str(home / "ct"), "PATH": os.environ["PATH"]}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(where)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "served"
        mw = ContextreeMiddleware(directory=where)
        monkeypatch.setattr(lc, "LOCK_WAIT", 0.3)
        state: list[BaseMessage] = [HumanMessage("hi", id="h1")]
        start = time.monotonic()
        with pytest.raises(SessionLocked, match="one turn of a thread at a time"):
            mw.prepare(state, "user-1")
        assert time.monotonic() - start >= 0.3
        monkeypatch.setattr(lc, "LOCK_WAIT", 60.0)
        stdin = holder.stdin
        threading.Timer(0.3, lambda: (stdin.write("go\n"), stdin.flush())).start()
        view = mw.prepare(state, "user-1")            # waits for the holder to let it go
        assert holder.stdout.readline().strip() == "closed"
        assert [m.id for m in view] == ["h1"] and mirrored(mw, "user-1")[0] == "h1"
        mw.close()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("run", ["threads", "tasks"])
def test_concurrent_turns_under_a_small_max_open_never_lose_a_session(tmp_path: Path,
                                                                      run: str) -> None:
    """Turns of many threads at once (OS threads, or asyncio tasks) with ``max_open=2``:
    a session a turn is using is never closed under it, and every history is right."""
    where = tmp_path / "threads"
    model = Tooling(pause=0.01)
    mw = ContextreeMiddleware(directory=where, max_open=2, hold_for=None, durable=False)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    threads = [f"user-{i}" for i in range(8)]
    closed_in_use: list[str] = []
    real_closed = lc._Conversation.closed

    def closed(self: Any) -> None:
        if self.uses:
            closed_in_use.append(self.sid)
        real_closed(self)

    lc._Conversation.closed = closed  # type: ignore[method-assign]
    try:
        def turns(thread: str) -> None:
            for turn in range(3):
                agent.invoke({"messages": [HumanMessage(f"turn {turn}")]},
                             {"configurable": {"thread_id": thread}})

        async def aturns(thread: str) -> None:
            for turn in range(3):
                await agent.ainvoke({"messages": [HumanMessage(f"turn {turn}")]},
                                    {"configurable": {"thread_id": thread}})

        async def all_tasks() -> None:
            await asyncio.gather(*map(aturns, threads))

        if run == "threads":
            workers = [threading.Thread(target=turns, args=(t,)) for t in threads]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        else:
            asyncio.run(all_tasks())
    finally:
        lc._Conversation.closed = real_closed  # type: ignore[method-assign]
    assert closed_in_use == []
    assert len(open_in(where)) <= 3 * 2
    for thread in threads:
        state = agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]
        assert len(state) == 3 * 4
        check_thread(mw, thread, state)
    mw.close()
