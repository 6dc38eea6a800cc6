"""One count: the planner, ``show --context``, ``compact``, the runtime trigger and a
message-list plan give the same number for a context, before and after a compaction, with
the provider scale (reported usage over the estimate) carried across the compaction."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextree as ct
from contextree import Message, ToolCall, Usage
from contextree.cli.commands_read import context_size
from contextree.compaction import CompactionPolicy, plan_compaction
from contextree.tokens import EstimateCounter, count_context, measure_context

COUNTER = EstimateCounter()
PROFILE = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow])

turns = st.lists(st.tuples(st.integers(5, 400), st.integers(0, 3000), st.booleans()),
                 min_size=2, max_size=14)


def build(spec: list[tuple[int, int, bool]], scale: float) -> ct.Session:
    """A session whose assistant messages report ``scale`` times the estimate (or, when a
    turn says so, no usage at all)."""
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    for i, (user, result, reports) in enumerate(spec):
        s.append_message(Message.user(f"task {i}: " + "word " * (user // 5)))
        call = ToolCall(id=f"c{i}", name="read", arguments={"path": f"src/m{i}.py"})
        ctx = s.build_context()
        seen = ctx.messages
        usage = (Usage(input=int(COUNTER.count_messages(seen) * scale), output=7)
                 if reports else None)
        s.append_message(Message.assistant(f"reading {i}", tool_calls=[call], usage=usage))
        s.append_message(Message.tool("x = 1\n" * (result // 6 + 1), tool_call_id=f"c{i}",
                                      name="read"))
    return s


def counts(s: ct.Session, window: int) -> set[int]:
    """Every way contextree counts the session's context now."""
    ctx = s.build_context()
    plan = s.compact(window, dry_run=True, force=True)
    found = {ctx.measure(COUNTER).tokens, context_size(ctx, COUNTER)[0], plan.tokens_before,
             # the runtime's trigger: the list it holds, knowing what came after the
             # compaction (the compacted view is its first messages)
             count_context(ctx.messages, COUNTER, fresh_from=ctx.fresh_from),
             measure_context(ctx.messages, COUNTER, fresh_from=ctx.fresh_from).tokens}
    # the runtime without a session plans on the list itself
    listed = plan_compaction(ctx.messages, CompactionPolicy(window), None, COUNTER,
                             fresh_from=ctx.fresh_from, force=True)
    found.add(listed.tokens_before)
    return found


@PROFILE
@given(turns, turns, st.sampled_from([0.6, 1.0, 2.3]), st.floats(0.2, 0.9))
def test_every_count_agrees_before_and_after_compactions(
        first: list[tuple[int, int, bool]], more: list[tuple[int, int, bool]], scale: float,
        fill: float) -> None:
    s = build(first, scale)
    before = counts(s, 1_000_000)
    assert len(before) == 1
    (tokens,) = before
    window = max(10, int(tokens / max(fill, 0.71)))
    r = s.compact(window)
    if r.entry_id is None:
        return
    after = counts(s, window)
    # right after it, every count is the compaction's own, scale included
    assert after == {r.tokens_after}
    # new messages are estimated on top of it, until the provider reports again
    s.append_message(Message.user("and one more thing"))
    grown = counts(s, window)
    assert grown == {r.tokens_after + COUNTER.count_message(Message.user("and one more thing"))}
    # a second compaction starts from there
    again = s.compact(window, force=True)
    if again.entry_id is not None:
        assert again.tokens_before == r.tokens_after + COUNTER.count_message(
            Message.user("and one more thing"))
        assert counts(s, window) == {again.tokens_after}


def test_the_scale_is_carried_across_a_compaction() -> None:
    """A provider that counts 2.3x the estimate: the next plan starts where `compact` and
    `show --context` left off, not from the plain estimate."""
    s = build([(200, 2000, True)] * 10, 2.3)
    r = s.compact(6000)
    assert r.entry_id is not None
    ctx = s.build_context()
    estimate = COUNTER.count_messages(ctx.messages)
    again = s.compact(6000, dry_run=True, force=True)
    assert again.tokens_before == r.tokens_after == ctx.measure(COUNTER).tokens
    assert abs(again.tokens_before / estimate - r.tokens_before / COUNTER.count_messages(
        r.branch and ct.build_context(r.branch).messages)) < 0.05
