"""Repeated compactions with a flat SessionLog update one summary instead of piling them up."""

from __future__ import annotations

from pathlib import Path

import contextree as ct
from contextree.compaction import CompactionPipeline, Digest
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
        .use(ct.SessionLog, path=tmp_path / "log.jsonl")
        .use(ct.SystemPrompt, text="sys")
        .use(ct.ToolResultLoop)
        .use(ct.DefaultCompactionPipeline, window=6000,
             compactor=CompactionPipeline([Digest()]))
        .use(ct.DefaultToolPipeline, tools=[_tool("big")])
        .run(model)
    )
    agent.on("compacted", lambda env, p: compacted.append(p["tokens_after"]))
    turn = agent.start("go")
    assert turn.text == "done"
    assert len(compacted) >= 2
    summaries = [m for m in turn.messages if (m.meta or {}).get("kind") == "compaction_summary"]
    assert len(summaries) == 1
    assert turn.messages[0].role == "system" and turn.messages[0].text == "sys"
