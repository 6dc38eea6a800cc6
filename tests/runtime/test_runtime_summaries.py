"""Repeated compactions with a flat SessionLog update one summary instead of piling them up."""

from __future__ import annotations

from pathlib import Path

import contextree as ct
from contextree.compaction import CompactionLadder, Digest
from contextree.models import ScriptedModel


def _tool(name: str) -> ct.Tool:
    @ct.tool(name=name)
    def big() -> str:
        """Return a large output."""
        return ("x" * 59 + "\n") * 100

    return big


def test_session_log_keeps_a_single_summary_across_compactions(tmp_path: Path) -> None:
    calls = [ct.Message.assistant(f"I decided to run step {i}.", tool_calls=[ct.ToolCall(id=f"c{i}", name="big")])
             for i in range(10)]
    model = ScriptedModel([*calls, "done"])
    compacted: list[int] = []
    agent = (
        ct.agent()
        .use(ct.runtime.SessionLog, path=tmp_path / "log.jsonl")
        .use(ct.runtime.SystemPrompt, text="sys")
        .use(ct.runtime.ToolResultLoop)
        .use(ct.runtime.DefaultCompactionPipeline, window=6000,
             ladder=CompactionLadder([Digest()]))
        .use(ct.runtime.DefaultToolPipeline, tools=[_tool("big")])
        .run(model)
    )
    agent.on("compacted", lambda env, p: compacted.append(p["tokens_after"]))
    turn = agent.start("go")
    assert turn.text == "done"
    assert len(compacted) >= 2
    summaries = [m for m in turn.messages if (m.meta or {}).get("kind") == "compaction_summary"]
    assert len(summaries) == 1
    assert turn.messages[0].role == "system" and turn.messages[0].text == "sys"


def test_usage_reported_after_a_compaction_anchors_the_next_count(tmp_path: Path) -> None:
    """The reply after a compaction reports what the provider really counted: that figure
    drives the next decision, not a fresh estimate of the whole conversation."""
    big = ("y" * 59 + "\n") * 100  # ~1,500 estimated tokens
    step = 0

    def reply(messages: list[ct.Message]) -> ct.Message:
        nonlocal step
        step += 1
        if step > 8:
            return ct.Message.assistant("done")
        compacted = any((m.meta or {}).get("kind") == "compaction_summary" for m in messages)
        # Before any compaction ScriptedModel estimates usage itself; after one, the
        # "provider" reports a prompt just over the 4,200-token trigger.
        usage = ct.Usage(input=4_300, output=10, total=4_310) if compacted else None
        return ct.Message.assistant(f"I decided to fetch part {step}.",
                                    tool_calls=[ct.ToolCall(id=f"c{step}", name="fetch")],
                                    usage=usage)

    @ct.tool
    def fetch() -> str:
        """Fetch a large document."""
        return big

    starts: list[int] = []
    agent = (
        ct.agent()
        .use(ct.runtime.SessionTree, path=tmp_path / "s.jsonl")
        .use(ct.runtime.ToolResultLoop)
        .use(ct.runtime.DefaultCompactionPipeline, window=6000,
             ladder=CompactionLadder([Digest()]))
        .use(ct.runtime.DefaultToolPipeline, tools=[fetch])
        .run(ScriptedModel([reply] * 10))
    )
    agent.on("compaction_start", lambda env, p: starts.append(step))
    agent.start("go")
    first = starts[0]
    # Right after a compaction the estimate alone (~2,700 tokens) is under the trigger; the
    # reported 4,300 + the new tool result is over it, so the next call compacts again.
    assert first + 1 in starts and first + 2 in starts
