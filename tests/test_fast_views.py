"""The fast paths of ``tree`` and ``stats`` give exactly what the slow paths give.

``Session.tree()`` makes its nodes as they are reached and counts subtree sizes from flat
columns; ``compute_stats`` decodes only the fields it needs of an indexed session's lines.
Each is compared here with a plain computation from whole entries, over sessions with
branches, labels, compactions, branch summaries, unknown entry types, a parent later in
the file, usage the skeleton cannot hold, a torn tail; with and without an index.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import contextree as ct
from contextree import _stats
from contextree._session import TreeNode
from contextree.cli import render
from contextree.storage import _index
from contextree.storage._filetree import FileTree
from helpers import TS, make_session, raw_message

VARIANTS = ["plain", "unknown_and_forward", "usage", "usage_extra_field", "odd_roles", "torn"]


def _line(data: dict[str, Any]) -> bytes:
    return orjson.dumps({"timestamp": TS, **data}) + b"\n"


def _build(path: Path, variant: str) -> None:
    """``make_session``, then lines a writer of another version (or a crash) may leave."""
    make_session(path)
    with ct.Session.open(path) as s:
        leaf = s.leaf_id
    lines = b""
    if variant == "unknown_and_forward":
        lines += _line({"type": "future_thing", "id": "fut1", "parent_id": leaf, "x": [1]})
        lines += raw_message("fwd1", "fwd2") + b"\n"  # its parent comes after it
        lines += raw_message("fwd2", "fut1") + b"\n"
        lines += _line({"type": "future_thing", "id": "fut2", "parent_id": None})
        # fields of other types, kept as extras: they count for nothing
        lines += _line({"type": "compaction", "id": "cx", "parent_id": "fwd2", "summary": "s",
                        "first_kept_entry_id": None, "tokens_before": 9,
                        "message": {"role": "user", "content": "not a message"}})
        lines += _line({"type": "message", "id": "mx", "parent_id": "cx",
                        "message": {"role": "user", "content": "hi"},
                        "usage": {"input": 5, "output": 5, "cache_read": 0,
                                  "cache_write": 0, "total": 10, "cost": 1.0}})
    if variant in ("usage", "usage_extra_field"):
        usage: dict[str, Any] = {"input": 1000, "output": 50, "cache_read": 10,
                                 "cache_write": 0, "total": 1060, "cost": None}
        if variant == "usage_extra_field":
            usage["reasoning"] = 7  # kept as an extra by the full decoder
        lines += _line({"type": "message", "id": "u1", "parent_id": leaf,
                        "message": {"role": "assistant", "content": "priced?",
                                    "usage": usage, "model": "no-such-model",
                                    "provider": "nobody"}})
        lines += _line({"type": "compaction", "id": "c9", "parent_id": "u1",
                        "summary": "s", "first_kept_entry_id": None, "tokens_before": 9,
                        "usage": {"input": 3, "output": 1, "cache_read": 0,
                                  "cache_write": 0, "total": 4, "cost": 0.5}})
    if variant == "odd_roles":  # usage where few put it, and a role the index has no code for
        lines += _line({"type": "message", "id": "o1", "parent_id": leaf,
                        "message": {"role": "tool", "content": "out", "tool_call_id": "c",
                                    "usage": {"input": 7, "output": 0, "cache_read": 0,
                                              "cache_write": 0, "total": 7, "cost": 0.25}}})
        lines += _line({"type": "message", "id": "o2", "parent_id": "o1",
                        "message": {"role": "developer", "content": "be brief"}})
    if variant == "torn":
        lines += raw_message("t1", leaf, "torn" * 20)[:40]
    with path.open("ab") as f:
        f.write(lines)


@pytest.fixture(params=[True, False], ids=["indexed", "no-index"])
def indexed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param:
        monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 0)
    return bool(request.param)


def _open(path: Path) -> ct.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn tail warns
        return ct.Session.open(path, readonly=True)


@pytest.fixture(params=VARIANTS)
def session(request: pytest.FixtureRequest, indexed: bool, tmp_path: Path) -> Iterator[ct.Session]:
    path = tmp_path / "s.jsonl"
    _build(path, request.param)
    _open(path).close()  # the first open writes the index (when indexed)
    assert _index.index_path(path).exists() == indexed
    s = _open(path)
    yield s
    s.close()


# -- stats ---------------------------------------------------------------------------------

def test_stats_from_skeletons_equal_stats_from_entries(session: ct.Session,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _stats.compute_stats(session).to_dict()
    _refuse_skeletons(monkeypatch)
    slow = _stats.compute_stats(session).to_dict()
    assert fast == slow
    assert orjson.dumps(fast) == orjson.dumps(slow)  # the same order too (roles, branches)


def test_stats_read_skeletons_of_a_file_session(session: ct.Session,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken (and not given up) unless a line holds more than it knows."""
    taken: list[bool] = []
    real = _stats._tree_stats

    def spy(*args: Any) -> Any:
        try:
            out = real(*args)
        except _stats._Stale:
            taken.append(False)
            raise
        taken.append(True)
        return out

    monkeypatch.setattr(_stats, "_tree_stats", spy)
    _stats.compute_stats(session)
    u1 = session.get_entry("u1")
    has_extra = isinstance(u1, ct.entries.MessageEntry) and bool(
        u1.message.usage and u1.message.usage.extra)
    assert taken == [not has_extra]


def _refuse_skeletons(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> Any:
        raise _stats._Stale

    monkeypatch.setattr(_stats, "_tree_stats", refuse)


@pytest.mark.parametrize("edit", [(b'"role":"assistant","content":"priced?"',
                                   b'"role":"assistanT","content":"priced?"'),
                                  (b'"u1"', b'"u2"')])
def test_stats_of_a_file_edited_in_place_equal_stats_from_entries(
        tmp_path: Path, indexed: bool, monkeypatch: pytest.MonkeyPatch,
        edit: tuple[bytes, bytes]) -> None:
    """An edit of the same length the index cannot see: a line's role (the skeleton reads
    it), a line's id (the skeleton sees it differ from the columns and gives up)."""
    path = tmp_path / "s.jsonl"
    _build(path, "usage")
    _open(path).close()
    path.write_bytes(path.read_bytes().replace(*edit))
    with _open(path) as s:
        fast = _stats.compute_stats(s).to_dict()
    _refuse_skeletons(monkeypatch)
    with _open(path) as s:
        assert fast == _stats.compute_stats(s).to_dict()


# -- tree ----------------------------------------------------------------------------------

def _eager_tree(s: ct.Session) -> list[TreeNode]:
    """The tree as it was built before nodes were made on demand: every node at once, from
    whole entries."""
    leaf = s.leaf_id
    on_branch = {e.id for e in s.branch()} if leaf is not None else set()
    labels = s.labels()
    nodes: dict[str, TreeNode] = {}
    for e in s.entries():
        if e.type != "leaf":
            nodes[e.id] = TreeNode(e, labels.get(e.id), on_branch=e.id in on_branch,
                                   is_leaf=e.id == leaf)
    roots = []
    for node in nodes.values():
        if node.parent_id in nodes:
            nodes[node.parent_id].children.append(node)
        else:
            roots.append(node)
    return roots


def _flat(roots: list[TreeNode]) -> list[tuple[Any, ...]]:
    out, stack = [], list(reversed(roots))
    while stack:
        n = stack.pop()
        out.append((n.id, n.parent_id, n.type, n.label, n.on_branch, n.is_leaf, n.size,
                    [c.id for c in n.children], n.entry.id))
        stack.extend(reversed(n.children))
    return out


def _lines(roots: list[TreeNode], expand: bool) -> list[tuple[Any, ...]]:
    return [(x.prefix, x.node.id if x.node else None, x.hidden, x.level, x.note)
            for x in render.tree_lines(roots, expand=expand)]


@pytest.fixture(params=["columns", "outline"])
def shaped_from(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tree shaped from a session file's columns, or from any storage's outline."""
    if request.param == "outline":
        monkeypatch.setattr(FileTree, "of", staticmethod(lambda storage: None))
    return str(request.param)


def test_lazy_tree_equals_the_eager_tree(session: ct.Session, shaped_from: str) -> None:
    lazy, eager = session.tree(), _eager_tree(session)
    assert _flat(lazy) == _flat(eager)
    assert lazy == eager


@pytest.mark.parametrize("fold_above", [render.FOLD_ABOVE, 0])
@pytest.mark.parametrize("expand", [False, True])
def test_tree_lines_of_lazy_nodes_equal_those_of_eager_nodes(
        session: ct.Session, monkeypatch: pytest.MonkeyPatch, fold_above: int,
        expand: bool, shaped_from: str) -> None:
    monkeypatch.setattr(render, "FOLD_ABOVE", fold_above)
    assert _lines(session.tree(), expand) == _lines(_eager_tree(session), expand)


def test_branch_summary_tips_on_demand_equal_abandoned_tips(session: ct.Session) -> None:
    calls: list[int] = []

    def outline() -> Any:
        calls.append(1)
        return session.storage.outline()

    tips = render.TipsOnDemand(outline)
    assert not calls  # nothing worked out before it is asked
    assert dict(tips) == render.abandoned_tips(session.storage.outline())
    assert calls == [1]


@pytest.mark.parametrize("readonly", [True, False])
def test_stats_of_a_last_line_without_its_newline(tmp_path: Path, indexed: bool,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  readonly: bool) -> None:
    """The last line's newline is not written yet (a writer adds it with the next line):
    the skeleton reads the line that is there."""
    path = tmp_path / "s.jsonl"
    _build(path, "usage")
    path.write_bytes(path.read_bytes().removesuffix(b"\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ct.Session.open(path, readonly=readonly) as s:
            fast = _stats.compute_stats(s).to_dict()
            _refuse_skeletons(monkeypatch)
            assert fast == _stats.compute_stats(s).to_dict()
    assert fast["file"]["compactions"] == 2


def test_stats_read_only_the_lines_that_record_a_call(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # The index knows each message's role: tool results and prompts (the bulk of a big
    # session) are never read for a count, and the figures are the same as a full read.
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 0)
    path = tmp_path / "big.jsonl"
    with ct.Session.create(path) as s:
        for i in range(30):
            s.append_message(ct.Message.user(f"question {i}"))
            s.append_message(ct.Message.assistant("", tool_calls=[
                ct.ToolCall(id=f"c{i}", name="shell", arguments={"command": "ls"})],
                usage=ct.Usage(input=100, output=5, total=105)))
            s.append_message(ct.Message.tool("x" * 50_000, tool_call_id=f"c{i}", name="shell"))
    _open(path).close()
    session = _open(path)
    try:
        tree = FileTree.of(session.storage)
        assert tree is not None
        read: list[int] = []
        real = tree.file.pread

        def counted(length: int, offset: int) -> bytes:
            data = real(length, offset)
            read.append(len(data))
            return data

        monkeypatch.setattr(tree.file, "pread", counted)
        fast = _stats.compute_stats(session).to_dict()
        assert sum(read) < path.stat().st_size / 4  # the 1.5 MB of tool output stays unread
        monkeypatch.undo()
        _refuse_skeletons(monkeypatch)
        assert fast == _stats.compute_stats(session).to_dict()
    finally:
        session.close()


def test_stats_through_an_index_without_the_facts_column(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # An index written before the column existed reads every message line, as before.
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 0)
    path = tmp_path / "s.jsonl"
    _build(path, "usage")
    _open(path).close()
    index = _index.index_path(path)
    data = index.read_bytes()
    head, rest = data.split(b"\n", 1)
    size = orjson.loads(head)["base_bytes"]
    import msgspec

    base = msgspec.msgpack.decode(rest[:size])
    old = msgspec.msgpack.encode(base[:-1])  # the base without its last field
    head_obj = orjson.loads(head)
    head_obj["base_bytes"] = len(old)
    tail = [orjson.loads(raw) for raw in rest[size:].splitlines() if raw.strip()]
    old_tail = b"".join(orjson.dumps(r[:8]) + b"\n" for r in tail)  # tail records alike
    index.write_bytes(orjson.dumps(head_obj) + b"\n" + old + old_tail)
    session = _open(path)
    try:
        tree = FileTree.of(session.storage)
        assert tree is not None and set(tree.facts) == {ord("?")}
        fast = _stats.compute_stats(session).to_dict()
        _refuse_skeletons(monkeypatch)
        assert fast == _stats.compute_stats(session).to_dict()
    finally:
        session.close()
    # That count learnt the roles and saved them: the next open knows them.
    again = _open(path)
    try:
        tree = FileTree.of(again.storage)
        assert tree is not None and ord("u") in tree.facts
    finally:
        again.close()
