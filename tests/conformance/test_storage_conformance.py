"""One storage contract, checked against every backend (memory, JSONL, PostgreSQL).

Each test gets a ``backend`` fixture: ``backend.make(header, entries)`` creates a storage,
``backend.reopen(storage)`` closes it and opens the same session again.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextree import OverflowStore, Session
from contextree.entries import (
    AnyEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionInfoEntry,
    UnknownEntry,
    decode_line,
    encode_line,
    to_dict,
)
from contextree.errors import (
    EntryNotFound,
    InvalidArgument,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionNotFound,
)
from contextree.storage import MemoryStorage, Storage, StorageHealth
from helpers import TS
from helpers import message_entry as msg

from .conftest import Backend, new_header


def ids(entries: list[AnyEntry] | Iterator[AnyEntry]) -> list[str]:
    return [e.id for e in entries]


def both(backend: Backend, storage: Storage) -> Iterator[Storage]:
    """The storage as written, then the same session reopened."""
    yield storage
    yield backend.reopen(storage)


# -- the basic contract ---------------------------------------------------------------------------

def test_empty_session(backend: Backend) -> None:
    header = new_header(metadata={"k": [1, 2]})
    for s in both(backend, backend.make(header)):
        assert s.header == header
        assert s.leaf_id is None
        assert len(s) == 0
        assert s.path(None) == []
        assert list(s.entries()) == []
        assert tuple(s.children(None)) == ()
        assert s.labels() == {}
        assert s.name is None
        assert "x" not in s
        assert s.get("x") is None
        assert isinstance(s, Storage)


def test_append_get_path_children_find(backend: Backend) -> None:
    s = backend.make()
    s.append(msg("a", None))
    s.append(msg("b", "a", "answer", "assistant"))
    s.append(msg("c", "b"))
    assert s.leaf_id == "c"
    s.append(msg("d", "b", "another"))  # a second child of b: a branch
    for st in both(backend, s):
        assert st.leaf_id == "d"
        assert len(st) == 4
        assert "a" in st and "zz" not in st
        b = st.get("b")
        assert isinstance(b, MessageEntry) and b.message.content == "answer"
        assert ids(st.path("c")) == ["a", "b", "c"]
        assert ids(st.path("d")) == ["a", "b", "d"]
        assert ids(st.path("a")) == ["a"]
        assert tuple(st.children(None)) == ("a",)
        assert tuple(st.children("b")) == ("c", "d")
        assert tuple(st.children("d")) == ()
        assert ids(st.find("message")) == ["a", "b", "c", "d"]
        assert st.find("compaction") == []
        assert ids(st.entries()) == ["a", "b", "c", "d"]


def test_path_to_unknown_entry_raises_not_found(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None)])
    with pytest.raises(EntryNotFound) as e:
        s.path("nope")
    assert e.value.code == "entry_not_found"


def test_labels_and_name(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None), msg("b", "a")])
    s.append(LabelEntry("l1", "b", TS, target_id="a", label="start"))
    assert s.leaf_id == "l1"  # a label entry is an entry: it becomes the leaf
    s.append(LabelEntry("l2", "l1", TS, target_id="b", label="second"))
    s.append(LabelEntry("l3", "l2", TS, target_id="b", label=None))  # clears b's label
    s.append(SessionInfoEntry("n1", "l3", TS, name="first name"))
    s.append(SessionInfoEntry("n2", "n1", TS, name="renamed"))
    s.append(SessionInfoEntry("n3", "n2", TS))  # no name: keeps the old one
    for st in both(backend, s):
        assert st.labels() == {"a": "start"}
        assert st.label("a") == "start"
        assert st.label("b") is None
        assert st.name == "renamed"
        assert st.leaf_id == "n3"
        assert ids(st.find("label")) == ["l1", "l2", "l3"]


def test_unknown_entry_types_and_fields_round_trip_exactly(backend: Backend) -> None:
    unknown_line = (b'{"type":"future_thing","id":"u1","parent_id":"a","timestamp":"' + TS.encode()
                    + b'","payload":{"z":[1,2.5,null,"\\u00e9"],"a":{}},"flag":true}')
    extra_line = (b'{"type":"message","id":"m2","parent_id":"u1","timestamp":"' + TS.encode()
                  + b'","message":{"role":"user","content":"x","new_field":[1]},"extra_top":7}')
    unknown = decode_line(unknown_line)
    extra = decode_line(extra_line)
    assert isinstance(unknown, UnknownEntry)
    assert not isinstance(extra, UnknownEntry | type(None))
    s = backend.make()
    s.append(msg("a", None))
    s.append(unknown)  # type: ignore[arg-type]
    s.append(extra)  # type: ignore[arg-type]
    for st in both(backend, s):
        u = st.get("u1")
        m = st.get("m2")
        assert isinstance(u, UnknownEntry)
        assert u.type == "future_thing"
        assert encode_line(u) == encode_line(unknown)
        assert to_dict(u) == to_dict(unknown)  # type: ignore[arg-type]
        assert m is not None and to_dict(m) == to_dict(extra)  # type: ignore[arg-type]
        assert encode_line(m) == encode_line(extra)
        assert ids(st.path("m2")) == ["a", "u1", "m2"]
        assert ids(st.find("future_thing")) == ["u1"]
        assert st.leaf_id == "m2"


def test_duplicate_id_rejected(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None), msg("b", "a")])
    with pytest.raises(SessionError) as e:
        s.append(msg("a", "b"))
    assert e.value.code == "duplicate_id"
    assert len(s) == 2 and s.leaf_id == "b"
    s = backend.reopen(s)
    with pytest.raises(SessionError) as e:
        s.append(msg("b", "b"))
    assert e.value.code == "duplicate_id"
    assert len(s) == 2 and s.leaf_id == "b"
    s.append(msg("c", "b"))  # still usable
    assert ids(s.path(s.leaf_id)) == ["a", "b", "c"]


def test_duplicate_id_rejected_at_create(backend: Backend) -> None:
    with pytest.raises(SessionError) as e:
        backend.make(entries=[msg("a", None), msg("a", "a")])
    assert e.value.code == "duplicate_id"


def test_missing_parent_rejected(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None)])
    with pytest.raises(SessionError) as e:
        s.append(msg("b", "nope"))
    assert e.value.code == "missing_parent"
    with pytest.raises(SessionError) as e:
        s.append(LeafEntry("lf", "a", TS, target_id="nope"))
    assert e.value.code == "missing_parent"
    for st in both(backend, s):
        assert len(st) == 1 and st.leaf_id == "a"
        assert "b" not in st and "lf" not in st


def test_invalid_id_rejected(backend: Backend) -> None:
    s = backend.make()
    with pytest.raises(SessionError) as e:
        s.append(msg("", None))
    assert e.value.code == "invalid_entry"
    assert len(s) == 0


def test_leaf_entry_moves_leaf_and_persists(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None), msg("b", "a")])
    s.append(LeafEntry("m1", "b", TS, target_id="a"))
    assert s.leaf_id == "a"
    s = backend.reopen(s)
    assert s.leaf_id == "a"
    s.append(msg("c", "a"))
    assert s.leaf_id == "c"
    assert ids(s.path("c")) == ["a", "c"]
    assert tuple(s.children("a")) == ("b", "c")
    s.append(LeafEntry("m2", "c", TS, target_id=None))  # before the first entry
    for st in both(backend, s):
        assert st.leaf_id is None
        assert len(st) == 5
        assert isinstance(st.get("m2"), LeafEntry)


def test_outline_is_the_trees_shape_in_append_order(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None), msg("b", "a")])
    s.append(LabelEntry("l1", "b", TS, target_id="a", label="start"))
    s.append(LeafEntry("m1", "l1", TS, target_id="a"))
    s.append(msg("c", "a"))
    expected = [("a", None, "message", None), ("b", "a", "message", None),
                ("l1", "b", "label", None), ("m1", "l1", "leaf", "a"),
                ("c", "a", "message", None)]
    for st in both(backend, s):
        assert st.outline() == expected
        assert [(e.id, e.parent_id, e.type) for e in st.entries()] == [x[:3] for x in expected]


def test_readonly(backend: Backend) -> None:
    if not backend.persistent:
        pytest.skip("memory storage has no read-only mode")
    s = backend.make(entries=[msg("a", None)])
    ro = backend.reopen(s, readonly=True)
    assert ro.readonly
    assert ro.leaf_id == "a" and ids(ro.path("a")) == ["a"]
    with pytest.raises(SessionError) as e:
        ro.append(msg("b", "a"))
    assert e.value.code == "readonly"


def test_long_chain_path_without_recursion(backend: Backend) -> None:
    n = 10_000
    chain = [msg(f"e{i}", f"e{i - 1}" if i else None, f"m{i}", "user" if i % 2 else "assistant")
             for i in range(n)]
    s = backend.reopen(backend.make(entries=chain))
    depth = len(_stack())
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 150)  # deep enough for the libraries, far below 10,000
    try:
        path = s.path(s.leaf_id)
        context = Session(s).build_context()
    finally:
        sys.setrecursionlimit(old)
    assert len(path) == n
    assert path[0].id == "e0" and path[-1].id == f"e{n - 1}"
    assert all(path[i].parent_id == path[i - 1].id for i in range(1, n))
    assert len(context.messages) == n


def _stack() -> list[Any]:
    frames = []
    f = sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back  # type: ignore[assignment]
    return frames


# -- batch, delete, health --------------------------------------------------------------------------

def test_batch_groups_appends_and_nests(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None)])
    with s.batch():
        s.append(msg("b", "a"))
        with s.batch():  # a nested batch is part of the outer one
            s.append(msg("c", "b"))
        assert s.leaf_id == "c" and "b" in s and len(s) == 3  # visible inside the block
        assert ids(s.path("c")) == ["a", "b", "c"]
    s.append(msg("d", "c"))  # and appends work as before after it
    for st in both(backend, s):
        assert ids(st.path(st.leaf_id)) == ["a", "b", "c", "d"]
        assert ids(st.entries()) == ["a", "b", "c", "d"]


def test_session_batch_uses_the_storage_batch(backend: Backend) -> None:
    session = Session(backend.make())
    with session.batch() as same:
        assert same is session
        first = session.append_message({"role": "user", "content": "one"})
        second = session.append_message({"role": "assistant", "content": "two"})
    assert ids(session.branch()) == [first, second]


def test_health_counts_entries_and_bytes(backend: Backend) -> None:
    header = new_header()
    entries: list[AnyEntry] = [msg("a", None), msg("b", "a", "answer", "assistant")]
    s = backend.make(header, entries)
    for st in both(backend, s):
        health = st.health()
        assert isinstance(health, StorageHealth)
        assert health.entries == 2 and health.quarantined_lines == 0
        assert health.torn_line is None
        if backend.persistent:  # the bytes of the session as JSON lines
            assert health.size == len(encode_line(header)) + sum(
                len(encode_line(e)) for e in entries)
        else:
            assert health.size is None


def test_delete_removes_the_session(backend: Backend, tmp_path: Path) -> None:
    s = backend.make(entries=[msg("a", None)])
    if backend.persistent:
        ro = backend.reopen(s, readonly=True)
        with pytest.raises(ReadOnlySession):
            ro.delete()
        s = backend.reopen(ro)
        assert "a" in s  # a refused delete changed nothing
    s.delete()
    if backend.persistent:
        with pytest.raises(SessionNotFound):
            backend.reopen(s)
    else:
        assert len(s) == 0 and "a" not in s
        with pytest.raises(SessionNotFound):
            s.append(msg("b", None))
    # Session.delete takes the storage itself, too.
    other = backend.make(entries=[msg("x", None)])
    assert Session.delete(other, store=OverflowStore(tmp_path / "spill")) == 0
    if backend.persistent:
        with pytest.raises(SessionNotFound):
            backend.reopen(other)


def test_session_open_wraps_a_ready_storage(backend: Backend) -> None:
    s = backend.make(entries=[msg("a", None)])
    session = Session.open(s)
    assert session.storage is s and session.id == s.header.id
    assert session.leaf_id == "a"
    b = session.append_message({"role": "assistant", "content": "hello"})
    assert ids(session.branch()) == ["a", b]
    assert Session.open_or_create(s).storage is s
    with pytest.raises(SessionExists):  # it already holds a session
        Session.create(s)
    # Options that would have to change how the storage was opened are refused.
    with pytest.raises(InvalidArgument, match="readonly"):
        Session.open(s, readonly=True)
    with pytest.raises(InvalidArgument, match="durable"):
        Session.open(s, durable=False)
    with pytest.raises(InvalidArgument, match="Storage instance"):
        Session.open(42)  # type: ignore[arg-type]
    if backend.persistent:
        ro = backend.reopen(s, readonly=True)
        assert Session.open(ro, readonly=True).storage is ro


# -- Session behaviour is the same on every backend -------------------------------------------------

def _script(session: Session) -> None:
    """A session that uses every kind of entry Session writes."""
    a = session.append_message({"role": "user", "content": "hello"})
    b = session.append_message({
        "role": "assistant", "content": "hi there", "model": "m1", "provider": "p",
        "usage": {"input": 10, "output": 5, "total": 15, "cost": 0.01},
    })
    session.append_model_change("p", "m2")
    session.append_thinking_level_change("high")
    session.append_active_tools_change(["read", "write"])
    c = session.append_message({"role": "user", "content": "question two"})
    session.set_label(a, "start")
    session.set_name("demo")
    session.move_to(b, summary={"summary": "tried another way", "details": {"n": 1},
                                "usage": {"input": 3, "output": 2}})
    d = session.append_message({"role": "user", "content": "on the new branch"})
    session.append_message({"role": "assistant", "content": "ok", "model": "m2",
                            "provider": "p", "usage": {"input": 20, "output": 3}})
    session.append_compaction(summary="summary of the start", first_kept_entry_id=d, tokens_before=40, tokens_after=12)
    session.append_custom("app_state", {"k": [1, 2]})
    session.append_custom_message("note", "a note for the model")
    session.set_label(c, "q2")
    session.set_label(a, None)
    session.move_to(c)
    session.append_message({"role": "assistant", "content": "back on the first branch"})


def _snapshot(session: Session) -> dict[str, Any]:
    stats = session.stats().to_dict()
    stats.pop("session_id")
    return {
        "entries": [encode_line(e) for e in session.storage.entries()],
        "leaf": session.leaf_id,
        "name": session.name,
        "labels": session.storage.labels(),
        "len": len(session.storage),
        "branch": ids(session.branch()),
        "context": session.build_context(),
        "stats": stats,
        "tree": session.tree(),
        "children": {e.id: list(session.storage.children(e.id))
                     for e in session.storage.entries()},
    }


@pytest.fixture
def deterministic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Session ids and timestamps from counters, so two runs write identical entries."""
    import contextree._session as session_module

    def reset() -> None:
        counter = itertools.count()
        monkeypatch.setattr(session_module, "new_id", lambda: f"id{next(counter):04d}")
        monkeypatch.setattr(session_module, "now", lambda: TS)

    reset()
    yield


def test_session_behaviour_matches_memory(backend: Backend, deterministic: None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import contextree._session as session_module

    reference = Session(MemoryStorage(new_header()))
    _script(reference)
    expected = _snapshot(reference)
    counter = itertools.count()
    monkeypatch.setattr(session_module, "new_id", lambda: f"id{next(counter):04d}")

    storage = backend.make()
    session = Session(storage)
    _script(session)
    assert _snapshot(session) == expected
    reopened = Session(backend.reopen(storage))
    assert _snapshot(reopened) == expected
    assert expected["name"] == "demo"
    assert expected["labels"] == {"id0005": "q2"}
    assert expected["stats"]["file"]["compactions"] == 1


def test_an_entry_with_no_json_form_is_refused_naming_why(backend: Backend) -> None:
    """A lone surrogate (a file's undecodable bytes read with surrogateescape, half of an
    emoji) cannot be written as UTF-8: every backend (memory too, which keeps objects but
    follows the same rules) refuses the entry with ``InvalidEntry`` saying how to clean the
    text, stores nothing, and takes the next one."""
    from contextree.errors import InvalidEntry

    s = backend.make()
    s.append(msg("a", None))
    with pytest.raises(InvalidEntry, match=r"lone surrogate \(\\udcff.*errors='replace'"):
        s.append(msg("b", "a", "bytes \udcff here"))
    s.append(msg("c", "a", "clean"))
    for view in both(backend, s):
        assert ids(view.path("c")) == ["a", "c"] and "b" not in view
