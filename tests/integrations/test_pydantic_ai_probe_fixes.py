"""Bugs a probe found in the pydantic-ai integration, each checked through a real agent loop.

- A tool result was sent to the model whole (320 KB at a window of 8000): every tool result
  the model is shown is now cut to the truncation limits, the whole of it saved once to the
  overflow store, and a bound store keeps the cut with its truncation record.
- A lone surrogate (a file name ``os.listdir`` could not decode) in any part killed the run
  with ``InvalidEntry``: it is now stored as U+FFFD, and the conversation reopens holding it.
- A store bound to a history and dropped without ``close()`` kept its JSONL writer lock
  until the cyclic garbage collector ran (the history registered its own methods on the
  store it holds: a cycle), so another worker saving the conversation got ``SessionLocked``.
- In a folder another integration wrote ``<id>.jsonl`` to, every save of conversation
  ``<id>`` was a ``ConversationConflict`` no reload could settle: it is now a
  ``SessionExists`` that says whose the session is and what to do.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.conversation_store")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from contextree import Message, OverflowStore, Session
from contextree._truncation import TruncationLimits
from contextree.entries import CompactionEntry, SessionHeader, now
from contextree.errors import InvalidArgument, SessionExists
from contextree.integrations.pydantic_ai import ContextreeConversationStore, ContextreeHistory
from contextree.storage import MemoryCatalog
from helpers import SRC

pytestmark = pytest.mark.anyio

LIMITS = TruncationLimits(max_lines=50, max_bytes=4000, max_line_chars=200)
BIG = "".join(f"row {i}: " + "x" * 90 + "\n" for i in range(3200))  # 320 KB
CONTENTS: dict[str, Any] = {
    "str": BIG,
    "dict": {"rows": [f"row {i}: " + "x" * 90 for i in range(3200)]},  # serialized by pydantic-ai
    "error": "retried",  # the tool raises ModelRetry with BIG: a ``retried`` outcome
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart)]


def agent_with(history: ContextreeHistory, seen: list[list[ModelMessage]], content: Any
               ) -> Agent[None, str]:
    """An agent that calls ``fetch`` (which returns ``content``) once, then ``ping`` on each
    turn, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if any(p.tool_name == "ping" for p in tool_returns(messages[-1:])):
            return ModelResponse(parts=[TextPart("done")])
        if tool_returns(messages):
            return ModelResponse(parts=[ToolCallPart("ping", {})])
        return ModelResponse(parts=[ToolCallPart("fetch", {})])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[history])

    @agent.tool_plain(retries=5)
    def fetch() -> Any:
        if content == "retried":
            raise ModelRetry(BIG)
        return content

    @agent.tool_plain
    def ping() -> str:
        return "pong"

    return agent


def assert_within(text: str, limits: TruncationLimits) -> None:
    """The preview of a cut result keeps to the limits (the hint line follows it, and a
    shortened line ends with a marker saying so)."""
    body, hint, _ = text.partition("[Output truncated")
    assert hint, "the result was not cut"
    body = re.sub(r"… \[line truncated, \d+ chars\]", "", body)
    assert len(body.encode()) <= limits.max_bytes
    assert body.count("\n") <= limits.max_lines
    assert all(len(line) <= limits.max_line_chars for line in body.splitlines())


@pytest.mark.parametrize("kind", list(CONTENTS))
async def test_a_long_tool_result_is_cut_once_saved_whole_and_kept_cut(
        kind: str, tmp_path: Path) -> None:
    overflow = OverflowStore(tmp_path / "overflow")
    store = ContextreeConversationStore(tmp_path / "conversations")
    history = ContextreeHistory(window=8000, store=store, limits=LIMITS, overflow=overflow)
    seen: list[list[ModelMessage]] = []
    agent = agent_with(history, seen, CONTENTS[kind])
    result = await agent.run("fetch it", conversation=Conversation(conversation_id="c"))
    await store.save(result)
    result = await agent.run("again", conversation=result.conversation)  # more model calls
    await store.save(result)

    whole = tool_returns(result.all_messages())[0]
    original = whole.model_response_str(wrap_if_error=False)
    assert len(original) > 300_000  # the run's history keeps the whole result
    assert len(seen) == 5
    shown = {tool_returns(request)[0].model_response_str(wrap_if_error=False)
             for request in seen[1:]}
    assert len(shown) == 1  # the same cut before every model call
    (text,) = shown
    assert_within(text, LIMITS)
    assert tool_returns(seen[-1])[0].outcome == whole.outcome
    (saved,) = overflow.files()  # saved once, whole
    assert saved.read_text() == original and str(saved) in text

    # The store loads the conversation as saved; its session keeps the cut, as the runtime does.
    loaded = await store.load("c")
    assert loaded is not None
    assert tool_returns(loaded.messages)[0].model_response_str(wrap_if_error=False) == original
    session = store.session("c")
    assert session is not None
    kept = [m for m in session.build_context().messages if m.role == "tool" and m.name == "fetch"]
    assert kept[0].text == text
    assert kept[0].truncation is not None and kept[0].truncation.saved_path == str(saved)
    store.close()

    # Reopened elsewhere, the model is shown the same cut, and nothing is saved again.
    reopened = ContextreeConversationStore(tmp_path / "conversations")
    fresh = ContextreeHistory(window=8000, store=reopened, limits=LIMITS, overflow=overflow)
    loaded = await reopened.load("c")
    assert loaded is not None
    view = fresh.view("c", list(loaded.messages))
    assert tool_returns(view)[0].model_response_str(wrap_if_error=False) == text
    assert overflow.files() == [saved]
    reopened.close()


def test_default_limits_and_the_sandboxed_overflow_store() -> None:
    """The defaults: the runtime's limits (50 KB), saved to the per-user store (sandboxed)."""
    seen: list[list[ModelMessage]] = []
    agent = agent_with(ContextreeHistory(window=8000), seen, BIG)
    result = agent.run_sync("fetch it")
    text = tool_returns(seen[-1])[0].model_response_str()
    assert_within(text, TruncationLimits())
    saved = OverflowStore.default().files()
    assert any(p.read_text() == BIG and str(p) in text for p in saved)
    assert tool_returns(result.all_messages())[0].content == BIG


# -- lone surrogates -------------------------------------------------------------------------

BAD = "report-\udcff.txt"  # as os.listdir gives a file name that is not UTF-8
GOOD = "report-\ufffd.txt"


def surrogate_agent(where: str, history: ContextreeHistory | None,
                    seen: list[list[ModelMessage]]) -> Agent[None, str]:
    """An agent with ``BAD`` in one part kind: a tool's output, the model's text, or its
    tool-call arguments (a user prompt is the prompt the test passes)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        usage = RequestUsage(input_tokens=100, output_tokens=10)  # as a provider reports it
        if tool_returns(messages[-1:]):
            return ModelResponse(parts=[TextPart(BAD if where == "text" else "listed")],
                                 usage=usage)
        name = BAD if where == "args" else "."
        return ModelResponse(parts=[ToolCallPart("ls", {"path": name})], usage=usage)

    agent: Agent[None, str] = Agent(FunctionModel(model),
                                    capabilities=[history] if history is not None else [])

    @agent.tool_plain
    def ls(path: str) -> str:
        return BAD if where == "tool" else f"listed {path}"

    return agent


def texts(messages: list[ModelMessage]) -> str:
    """Every text of ``messages`` (prompts, answers, tool arguments and results), joined."""
    out = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, UserPromptPart | TextPart):
                out.append(str(p.content))
            elif isinstance(p, ToolCallPart):
                out.append(p.args_as_json_str())
            elif isinstance(p, ToolReturnPart):
                out.append(p.model_response_str())
    return "\n".join(out)


WHERE = ["tool", "text", "prompt", "args"]


@pytest.mark.parametrize("bound", [True, False], ids=["with-history", "store-only"])
@pytest.mark.parametrize("where", WHERE)
async def test_a_lone_surrogate_is_stored_as_replacement_and_reopens(
        where: str, bound: bool, tmp_path: Path) -> None:
    store = ContextreeConversationStore(tmp_path / "conversations")
    history = (ContextreeHistory(window=8000, store=store,
                                 overflow=OverflowStore(tmp_path / "overflow")) if bound else None)
    seen: list[list[ModelMessage]] = []
    agent = surrogate_agent(where, history, seen)
    prompt = f"list {BAD}" if where == "prompt" else "list the files"
    conversation = Conversation(conversation_id="c")
    for _ in range(2):  # the second run's model calls show the first run's messages
        result = await agent.run(prompt, conversation=conversation)
        await store.save(result)
        conversation = result.conversation
    if bound:
        assert GOOD in texts(seen[-1]) and BAD not in texts(seen[-1])
    store.close()

    reopened = ContextreeConversationStore(tmp_path / "conversations")
    loaded = await reopened.load("c")
    assert loaded is not None and len(loaded.messages) == 8
    assert GOOD in texts(list(loaded.messages)) and BAD not in texts(list(loaded.messages))
    session = reopened.session("c")
    assert session is not None
    assert any(GOOD in m.text or GOOD in str(m.tool_calls)
               for m in session.build_context().messages)
    result = await agent.run("once more", conversation=loaded)  # and the conversation goes on
    await reopened.save(result)
    assert reopened.message_count("c") == 12
    reopened.close()


@pytest.mark.parametrize("where", WHERE)
def test_a_lone_surrogate_does_not_stop_a_run_without_a_store(where: str) -> None:
    """The history's own working session stores it too, and the model is shown valid text."""
    seen: list[list[ModelMessage]] = []
    agent = surrogate_agent(where, ContextreeHistory(window=8000), seen)
    prompt = f"list {BAD}" if where == "prompt" else "list the files"
    result = agent.run_sync(prompt)
    agent.run_sync("again", message_history=result.all_messages())
    assert GOOD in texts(seen[-1]) and BAD not in texts(seen[-1])


async def test_compactions_are_saved_for_a_conversation_that_held_a_surrogate(
        tmp_path: Path) -> None:
    """A history that starts on a conversation the run still holds with the surrogate (the
    store holds U+FFFD) takes up the stored copy, and saves its compactions with it."""
    store = ContextreeConversationStore(tmp_path / "conversations")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if tool_returns(messages[-1:]):
            return ModelResponse(parts=[TextPart("listed")])
        return ModelResponse(parts=[ToolCallPart("ls", {"path": "."})])

    def agent(history: ContextreeHistory) -> Agent[None, str]:
        a: Agent[None, str] = Agent(FunctionModel(model), capabilities=[history])

        @a.tool_plain
        def ls(path: str) -> str:
            return f"{BAD}\n" + "FAILED test_x: assert 1 == 2\n" * 60

        return a

    first = agent(ContextreeHistory(window=1500, store=store))
    result = await first.run("list", conversation=Conversation(conversation_id="c"))
    await store.save(result)
    history = ContextreeHistory(window=1500, store=store)  # another worker, same conversation
    conversation = result.conversation
    for turn in range(6):
        result = await agent(history).run(f"turn {turn}", conversation=conversation)
        await store.save(result)
        conversation = result.conversation
    session = store.session("c")
    assert session is not None and history.compactions >= 1
    assert len(session.find(CompactionEntry)) == history.compactions
    store.close()


# -- a store dropped without close() ---------------------------------------------------------

OTHER_WORKER = """
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from contextree.integrations.pydantic_ai import ContextreeConversationStore

async def main():
    store = ContextreeConversationStore(sys.argv[1])
    conversation = await store.load("c1") or Conversation(conversation_id="c1")
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("b")])))
    result = await agent.run("from the other worker", conversation=conversation)
    await store.save(result)
    print(store.message_count("c1"))
    store.close()

asyncio.run(main())
"""


def other_worker_saves(where: Path) -> int:
    """Conversation ``c1`` saved by another process; how many messages it then holds."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", OTHER_WORKER, str(where)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def one_request(where: Path, variant: str) -> list[weakref.ref[Any]]:
    """A request served with a store and/or a history made for it; weak references to
    them, which the caller drops."""
    store = ContextreeConversationStore(where) if variant != "history" else None
    history = ContextreeHistory(window=100_000, store=store) if variant != "store" else None
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("a")])),
                  capabilities=[history] if history is not None else [])

    async def serve() -> None:
        if store is None:  # the history on its own (what pydantic-ai's run keeps aside)
            assert history is not None
            messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
            for _ in range(3):
                history.view("c1", messages)
                messages = [*history.processor(messages), ModelResponse(parts=[TextPart("a")]),
                            ModelRequest(parts=[UserPromptPart("more")])]
            return
        conversation = await store.load("c1") or Conversation(conversation_id="c1")
        result = await agent.run("from this worker", conversation=conversation)
        await store.save(result)
        if variant == "closed":
            store.close()

    asyncio.run(serve())
    return [weakref.ref(x) for x in (store, history) if x is not None]


@pytest.mark.parametrize("variant", ["store+history", "store", "history", "closed"])
def test_a_dropped_store_and_history_free_the_conversation_at_once(
        variant: str, tmp_path: Path) -> None:
    """Dropped without ``close()`` (and with the cyclic collector off), a store and the
    history bound to it are freed at once: another process saves the conversation."""
    where = tmp_path / "conversations"
    enabled = gc.isenabled()
    gc.disable()
    try:
        refs = one_request(where, variant)
        assert [r() for r in refs] == [None] * len(refs)  # no cycle keeps them
        if variant != "history":
            assert other_worker_saves(where) == 4  # the writer lock went with the store
    finally:
        if enabled:
            gc.enable()


def test_a_dropped_history_does_not_keep_its_hooks_on_a_store_that_lives(
        tmp_path: Path) -> None:
    """A long-lived store with a history per request: each history is freed with its
    request, its hooks no longer run, and the store saves as before."""
    store = ContextreeConversationStore(tmp_path / "conversations")
    agent_model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("a")]))

    async def serve(n: int) -> weakref.ref[ContextreeHistory]:
        history = ContextreeHistory(window=100_000, store=store)
        agent = Agent(agent_model, capabilities=[history])
        conversation = await store.load("c1") or Conversation(conversation_id="c1")
        await store.save(await agent.run(f"request {n}", conversation=conversation))
        return weakref.ref(history)

    enabled = gc.isenabled()
    gc.disable()
    try:
        for n in range(3):
            assert asyncio.run(serve(n))() is None
    finally:
        if enabled:
            gc.enable()
    assert store.message_count("c1") == 6
    assert not store._ct_hooks(store._saved) and not store._ct_hooks(store._pending)
    store.close()


def test_a_users_hooks_are_held_for_good(tmp_path: Path) -> None:
    """A bound method of an object nothing else holds, and one of a ``__slots__`` class,
    are called on every save as a lambda is (only the history asks for weak hooks)."""
    called: list[str] = []

    class Audit:
        def on_saved(self, cid: str) -> None:
            called.append(f"audit {cid}")

    class Slotted:
        __slots__ = ()

        def on_saved(self, cid: str) -> None:
            called.append(f"slotted {cid}")

    store = ContextreeConversationStore(tmp_path / "conversations")
    store.add_saved_hook(Audit().on_saved)
    store.add_saved_hook(Slotted().on_saved)
    gc.collect()
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("a")])))

    async def serve() -> None:
        conversation = await store.load("c1") or Conversation(conversation_id="c1")
        await store.save(await agent.run("hi", conversation=conversation))

    asyncio.run(serve())
    assert called == ["audit c1", "slotted c1"]
    with pytest.raises(InvalidArgument, match="cannot be referenced weakly"):
        store.add_saved_hook(Slotted().on_saved, weak=True)
    store.close()


# -- a folder other integrations write to -----------------------------------------------------

def save_until_it_settles(store: ContextreeConversationStore, cid: str) -> None:
    """Load, run, save; on a conflict load again and retry, as an application does."""
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("a")])))

    async def attempt() -> None:
        conversation = await store.load(cid) or Conversation(conversation_id=cid)
        await store.save(await agent.run("hi", conversation=conversation))

    for _ in range(3):
        try:
            asyncio.run(attempt())
            return
        except ConversationConflict:
            continue
    raise AssertionError("a conflict that retrying never settles")


def another_tools_session(folder: Path, kind: str) -> None:
    """``folder/c1.jsonl`` as another writer left it."""
    folder.mkdir(parents=True)
    path = folder / "c1.jsonl"
    metadata = ({"pydantic_ai": {"conversation_id": "C1"}} if kind == "other-conversation"
                else None)  # what a case-insensitive file system makes of "C1" and "c1"
    session = Session.create(path, session_id="c1", metadata=metadata)
    session.append_message(Message.user("hi from another integration"))
    session.close()


@pytest.mark.parametrize("kind", ["plain-session", "other-conversation"])
def test_a_session_of_another_tool_is_a_clear_error_not_a_conflict(
        kind: str, tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    another_tools_session(folder, kind)
    before = (folder / "c1.jsonl").read_bytes()
    store = ContextreeConversationStore(folder)
    with pytest.raises(SessionExists) as caught:
        save_until_it_settles(store, "c1")
    message = str(caught.value)
    assert "retrying will not help" in message and "of its own" in message
    assert {"plain-session": "not a pydantic-ai conversation",
            "other-conversation": "the pydantic-ai conversation 'C1'"}[kind] in message
    assert (folder / "c1.jsonl").read_bytes() == before  # left as it was
    save_until_it_settles(store, "c2")  # other conversations are saved as ever
    assert store.message_count("c2") == 2
    store.close()


def test_a_session_of_another_tool_in_a_catalog_is_a_clear_error(tmp_path: Path) -> None:
    catalog = MemoryCatalog("shared-with-another-tool")
    catalog.create(SessionHeader(id="c1", created_at=now()), [])
    store = ContextreeConversationStore(catalog)
    with pytest.raises(SessionExists, match="not a pydantic-ai conversation"):
        save_until_it_settles(store, "c1")
    store.close()


def test_a_session_the_openai_agents_integration_wrote(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from contextree.integrations.openai_agents import ContextreeSession

    folder = tmp_path / "shared"
    session = ContextreeSession("c1", folder)
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))  # type: ignore[list-item]
    session.close()
    store = ContextreeConversationStore(folder)
    with pytest.raises(SessionExists, match="not a pydantic-ai conversation"):
        save_until_it_settles(store, "c1")
    store.close()
    assert json.loads((folder / "c1.jsonl").read_text().splitlines()[0])["id"] == "c1"
