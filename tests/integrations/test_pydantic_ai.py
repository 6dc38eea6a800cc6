"""contextree under pydantic-ai: the ConversationStore contract and the compacting history.

The store scenarios run against pydantic-ai's own ``InMemoryConversationStore`` and against
``ContextreeConversationStore`` on memory, JSONL and PostgreSQL, and must observe the same
results (ids and revisions compared by order of appearance). The agent tests run a real
``Agent`` with ``FunctionModel`` and real tools.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.conversation_store")

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RequestUsage, RunUsage

from contextree.entries import CompactionEntry, CustomEntry, MessageEntry
from contextree.errors import InvalidArgument
from contextree.integrations.pydantic_ai import (
    ContextreeConversationStore,
    ContextreeHistory,
)
from helpers import SRC, TESTS, as_url, require_postgres

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def req(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text, timestamp=T0)], timestamp=T0)


def resp(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], timestamp=T0, model_name="m")


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


# -- stores ----------------------------------------------------------------------------------

def _pg_url() -> str:
    from contextree.storage.postgres import create_schema

    url = require_postgres()
    create_schema(url)
    return as_url(url)  # a conninfo string is refused, as everywhere (see the test below)


STORES = ["pydantic-ai-memory", "contextree-memory", "contextree-jsonl", "contextree-postgres"]


def make_store(kind: str, tmp: Path) -> ConversationStore:
    if kind == "pydantic-ai-memory":
        return InMemoryConversationStore()
    if kind == "contextree-memory":
        return ContextreeConversationStore()
    if kind == "contextree-jsonl":
        return ContextreeConversationStore(tmp / "conversations", durable=False)
    url = _pg_url()
    return ContextreeConversationStore(url)


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationStore]:
    s = make_store(request.param, tmp_path)
    yield s
    if isinstance(s, ContextreeConversationStore):
        s.close()


# -- observing a store ------------------------------------------------------------------------

class Observer:
    """Records what a scenario sees, with ids and revisions named by order of appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.log: list[Any] = []

    def n(self, value: str | None) -> str | None:
        if value is None:
            return None
        if value not in self.names:
            self.names[value] = f"#{len(self.names)}"
        return self.names[value]

    def conv(self, label: str, c: Conversation | None) -> None:
        if c is None:
            self.log.append((label, None))
            return
        self.log.append((label, c.conversation_id, dumped(c.messages).decode(), self.n(c.revision),
                         c.new_message_index, c.usage.requests, c.deferred_tool_requests))

    def entries(self, label: str, entries: list[Any] | None) -> None:
        self.log.append((label, None if entries is None else [
            (self.n(e.id), self.n(e.parent_id), dumped([e.message]).decode()) for e in entries]))

    def record(self, label: str, r: Any) -> None:
        if r is None:
            self.log.append((label, None))
            return
        self.log.append((label, r.conversation_id, self.n(r.head_id), r.usage, r.deferred_tool_requests,
                         r.scope, r.forked_from, self.n(r.forked_at), [self.n(b) for b in r.branches],
                         self.n(r.revision), r.format_version))

    async def raises(self, label: str, coro: Any) -> Any:
        try:
            result = await coro
        except (ConversationConflict, UserError, LookupError) as e:
            self.log.append((label, type(e).__name__))
            return None
        self.log.append((label, "ok"))
        return result


async def scenarios(store: ConversationStore) -> list[Any]:
    o = Observer()
    # save, continue
    c = Conversation(conversation_id="c1", messages=[req("hi"), resp("hello")])
    o.entries("save new", await store.save(c, scope="alice"))
    o.conv("after save", c)
    loaded = await store.load("c1")
    o.conv("load", loaded)
    assert loaded is not None
    stale = await store.load("c1")
    loaded.messages += [req("more"), resp("sure")]
    o.entries("continue", await store.save(loaded))
    o.entries("load_entries", await store.load_entries("c1"))
    o.entries("load_entries limit", await store.load_entries("c1", limit=3))
    stored = await store.load_entries("c1")
    assert stored is not None
    o.entries("read_entry", [await store.read_entry(e.id) for e in stored])
    o.entries("read_history limit", await store.read_history(stored[-1].id, limit=2))
    o.entries("read_history middle", await store.read_history(stored[1].id))
    await o.raises("read_entry unknown", store.read_entry("no-such-entry"))
    window = await store.load("c1", limit=1)
    o.conv("load limit 1", window)
    assert window is not None
    window.messages.append(req("windowed"))
    o.entries("save windowed", await store.save(window))
    o.conv("load after windowed", await store.load("c1"))
    o.record("record", await store.read_record("c1"))
    # stale revisions, an existing id, a foreign scope
    assert stale is not None
    stale.messages.append(req("lost?"))
    await o.raises("stale save", store.save(stale))
    await o.raises("existing id", store.save(Conversation(conversation_id="c1", messages=[req("x")])))
    mine = await store.load("c1")
    assert mine is not None
    await o.raises("foreign scope save", store.save(mine, scope="bob"))
    o.conv("load foreign scope", await store.load("c1", scope="bob"))
    # a rewritten history branches off the last shared message
    current = await store.load("c1")
    assert current is not None
    rewritten = Conversation(conversation_id="c1", messages=[req("hi"), resp("hello"), req("other")],
                             revision=current.revision)
    o.entries("rewrite", await store.save(rewritten))
    o.record("record after rewrite", await store.read_record("c1"))
    # branch
    current = await store.load("c1")
    assert current is not None
    b = await store.branch("c1", at=1, expected_revision=current.revision)
    o.conv("branch at 1", b)
    b.messages += [resp("regenerated")]
    o.entries("save on branch", await store.save(b))
    rec = await store.read_record("c1")
    o.record("record after branch", rec)
    assert rec is not None and rec.branches
    back = await store.branch("c1", from_entry=rec.branches[0], expected_revision=rec.revision)
    o.conv("branch back", back)
    await o.raises("stale branch", store.branch("c1", at=0, expected_revision=current.revision))
    fresh = await store.read_record("c1")
    assert fresh is not None
    await o.raises("branch out of range", store.branch("c1", at=99, expected_revision=fresh.revision))
    await o.raises("branch both", store.branch("c1", at=0, from_entry="x", expected_revision=fresh.revision))
    await o.raises("branch unknown entry", store.branch("c1", from_entry="nope", expected_revision=fresh.revision))
    await o.raises("branch missing", store.branch("zz", at=0, expected_revision=None))
    empty = await store.branch("c1", at=0, expected_revision=fresh.revision)
    o.conv("branch at 0", empty)
    empty.messages += [req("from scratch"), resp("ok")]
    o.entries("save from scratch", await store.save(empty))
    # fork
    f1 = await store.fork("c1", at=1, new_conversation_id="f1", scope="carol")
    o.conv("fork at 1", f1)
    f1.messages += [resp("forked answer")]
    o.entries("save fork", await store.save(f1))
    whole = await store.fork("c1", new_conversation_id="f2")
    o.conv("fork whole", whole)
    rec = await store.read_record("c1")
    assert rec is not None
    o.conv("fork from a left branch", await store.fork("c1", from_entry=rec.branches[-1],
                                                       new_conversation_id="f3"))
    await o.raises("fork onto existing id", store.fork("c1", new_conversation_id="f1"))
    await o.raises("fork missing", store.fork("nope"))
    await o.raises("fork foreign scope", store.fork("c1", source_scope="bob"))
    zero = await store.fork("c1", at=0, new_conversation_id="f4")
    o.conv("fork at 0", zero)
    for cid in ("f1", "f2", "f3", "f4"):
        o.record(f"record {cid}", await store.read_record(cid))
    # scope filters and listing
    o.log.append(("list", [r.conversation_id for r in await store.list_conversations()]))
    o.log.append(("list alice", [r.conversation_id for r in await store.list_conversations(scope="alice")]))
    o.log.append(("list carol", [r.conversation_id for r in await store.list_conversations(scope="carol")]))
    o.log.append(("list limit", [r.conversation_id for r in await store.list_conversations(limit=2)]))
    await o.raises("list negative", store.list_conversations(limit=-1))
    await o.raises("load negative", store.load("c1", limit=-1))
    # delete
    before_delete = await store.load("c1")
    await store.delete("c1", scope="bob")
    o.conv("after foreign delete", await store.load("c1"))
    await store.delete("c1")
    o.conv("after delete", await store.load("c1"))
    await store.delete("c1")  # gone already: nothing to do
    o.conv("fork survives", await store.load("f1"))
    o.entries("fork history survives", await store.load_entries("f1"))
    again = Conversation(conversation_id="c1", messages=[req("new life")])
    o.entries("recreate", await store.save(again, scope="alice"))
    assert before_delete is not None
    before_delete.messages.append(req("zombie"))
    await o.raises("save copy from before delete", store.save(before_delete))
    o.log.append(("list end", [r.conversation_id for r in await store.list_conversations()]))
    # what the record carries
    deferred = DeferredToolRequests(calls=[ToolCallPart("ask", {"q": 1}, tool_call_id="d1")],
                                    metadata={"d1": {"why": "approval"}})
    paused = Conversation(conversation_id="p1", messages=[req("go"), ModelResponse(
        parts=[ToolCallPart("ask", {"q": 1}, tool_call_id="d1")], timestamp=T0)],
        usage=RunUsage(requests=3, input_tokens=10, output_tokens=4, tool_calls=1),
        deferred_tool_requests=deferred)
    await store.save(paused)
    o.conv("paused", await store.load("p1"))
    o.record("paused record", await store.read_record("p1"))
    return o.log


async def test_same_observable_results(store: ConversationStore) -> None:
    reference = await scenarios(InMemoryConversationStore())
    assert await scenarios(store) == reference


async def test_rich_messages_round_trip_exactly(store: ConversationStore) -> None:
    png = BinaryContent(data=b"\x89PNG\r\n\x1a\n" + bytes(range(256)), media_type="image/png")
    pdf = BinaryContent(data=b"%PDF-1.4 ...", media_type="application/pdf")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("be careful", timestamp=T0),
                            UserPromptPart(["look", png, pdf, ImageUrl("https://example.invalid/a.png")],
                                           timestamp=T0)],
                     timestamp=T0, instructions="short answers", metadata={"k": [1, 2]}),
        ModelResponse(parts=[ThinkingPart("hmm", signature="sig==", id="t1", provider_name="anthropic"),
                             TextPart("calling"),
                             ToolCallPart("read", '{"path": "a"}', tool_call_id="c1"),
                             ToolCallPart("write", {"path": "b"}, tool_call_id="c2"),
                             ToolCallPart("rm", {"path": "c"}, tool_call_id="c3"),
                             NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="n1"),
                             NativeToolReturnPart("web_search", {"hits": 2}, tool_call_id="n1")],
                      usage=RequestUsage(input_tokens=50, output_tokens=7, cache_read_tokens=20),
                      model_name="claude", provider_name="anthropic", timestamp=T0,
                      provider_details={"finish": "tool_use"}, finish_reason="tool_call",
                      state="incomplete"),
        ModelRequest(parts=[ToolReturnPart("read", {"bytes": b"\x00\x01"}, tool_call_id="c1", timestamp=T0),
                            ToolReturnPart("write", "disk full", tool_call_id="c2", outcome="failed",
                                           timestamp=T0),
                            ToolReturnPart("rm", "no", tool_call_id="c3", outcome="denied", timestamp=T0),
                            RetryFeedbackPart("try again", retry=RetryInfo("model_retry", attempt=1), timestamp=T0)],
                     timestamp=T0, state="interrupted"),
        ModelResponse(parts=[TextPart("paused")], state="suspended", timestamp=T0),
    ]
    c = Conversation(conversation_id="rich", messages=messages)
    await store.save(c)
    loaded = await store.load("rich")
    assert loaded is not None
    assert dumped(loaded.messages) == dumped(messages)
    if isinstance(store, ContextreeConversationStore):
        # Exactly what the adapter reads back from its own JSON (a raw ``bytes`` tool return
        # reads back as its base64 text, as through ModelMessagesTypeAdapter itself).
        assert loaded.messages == ModelMessagesTypeAdapter.validate_json(dumped(messages))
        # The contextree shape of the same messages: roles, text, calls, results, thinking.
        session = store.session("rich")
        assert session is not None
        shown = session.build_context().messages
        assert [m.role for m in shown] == ["system", "user", "assistant", "tool", "tool", "tool", "user",
                                          "assistant"]
        assert shown[2].thinking[0].signature == "sig=="
        assert [t.id for t in shown[2].tool_calls or []] == ["c1", "c2", "c3"]
        assert shown[2].tool_calls[0].arguments == {"path": "a"}  # type: ignore[index]
        assert shown[4].is_error and not shown[5].is_error  # failed; denied is an answer
        assert shown[2].usage is not None and shown[2].usage.cache_read == 20


async def test_concurrent_saves_exactly_one_wins(store: ConversationStore) -> None:
    await store.save(Conversation(conversation_id="race", messages=[req("start")]))
    copies = [await store.load("race") for _ in range(4)]
    results: list[str] = []

    async def save(i: int, c: Conversation | None) -> None:
        assert c is not None
        c.messages.append(req(f"writer {i}"))
        try:
            await store.save(c)
            results.append("ok")
        except ConversationConflict:
            results.append("conflict")

    await asyncio.gather(*(save(i, c) for i, c in enumerate(copies)))
    assert sorted(results) == ["conflict"] * 3 + ["ok"]
    final = await store.load("race")
    assert final is not None and len(final.messages) == 2


# -- contextree specifics -----------------------------------------------------------------------

async def test_a_conversation_is_a_session(tmp_path: Path) -> None:
    store = ContextreeConversationStore(tmp_path)
    c = Conversation(conversation_id="chat/42", messages=[req("hi"), resp("hello")])
    entries = await store.save(c)
    session = store.session("chat/42")
    assert session is not None
    kinds = [type(e).__name__ for e in session.branch()]
    assert kinds == ["CustomEntry", "MessageEntry", "MessageEntry"]
    assert session.leaf_id == entries[-1].id  # the head is the leaf
    record = session.branch()[0]
    assert isinstance(record, CustomEntry) and record.id == c.revision  # the revision is the entry
    assert [e.id for e in session.branch()[1:]] == [e.id for e in entries]
    store.close()
    assert (tmp_path / "chat%2F42.jsonl").exists()
    # the file is an ordinary contextree session
    from contextree import Session

    with Session.open(tmp_path / "chat%2F42.jsonl", readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["hi", "hello"]


async def test_torn_save_is_skipped(tmp_path: Path) -> None:
    """A save cut short (its record written, not all its messages) leaves the conversation as
    it was: the same revision loads and can be saved."""
    store = ContextreeConversationStore(tmp_path)
    c = Conversation(conversation_id="t", messages=[req("a"), resp("b")])
    await store.save(c)
    good = c.revision
    session = store.session("t")
    assert session is not None
    torn = CustomEntry("torn-record", session.leaf_id, "2026-01-01T00:00:00.000Z",
                       custom_type="pydantic_ai.conversation",
                       data={"record": {"conversation_id": "t", "head_id": "never-written",
                                        "revision": "torn-record",
                                        "updated_at": "2026-01-01T00:00:00Z"}, "prev": good})
    session.append(torn)
    session.append(MessageEntry("half", "torn-record", "2026-01-01T00:00:00.000Z",
                                message=session.branch()[-2].message))  # type: ignore[union-attr]
    store.close()
    again = ContextreeConversationStore(tmp_path)
    loaded = await again.load("t")
    assert loaded is not None and loaded.revision == good and len(loaded.messages) == 2
    loaded.messages.append(req("c"))
    await again.save(loaded)
    final = await again.load("t")
    assert final is not None and [dumped([m]) for m in final.messages] == [
        dumped([m]) for m in [req("a"), resp("b"), req("c")]]
    again.close()


def test_jsonl_stores_in_one_process_share_the_writer(tmp_path: Path) -> None:
    # Two stores of one process are like two SQLite connections: both write, both see it
    # (another process gets SessionLocked while this one holds the file).
    async def main() -> None:
        a = ContextreeConversationStore(tmp_path)
        b = ContextreeConversationStore(tmp_path)
        await a.save(Conversation(conversation_id="x", messages=[req("1")]))
        seen = await b.load("x")  # reading needs no lock
        assert seen is not None
        seen.messages.append(req("2"))
        await b.save(seen)
        again = await a.load("x")
        assert again is not None and len(again.messages) == 2
        a.close()
        b.close()

    asyncio.run(main())


def test_postgres_writers_in_threads(tmp_path: Path) -> None:
    """Many stores (separate pools, as separate processes would have) save one conversation
    at once: each save either lands whole or gets ConversationConflict; none is lost."""
    url = _pg_url()
    cid = f"pg-{uuid.uuid4().hex[:8]}"
    setup = ContextreeConversationStore(url)
    asyncio.run(setup.save(Conversation(conversation_id=cid, messages=[req("0")])))
    landed: list[str] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        async def go() -> None:
            store = ContextreeConversationStore(url)
            try:
                for k in range(6):
                    while True:
                        c = await store.load(cid)
                        assert c is not None
                        text = f"w{i}-{k}"
                        c.messages += [req(text), resp(text)]
                        try:
                            await store.save(c)
                        except ConversationConflict:
                            continue
                        with lock:
                            landed.append(text)
                        break
            finally:
                store.close()

        asyncio.run(go())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = asyncio.run(setup.load(cid))
    assert final is not None
    texts = [m.parts[0].content for m in final.messages[1:] if isinstance(m, ModelRequest)]  # type: ignore[union-attr]
    assert sorted(texts) == sorted(landed) and len(texts) == 24
    setup.close()


# -- the agent, compaction, a reopen ----------------------------------------------------------------

def scripted_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Calls the shell tool once per user turn, then answers."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart(f"done after {len(messages)} messages")])
        turn = sum(1 for m in messages if isinstance(m, ModelRequest)
                   and any(isinstance(p, UserPromptPart) for p in m.parts))
        return ModelResponse(parts=[ThinkingPart("run it", signature=f"s{turn}"),
                                    ToolCallPart("shell", {"command": f"pytest -k t{turn}"},
                                                 tool_call_id=f"call-{turn}")])

    return FunctionModel(fn)


def make_agent(seen: list[list[ModelMessage]], history: ContextreeHistory | None) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(scripted_model(seen), system_prompt="You are a test agent.",
                                    capabilities=[history] if history is not None else [])

    @agent.tool_plain
    def shell(command: str) -> str:
        return "FAILED test_x: assert 1 == 2\n" * 60 + f"$ {command}"

    return agent


def assert_pairing_valid(messages: list[ModelMessage]) -> None:
    for i, m in enumerate(messages):
        if isinstance(m, ModelResponse):
            calls = {p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart)}
            if calls:
                nxt = messages[i + 1]
                assert isinstance(nxt, ModelRequest)
                assert {p.tool_call_id for p in nxt.parts if isinstance(p, ToolReturnPart)} == calls
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart):
                    prev = messages[i - 1]
                    assert isinstance(prev, ModelResponse) and p.tool_call_id in {
                        q.tool_call_id for q in prev.parts if isinstance(q, ToolCallPart)}


@pytest.mark.parametrize("kind", ["contextree-jsonl", "contextree-memory", "pydantic-ai-memory"])
async def test_agent_turns_compacted_history_kept(kind: str, tmp_path: Path) -> None:
    store = make_store(kind, tmp_path)
    bound = store if isinstance(store, ContextreeConversationStore) else None
    history = ContextreeHistory(window=1500, store=bound)
    seen: list[list[ModelMessage]] = []
    agent = make_agent(seen, history)
    conversation = Conversation(conversation_id="agent")
    for turn in range(8):
        result = await agent.run(f"turn {turn}: run the tests", conversation=conversation)
        await store.save(result)
        conversation = result.conversation
        assert len(result.all_messages()) == 4 * (turn + 1)  # the run's history keeps everything
    assert history.compactions >= 1
    stored = await store.load("agent")
    assert stored is not None and dumped(stored.messages) == dumped(conversation.messages)
    assert len(stored.messages) == 32
    # what the model saw: compacted, with a summary, fewer messages, pairing intact
    last = seen[-1]
    assert len(last) < len(conversation.messages)
    assert any(isinstance(p, SystemPromptPart) and "compacted" in p.content
               for m in last if isinstance(m, ModelRequest) for p in m.parts)
    assert any(isinstance(p, SystemPromptPart) and p.content == "You are a test agent."
               for m in last if isinstance(m, ModelRequest) for p in m.parts)  # pinned
    for request in seen:
        assert_pairing_valid(request)
    # between compactions the prompt only grows at the end: the prefix is byte-stable
    stable = sum(1 for a, b in itertools.pairwise(seen)
                 if dumped(b[: len(a)]) == dumped(a))
    assert stable >= len(seen) - 1 - 2 * history.compactions
    if bound is not None:
        session = bound.session("agent")
        assert session is not None
        assert len(session.find(CompactionEntry)) == history.compactions  # persisted
        # the same view after a reopen, from the stored compactions (no new compaction)
        view = history.view("agent", conversation.messages)
        if kind == "contextree-jsonl":
            bound.close()
            reopened = ContextreeConversationStore(tmp_path / "conversations")
            fresh = ContextreeHistory(window=1500, store=reopened)
            loaded = await reopened.load("agent")
            assert loaded is not None
            assert dumped(fresh.view("agent", loaded.messages)) == dumped(view)
            assert fresh.compactions == 0
            reopened.close()
        else:
            bound.close()


async def test_history_without_conversation_id_or_store() -> None:
    history = ContextreeHistory(window=1200)
    seen: list[list[ModelMessage]] = []
    agent = make_agent(seen, history)
    messages: list[ModelMessage] = []
    for turn in range(6):
        result = await agent.run(f"turn {turn}", message_history=messages)
        messages = result.all_messages()
    assert len(messages) == 24 and history.compactions >= 1
    assert len(seen[-1]) < len(messages)


@pytest.mark.slow
def test_reopen_in_a_new_process_and_continue(tmp_path: Path) -> None:
    root = tmp_path / "conversations"

    async def first() -> None:
        store = ContextreeConversationStore(root)
        history = ContextreeHistory(window=1500, store=store)
        agent = make_agent([], history)
        conversation = Conversation(conversation_id="proc")
        for turn in range(6):
            result = await agent.run(f"turn {turn}", conversation=conversation)
            await store.save(result)
            conversation = result.conversation
        store.close()

    asyncio.run(first())
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_pydantic_ai import make_agent
        from contextree.integrations.pydantic_ai import ContextreeConversationStore, ContextreeHistory

        async def main():
            store = ContextreeConversationStore({str(root)!r})
            history = ContextreeHistory(window=1500, store=store)
            seen = []
            agent = make_agent(seen, history)
            conversation = await store.load("proc")
            before = len(conversation.messages)
            result = await agent.run("turn in another process", conversation=conversation)
            await store.save(result)
            store.close()
            print(json.dumps({{"before": before, "after": len(result.all_messages()),
                              "sent": len(seen[0]), "compactions": history.compactions}}))
        asyncio.run(main())
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS),
                                                         os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["before"] == 24 and report["after"] == 28
    assert report["sent"] < report["before"]  # the stored compaction applies at once

    async def check() -> None:
        store = ContextreeConversationStore(root)
        loaded = await store.load("proc")
        assert loaded is not None and len(loaded.messages) == 28
        assert isinstance(loaded.messages[-1], ModelResponse)
        store.close()

    asyncio.run(check())


def test_missing_extra_names_it() -> None:
    script = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "pydantic_ai" or name.startswith("pydantic_ai."):
                    raise ImportError("No module named " + repr(name))
                return None
        sys.meta_path.insert(0, Block())
        import contextree.integrations  # the package itself imports no framework
        try:
            import contextree.integrations.pydantic_ai
        except ImportError as e:
            print(e)
        else:
            print("imported")
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         timeout=60, check=True)
    assert "contextree[pydantic-ai]" in out.stdout




@pytest.mark.parametrize("kind", ["contextree-memory", "contextree-jsonl", "contextree-postgres"])
async def test_a_conversation_id_with_a_lone_surrogate_is_an_invalid_argument(
        kind: str, tmp_path: Path) -> None:
    """An id decoded from bad bytes (``surrogateescape``) or a broken ``\\ud800`` escape: a
    clear InvalidArgument from every entry point, and the store goes on working."""
    store = make_store(kind, tmp_path)
    assert isinstance(store, ContextreeConversationStore)
    bad = "chat-\ud800-1"
    try:
        calls = [lambda: store.save(Conversation(conversation_id=bad, messages=[req("hi")])),
                 lambda: store.load(bad), lambda: store.read_record(bad)]
        for call in calls:
            with pytest.raises(InvalidArgument, match="pydantic-ai conversation id") as info:
                await call()
            assert "valid characters" in str(info.value)
        with pytest.raises(InvalidArgument, match="lone surrogate"):
            store.session(bad)
        await store.save(Conversation(conversation_id="chat-1", messages=[req("hi")]))
        loaded = await store.load("chat-1")
        assert loaded is not None and len(loaded.messages) == 1
    finally:
        store.close()


def test_the_store_takes_what_session_open_takes_and_refuses_what_it_refuses(
        tmp_path: Path) -> None:
    # One scheme table: a libpq conninfo string is refused with the same advice as
    # Session.open gives, a memory:// catalog and a registered backend work.
    from contextree.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="write it as a URL"):
        ContextreeConversationStore("host=localhost dbname=x")
    store = ContextreeConversationStore("memory://pydantic-test")
    try:
        store._sync_write_record  # noqa: B018 (the store opened)
    finally:
        store.close()


def test_a_directory_written_before_the_catalog_still_opens(tmp_path: Path) -> None:
    # Stores used to name files after the conversation id with a random session id inside.
    import uuid as _uuid

    from contextree import Message, Session
    from contextree.integrations.pydantic_ai._backends import header, legacy_file_name

    root = tmp_path / "conversations"
    root.mkdir()
    old = root / legacy_file_name("chat 1")
    with Session.create(old, session_id=str(_uuid.uuid4()),
                        metadata=header("chat 1", "x").metadata) as s:
        s.append_message(Message.user("kept"))
    store = ContextreeConversationStore(root)
    try:
        session = store.session("chat 1")
        assert session is not None
        assert [m.text for m in session.build_context().messages] == ["kept"]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["contextree-memory", "contextree-postgres"])
async def test_a_conversation_id_that_starts_other_session_ids_is_its_own(
        kind: str, tmp_path: Path) -> None:
    """Catalogs find a session by a unique start of its id, for people who type ids; a store
    looks its conversation up by its exact id: a conversation ``ab`` is new beside sessions
    ``ab...``, and found when there are more of those than a lookup lists."""
    from contextree.entries import SessionHeader, now

    store = make_store(kind, tmp_path)
    assert isinstance(store, ContextreeConversationStore)
    cid = f"c{uuid.uuid4().hex[:8]}"
    try:
        catalog = store._backend.catalog
        for k in range(2):  # sessions of no conversation whose ids start with cid
            catalog.create(SessionHeader(id=f"{cid}{k}", created_at=now()))
        assert await store.load(cid) is None  # new: neither an error nor another's session
        await store.save(Conversation(conversation_id=cid, messages=[req("mine")]))
        for k in range(2, 10):  # more of them, newer than the conversation
            catalog.create(SessionHeader(id=f"{cid}{k}", created_at=now()))
        loaded = await store.load(cid)
        assert loaded is not None and dumped(loaded.messages) == dumped([req("mine")])
        assert catalog.get(cid).id == cid
    finally:
        store.close()
