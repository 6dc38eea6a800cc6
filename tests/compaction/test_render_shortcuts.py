"""The planner renders a plan without building the whole branch again when it can (a plan
that only adds a summary, or only clears more tool results, than one already rendered): the
view must be exactly what ``build_context`` gives."""

from __future__ import annotations

from dataclasses import replace

import contextree as ct
from contextree import Message
from contextree.compaction import CompactionPolicy, CompactionState, Digest, ToolResults
from contextree.tokens import EstimateCounter


def _session() -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    for i in range(20):
        s.append_message(Message.user(f"Step {i}: read src/m{i}.py"))
        call = ct.ToolCall(id=f"c{i}", name="read", arguments={"path": f"src/m{i}.py"})
        s.append_message(Message.assistant("Reading.", tool_calls=[call]))
        s.append_message(Message.tool("x = 1\n" * 400, tool_call_id=f"c{i}", name="read"))
    return s


def _same(state: CompactionState, plan: ct.compaction.Plan) -> None:
    shown = state.render(plan)
    built = ct.build_context([*state.branch, state.entry_for(plan)])
    assert shown.messages == built.messages
    assert shown.entry_ids == built.entry_ids
    assert shown.fresh_from == built.fresh_from
    assert shown.compaction == built.compaction


def test_derived_views_equal_the_built_ones() -> None:
    s = _session()
    state = CompactionState(s.branch(), CompactionPolicy(6_000), EstimateCounter())
    cleared = ToolResults(keep_recent=2)(state, state.initial_plan)
    assert cleared is not None and cleared.cleared
    _same(state, cleared)  # from the initial view, more results cleared
    more = replace(cleared, cleared={**cleared.cleared, "nope": "x"})
    _same(state, more)
    folded = Digest()(state, cleared)
    assert folded is not None and folded.summary
    _same(state, folded)  # from its view without the summary
    fewer = replace(folded, cleared=dict(list(folded.cleared.items())[:1]))
    _same(state, fewer)  # fewer cleared than a rendered plan: built again
    _same(state, replace(fewer, summary=""))
