"""``CutViews`` gives the view of a candidate compaction entry without building the branch
again: it must be exactly what ``build_context([*branch, entry])`` gives, for any cut, pins
and cleared results, on branches with every kind of entry that gives messages on its own;
and it steps aside where entries depend on others (context edits, projected custom
entries)."""

from __future__ import annotations

import random

import pytest

import contextree as ct
from contextree import Message, ToolCall, Usage
from contextree._context import CutViews
from contextree.entries import CompactionEntry


def _branch(seed: int) -> list[ct.entries.AnyEntry]:
    """A random branch: turns with calls (some results missing, some orphaned or repeated),
    an older compaction, branch summaries, custom messages and entries, state changes."""
    rnd = random.Random(seed)
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    n = 0
    for turn in range(rnd.randint(2, 9)):
        s.append_message(Message.user(f"Turn {turn}: fix the loader"))
        for _ in range(rnd.randint(0, 4)):
            calls = []
            for _ in range(rnd.randint(1, 3)):
                n += 1
                calls.append(ToolCall(id=f"c{n % 7}", name=rnd.choice(["read", "shell"]),
                                      arguments={"path": f"src/m{n}.py"}))
            s.append_message(Message.assistant("Working.", tool_calls=calls,
                                               usage=Usage(input=100 * n, output=5),
                                               model="m", provider="p"))
            for c in calls:
                for _ in range(rnd.choice([0, 1, 1, 1, 2])):  # missing, once, repeated
                    s.append_message(Message.tool(f"out {c.id}\n" * rnd.randint(1, 5),
                                                  tool_call_id=c.id, name=c.name))
            if rnd.random() < 0.2:
                s.append_message(Message.tool("orphan", tool_call_id="nobody"))
        roll = rnd.random()
        if roll < 0.15:
            s.append_custom_message("note", f"a note in turn {turn}")
        elif roll < 0.3:
            s.append_custom("app", {"turn": turn})
        elif roll < 0.4:
            s.append_model_change("p", f"model-{turn}")
        elif roll < 0.5:
            s.append_active_tools_change(["read", "shell"])
        elif roll < 0.6:
            s.append_thinking_level_change("high")
        elif roll < 0.7:
            s.append_branch_summary(s.leaf_id or "", f"branch work in turn {turn}")
        elif roll < 0.8:
            ids = [e.id for e in s.branch()]
            s.append_compaction(summary="older summary", first_kept_entry_id=rnd.choice(ids),
                                tokens_before=10, pinned=[ids[0]])
        s.append_message(Message.assistant(f"Done with turn {turn}."))
    return s.branch()


@pytest.mark.parametrize("seed", range(60))
def test_cut_views_equal_built_contexts(seed: int) -> None:
    branch = _branch(seed)
    views = CutViews.of(branch)
    assert views is not None
    rnd = random.Random(seed)
    ids = [e.id for e in branch]
    tools = [e.id for e in branch if getattr(getattr(e, "message", None), "role", "") == "tool"]
    for k in range(12):
        first = rnd.randrange(len(branch))
        pinned = rnd.sample(ids, rnd.randint(0, 3)) + (["unknown"] if k % 5 == 0 else [])
        cleared = {t: f"[cleared {t}]" for t in rnd.sample(tools, min(len(tools),
                                                                      rnd.randint(0, 6)))}
        comp = CompactionEntry("\x00cand", ids[-1], "", summary="",
                               first_kept_entry_id=ids[first], tokens_before=1,
                               cleared=cleared or None, pinned=pinned or None,
                               tokens_after=rnd.choice([None, 500]))
        shown = views.view(comp)
        assert shown is not None
        assert shown == ct.build_context([*branch, comp])


def test_cut_views_step_aside() -> None:
    branch = _branch(1)
    comp = CompactionEntry("\x00cand", branch[-1].id, "", summary="a summary",
                           first_kept_entry_id=branch[1].id, tokens_before=1)
    views = CutViews.of(branch)
    assert views is not None
    assert views.view(comp) is None  # a summary: not a bare view
    s = ct.Session.in_memory()
    s.append_message(Message.user("hello"))
    target = s.append_message(Message.assistant("hi"))
    s.append_context_edit(target, "edited")
    assert CutViews.of(s.branch()) is None
    s2 = ct.Session.in_memory()
    s2.append_custom("shown", {"x": 1})
    assert CutViews.of(s2.branch(), {"shown": lambda e, i, es: [Message.user("x")]}) is None
    assert CutViews.of(s2.branch(), {"other": lambda e, i, es: []}) is not None
