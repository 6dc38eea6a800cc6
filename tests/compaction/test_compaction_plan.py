"""Compaction as a pure plan, and one usage anchor for every counter.

The planner reads a branch or a plain list of messages and returns the entry to append;
only ``Session.compact`` writes. The context builder, the planner, the runtime and the CLI
count the same context the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import contextree as ct
import contextree._session as session_module
from contextree import Message, ToolCall, Usage
from contextree._context import SUMMARY_PREFIX
from contextree.cli import app
from contextree.compaction import (
    CompactionLadder,
    CompactionPolicy,
    Digest,
    SlidingWindow,
    ToolResults,
    plan_compaction,
)
from contextree.entries import CompactionEntry
from contextree.markers import Kind
from contextree.models import ScriptedModel
from contextree.tokens import EstimateCounter, count_context

COUNTER = EstimateCounter()


def conversation(steps: int = 12, *, prefix: str = "") -> list[Message]:
    """A user task and ``steps`` read steps with 60-line results."""
    msgs = [Message.user(f"{prefix}Refactor every module; keep the API stable.")]
    for i in range(steps):
        call = ToolCall(id=f"{prefix}c{i}", name="read", arguments={"path": f"src/m{i}.py"})
        msgs.append(Message.assistant(f"{prefix}Reading module {i}.", tool_calls=[call]))
        body = "\n".join(f"line {i}.{j}: value = compute({j})" for j in range(60))
        msgs.append(Message.tool(body, tool_call_id=call.id, name="read"))
    msgs.append(Message.assistant(f"{prefix}Done reading."))
    return msgs


def ladder() -> CompactionLadder:
    return CompactionLadder([ToolResults(keep_recent=1), SlidingWindow(), Digest()])


def fill(session: ct.Session, messages: list[Message]) -> None:
    for m in messages:
        session.append_message(m)


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constructing a Session fails: planning must not need one."""

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Session was built to plan a compaction")

    monkeypatch.setattr(session_module.Session, "__init__", refuse)


# -- the planner --------------------------------------------------------------------------


def test_plan_on_a_message_list_needs_no_session(no_session: None) -> None:
    msgs = conversation()
    window = int(COUNTER.count_messages(msgs) * 0.6 / 0.4)
    result = plan_compaction(msgs, CompactionPolicy(window), ladder(), COUNTER)
    assert isinstance(result.entry, CompactionEntry) and result.entry_id is None
    assert result.tokens_before == COUNTER.count_messages(msgs)
    after = result.context().messages
    assert COUNTER.count_messages(after) == result.tokens_after < result.tokens_before
    assert result.reached_target
    # what the user typed is kept; the summary carries its raw text in its marker
    assert any(m.role == "user" and m.text == msgs[0].text for m in after)
    summaries = [m for m in after if m.kind is Kind.COMPACTION_SUMMARY]
    if result.summary:
        assert len(summaries) == 1 and (summaries[0].meta or {})["summary"] == result.summary


def test_a_previous_summary_in_a_message_list_is_updated_not_piled_up() -> None:
    msgs = conversation()
    window = int(COUNTER.count_messages(msgs) * 0.5 / 0.4)
    digest = CompactionLadder([Digest()])
    first = plan_compaction(msgs, CompactionPolicy(window), digest, COUNTER)
    assert first.summary
    grown = [*first.context().messages, *conversation(8, prefix="second ")]
    second = plan_compaction(grown, CompactionPolicy(window), digest, COUNTER)
    assert second.entry is not None
    after = second.context().messages
    summaries = [m for m in after if m.kind is Kind.COMPACTION_SUMMARY]
    assert len(summaries) == 1
    # the old summary's state (carried in the marker) is merged into the new one, and the
    # prefix is never doubled
    assert (summaries[0].meta or {})["digest"]["users"] == [msgs[0].text]
    assert any(m.role == "user" and m.text.startswith("second ") for m in after)
    assert first.summary.split("\n")[0] not in second.summary  # one header, recounted
    assert summaries[0].text.count(SUMMARY_PREFIX) == 1
    assert second.entry.tokens_before == second.tokens_before


def test_plan_on_a_branch_returns_the_entry_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        fill(s, [Message.system("You are terse."), *conversation()])
        on_disk, count, leaf = path.read_bytes(), len(s), s.leaf_id
        window = int(COUNTER.count_messages(s.build_context().messages) * 0.6 / 0.4)
        planned = plan_compaction(s.branch(), CompactionPolicy(window), ladder(), COUNTER)
        assert isinstance(planned.entry, CompactionEntry)
        assert planned.entry.parent_id == leaf and planned.entry.id not in s
        assert path.read_bytes() == on_disk and len(s) == count and s.leaf_id == leaf
        # Session.compact plans the same and appends it
        done = s.compact(window, ladder=ladder(), counter=COUNTER)
        stored = s.get_entry(s.leaf_id or "")
        assert isinstance(stored, CompactionEntry) and done.entry == stored
        assert done.entry_id == stored.id and len(s) == count + 1
        for name in ("summary", "first_kept_entry_id", "tokens_before", "tokens_after",
                     "cleared", "pinned"):
            assert getattr(stored, name) == getattr(planned.entry, name), name
        assert [m.text for m in planned.context().messages] == \
            [m.text for m in s.build_context().messages]
        assert done.context().messages == s.build_context().messages
    with ct.Session.open(path, readonly=True) as again:
        assert again.build_context().messages == s.build_context().messages


def test_the_runtime_compacts_a_flat_log_without_a_session(tmp_path: Path,
                                                            no_session: None) -> None:
    @ct.tool(name="big")
    def big() -> str:
        """Return a large output."""
        return ("x" * 59 + "\n") * 100

    calls = [Message.assistant(f"Step {i}.", tool_calls=[ToolCall(id=f"c{i}", name="big")])
             for i in range(8)]
    compacted: list[dict[str, Any]] = []
    agent = (ct.agent()
             .use(ct.runtime.SessionLog, path=tmp_path / "log.jsonl")
             .use(ct.runtime.ToolResultLoop)
             .use(ct.runtime.DefaultCompactionPipeline, window=6000,
                  ladder=CompactionLadder([Digest()]))
             .use(ct.runtime.DefaultToolPipeline, tools=[big])
             .run(ScriptedModel([*calls, "done"])))
    agent.on("compacted", lambda env, p: compacted.append(p))
    assert agent.start("go").text == "done"
    assert compacted and all(p["entry_id"] for p in compacted)


# -- one usage anchor ---------------------------------------------------------------------


def anchored_session(path: Path) -> ct.Session:
    """A session with a compaction, stale usage before it and fresh usage after it."""
    s = ct.Session.create(path)
    s.append_message(Message.user("Find the bug."))
    s.append_message(Message.assistant("Looking.", usage=Usage(input=900_000, output=5)))
    kept = s.append_message(Message.user("It is in the parser."))
    s.append_message(Message.assistant("Found it.", usage=Usage(input=800_000, output=5)))
    s.append_compaction(summary="Looked for the bug.", first_kept_entry_id=kept,
                        tokens_before=900_000)
    s.append_message(Message.user("Fix it."))
    s.append_message(Message.assistant("Fixed.",
                                       usage=Usage(input=3_000, cache_read=400, output=20)))
    s.append_message(Message.user("Thanks, now add a test."))
    return s


def test_the_same_context_is_counted_the_same_way_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = anchored_session(path)
    ctx = s.build_context()
    anchor = ctx.usage_anchor
    assert anchor is not None and ctx.messages[anchor].text == "Fixed."
    assert ctx.fresh_from == [m.text for m in ctx.messages].index("Fix it.")
    expected = 3_420 + COUNTER.count_messages(ctx.messages[anchor + 1 :])
    # the context builder's anchor
    assert count_context(ctx.messages, COUNTER, fresh_from=ctx.fresh_from) == expected
    # the planner, on the branch and on the plain message list
    policy = CompactionPolicy(1_000_000)
    assert s.compact(1_000_000, counter=COUNTER, dry_run=True, force=True).tokens_before \
        == expected
    assert plan_compaction(ctx.messages, policy, counter=COUNTER, force=True,
                           fresh_from=ctx.fresh_from).tokens_before == expected
    # the runtime: what it counts before deciding, and what the compaction it runs counts
    # the CLI
    shown = CliRunner().invoke(app, ["show", str(path), "--context", "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["total_tokens"] == expected
    # the runtime: what it counts before deciding, and what the compaction it runs counts
    # (the reported overhead cannot be dropped, so this ladder cannot reach the target)
    events: list[dict[str, Any]] = []
    agent = (ct.agent()
             .use(ct.runtime.SessionTree, session=s)
             .use(ct.runtime.DefaultCompactionPipeline, window=4_000, counter=COUNTER)
             .run(ScriptedModel(["ok"])))
    agent.on("*", lambda env, p: events.append(p))
    agent.start()
    start, *_, end = (p for p in events if p["event"].startswith("compact"))
    assert start["event"] == "compaction_start" and start["tokens"] == expected
    assert end.get("tokens_before", end.get("tokens")) == expected
    s.close()


def test_usage_from_before_the_compaction_is_stale_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path)
    s.append_message(Message.user("Find the bug."))
    kept = s.append_message(Message.assistant("Found it.", usage=Usage(input=800_000)))
    s.append_compaction(summary="Looked.", first_kept_entry_id=kept, tokens_before=800_000)
    s.append_message(Message.user("Fix it."))
    ctx = s.build_context()
    estimate = COUNTER.count_messages(ctx.messages)
    shown = CliRunner().invoke(app, ["show", str(path), "--context", "--json"])
    data = json.loads(shown.stdout)
    assert data["total_is_estimate"] is True and data["total_tokens"] == estimate
    assert ctx.usage_anchor is None
    assert count_context(ctx.messages, COUNTER, fresh_from=ctx.fresh_from) == estimate
    assert s.compact(1_000_000, counter=COUNTER, dry_run=True, force=True).tokens_before \
        == estimate
    starts: list[dict[str, Any]] = []
    agent = (ct.agent()
             .use(ct.runtime.SessionTree, session=s)
             .use(ct.runtime.DefaultCompactionPipeline, window=max(2, estimate), compact_at=0.5,
                  compact_to=0.25, counter=COUNTER)
             .run(ScriptedModel(["ok"])))
    agent.on("compaction_start", lambda env, p: starts.append(p))
    agent.start()
    assert starts and starts[0]["tokens"] == estimate
    s.close()


def test_a_system_prompt_put_in_front_keeps_stale_usage_stale(tmp_path: Path) -> None:
    """SystemPrompt inserts before the loaded history: the stale usage must stay stale."""
    s = ct.Session.in_memory()
    s.append_message(Message.user("Find the bug."))
    kept = s.append_message(Message.assistant("Found it.", usage=Usage(input=800_000)))
    s.append_compaction(summary="Looked.", first_kept_entry_id=kept, tokens_before=800_000)
    starts: list[dict[str, Any]] = []
    agent = (ct.agent()
             .use(ct.runtime.SessionTree, session=s)
             .use(ct.runtime.SystemPrompt, text="You are terse.")
             .use(ct.runtime.DefaultCompactionPipeline, window=1_000_000, counter=COUNTER)
             .run(ScriptedModel(["ok"])))
    agent.on("compaction_start", lambda env, p: starts.append(p))
    agent.start("Fix it.")
    assert starts == []  # the 800k report no longer counts: far under the trigger
