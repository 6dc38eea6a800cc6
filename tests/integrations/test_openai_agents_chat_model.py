"""The Agents SDK session compacts with a Chat Completions model.

The ``Runner`` calls ``run_compaction`` only with a Responses ``response_id`` and no local
tool output; a Chat Completions model (vLLM, Ollama, the docs' own example) has neither.
``ContextreeSession`` compacts when ``add_items`` takes the context past the trigger. Driven
through the real SDK's ``Runner`` and ``OpenAIChatCompletionsModel`` (the real ``openai``
client) against a fake Chat Completions server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from contextree.entries import CompactionEntry
from contextree.integrations.openai_agents import ContextreeSession
from fakes import Recorded
from fakes.openai_server import OpenAIServer, completion, tool_call

set_tracing_disabled(True)


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: " + "def f():\n    return 1\n" * 30


CALLS = iter(range(10**6))


def reply(req: Recorded) -> dict[str, Any]:
    """Call read_file once per user task, then answer; report a provider-like usage."""
    messages = req.body["messages"]
    prompt = len(json.dumps(messages)) // 3
    last = messages[-1]
    if last["role"] == "tool":
        return completion(f"done: {last['content'][:20]}", prompt_tokens=prompt)
    n = next(CALLS)
    return completion(None, tool_calls=[tool_call(f"call_{n}", "read_file",
                                                  {"path": f"src/m{n}.py"})],
                      prompt_tokens=prompt)


def test_a_chat_completions_model_compacts_through_the_runner() -> None:
    asyncio.run(run())


async def run() -> None:
    with OpenAIServer() as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
        agent = Agent(name="coder", instructions="Be brief.", model=model, tools=[read_file])
        session = ContextreeSession("chat", window=3_000)
        called: list[object] = []
        original = session.run_compaction

        async def spy(args: Any = None, **kw: Any) -> None:
            called.append(args)
            await original(args, **kw)

        session.run_compaction = spy  # type: ignore[method-assign]
        for t in range(12):
            server.reply(reply, reply)
            result = await Runner.run(agent, f"task {t}: fix src/m{t}.py", session=session)
            assert result.final_output.startswith("done")
        assert not called  # the Runner never offered a compaction: no response id
        compactions = session.session.find(CompactionEntry)
        assert compactions, "add_items compacted past the trigger"
        assert session.last_compaction is not None and session.last_compaction.entry_id
        # the model was sent the compacted view: the last request is under the window
        sent = server.requests[-1].body["messages"]
        assert any("compacted" in str(m.get("content")) or "[Cleared" in str(m.get("content"))
                   for m in sent)
        assert len(json.dumps(sent)) // 3 < 3_000
        # every tool call still has its output, and the history is all there
        calls = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert calls == answered
        assert len(list(session.session.entries())) > len(session.session.build_context().messages)
        session.close()
        await client.close()
