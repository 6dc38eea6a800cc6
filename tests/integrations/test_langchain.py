"""contextree's AgentMiddleware for LangChain 1.x, inside real ``create_agent`` graphs.

The chat model is scripted (a small ``BaseChatModel`` that supports ``bind_tools`` and
records what it was sent); the agent loop, the tool node, the checkpointer and the other
middleware are LangChain's and LangGraph's own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextree.entries import CompactionEntry, MessageEntry
from contextree.errors import InvalidArgument
from contextree.integrations.langchain import LC_KEY, ContextreeMiddleware
from helpers import SRC


class ScriptedChat(BaseChatModel):
    """Replies from a script (AIMessages, or exceptions to raise); records its inputs."""

    script: list[Any] = []
    inputs: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        reply = self.script.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}\n" + "line of text\n" * 60


def thinking_call(n: int) -> AIMessage:
    return AIMessage(
        content=[{"type": "thinking", "thinking": f"I need files for step {n}",
                  "signature": f"EqQBCkYIARgCKkD{n}+/=="},
                 {"type": "text", "text": f"Reading for step {n}."}],
        tool_calls=[{"id": f"call_{n}a", "name": "read_file", "args": {"path": f"a{n}.py"}},
                    {"id": f"call_{n}b", "name": "read_file", "args": {"path": f"b{n}.py"}}],
        usage_metadata={"input_tokens": 0, "output_tokens": 20, "total_tokens": 20},
    )


def answer(n: int) -> AIMessage:
    return AIMessage(content=f"Step {n} is done.")


def wire(messages: list[BaseMessage]) -> list[str]:
    """What a provider adapter would serialize: the exact message data, in order."""
    return [json.dumps(message_to_dict(m), sort_keys=True, default=str) for m in messages]


def assert_paired(messages: list[BaseMessage]) -> None:
    pending: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"orphan tool result {m.tool_call_id}"
            pending.discard(m.tool_call_id)
            continue
        assert not pending, f"calls without results before {type(m).__name__}: {pending}"
        if isinstance(m, AIMessage):
            pending = {c["id"] for c in m.tool_calls if c["id"]}
    assert not pending


def mirrored(mw: ContextreeMiddleware, thread: str | None = None) -> list[str]:
    """The LangChain ids of the messages in the session (every branch), in append order."""
    out = []
    for e in mw.session_for(thread).entries():
        if isinstance(e, MessageEntry) and LC_KEY in e.message.extra:
            out.append(e.message.extra["langchain_id"])
    return out


def test_turns_with_tools_mirror_once_and_keep_thinking() -> None:
    model = ScriptedChat(script=[thinking_call(0), answer(0), thinking_call(1), answer(1)])
    mw = ContextreeMiddleware()
    agent = create_agent(model, tools=[read_file], system_prompt="Be brief.", middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": "step 0"}]}, cfg)
    state = agent.invoke({"messages": [{"role": "user", "content": "step 1"}]}, cfg)["messages"]
    assert len(state) == 10
    ids = mirrored(mw, "t1")
    assert ids == [m.id for m in state]                 # each message once, in order
    # without compaction the model saw exactly the state (after the system prompt)
    assert wire(model.inputs[-1][1:]) == wire(state[:-1])
    sent = model.inputs[-1][1]
    assert isinstance(model.inputs[-1][0], SystemMessage)
    # thinking blocks and their signatures reach the model untouched
    ai = next(m for m in model.inputs[-1] if isinstance(m, AIMessage) and m.tool_calls)
    assert ai.content[0] == {"type": "thinking", "thinking": "I need files for step 0",
                             "signature": "EqQBCkYIARgCKkD0+/=="}
    assert sent.content == "step 0"
    session = mw.session_for("t1")
    msgs = [e.message for e in session.branch() if isinstance(e, MessageEntry)]
    assert msgs[1].thinking[0].signature == "EqQBCkYIARgCKkD0+/=="
    assert [c.id for c in msgs[1].tool_calls or []] == ["call_0a", "call_0b"]
    assert [m.role for m in msgs[:5]] == ["user", "assistant", "tool", "tool", "assistant"]


def test_retries_and_replays_never_duplicate() -> None:
    model = ScriptedChat(script=[RuntimeError("overloaded"), thinking_call(0),
                                 RuntimeError("overloaded"), answer(0)])
    mw = ContextreeMiddleware()
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, retry_on=(RuntimeError,))
    agent = create_agent(model, tools=[read_file], middleware=[retry, mw])
    state = agent.invoke({"messages": [{"role": "user", "content": "go"}]})["messages"]
    assert len(model.inputs) == 4
    assert mirrored(mw) == [m.id for m in state]
    # replaying the whole conversation (no checkpointer: the caller sends the history)
    model.script = [answer(1)]
    again = agent.invoke({"messages": [*state, HumanMessage("and now?", id="h2")]})["messages"]
    assert mirrored(mw) == [m.id for m in again]
    assert len(mw.session_for().tree()) == 1            # no branch, no copies


@pytest.mark.slow
def test_compaction_keeps_the_state_and_a_stable_prefix(tmp_path: Path) -> None:
    turns = 6
    script: list[Any] = []
    for n in range(turns):
        script += [thinking_call(n), answer(n)]
    model = ScriptedChat(script=script)
    mw = ContextreeMiddleware(directory=tmp_path, window=3_000)
    agent = create_agent(model, tools=[read_file], system_prompt="Be brief.", middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "user/42"}}
    state: list[BaseMessage] = []
    counts = []
    for n in range(turns):
        state = agent.invoke({"messages": [{"role": "user", "content": f"step {n}"}]},
                             cfg)["messages"]
        counts.append(len(mw.session_for("user/42").find(CompactionEntry)))
    session = mw.session_for("user/42")
    compactions = session.find(CompactionEntry)
    assert compactions and mw.last_compaction is not None
    assert counts[-1] == counts[-2] == 1                # one compaction, in the 5th turn
    assert (tmp_path / "user%2F42.jsonl").exists()
    # the graph state still holds every message; the session too
    assert len(state) == turns * 5
    assert mirrored(mw, "user/42") == [m.id for m in state]
    # the model got the compacted view: shorter, paired, and led by the summary
    last = model.inputs[-1][1:]
    assert len(last) < len(state) - 1
    assert_paired(last)
    assert any(m.id and m.id.startswith("contextree-compaction_summary") for m in last)
    # after the compaction the prompt prefix is byte-stable: each call starts with exactly
    # what the call before it was sent (the 5th turn compacted before its second call)
    after = model.inputs[-3:]
    assert len(after[0]) < len(model.inputs[-4])
    for before, nxt in itertools.pairwise(after):
        assert wire(nxt[: len(before)]) == wire(before)
    # reopen: a new middleware on the same directory sees the same view
    view = wire(mw.prepare(state, "user/42"))
    mw.close()
    reopened = ContextreeMiddleware(directory=tmp_path, window=3_000)
    assert wire(reopened.prepare(state, "user/42")) == view
    assert mirrored(reopened, "user/42") == [m.id for m in state]   # nothing written twice
    reopened.close()
    # and in a new process (no state at all: the messages come from the session)
    code = (
        "import json\n"
        "from contextree.integrations.langchain import ContextreeMiddleware\n"
        "from langchain_core.messages import message_to_dict\n"
        f"mw = ContextreeMiddleware(directory={str(tmp_path)!r}, window=3_000)\n"
        "view = mw.prepare([], 'user/42')\n"
        "print(json.dumps([message_to_dict(m)['data']['content'] for m in view]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC)}, check=True).stdout
    contents = json.loads(out)
    assert contents == [json.loads(w)["data"]["content"] for w in view]


def test_async_hooks_with_ainvoke() -> None:
    model = ScriptedChat(script=[thinking_call(0), answer(0), answer(1)])
    mw = ContextreeMiddleware(window=100_000)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "a"}}

    async def main() -> list[BaseMessage]:
        await agent.ainvoke({"messages": [{"role": "user", "content": "one"}]}, cfg)
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "two"}]}, cfg)
        return list(out["messages"])

    state = asyncio.run(main())
    assert mirrored(mw, "a") == [m.id for m in state]
    assert wire(model.inputs[-1]) == wire(state[:-1])


def test_dangling_calls_and_orphan_results_are_repaired() -> None:
    model = ScriptedChat(script=[answer(0)])
    mw = ContextreeMiddleware()
    agent = create_agent(model, tools=[read_file], middleware=[mw])
    history: list[BaseMessage] = [
        HumanMessage("start", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"id": "lost", "name": "read_file",
                                            "args": {"path": "x"}}]),
        ToolMessage("from nowhere", tool_call_id="ghost", id="t0"),
        HumanMessage("never mind, just answer", id="h2"),
    ]
    state = agent.invoke({"messages": history})["messages"]
    sent = model.inputs[-1]
    assert_paired(sent)
    assert [type(m).__name__ for m in sent] == ["HumanMessage", "AIMessage", "ToolMessage",
                                                "HumanMessage"]
    assert sent[2].status == "error" and "interrupted" in sent[2].content
    assert len(state) == 5                              # the state itself is untouched


def test_a_forked_state_branches_the_session() -> None:
    model = ScriptedChat(script=[answer(0), answer(1), answer(2)])
    mw = ContextreeMiddleware()
    agent = create_agent(model, tools=[read_file], middleware=[mw])
    first = agent.invoke({"messages": [HumanMessage("q", id="h1")]})["messages"]
    second = agent.invoke({"messages": [*first, HumanMessage("more", id="h2")]})["messages"]
    assert len(second) == 4
    # go back: continue from the first exchange with another question (a time-travel resume)
    third = agent.invoke({"messages": [*first, HumanMessage("other", id="h3")]})["messages"]
    session = mw.session_for()
    roots = session.tree()
    assert len(roots) == 1
    node = roots[0].children[0]                         # the first answer
    assert len(node.children) == 2                      # two branches, nothing copied
    assert mirrored(mw).count("h1") == 1
    assert [e.message.text for e in session.branch() if isinstance(e, MessageEntry)] == \
        [m.text for m in third]
    # an edited message (same id, other content) branches too, from the message before it
    model.script = [answer(3)]
    edited = first[1].model_copy(update={"content": "Step 0 is done, edited."})
    agent.invoke({"messages": [first[0], edited, HumanMessage("ok?", id="h4")]})
    assert len(session.tree()[0].children) == 2         # h1 now has two answers
    branch = [e.message.text for e in session.branch() if isinstance(e, MessageEntry)]
    assert branch == ["q", "Step 0 is done, edited.", "ok?", "Step 3 is done."]
    assert model.inputs[-1][1].content == "Step 0 is done, edited."


def test_one_session_given_directly() -> None:
    import contextree as ct

    session = ct.Session.in_memory()
    mw = ContextreeMiddleware(session)
    assert mw.session_for("anything") is session
    with pytest.raises(ct.errors.InvalidArgument):
        ContextreeMiddleware(session, directory="x")


def test_missing_extra_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['langchain'] = None\n"
        "try:\n"
        "    import contextree.integrations.langchain\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC)}, check=True).stdout
    assert "contextree[langchain]" in out


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_thread_id_with_a_lone_surrogate_is_an_invalid_argument(tmp_path: Path,
                                                                  on_disk: bool) -> None:
    """A thread id decoded from bad bytes or a broken ``\\ud800`` escape names no session:
    InvalidArgument saying so, from inside a real graph run; other threads go on working."""
    model = ScriptedChat(script=[answer(0)])
    mw = ContextreeMiddleware(directory=tmp_path) if on_disk else ContextreeMiddleware()
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    bad = {"configurable": {"thread_id": "user-\ud800-1"}}
    with pytest.raises(InvalidArgument, match="LangGraph thread id") as info:
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, bad)
    assert "lone surrogate" in str(info.value) and "valid characters" in str(info.value)
    with pytest.raises(InvalidArgument):
        mw.session_for("user-\ud800-1")
    good = {"configurable": {"thread_id": "user-1"}}
    state = agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, good)
    assert state["messages"][-1].content == "Step 0 is done."
    assert len(mirrored(mw, "user-1")) == 2
    assert [p.name for p in tmp_path.glob("*.jsonl")] == (["user-1.jsonl"] if on_disk else [])


@pytest.mark.parametrize("on_disk", [True, False])
def test_runs_without_a_thread_id_are_apart_from_a_thread_named_default(
        tmp_path: Path, on_disk: bool) -> None:
    """A run with no thread id (the caller sends the history) and the thread "default" are
    two conversations: each is mirrored into its own session, neither sees the other's."""
    model = ScriptedChat(script=[answer(0), answer(1)])
    mw = ContextreeMiddleware(directory=tmp_path) if on_disk else ContextreeMiddleware()
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("threaded", id="t1")]},
                 {"configurable": {"thread_id": "default"}})
    unthreaded = create_agent(model, tools=[read_file], middleware=[mw])
    unthreaded.invoke({"messages": [HumanMessage("alone", id="u1")]})
    assert mirrored(mw, "default")[0] == "t1" and "u1" not in mirrored(mw, "default")
    assert mirrored(mw)[0] == "u1" and "t1" not in mirrored(mw)
    assert mw.session_for() is not mw.session_for("default")
    if on_disk:
        names = sorted(p.name for p in tmp_path.glob("*.jsonl"))
        assert len(names) == 2 and "default.jsonl" in names
        mw.close()
        reopened = ContextreeMiddleware(directory=tmp_path)  # the same sessions, found again
        assert mirrored(reopened)[0] == "u1" and mirrored(reopened, "default")[0] == "t1"
        reopened.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names open files by /proc")
@pytest.mark.parametrize("durable", [True, False])
def test_durable_false_writes_the_files_without_syncing_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool) -> None:
    syncs: list[str] = []  # the files synced under tmp_path (another test's may sync too)
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(tmp_path)):
            syncs.append(path)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    mw = ContextreeMiddleware(directory=tmp_path, durable=durable)
    agent = create_agent(ScriptedChat(script=[answer(0)]), tools=[read_file],
                         middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    state = agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, cfg)["messages"]
    assert mirrored(mw, "t") == [m.id for m in state]  # written either way
    assert bool(syncs) is durable  # the file is created and appended to in the turn
    mw.close()
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 1 + len(state)


# -- one session for every thread: a branch each -------------------------------------------

def entry_of(mw: ContextreeMiddleware, lc_id: str | None) -> str:
    """The id of the (only) entry holding the LangChain message ``lc_id``."""
    found = [e.id for e in mw.session_for().entries() if isinstance(e, MessageEntry)
             and e.message.extra.get("langchain_id") == lc_id]
    assert len(found) == 1, found
    return found[0]


def branch_ids(mw: ContextreeMiddleware, state: list[BaseMessage]) -> list[str]:
    """The LangChain ids on the branch that ends at the state's last message."""
    return [e.message.extra["langchain_id"] for e in
            mw.session_for().branch(entry_of(mw, state[-1].id))
            if isinstance(e, MessageEntry) and LC_KEY in e.message.extra]


def assert_own_thread(inputs: list[list[BaseMessage]], state: list[BaseMessage]) -> None:
    """Each call was sent a pairing-valid prefix of this thread's state, and nothing else."""
    for sent in inputs:
        assert_paired(sent)
        assert wire(sent) == wire(state[: len(sent)])


def test_threads_alternating_on_one_session_each_keep_their_branch(tmp_path: Path) -> None:
    """Two threads take turns on one shared session file: each message is written once,
    each thread's branch holds exactly its state, and the model sees only its own thread."""
    path = tmp_path / "one.jsonl"
    model = ScriptedChat(script=[])
    mw = ContextreeMiddleware(path)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    states: dict[str, list[BaseMessage]] = {}
    for turn in range(5):
        for thread in ("A", "B"):
            model.script = [thinking_call(turn), answer(turn)]
            before = len(model.inputs)
            states[thread] = agent.invoke(
                {"messages": [{"role": "user", "content": f"{thread} {turn}"}]},
                {"configurable": {"thread_id": thread}})["messages"]
            assert_own_thread(model.inputs[before:], states[thread])
    assert len(states["A"]) == len(states["B"]) == 5 * 5
    ids = mirrored(mw)
    assert sorted(ids) == sorted(m.id for m in states["A"] + states["B"])  # each once
    for thread in ("A", "B"):
        assert branch_ids(mw, states[thread]) == [m.id for m in states[thread]]
    # a run without a thread id gets a branch of its own there too
    model.script = [answer(9)]
    alone = create_agent(model, tools=[read_file], middleware=[mw])
    solo = alone.invoke({"messages": [HumanMessage("alone", id="u1")]})["messages"]
    assert mw.session_for() is mw.session_for("A")
    assert branch_ids(mw, solo) == ["u1", solo[-1].id]
    mw.close()
    assert len(mirrored(ContextreeMiddleware(path))) == len(ids) + 2


def test_a_new_middleware_on_the_shared_file_continues_every_thread(tmp_path: Path) -> None:
    """After a restart (a new middleware on the same file, the same checkpointer), each
    thread's branch is found again by the ids of the messages it mirrored: nothing twice."""
    path = tmp_path / "one.jsonl"
    saver = InMemorySaver()
    model = ScriptedChat(script=[])
    states: dict[str, list[BaseMessage]] = {}

    def turn(agent: Any, thread: str, n: int) -> None:
        model.script = [thinking_call(n), answer(n)]
        before = len(model.inputs)
        states[thread] = agent.invoke(
            {"messages": [{"role": "user", "content": f"{thread} {n}"}]},
            {"configurable": {"thread_id": thread}})["messages"]
        assert_own_thread(model.inputs[before:], states[thread])

    mw = ContextreeMiddleware(path)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=saver)
    for n in range(2):
        turn(agent, "A", n)
        turn(agent, "B", n)
    mw.close()
    mw = ContextreeMiddleware(path)  # the leaf is at B's tip: A is found by its ids
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=saver)
    for n in range(2, 4):
        turn(agent, "A", n)
        turn(agent, "B", n)
    assert len(states["A"]) == len(states["B"]) == 4 * 5
    assert sorted(mirrored(mw)) == sorted(m.id for m in states["A"] + states["B"])
    for thread in ("A", "B"):
        assert branch_ids(mw, states[thread]) == [m.id for m in states[thread]]
    assert len(mw.session_for().tree()) == 2            # a root per thread, nothing else
    mw.close()


def test_a_thread_not_seen_yet_with_an_empty_state_sees_nothing(tmp_path: Path) -> None:
    """On a shared session the leaf is the tip of the thread that wrote last: a thread this
    middleware has not seen, whose state is empty, gets an empty view (before, it got the
    other thread's conversation), after a restart too; nothing is written for it."""
    path = tmp_path / "one.jsonl"
    model = ScriptedChat(script=[answer(0)])
    mw = ContextreeMiddleware(path)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    secret = agent.invoke({"messages": [{"role": "user", "content": "my pin is 4921"}]},
                          {"configurable": {"thread_id": "A"}})["messages"]
    written = len(mw.session_for())
    assert mw.prepare([], "B") == []
    assert mw.prepare([], None) == []  # a run without a thread id is a thread of its own
    assert [m.id for m in mw.prepare(secret, "A")] == [m.id for m in secret]
    assert [m.id for m in mw.prepare([], "A")] == [m.id for m in secret]  # seen: its own
    assert len(mw.session_for()) == written
    mw.close()
    again = ContextreeMiddleware(path)
    assert again.prepare([], "B") == [] and again.prepare([], "A") == []
    assert [m.id for m in again.prepare(secret, "A")] == [m.id for m in secret]
    again.close()


def test_threads_running_at_once_on_one_session(tmp_path: Path) -> None:
    """Two threads' turns run at the same time in two OS threads on one shared session:
    every message is written once, none is lost, each branch is its thread's state."""
    import threading
    import time
    import uuid

    class Concurrent(BaseChatModel):
        """Calls a tool after a user message, answers after a result; a little slowly."""

        inputs: list[list[BaseMessage]] = []

        @property
        def _llm_type(self) -> str:
            return "concurrent"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Concurrent:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            self.inputs.append(list(messages))
            time.sleep(0.002)
            if isinstance(messages[-1], HumanMessage):
                reply = AIMessage("", id=f"ai-{uuid.uuid4()}", tool_calls=[
                    {"id": f"call-{uuid.uuid4()}", "name": "read_file", "args": {"path": "x"}}])
            else:
                reply = AIMessage("done", id=f"ai-{uuid.uuid4()}")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    model = Concurrent()
    mw = ContextreeMiddleware(tmp_path / "one.jsonl", durable=False)
    agent = create_agent(model, tools=[read_file], middleware=[mw], checkpointer=InMemorySaver())
    threads = [f"t{i}" for i in range(3)]
    states: dict[str, list[BaseMessage]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(threads))

    def run(thread: str) -> None:
        try:
            start.wait()
            for n in range(6):
                states[thread] = agent.invoke(
                    {"messages": [{"role": "user", "content": f"{thread} {n}"}]},
                    {"configurable": {"thread_id": thread}})["messages"]
        except BaseException as e:  # reported below
            errors.append(e)

    workers = [threading.Thread(target=run, args=(t,)) for t in threads]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: inside the hooks too
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    everything = [m.id for t in threads for m in states[t]]
    assert len(everything) == len(threads) * 6 * 4
    assert sorted(mirrored(mw)) == sorted(everything)   # each once, none lost
    for t in threads:
        assert branch_ids(mw, states[t]) == [m.id for m in states[t]]
    for sent in model.inputs:                           # each call: one thread's own view
        owner = next(t for t in threads if states[t][0].id == sent[0].id)
        assert_own_thread([sent], states[owner])
    mw.close()
