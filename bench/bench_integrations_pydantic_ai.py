"""Overhead per turn of ``ContextreeConversationStore`` against pydantic-ai's own
``InMemoryConversationStore``, measured in the same run.

    python bench/bench_integrations_pydantic_ai.py                # 10 and 10,000 items
    python bench/bench_integrations_pydantic_ai.py --sizes 10000 --turns 20

A *turn* is what an app does around each agent run: ``load`` the conversation, append one
run's messages (a user prompt, a tool call, its ~1 KB result, the answer), ``save`` it. The
conversation starts with ``size`` messages of the same mix. Stores: pydantic-ai's in-memory
store (the baseline), contextree in memory, contextree JSONL (durable: fdatasync on every
save) and, when ``CONTEXTREE_PG_URL`` is set, contextree PostgreSQL.

Printed per store and size: the median ms of ``load``, of ``save``, of the whole turn, and the
turn's ratio to the baseline's. A second table times a real ``Agent.run`` (``FunctionModel``,
one tool call) around the same store calls, where the model and the framework's own work are
part of each turn, and, for the 10,000-item conversation, the same with ``ContextreeHistory``
compacting what the model is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore
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

from contextree.integrations.pydantic_ai import (
    ContextreeConversationStore,
    ContextreeHistory,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OUTPUT = "\n".join(f"tests/test_{i}.py::test_case PASSED  [{i:3d}%]" for i in range(20))  # ~1 KB


def turn_messages(i: int) -> list[ModelMessage]:
    """One run's messages: prompt, tool call, tool result, answer."""
    return [
        ModelRequest(parts=[UserPromptPart(f"step {i}: run the tests", timestamp=T0)], timestamp=T0),
        ModelResponse(parts=[ToolCallPart("shell", {"command": f"pytest -k {i}"}, tool_call_id=f"c{i}")],
                      usage=RequestUsage(input_tokens=1000 + i, output_tokens=20), timestamp=T0),
        ModelRequest(parts=[ToolReturnPart("shell", OUTPUT, tool_call_id=f"c{i}", timestamp=T0)],
                     timestamp=T0),
        ModelResponse(parts=[TextPart(f"all {i} tests pass")], timestamp=T0),
    ]


def conversation_of(size: int, cid: str) -> Conversation:
    messages: list[ModelMessage] = []
    i = 0
    while len(messages) < size:
        messages += turn_messages(i)
        i += 1
    return Conversation(conversation_id=cid, messages=messages[: max(4, size // 4 * 4)])  # whole turns


def stores(tmp: Path) -> list[tuple[str, Callable[[], ConversationStore]]]:
    out: list[tuple[str, Callable[[], ConversationStore]]] = [
        ("pydantic-ai InMemory (baseline)", InMemoryConversationStore),
        ("contextree memory", ContextreeConversationStore),
        ("contextree JSONL (durable)", lambda: ContextreeConversationStore(tmp / "jsonl")),
    ]
    url = os.environ.get("CONTEXTREE_PG_URL")
    if url:
        from contextree.storage.postgres import create_schema

        create_schema(url)
        out.append(("contextree PostgreSQL", lambda: ContextreeConversationStore(url)))
    return out


async def store_turns(store: ConversationStore, size: int, turns: int) -> dict[str, float]:
    cid = f"bench-{size}-{time.monotonic_ns()}"
    await store.save(conversation_of(size, cid))
    loads, saves, whole = [], [], []
    for t in range(turns):
        start = time.perf_counter()
        c = await store.load(cid)
        loaded = time.perf_counter()
        assert c is not None
        c.messages += turn_messages(10_000 + t)
        before = time.perf_counter()
        await store.save(c)
        end = time.perf_counter()
        loads.append(loaded - start)
        saves.append(end - before)
        whole.append((loaded - start) + (end - before))
    return {"load": statistics.median(loads) * 1e3, "save": statistics.median(saves) * 1e3,
            "turn": statistics.median(whole) * 1e3}


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("shell", {"command": "pytest"})])


async def agent_turns(store: ConversationStore, size: int, turns: int,
                      history: Callable[[ConversationStore], Any] | None = None) -> float:
    capabilities = [history(store)] if history is not None else []
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=capabilities)

    @agent.tool_plain
    def shell(command: str) -> str:
        return OUTPUT

    cid = f"agent-{size}-{time.monotonic_ns()}"
    await store.save(conversation_of(size, cid))
    times = []
    for t in range(turns):
        start = time.perf_counter()
        c = await store.load(cid)
        assert c is not None
        result = await agent.run(f"turn {t}", conversation=c)
        await store.save(result)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def close(store: ConversationStore) -> None:
    if isinstance(store, ContextreeConversationStore):
        store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--turns", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"store calls per turn (median of {args.turns} turns; load + save, ms)")
        print(f"{'store':34} {'items':>7} {'load':>9} {'save':>9} {'turn':>9} {'vs baseline':>12}")
        for size in args.sizes:
            base = None
            for name, make in stores(Path(tmp)):
                store = make()
                r = await store_turns(store, size, args.turns)
                close(store)
                base = base or r["turn"]
                print(f"{name:34} {size:>7} {r['load']:>9.2f} {r['save']:>9.2f} {r['turn']:>9.2f} "
                      f"{r['turn'] / base:>11.2f}x")
        print()
        print("Agent.run turns with the store (load, run with one tool call, save; median ms)")
        print(f"{'store':34} {'items':>7} {'turn':>9} {'vs baseline':>12}")
        for size in args.sizes:
            base = None
            for name, make in stores(Path(tmp) / f"agent-{size}"):
                store = make()
                ms = await agent_turns(store, size, args.turns)
                close(store)
                base = base or ms
                print(f"{name:34} {size:>7} {ms:>9.2f} {ms / base:>11.2f}x")
            store = ContextreeConversationStore(Path(tmp) / f"hist-{size}")

            def bound(s: ConversationStore) -> Any:
                assert isinstance(s, ContextreeConversationStore)
                return ContextreeHistory(window=128_000, store=s)

            ms = await agent_turns(store, size, args.turns, bound)
            close(store)
            name = "  + ContextreeHistory (JSONL)"
            print(f"{name:34} {size:>7} {ms:>9.2f} {ms / (base or ms):>11.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
