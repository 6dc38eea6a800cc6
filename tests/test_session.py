"""Session API: reopen equals before (memory vs JSONL), navigation, fork, stats, deep chains."""

from __future__ import annotations

import itertools
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextree as ct
from contextree.entries import to_dict

# -- deterministic ids and timestamps, so two backends can be compared entry for entry -----


@contextmanager
def deterministic_ids() -> Iterator[None]:
    counter = itertools.count()
    clock = itertools.count()
    with (
        mock.patch("contextree._session.new_id", lambda: f"id{next(counter):05d}"),
        mock.patch("contextree._session.now",
                   lambda: f"2026-01-01T00:00:{next(clock) % 60:02d}.000Z"),
    ):
        yield


# -- random operation sequences ----------------------------------------------------------

pick = st.integers(min_value=0, max_value=10_000)
short_text = st.text(max_size=12)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), short_text),
        st.tuples(st.just("assistant"), st.integers(0, 3), st.booleans(),
                  st.sampled_from(["m1", "m2"])),
        st.tuples(st.just("tool"), pick, st.booleans()),
        st.tuples(st.just("model"), st.sampled_from([("openai", "gpt"), ("anthropic", "c")])),
        st.tuples(st.just("thinking"), st.sampled_from(["off", "low", "high"])),
        st.tuples(st.just("tools"), st.lists(st.sampled_from(["read", "shell", "edit"]),
                                             max_size=3)),
        st.tuples(st.just("label"), pick, st.one_of(st.none(), short_text)),
        st.tuples(st.just("name"), st.one_of(st.none(), short_text)),
        st.tuples(st.just("move"), st.one_of(st.none(), pick), st.one_of(st.none(), short_text)),
        st.tuples(st.just("compact"), st.one_of(st.none(), pick), st.booleans(), st.booleans()),
        st.tuples(st.just("custom"), st.dictionaries(  # integers in the 64-bit range
            short_text, st.integers(-(2**63), 2**64 - 1), max_size=2)),
        st.tuples(st.just("custom_message"), short_text, st.booleans()),
    ),
    max_size=40,
)


def apply_ops(s: ct.Session, ops: list[tuple[Any, ...]]) -> None:
    ids: list[str] = []
    calls: list[str] = []
    for op in ops:
        kind = op[0]
        if kind == "user":
            ids.append(s.append_message(ct.Message.user(op[1])))
        elif kind == "assistant":
            n, with_usage, model = op[1], op[2], op[3]
            tcs = []
            for _ in range(n):
                calls.append(f"call{len(calls)}")
                tcs.append(ct.ToolCall(id=calls[-1], name="read", arguments={"p": len(calls)}))
            usage = ct.Usage(input=10, output=len(calls), total=10 + len(calls), cost=0.001)
            ids.append(s.append_message(ct.Message.assistant(
                "ok", tool_calls=tcs, usage=usage if with_usage else None, model=model,
                provider="prov")))
        elif kind == "tool":
            call = calls[op[1] % len(calls)] if calls and op[2] else "orphan"
            ids.append(s.append_message(ct.Message.tool("out", tool_call_id=call)))
        elif kind == "model":
            ids.append(s.append_model_change(*op[1]))
        elif kind == "thinking":
            ids.append(s.append_thinking_level_change(op[1]))
        elif kind == "tools":
            ids.append(s.append_active_tools_change(op[1]))
        elif kind == "label" and ids:
            label_id = s.set_label(ids[op[1] % len(ids)], op[2])
            if label_id is not None:  # None: nothing changed, nothing was written
                ids.append(label_id)
        elif kind == "name":
            ids.append(s.set_name(op[1]))
        elif kind == "move" and ids:
            target = None if op[1] is None else ids[op[1] % len(ids)]
            summary = op[2] if target is not None else None
            new = s.move_to(target, summary)
            if new is not None:
                ids.append(new)
        elif kind == "compact":
            branch = [e.id for e in s.branch()]
            first_kept = branch[op[1] % len(branch)] if branch and op[1] is not None else None
            tail = [ct.Message.user("kept")] if op[2] else None
            usage = ct.Usage(input=5, output=5, total=10, cost=0.01) if op[3] else None
            ids.append(s.append_compaction(summary="sum", first_kept_entry_id=first_kept, tokens_before=1000, usage=usage,
                                           retained_tail=tail))
        elif kind == "custom":
            ids.append(s.append_custom("ext", op[1]))
        elif kind == "custom_message":
            ids.append(s.append_custom_message("ext", op[1], display=op[2]))


def tree_shape(s: ct.Session) -> list[tuple[str, int, str | None, bool, bool]]:
    out = []
    stack = [(n, 0) for n in reversed(s.tree())]
    while stack:
        node, depth = stack.pop()
        out.append((node.entry.id, depth, node.label, node.on_branch, node.is_leaf))
        stack.extend((c, depth + 1) for c in reversed(node.children))
    return out


def snapshot(s: ct.Session) -> dict[str, Any]:
    ctx = s.build_context()
    return {
        "leaf": s.leaf_id,
        "name": s.name,
        "labels": s.labels(),
        "branch": [to_dict(e) for e in s.branch()],
        "entries": [to_dict(e) for e in s.entries()],
        "messages": [m.to_dict() for m in ctx.messages],
        "context_entry_ids": ctx.entry_ids,
        "state": (ctx.model, ctx.thinking_level, ctx.active_tools, ctx.usage_anchor),
        "stats": s.stats().to_dict(),
        "tree": tree_shape(s),
    }


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_reopen_equals_before_and_memory_equals_jsonl(ops: list[tuple[Any, ...]]) -> None:
    with deterministic_ids():
        mem = ct.Session.in_memory(session_id="sid", cwd="/w")
        apply_ops(mem, ops)
    expected = snapshot(mem)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.jsonl"
        with deterministic_ids():
            disk = ct.Session.create(path, session_id="sid", cwd="/w")
            apply_ops(disk, ops)
        assert snapshot(disk) == expected
        disk.close()
        with ct.Session.open(path) as again:
            assert snapshot(again) == expected
        with ct.Session.open(path, readonly=True) as ro:
            assert snapshot(ro) == expected


# -- navigation --------------------------------------------------------------------------


def test_append_returns_id_and_moves_leaf() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(ct.Message.user("a"))
    b = s.append_message({"role": "assistant", "content": "b"})
    assert s.leaf_id == b
    assert s.get_entry(b).parent_id == a  # type: ignore[union-attr]
    assert [e.id for e in s.branch()] == [a, b]
    assert s.get_entry("nope") is None


def test_move_to_is_persisted_and_restored_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
        s.append_message(ct.Message.user("b"))
        s.move_to(a)
        assert s.leaf_id == a
    with ct.Session.open(path) as s:
        assert s.leaf_id == a
        c = s.append_message(ct.Message.user("c"))
        assert s.get_entry(c).parent_id == a  # type: ignore[union-attr]
        s.move_to(None)
    with ct.Session.open(path) as s:
        assert s.leaf_id is None
        assert s.branch() == []
        root2 = s.append_message(ct.Message.user("new root"))
        assert s.get_entry(root2).parent_id is None  # type: ignore[union-attr]


def test_move_to_current_leaf_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
        n = len(path.read_bytes().splitlines())
        assert s.move_to(a) is None
        assert len(path.read_bytes().splitlines()) == n


def test_move_to_with_summary_writes_one_branch_summary_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
        s.append_message(ct.Message.user("b"))
        before = path.read_bytes().splitlines()
        bs = s.move_to(a, "we tried b; it did not work")
        after = path.read_bytes().splitlines()
        assert len(after) - len(before) == 1
        line = orjson.loads(after[-1])
        assert line["type"] == "branch_summary" and line["id"] == bs
        assert line["parent_id"] == a and line["from_id"] == a
        assert s.leaf_id == bs
    with ct.Session.open(path) as s:
        assert s.leaf_id == bs
        msgs = s.build_context().messages
        assert [m.role for m in msgs] == ["user", "system"]
        assert msgs[1].meta == {"kind": "branch_summary", "from_id": a}
        assert "we tried b" in msgs[1].text


def test_move_to_unknown_entry_raises_not_found() -> None:
    s = ct.Session.in_memory()
    with pytest.raises(ct.errors.EntryNotFound) as info:
        s.move_to("missing")
    assert info.value.code == "entry_not_found"


def test_move_to_none_with_summary_is_rejected() -> None:
    s = ct.Session.in_memory()
    s.append_message(ct.Message.user("a"))
    with pytest.raises(ct.errors.InvalidArgument) as info:
        s.move_to(None, "summary")
    assert info.value.code == "invalid_argument"


def test_label_set_and_clear_and_unknown_target() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(ct.Message.user("a"))
    s.set_label(a, "checkpoint")
    assert s.label_of(a) == "checkpoint"
    s.set_label(a, None)
    assert s.label_of(a) is None
    with pytest.raises(ct.errors.EntryNotFound) as info:
        s.set_label("missing", "x")
    assert info.value.code == "entry_not_found"


def test_read_api_entries_labels_find_len_in() -> None:
    s = ct.Session.in_memory()
    assert s and len(s) == 0 and list(s.entries()) == [] and s.labels() == {}
    assert bool(s) is True  # an empty session is truthy: ``session or default`` keeps it
    a = s.append_message(ct.Message.user("a"))
    b = s.append_message(ct.Message.assistant("b"))
    label = s.set_label(a, "start")
    s.append_compaction(summary="sum", first_kept_entry_id=b, tokens_before=10)
    s.set_label(b, "reply")
    s.set_label(b, None)
    ids = [e.id for e in s.entries()]
    assert len(s) == len(ids) == 6 and ids[:3] == [a, b, label]
    assert a in s and label in s and "nope" not in s and 42 not in s
    assert s.labels() == {a: "start"}
    assert s.label_of(a) == "start" and s.label_of(b) is None and s.label_of("nope") is None
    assert [e.id for e in s.find(ct.entries.MessageEntry)] == [a, b]
    assert [e.target_id for e in s.find(ct.entries.LabelEntry)] == [a, b, b]
    assert len(s.find(ct.entries.CompactionEntry)) == 1
    assert all(isinstance(e, ct.entries.LabelEntry) for e in s.find(ct.entries.LabelEntry))


def test_append_compaction_takes_keywords_only() -> None:
    s = ct.Session.in_memory()
    k = s.append_message(ct.Message.user("a"))
    with pytest.raises(TypeError):
        s.append_compaction("sum", k, 10)  # type: ignore[misc]
    assert len(s) == 1
    c = s.append_compaction(summary="sum", first_kept_entry_id=k, tokens_before=10,
                            tokens_after=4)
    entry = s.get_entry(c)
    assert isinstance(entry, ct.entries.CompactionEntry)
    assert (entry.summary, entry.first_kept_entry_id, entry.tokens_before,
            entry.tokens_after) == ("sum", k, 10, 4)


def test_set_name_keeps_latest() -> None:
    s = ct.Session.in_memory()
    assert s.name is None
    s.set_name("one")
    s.set_name("two")
    assert s.name == "two"


def test_compaction_first_kept_must_be_on_branch() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(ct.Message.user("a"))
    s.append_message(ct.Message.user("b"))
    s.move_to(a)
    c = s.append_message(ct.Message.user("c"))
    s.move_to(a)
    s.append_message(ct.Message.user("d"))
    with pytest.raises(ct.errors.InvalidArgument) as info:
        s.append_compaction(summary="x", first_kept_entry_id=c, tokens_before=10)
    assert info.value.code == "invalid_argument"


def test_appending_to_readonly_session_raises_readonly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ct.Session.create(path, cwd="/").close()
    with ct.Session.open(path, readonly=True) as s, pytest.raises(ct.SessionError) as info:
        s.append_message(ct.Message.user("x"))
    assert info.value.code == "readonly"


def test_create_on_existing_path_fails_with_exists(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"precious\n")
    with pytest.raises(ct.SessionError) as info:
        ct.Session.create(path, cwd="/")
    assert info.value.code == "exists"
    assert path.read_bytes() == b"precious\n"


def test_open_missing_file_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(tmp_path / "nope.jsonl")
    assert info.value.code == "not_found"


def test_tree_shows_branches_labels_and_hides_leaf_moves() -> None:
    s = ct.Session.in_memory()
    a = s.append_message(ct.Message.user("a"))
    b = s.append_message(ct.Message.user("b"))
    s.move_to(a)
    c = s.append_message(ct.Message.user("c"))
    lab = s.set_label(a, "root")
    roots = s.tree()
    assert len(roots) == 1 and roots[0].entry.id == a and roots[0].label == "root"
    assert [n.entry.id for n in roots[0].children] == [b, c]
    assert roots[0].children[1].children[0].entry.id == lab
    assert roots[0].children[1].on_branch and not roots[0].children[0].on_branch
    assert roots[0].children[1].children[0].is_leaf
    assert all(not isinstance(n.entry, ct.entries.LeafEntry) for n in roots[0].children)
    assert [e.id for e in s.children(a)] == [b, c]


# -- fork ---------------------------------------------------------------------------------


def test_fork_copies_path_links_source_and_carries_labels(tmp_path: Path) -> None:
    src_path = tmp_path / "src.jsonl"
    with ct.Session.create(src_path, cwd="/w") as s:
        a = s.append_message(ct.Message.user("a"))
        b = s.append_message(ct.Message.assistant("b"))
        s.append_message(ct.Message.user("c (not copied)"))
        s.set_label(a, "first")
        s.set_label(b, "second")
        s.move_to(b)
        forked = s.fork(tmp_path / "fork.jsonl", at=b)
        src_ctx = [m.to_dict() for m in s.build_context(b).messages]
    with forked:
        assert forked.header.parent_session == str(src_path)
        assert forked.header.metadata == {"forked_from": {"session_id": s.id, "entry_id": b}}
        assert forked.header.cwd == "/w"
        assert forked.id != s.id
        assert [e.id for e in forked.branch()][:2] == [a, b]
        assert forked.label_of(a) == "first" and forked.label_of(b) == "second"
        assert [m.to_dict() for m in forked.build_context().messages] == src_ctx
        assert all(e.id in {a, b} or isinstance(e, ct.entries.LabelEntry)
                   for e in forked.entries())
        forked.append_message(ct.Message.user("continues"))  # the fork is writable
    with ct.Session.open(tmp_path / "fork.jsonl") as again:
        assert again.label_of(a) == "first"


def test_fork_onto_existing_path_fails_and_keeps_file(tmp_path: Path) -> None:
    existing = tmp_path / "existing.jsonl"
    existing.write_bytes(b"keep me\n")
    with ct.Session.create(tmp_path / "s.jsonl", cwd="/") as s:
        s.append_message(ct.Message.user("a"))
        with pytest.raises(ct.SessionError) as info:
            s.fork(existing)
    assert info.value.code == "exists"
    assert existing.read_bytes() == b"keep me\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fork_at_unknown_id_or_empty_session_is_invalid_fork_target(tmp_path: Path) -> None:
    with ct.Session.create(tmp_path / "s.jsonl", cwd="/") as s:
        with pytest.raises(ct.errors.InvalidArgument) as info:
            s.fork(tmp_path / "f.jsonl")
        assert info.value.code == "invalid_argument"
        s.append_message(ct.Message.user("a"))
        with pytest.raises(ct.errors.EntryNotFound) as info:
            s.fork(tmp_path / "f.jsonl", at="nope")
        assert info.value.code == "entry_not_found"
    assert not (tmp_path / "f.jsonl").exists()


def test_fork_of_in_memory_session_links_by_id(tmp_path: Path) -> None:
    s = ct.Session.in_memory(session_id="mem-1")
    s.append_message(ct.Message.user("a"))
    with s.fork(tmp_path / "f.jsonl") as f:
        assert f.header.parent_session == "mem-1"


# -- stats ----------------------------------------------------------------------------------


def test_stats_counts_roles_usage_cost_models_for_branch_and_file(tmp_path: Path) -> None:
    u1 = ct.Usage(input=100, output=10, cache_read=50, cache_write=5, total=165, cost=0.01)
    u2 = ct.Usage(input=200, output=20, cache_read=0, cache_write=0, total=220, cost=0.02)
    u3 = ct.Usage(input=1, output=1, cache_read=1, cache_write=1, total=4, cost=1.0)
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("q"))
        s.append_message(ct.Message.assistant("r1", usage=u1, model="big", provider="p"))
        s.append_message(ct.Message.user("q2"))
        s.append_message(ct.Message.assistant("r2", usage=u2, model="small", provider="p"))
        s.move_to(a)
        s.append_message(ct.Message.assistant("alt", usage=u3, model="big", provider="p"))
        s.append_message(ct.Message.tool("t", tool_call_id="x"))
        s.append_compaction(summary="sum", first_kept_entry_id=None, tokens_before=10, usage=u1)
        st_ = s.stats()
    assert st_.branch_count == 2
    assert st_.entry_count == 8  # 6 messages, 1 leaf move, 1 compaction
    assert st_.quarantined_lines == 0
    f = st_.file
    assert f.message_count == 6 == st_.message_count
    assert f.by_role == {"user": 2, "assistant": 3, "tool": 1}
    assert f.usage == u1 + u2 + u3 + u1
    assert st_.total_tokens == (u1 + u2 + u3 + u1).total
    assert st_.cost_total == pytest.approx(0.01 + 0.02 + 1.0 + 0.01)
    # The compaction's summarizer call names no model: it counts under "unknown", so the
    # models add up to the total.
    assert f.by_model == {"p/big": u1 + u3, "p/small": u2, "unknown": u1}
    assert f.compactions == 1
    b = st_.branch
    assert b.message_count == 3
    assert b.by_role == {"user": 1, "assistant": 1, "tool": 1}
    assert b.usage == u3 + u1
    assert b.by_model == {"p/big": u3, "unknown": u1}
    d = st_.to_dict()
    assert d["message_count"] == 6 and d["branch"]["message_count"] == 3
    assert orjson.loads(orjson.dumps(d)) == d


def test_stats_of_empty_session() -> None:
    st_ = ct.Session.in_memory().stats()
    assert (st_.message_count, st_.total_tokens, st_.cost_total) == (0, 0, 0.0)
    assert st_.branch_count == 0 and st_.entry_count == 0


# -- deep chains ---------------------------------------------------------------------------


@pytest.mark.slow
def test_hundred_thousand_entry_chain_has_no_recursion_limit(tmp_path: Path) -> None:
    n = 100_000
    path = tmp_path / "deep.jsonl"
    with ct.Session.create(path, cwd="/") as s, s.batch():
        for i in range(n):
            if i % 2:
                s.append_message(ct.Message.assistant(f"a{i}"))
            else:
                s.append_message(ct.Message.user(f"u{i}"))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # anything recursive over the depth fails loudly
    try:
        with ct.Session.open(path) as s:
            assert len(s.branch()) == n
            ctx = s.build_context()
            assert len(ctx.messages) == n
            roots = s.tree()
            depth, node = 1, roots[0]
            while node.children:
                node = node.children[0]
                depth += 1
            assert depth == n and node.is_leaf
            assert s.stats().message_count == n
            assert s.stats().branch_count == 1
            mid = s.branch()[n // 2].id
            with s.fork(tmp_path / "fork.jsonl", at=mid) as f:
                assert len(f.branch()) == n // 2 + 1
    finally:
        sys.setrecursionlimit(limit)
