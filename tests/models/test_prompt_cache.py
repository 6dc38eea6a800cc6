"""A stable prefix and prompt caching: ``AnthropicMessages`` places ``cache_control``
breakpoints, and in an agent loop each request between compactions extends the previous one
byte for byte, so a provider's cache serves all of it; cached tokens are read from usage,
priced at the cache rate, and ``stats`` shows the share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import contextree as ct
from contextree import Message, Usage
from contextree._pricing import cost_of
from contextree._stats import UsageStats
from contextree.compaction import CompactionLadder, Digest
from contextree.markers import Kind
from contextree.models import AnthropicMessages
from contextree.models._wire_anthropic import CACHE_CONTROL, cache_breakpoints
from fakes import Recorded
from fakes.anthropic_server import (
    AnthropicServer,
    CachingAnthropicServer,
    message,
    text,
    thinking,
    tool_use,
)
from helpers import run_json


def test_breakpoints_sit_on_the_last_tool_the_system_prompt_and_the_last_block() -> None:
    with AnthropicServer() as server:
        server.reply(message(text("ok")))
        m = AnthropicMessages("c", base_url=server.url, api_key="k")
        summary = Message.system("Earlier: the user asked about Paris.").marked(
            Kind.COMPACTION_SUMMARY)
        spec = {"name": "read", "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
        m.complete([summary, Message.system("You are helpful."), Message.user("Hi")],
                   tools=[spec])
        body = server.bodies[0]
    # the system prompt first, the summary after it: a compaction leaves the start alone
    assert body["system"] == [{"type": "text", "cache_control": CACHE_CONTROL,
                               "text": "You are helpful.\n\nEarlier: the user asked about "
                               "Paris."}]
    assert body["tools"][-1]["cache_control"] == CACHE_CONTROL
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Hi", "cache_control": CACHE_CONTROL}]}]


def test_no_breakpoint_on_thinking_and_existing_ones_are_kept() -> None:
    request = {"system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral",
                                                                         "ttl": "1h"}}],
               "messages": [{"role": "assistant", "content": [thinking("t", "sig")]}]}
    out = cache_breakpoints(request)
    assert out["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in out["messages"][0]["content"][0]
    assert request["messages"][0]["content"][0] == thinking("t", "sig")  # not modified


def test_the_fake_server_rejects_what_the_api_rejects() -> None:
    with AnthropicServer() as server:
        body = {"model": "c", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x",
                                          "cache_control": {"type": "forever"}}]}]}
        assert "cache_control" in (server.validate(body) or "")
        many = [{"type": "text", "text": f"x{i}", "cache_control": CACHE_CONTROL}
                for i in range(5)]
        body["messages"] = [{"role": "user", "content": many}]
        assert "maximum of 4" in (server.validate(body) or "")


@ct.tool
def read_file(path: str) -> str:
    """Read a file."""
    return "".join(f"{path}:{i}: value = {i}\n" for i in range(60))


def agent_loop(tmp_path: Path, steps: int, window: int) -> tuple[list[tuple[int, int, int]],
                                                                  list[int], Path]:
    with CachingAnthropicServer() as server:
        calls = iter(range(10**6))

        def reply(req: Recorded) -> dict[str, Any]:
            n = next(calls)
            if n + 1 >= steps:
                return message(text("done"))
            return message(text(f"step {n}"), tool_use(f"toolu_{n}", "read_file",
                                                        {"path": f"src/m{n}.py"}))

        server.reply(*[reply] * (steps + 5))
        path = tmp_path / "loop.jsonl"
        compacted: list[int] = []
        agent = (ct.agent()
                 .use(ct.runtime.SessionTree, path=path)
                 .use(ct.runtime.SystemPrompt, text="You are a coding agent. " * 20)
                 .use(ct.runtime.ToolResultLoop)
                 .use(ct.runtime.DefaultCompactionPipeline, window=window,
                      ladder=CompactionLadder([Digest()]))
                 .use(ct.runtime.DefaultToolPipeline, tools=[read_file])
                 .run(AnthropicMessages("claude-test", base_url=server.url, api_key="k")))
        agent.on("compacted", lambda env, p: compacted.append(len(server.usages)))
        assert agent.start("go through the modules").text == "done"
        return server.usages, compacted, path


def test_each_request_between_compactions_extends_the_previous_one(tmp_path: Path) -> None:
    usages, compacted, path = agent_loop(tmp_path, 30, 12_000)
    assert compacted, "the loop compacted"
    cold = {0, *compacted}
    for i in range(1, len(usages)):
        if i in cold:
            continue
        # all of the previous request is read from the cache: it is a prefix of this one
        assert usages[i][1] == sum(usages[i - 1]), (i, usages[i], usages[i - 1])
    # the reported cache reads are in the session, and stats shows the share
    stats = run_json("stats", path)["branch"]
    read = sum(r for i, (_, r, _) in enumerate(usages))
    assert stats["usage"]["cache_read"] == read
    prompt = sum(sum(u) for u in usages)
    assert abs(stats["cache_hit_share"] - read / prompt) < 1e-9 and stats[
        "cache_hit_share"] > 0.6


def test_cache_hit_share_and_the_cache_rate() -> None:
    stats = UsageStats(usage=Usage(input=100, cache_read=900, cache_write=0, output=10))
    assert stats.cache_hit_share == 0.9
    assert UsageStats().cache_hit_share is None
    cold = Message.assistant("x", usage=Usage(input=10_000, output=100), provider="anthropic",
                             model="claude-sonnet-4-5")
    warm = cold.replace(usage=Usage(input=0, cache_read=10_000, output=100))
    cost_cold, cost_warm = cost_of(cold), cost_of(warm)
    if cost_cold is not None and cost_warm is not None:  # the price table is installed
        assert cost_warm < cost_cold * 0.3  # cache reads bill at a tenth of the input rate
