"""Context building: the seed's compaction rules, derived state, and the pairing invariant."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextree as ct

U = ct.Message.user
A = ct.Message.assistant


def call(cid: str, name: str = "read") -> ct.ToolCall:
    return ct.ToolCall(id=cid, name=name, arguments={"path": cid})


def result(cid: str, text: str = "out") -> ct.Message:
    return ct.Message.tool(text, tool_call_id=cid)


def texts(ctx: ct.SessionContext) -> list[str]:
    return [m.text for m in ctx.messages]


# -- the seed's rules ----------------------------------------------------------------------


def test_without_compaction_every_message_on_the_branch_in_order() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(U("one"))
    s.append_message(U("off-branch"))
    s.move_to(a)
    s.append_message(A("two"))
    s.append_model_change("p", "m")  # state changes produce no messages
    s.set_label(a, "x")
    s.set_name("n")
    s.append_message(U("three"))
    assert texts(s.build_context()) == ["one", "two", "three"]


def test_branch_summaries_and_custom_messages_become_messages() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(U("one"))
    s.append_message(U("abandoned"))
    bs = s.move_to(a, "the abandoned branch tried X")
    cm = s.append_custom_message("ext.note", "remember Y", details={"d": 1}, display=False)
    ctx = s.build_context()
    assert [m.role for m in ctx.messages] == ["user", "system", "user"]
    assert ctx.messages[1].meta == {"kind": "branch_summary", "from_id": a}
    assert ctx.messages[1].text.endswith("the abandoned branch tried X")
    assert ctx.messages[2].text == "remember Y"
    assert ctx.messages[2].meta == {"kind": "custom_message", "custom_type": "ext.note"}
    assert ctx.entry_ids == [a, bs, cm]


def test_custom_entries_are_dropped_unless_a_projector_claims_them() -> None:
    seen: list[tuple[str, int, list[str]]] = []

    def project(entry: ct.entries.CustomEntry, index: int, entries: Sequence[Any]) -> list[ct.Message]:
        seen.append((entry.custom_type, index, [e.id for e in entries]))
        return [U(f"projected {entry.data['n']}")]

    s = ct.Session.in_memory()
    first = s.append_message(U("one"))
    c1 = s.append_custom("ext.todo", {"n": 1})
    c2 = s.append_custom("ext.other", {"n": 2})
    assert texts(s.build_context()) == ["one"]
    ctx = s.build_context(projectors={"ext.todo": project})
    assert texts(ctx) == ["one", "projected 1"]
    assert ctx.entry_ids == [first, c1]
    assert seen == [("ext.todo", 1, [first, c1, c2])]
    # projectors given to the session apply to every build
    s2 = ct.Session(s.storage, projectors={"ext.other": project})
    assert texts(s2.build_context()) == ["one", "projected 2"]


def test_compaction_keeps_summary_then_first_kept_onwards_then_later_entries() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("m1"))
    s.append_message(A("m2"))
    k = s.append_message(U("m3"))
    s.append_message(A("m4"))
    c = s.append_compaction(summary="what happened before", first_kept_entry_id=k, tokens_before=12345)
    s.append_message(U("m5"))
    ctx = s.build_context()
    assert ctx.messages[0].role == "system"
    assert ctx.messages[0].meta == {"kind": "compaction_summary", "entry_id": c,
                                    "tokens_before": 12345,
                                    "summary": "what happened before"}  # the raw summary
    assert ctx.messages[0].text.endswith("what happened before")
    assert texts(ctx)[1:] == ["m3", "m4", "m5"]
    assert ctx.compaction is not None and ctx.compaction.id == c
    assert ctx.entry_ids[0] == c


def test_compaction_retained_tail_replaces_kept_entries() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("m1"))
    k = s.append_message(A("m2"))
    c = s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10, retained_tail=[U("tail1"), A("tail2")])
    s.append_message(U("after"))
    ctx = s.build_context()
    assert texts(ctx)[1:] == ["tail1", "tail2", "after"]
    assert ctx.entry_ids[:3] == [c, c, c]


def test_compaction_without_first_kept_keeps_only_later_entries() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("m1"))
    s.append_compaction(summary="sum", first_kept_entry_id=None, tokens_before=10)
    s.append_message(U("after"))
    assert texts(s.build_context())[1:] == ["after"]


def test_compaction_with_empty_summary_adds_no_summary_message() -> None:
    s = ct.Session.in_memory()
    k = s.append_message(U("m1"))
    s.append_compaction(summary="", first_kept_entry_id=k, tokens_before=10)
    assert [m.role for m in s.build_context().messages] == ["user"]


def test_latest_compaction_on_the_branch_decides() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("m1"))
    k2 = s.append_message(U("m2"))
    s.append_compaction(summary="first", first_kept_entry_id=k2, tokens_before=10)
    k3 = s.append_message(U("m3"))
    s.append_compaction(summary="second", first_kept_entry_id=k3, tokens_before=20)
    s.append_message(U("m4"))
    ctx = s.build_context()
    assert ctx.messages[0].text.endswith("second")
    assert texts(ctx)[1:] == ["m3", "m4"]
    # an older compaction inside the kept range does not add its summary again
    s2 = ct.Session.in_memory()
    s2.append_message(U("m1"))
    k = s2.append_message(U("m2"))
    s2.append_compaction(summary="old", first_kept_entry_id=k, tokens_before=10)
    s2.append_message(U("m3"))
    s2.append_compaction(summary="new", first_kept_entry_id=k, tokens_before=20)
    ctx2 = s2.build_context()
    assert [m.text for m in ctx2.messages if m.meta] == [ctx2.messages[0].text]
    assert texts(ctx2)[1:] == ["m2", "m3"]


def test_compaction_on_another_branch_does_not_apply() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(U("m1"))
    s.append_message(U("m2"))
    s.append_compaction(summary="sum", first_kept_entry_id=None, tokens_before=10)
    s.move_to(a)
    s.append_message(U("m3"))
    assert texts(s.build_context()) == ["m1", "m3"]


def test_build_context_at_an_earlier_entry() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(U("m1"))
    s.append_message(U("m2"))
    assert texts(s.build_context(a)) == ["m1"]


def test_state_is_derived_from_the_whole_branch() -> None:
    s = ct.Session.in_memory()
    assert s.build_context().model is None
    s.append_message(A("hi", model="from-msg", provider="prov"))
    assert s.build_context().model == ("prov", "from-msg")
    s.append_model_change("openai", "gpt-4")
    s.append_thinking_level_change("low")
    s.append_active_tools_change(["read"])
    k = s.append_message(U("m"))
    s.append_model_change("anthropic", "claude")
    s.append_thinking_level_change("high")
    s.append_active_tools_change(["read", "shell"])
    s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10)  # compaction hides messages, not state
    ctx = s.build_context()
    assert ctx.model == ("anthropic", "claude")
    assert ctx.thinking_level == "high"
    assert ctx.active_tools == ["read", "shell"]
    s.append_active_tools_change([])
    assert s.build_context().active_tools == []


def test_cleared_tool_results_show_their_placeholder() -> None:
    s = ct.Session.in_memory()
    first = s.append_message(U("go"))
    s.append_message(A("", tool_calls=[call("c1")]))
    r = s.append_message(result("c1", "a very long output"))
    s.append_compaction(summary="", first_kept_entry_id=first, tokens_before=10, cleared={r: "[cleared: re-run read]"})
    ctx = s.build_context()
    tool = ctx.messages[-1]
    assert tool.role == "tool" and tool.text == "[cleared: re-run read]"
    assert tool.meta == {"kind": "cleared_tool_result"}
    assert tool.tool_call_id == "c1"


def test_usage_anchor_ignores_usage_reported_before_the_compaction() -> None:
    s = ct.Session.in_memory()
    k = s.append_message(U("q"))
    s.append_message(A("r", usage=ct.Usage(input=50, output=5, total=55)))
    assert s.build_context().usage_anchor == 1
    s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10)
    assert s.build_context().usage_anchor is None
    s.append_message(A("r2", usage=ct.Usage(input=20, output=2, total=22)))
    ctx = s.build_context()
    assert ctx.usage_anchor == len(ctx.messages) - 1


# -- pairing: specific cases -----------------------------------------------------------------


def test_missing_result_becomes_explicit_interrupted_message() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("go"))
    s.append_message(A("", tool_calls=[call("c1"), call("c2", "shell")]))
    r1 = s.append_message(result("c1"))
    s.append_message(U("never mind"))
    ctx = s.build_context()
    assert [m.role for m in ctx.messages] == ["user", "assistant", "tool", "tool", "user"]
    interrupted = ctx.messages[3]
    assert interrupted.tool_call_id == "c2" and interrupted.name == "shell"
    assert interrupted.is_error and interrupted.meta == {"kind": "interrupted"}
    assert ctx.entry_ids[2:4] == [r1, None]
    # and at the very end of the context too
    s.append_message(A("", tool_calls=[call("c3")]))
    assert s.build_context().messages[-1].meta == {"kind": "interrupted"}


def test_orphan_duplicate_and_late_results_are_not_sent() -> None:
    s = ct.Session.in_memory()
    s.append_message(result("nobody-called-me"))
    s.append_message(U("go"))
    s.append_message(A("", tool_calls=[call("c1")]))
    s.append_message(result("c1", "first"))
    s.append_message(result("c1", "duplicate"))
    s.append_message(A("", tool_calls=[call("c2")]))
    s.append_message(U("interjection"))
    s.append_message(result("c2", "too late"))
    ctx = s.build_context()
    assert texts(ctx)[:3] == ["go", "", "first"]
    assert "duplicate" not in texts(ctx) and "too late" not in texts(ctx)
    assert "nobody-called-me" not in [m.tool_call_id for m in ctx.messages]


def test_parallel_results_in_any_order_are_kept() -> None:
    s = ct.Session.in_memory()
    s.append_message(A("", tool_calls=[call("a"), call("b")]))
    s.append_message(result("b", "B"))
    s.append_message(result("a", "A"))
    assert texts(s.build_context()) == ["", "B", "A"]


def test_result_whose_call_was_compacted_away_is_dropped() -> None:
    s = ct.Session.in_memory()
    s.append_message(U("go"))
    s.append_message(A("", tool_calls=[call("c1")]))
    k = s.append_message(result("c1"))
    s.append_message(U("next"))
    s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10)
    ctx = s.build_context()
    assert [m.role for m in ctx.messages] == ["system", "user"]


# -- pairing: property test over random trees -------------------------------------------------

CALL_IDS = [f"c{i}" for i in range(6)]
# ids may repeat within a reply: some providers give every call ``call_0``
call_ids = st.lists(st.sampled_from(CALL_IDS), max_size=3)
msg = st.one_of(
    st.builds(lambda t: U(t), st.sampled_from(["u1", "u2"])),
    st.builds(lambda ids: A("a", tool_calls=[call(c) for c in ids]), call_ids),
    st.builds(lambda c: result(c), st.sampled_from([*CALL_IDS, "stray"])),
)
pick = st.integers(0, 1000)
TREE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("msg"), msg),
        st.tuples(st.just("result_for_last_call"), pick),
        st.tuples(st.just("move"), pick, st.booleans()),
        st.tuples(st.just("compact"), st.one_of(st.none(), pick),
                  st.one_of(st.none(), st.lists(msg, max_size=4)), st.booleans()),
        st.tuples(st.just("custom_message"), st.booleans()),
        st.tuples(st.just("projected"), st.lists(msg, max_size=3)),
    ),
    min_size=1,
    max_size=30,
)


def project(entry: ct.entries.CustomEntry, index: int, entries: Sequence[Any]) -> list[ct.Message]:
    return [ct.Message.from_dict(d) for d in entry.data]


def grow(ops: list[tuple[Any, ...]]) -> tuple[ct.Session, list[str]]:
    s = ct.Session.in_memory()
    s.projectors["proj"] = project
    ids: list[str] = []
    last_calls: list[str] = []
    for op in ops:
        kind = op[0]
        if kind == "msg":
            m = op[1]
            if m.tool_calls:
                last_calls = [c.id for c in m.tool_calls]
            ids.append(s.append_message(m))
        elif kind == "result_for_last_call" and last_calls:
            ids.append(s.append_message(result(last_calls[op[1] % len(last_calls)])))
        elif kind == "move" and ids:
            new = s.move_to(ids[op[1] % len(ids)], "bs" if op[2] else None)
            if new:
                ids.append(new)
        elif kind == "compact":
            branch = [e.id for e in s.branch()]
            first_kept = branch[op[1] % len(branch)] if branch and op[1] is not None else None
            ids.append(s.append_compaction(summary="sum" if op[3] else "", first_kept_entry_id=first_kept, tokens_before=10,
                                           retained_tail=op[2]))
        elif kind == "custom_message":
            ids.append(s.append_custom_message("note", "cm", display=op[1]))
        elif kind == "projected":
            ids.append(s.append_custom("proj", [m.to_dict() for m in op[1]]))
    return s, ids


def reference_raw(path: Sequence[Any]) -> list[tuple[ct.Message, str]]:
    """The seed's rule, written independently: (message, producing entry id) before pairing."""
    ci = max((i for i, e in enumerate(path) if isinstance(e, ct.entries.CompactionEntry)), default=None)
    out: list[tuple[ct.Message, str]] = []
    entries = list(path)
    if ci is not None:
        comp = path[ci]
        if comp.summary:
            out.append((ct.Message.system(comp.summary), comp.id))
        out.extend((m, comp.id) for m in comp.retained_tail or ())
        kept: list[Any] = []
        if comp.retained_tail is None and comp.first_kept_entry_id is not None:
            ids = [e.id for e in path[:ci]]
            if comp.first_kept_entry_id in ids:
                start = ids.index(comp.first_kept_entry_id)
                kept = [e for e in path[start:ci] if not isinstance(e, ct.entries.CompactionEntry)]
        entries = kept + list(path[ci + 1:])
    for e in entries:
        if isinstance(e, ct.entries.MessageEntry):
            out.append((e.message, e.id))
        elif isinstance(e, ct.entries.BranchSummaryEntry | ct.entries.CustomMessageEntry):
            out.append((ct.Message.system("x"), e.id))
        elif isinstance(e, ct.entries.CustomEntry):
            out.extend((m, e.id) for m in project(e, 0, []))
    return out


def check_pairing(ctx: ct.SessionContext, raw: list[tuple[ct.Message, str]]) -> None:
    msgs = ctx.messages
    assert len(ctx.entry_ids) == len(msgs)
    # Nothing but tool results is ever dropped or added, and order is kept.
    assert [eid for m, eid in raw if m.role != "tool"] == [
        eid for m, eid in zip(msgs, ctx.entry_ids, strict=True) if m.role != "tool"
    ]
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert m.role != "tool", f"orphan tool result at {i}: {m.tool_call_id}"
        j = i + 1
        if m.role == "assistant" and m.tool_calls:
            called = [c.id for c in m.tool_calls]
            while j < len(msgs) and msgs[j].role == "tool":
                j += 1
            results = msgs[i + 1:j]
            # every call has exactly one result right after it, and no result is a stranger
            assert Counter(r.tool_call_id for r in results) == Counter(called)
            for r, eid in zip(results, ctx.entry_ids[i + 1:j], strict=True):
                if r.meta == {"kind": "interrupted"}:
                    assert eid is None and r.is_error
                else:
                    assert eid is not None
        i = j
    # Every interrupted message stands for a call with no answer in the raw run after it.
    answered = 0
    pending: list[str | None] = []  # calls that share an id are answered in order
    for m, _ in raw:
        if m.role == "tool":
            if m.tool_call_id in pending:
                pending.remove(m.tool_call_id)
                answered += 1
        else:
            pending = [c.id for c in m.tool_calls or ()] if m.role == "assistant" else []
    real = sum(1 for m in msgs if m.role == "tool" and m.meta != {"kind": "interrupted"})
    assert real == answered


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=TREE_OPS)
def test_pairing_invariant_holds_at_every_entry_of_random_trees(
    ops: list[tuple[Any, ...]],
) -> None:
    s, ids = grow(ops)
    for leaf in [None, *ids]:
        path = s.branch(leaf)
        ctx = s.build_context(leaf)
        check_pairing(ctx, reference_raw(path))


def test_pairing_check_rejects_broken_contexts() -> None:
    """The property test's checker is not vacuous."""
    ok = [(A("", tool_calls=[call("x")]), "e1"), (result("x"), "e2")]
    good = ct.SessionContext(messages=[m for m, _ in ok], entry_ids=["e1", "e2"])
    check_pairing(good, ok)
    bad = ct.SessionContext(messages=[ok[0][0]], entry_ids=["e1"])  # missing result
    with pytest.raises(AssertionError):
        check_pairing(bad, ok)
    orphan = ct.SessionContext(messages=[U("u"), result("x")], entry_ids=["e0", "e2"])
    with pytest.raises(AssertionError):
        check_pairing(orphan, [(U("u"), "e0"), (result("x"), "e2")])


def test_calls_that_share_an_id_get_one_result_each_in_order() -> None:
    """Two calls named ``call_0`` (llama.cpp, Kimi): both results are kept, in order, and
    a third call with the id and no result gets the interrupted one."""
    s = ct.Session.in_memory()
    s.append_message(U("weather?"))
    s.append_message(A("", tool_calls=[call("call_0"), call("call_0"), call("call_0")]))
    s.append_message(result("call_0", "oslo"))
    s.append_message(result("call_0", "rome"))
    s.append_message(U("next"))
    ctx = s.build_context()
    tools = [m for m in ctx.messages if m.role == "tool"]
    assert [m.text for m in tools[:2]] == ["oslo", "rome"]
    assert len(tools) == 3 and tools[2].meta == {"kind": "interrupted"}


def test_pinned_entries_before_the_kept_range_come_right_after_the_summary() -> None:
    s = ct.Session.in_memory()
    task = s.append_message(U("the task"))
    s.append_message(A("old work"))
    k = s.append_message(U("recent"))
    s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10, pinned=[task])
    s.append_message(A("after"))
    assert texts(s.build_context())[1:] == ["the task", "recent", "after"]
